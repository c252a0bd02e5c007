// The executor's planned arena: recording, planning, serving (see planned_arena.h).
#include "jit/planned_arena.h"

#include <algorithm>

#include "core/cpu_suballoc.h"
#include "jit/memory_plan.h"

namespace ignis::jit::detail {

namespace {
constexpr int64_t kAlign = 64;
int64_t rounded(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

PlannedArena* PlannedArena::create() { return new PlannedArena(); }

void PlannedArena::release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

PlannedArena::~PlannedArena() {
  if (base_ != nullptr) ignis::detail::cpu_release_block(base_, static_cast<size_t>(bytes_));
}

void PlannedArena::finish_recording() {
  std::lock_guard<std::mutex> g(mu_);
  if (!recording_) return;
  recording_ = false;
  // The allocations freed within the recorded run; those still alive (returned, saved for
  // backward, cached by an op) are not planned.
  std::vector<int64_t> bytes;
  std::vector<std::pair<int64_t, int64_t>> life;
  std::vector<const Event*> planned;
  for (const Event& e : events_) {
    if (e.freed < 0) continue;
    planned.push_back(&e);
    bytes.push_back(rounded(e.bytes));
    life.emplace_back(e.made, e.freed);
    stats_.planned_bytes += e.bytes;
  }
  const Placement p = place_by_liveness(bytes, life, kAlign);
  for (size_t i = 0; i < planned.size(); ++i) {
    const Event& e = *planned[i];
    auto& seqs = slots_by_node_[static_cast<size_t>(e.node)];
    if (seqs.size() <= static_cast<size_t>(e.seq)) seqs.resize(static_cast<size_t>(e.seq) + 1, -1);
    seqs[static_cast<size_t>(e.seq)] = static_cast<int>(slots_.size());
    slots_.push_back({p.offsets[i], e.bytes});
  }
  stats_.planned = static_cast<int64_t>(slots_.size());
  stats_.recorded_peak_bytes = p.peak_live;
  if (p.bytes > 0) {
    // Reserved, not allocated: the storages served from it count as allocated.
    base_ = static_cast<char*>(ignis::detail::cpu_reserve_block(static_cast<size_t>(p.bytes)));
    bytes_ = p.bytes;
  }
  stats_.arena_bytes = bytes_;
  events_.clear();
  recorded_live_.clear();
}

void PlannedArena::begin_run() {
  std::lock_guard<std::mutex> g(mu_);
  stats_.served = 0;
  stats_.missed = 0;
  stats_.unplanned = 0;
}

ArenaStats PlannedArena::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

int PlannedArena::slot_for(int node, int seq) const {
  const auto n = static_cast<size_t>(node), k = static_cast<size_t>(seq);
  return n < slots_by_node_.size() && k < slots_by_node_[n].size() ? slots_by_node_[n][k] : -1;
}

bool PlannedArena::clear_of_served(const Slot& slot) const {
  const int64_t end = slot.offset + rounded(slot.bytes);
  for (const auto& [ptr, l] : served_live_) {
    const Slot& o = slots_[static_cast<size_t>(l)];
    if (o.offset < end && slot.offset < o.offset + rounded(o.bytes)) return false;
  }
  return true;
}

void* PlannedArena::allocate(size_t nbytes, Device device, void* stream) {
  auto& hook = ignis::detail::tls_storage_hook;
  const int node = hook.node, seq = hook.seq++;
  const auto n = static_cast<int64_t>(nbytes);
  retain();
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!recording_) {
      const int s = slot_for(node, seq);
      if (s < 0) {
        ++stats_.unplanned;
      } else if (slots_[static_cast<size_t>(s)].bytes == n &&
                 clear_of_served(slots_[static_cast<size_t>(s)])) {
        void* p = base_ + slots_[static_cast<size_t>(s)].offset;
        served_live_.emplace(p, s);
        ++stats_.served;
        ignis::detail::cpu_count_suballocation(nbytes, false);
        return p;
      } else {
        ++stats_.missed;
      }
    }
  }
  void* p = nullptr;
  try {
    p = cpu().allocate(nbytes, device, stream);
  } catch (...) {
    release();
    throw;
  }
  std::lock_guard<std::mutex> g(mu_);
  if (recording_) {
    if (static_cast<size_t>(node) >= slots_by_node_.size())
      slots_by_node_.resize(static_cast<size_t>(node) + 1);
    recorded_live_[p] = events_.size();
    events_.push_back({node, seq, n, tick_++, -1});
  }
  return p;
}

void PlannedArena::deallocate(void* ptr, size_t nbytes, Device device) {
  bool served = false;
  {
    std::lock_guard<std::mutex> g(mu_);
    served = served_live_.erase(ptr) > 0;
    if (!served && recording_) {
      auto it = recorded_live_.find(ptr);
      if (it != recorded_live_.end()) {
        events_[it->second].freed = tick_++;
        recorded_live_.erase(it);
      }
    }
  }
  if (served) {
    ignis::detail::cpu_count_suballocation(nbytes, true);
  } else {
    cpu().deallocate(ptr, nbytes, device);
  }
  release();
}

}  // namespace ignis::jit::detail
