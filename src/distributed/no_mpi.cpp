// The MPI backend's entry points when ignis is built without MPI: init_process_group says so.
#include "distributed/backend.h"

namespace ignis::distributed::detail {

bool mpi_available() { return false; }

ProcessGroupPtr mpi_init_world(const ProcessGroupOptions&) {
  IGNIS_FAIL("init_process_group: ignis was built without MPI");
}

ProcessGroupPtr mpi_new_group(const std::vector<int>&, const ProcessGroupOptions&) {
  IGNIS_FAIL("new_group: ignis was built without MPI");
}

void mpi_destroy(const ProcessGroupPtr&, bool) {}

}  // namespace ignis::distributed::detail
