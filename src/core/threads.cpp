// Intra-op thread count. ignis and oneDNN share one OpenMP pool (both use libgomp), so the
// count set here applies to ignis's parallel loops and to oneDNN's sgemm alike.
#include <omp.h>

#include "ignis/ops.h"

namespace ignis {

// omp_set_num_threads sets the calling thread's OpenMP thread count (the nthreads ICV): call it
// from the thread that runs the ops. Threads started later by the program begin with the
// runtime's default (OMP_NUM_THREADS, or the number of cores).
void set_num_threads(int n) {
  IGNIS_CHECK(n > 0, "set_num_threads: expected a positive number of threads, but got ", n);
  omp_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

}  // namespace ignis
