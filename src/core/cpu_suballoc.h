// Accounting for a sub-allocator of CPU memory (graph mode's planned arena): it takes one block
// from the system, which counts as reserved, and hands storages out of it, which count as
// allocated, so that memory_stats(kCPU) (and the profiler's per-op bytes, read from it) report
// the bytes of live tensors whichever allocator made them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ignis::detail {

/// A 64-byte aligned block of `nbytes` from the system, counted as reserved only.
void* cpu_reserve_block(size_t nbytes);
/// Returns a block of cpu_reserve_block.
void cpu_release_block(void* ptr, size_t nbytes);
/// A storage of `nbytes` handed out of such a block (counted as allocated, with the peak), or
/// given back (`handed_back`).
void cpu_count_suballocation(size_t nbytes, bool handed_back);

}  // namespace ignis::detail
