// A minimal Chrome trace-event recorder for distributed runs (no profiler in ignis yet):
// IGNIS_DDP_TRACE=PREFIX makes each rank write PREFIX.rank<R>.json when its
// DistributedDataParallel is destroyed, with the forward and backward spans of every iteration
// (thread "compute") and every collective (thread "communication", from post to completion), so
// that chrome://tracing or Perfetto shows the bucket all-reduces overlapping backward.
#pragma once

#include <string>

namespace ignis::distributed::trace {

/// Whether IGNIS_DDP_TRACE is set (read once).
bool enabled();
/// Microseconds on a steady clock.
double now_us();
/// Records a complete event ("X") on thread `tid` (1: compute, 2: communication).
void record(const std::string& name, int tid, double start_us, double end_us);
/// Writes the events recorded so far to IGNIS_DDP_TRACE.rank<rank>.json.
void write(int rank);

}  // namespace ignis::distributed::trace
