// CIFAR-10 from the standard binary batches (cifar-10-binary.tar.gz).
#pragma once

#include <cstdint>
#include <string>

#include "ignis/data.h"

namespace ignis::data {

/// One CIFAR-10 record: 1 label byte (0-9) then 3072 pixel bytes, channel-major (3 x 32 x 32).
inline constexpr int64_t kCifarRecordBytes = 3073;
/// Records per batch file in the official distribution.
inline constexpr int64_t kCifarRecordsPerFile = 10000;

/// Reads one CIFAR-10 binary batch file. data: float32 [N, 3, 32, 32] scaled to [0, 1];
/// target: int64 [N]. The file size must be a multiple of 3073 bytes holding exactly
/// `expected_records` records (10,000 in the official files), and every label must be in 0..9;
/// a bad file gives an ignis::Error naming the file and the fault.
Example read_cifar10_batch(const std::string& path,
                           int64_t expected_records = kCifarRecordsPerFile);

/// The CIFAR-10 data set in `root`: data_batch_1.bin ... data_batch_5.bin (train, 50,000
/// images) or test_batch.bin (test, 10,000). The files may also sit in the tarball's
/// `cifar-10-batches-bin/` subdirectory of root. data: float32 [N, 3, 32, 32] in [0, 1];
/// targets: int64 [N] in 0..9.
class CIFAR10 : public TensorDataset {
 public:
  CIFAR10(const std::string& root, bool train);
  /// The path of batch file `name` under root (or root/cifar-10-batches-bin); throws naming the
  /// file and where to get it when absent.
  static std::string file_path(const std::string& root, const std::string& name);
};

/// The per-channel statistics of the CIFAR-10 training images, for transforms::Normalize.
inline const std::vector<double> kCifar10Mean = {0.4914, 0.4822, 0.4465};
inline const std::vector<double> kCifar10Std = {0.2470, 0.2435, 0.2616};

}  // namespace ignis::data
