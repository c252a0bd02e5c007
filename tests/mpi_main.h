// main() of the MPI test programs (run by ctest under mpirun -np 2): the default group wraps
// every test, with a timeout so that a test that leaves a peer waiting fails instead of hanging.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "ignis/distributed.h"

// Runs `body`, expecting an ignis::Error whose message contains `needle`.
#define EXPECT_ERROR_WITH(body, needle)                                        \
  do {                                                                         \
    try {                                                                      \
      body;                                                                    \
      ADD_FAILURE() << "expected an ignis::Error containing: " << (needle);    \
    } catch (const ignis::Error& e) {                                          \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)         \
          << "message: " << e.what() << "\nexpected to contain: " << (needle); \
    }                                                                          \
  } while (0)

inline int mpi_test_main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ignis::distributed::ProcessGroupOptions opts;
  opts.timeout = std::chrono::seconds(120);
  ignis::distributed::init_process_group("mpi", opts);
  // Only rank 0 prints gtest's report; every rank's failures still fail the run.
  if (ignis::distributed::get_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  ignis::distributed::destroy_process_group();
  return rc;
}
