// The executor's planned arena (ExecutorOptions::memory_arena), after ONNX Runtime's memory
// patterns: one run is recorded -- every CPU storage of more than 4 KiB made while a node runs,
// named by (node, its order within the node), with its bytes and when it was made and freed --
// and the allocations freed within that run are placed in one arena by liveness
// (place_by_liveness). Later runs are served from it: the k-th allocation of node i gets the
// bytes planned for it. This covers what the graph's values cannot show (an op's temporaries:
// oneDNN's reorders of activations) and needs no op to write into a given buffer.
//
// Served only when safe: an allocation whose size or order differs from the recording, or whose
// bytes are still held by a live one (a tensor kept longer than in the recording: saved for
// backward, returned), is taken from the caching allocator instead and counted as missed. The
// arena is reference-counted by the storages it made, so it outlives the executor while any of
// them lives.
#pragma once

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/tensor_impl.h"
#include "ignis/jit.h"

namespace ignis::jit::detail {

class PlannedArena final : public Allocator {
 public:
  /// A new arena recording its first run; the caller holds one reference.
  static PlannedArena* create();
  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  /// Drops a reference; the last one deletes the arena (and gives its block back).
  void release();

  /// Ends the recording: plans the allocations freed since create() and takes the block. Later
  /// allocations are served from it.
  void finish_recording();
  bool recording() const { return recording_; }
  /// Resets the per-run counts (served, missed).
  void begin_run();
  ArenaStats stats() const;
  /// [begin, end) of the arena's block (null before finish_recording or when nothing was planned).
  std::pair<const char*, const char*> block() const { return {base_, base_ + bytes_}; }

  void* allocate(size_t nbytes, Device device, void* stream) override;
  void deallocate(void* ptr, size_t nbytes, Device device) override;
  MemoryStats stats(Device device) const override { return cpu().stats(device); }
  void reset_peak_stats(Device device) override { cpu().reset_peak_stats(device); }
  void empty_cache(Device device) override { cpu().empty_cache(device); }

 private:
  PlannedArena() = default;
  ~PlannedArena() override;
  static Allocator& cpu() { return allocator_for(kCPU); }
  struct Event {  // one recorded allocation
    int node, seq;
    int64_t bytes, made, freed;  // ticks; freed -1 while alive
  };
  struct Slot {  // one planned allocation
    int64_t offset, bytes;
  };
  /// The slot planned for the node's seq-th allocation, or -1 (under mu_, as below).
  int slot_for(int node, int seq) const;
  /// True when no served allocation alive now holds any of the slot's bytes.
  bool clear_of_served(const Slot& slot) const;
  std::atomic<int64_t> refs_{1};
  mutable std::mutex mu_;
  bool recording_ = true;
  int64_t tick_ = 0;
  std::vector<Event> events_;
  std::unordered_map<const void*, size_t> recorded_live_;  // pointer -> event
  std::vector<std::vector<int>> slots_by_node_;            // [node][seq] -> slot, -1: none
  std::vector<Slot> slots_;
  std::unordered_map<const void*, int> served_live_;  // pointer -> slot, alive now
  char* base_ = nullptr;
  int64_t bytes_ = 0;
  ArenaStats stats_;
};

/// Sets this thread's storage hook to `arena` for node `node` (nothing when arena is null) and
/// restores the previous hook on exit.
class ArenaScope {
 public:
  ArenaScope(PlannedArena* arena, int node) : saved_(ignis::detail::tls_storage_hook) {
    if (arena != nullptr) ignis::detail::tls_storage_hook = {arena, node, 0};
  }
  ~ArenaScope() { ignis::detail::tls_storage_hook = saved_; }
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  ignis::detail::StorageHook saved_;
};

}  // namespace ignis::jit::detail
