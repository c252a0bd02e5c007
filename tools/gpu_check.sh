#!/usr/bin/env bash
# Runs the CUDA checks on a GPU machine from gpu-bundle.tgz (tools/gpu_bundle.sh): the CUDA tests
# (every op against the CPU, copies, streams, events, the allocator, NCCL in a world of one, the
# zoo models), then the lecture notes' timed GPU examples. Prints the GPU and driver first.
# Exit status: 0 when everything passed.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpu-bundle
if [ ! -x "$B/bin/test_cuda" ] && [ -f "$B.tgz" ]; then tar -xzf "$B.tgz"; fi
[ -x "$B/bin/test_cuda" ] || {
  echo "gpu-check: no $B/bin/test_cuda: run 'make gpu-bundle' where ignis builds, then carry $B.tgz"
  exit 2; }
# CUDA's libraries (cuBLAS): the toolkit's, or those of the Python packages beside PyTorch.
cuda_libs=""
for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" $(python3 -c 'import nvidia, os; \
    p = nvidia.__path__[0]; print(" ".join(os.path.join(p, d, "lib") for d in os.listdir(p)))' \
    2>/dev/null); do
  [ -d "$d" ] && cuda_libs="$cuda_libs:$d"
done
export LD_LIBRARY_PATH="$PWD/$B/lib$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
  echo "gpu-check: nvidia-smi found no GPU"
status=0
for t in test_caching_allocator test_cuda; do
  echo "== $t"
  "$B/bin/$t" --gtest_color=no || status=1
done
echo "== gpu_async (the lecture notes' GPU examples, timed)"
"$B/bin/gpu_async" || status=1
exit $status
