// The backends behind ignis::distributed's functional API (src/distributed/process_group.cpp).
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "ignis/distributed.h"

namespace ignis::distributed::detail {

/// Whether ignis was built with MPI (CMake found it).
bool mpi_available();
/// Starts MPI (once per process) and returns the world group.
ProcessGroupPtr mpi_init_world(const ProcessGroupOptions& options);
/// The group of `world_ranks` (sorted, distinct), made on every process of the world.
ProcessGroupPtr mpi_new_group(const std::vector<int>& world_ranks,
                              const ProcessGroupOptions& options);
/// Frees one group's communicators (the world group: shuts MPI down).
void mpi_destroy(const ProcessGroupPtr& group, bool is_world);
/// The "nccl" backend (src/cuda/nccl_group.cpp; src/cuda/no_cuda.cpp without the CUDA backend):
/// whether a GPU is there, the world group (bootstrapped over MPI under a launcher, a world of
/// one otherwise), and its destruction (the communicator, then MPI).
bool nccl_available();
ProcessGroupPtr nccl_init_world(const ProcessGroupOptions& options);
void nccl_destroy(const ProcessGroupPtr& group);
/// How many threads are blocked in Work::wait now. While one is, a backend's progress thread
/// polls without sleeping: the waiter's core is free, and the result is on its critical path.
std::atomic<int>& blocked_waiters();

}  // namespace ignis::distributed::detail
