// ignis::distributed collectives on 2+ ranks (ctest runs this under mpirun -np 2): every
// collective on every dtype, synchronous and asynchronous, on contiguous and non-contiguous
// tensors; the ring all-reduce against MPI's; metadata checks; groups; point to point.
#include <algorithm>
#include <functional>

#include "ignis/ignis.h"
#include "mpi_main.h"

namespace dist = ignis::distributed;
using namespace ignis;

namespace {

constexpr DType kAllDTypes[] = {kBool, kUInt8, kInt32, kInt64, kBFloat16, kFloat32, kFloat64};

int rank() { return dist::get_rank(); }
int world() { return dist::get_world_size(); }

// Rank r's test values: small integers, so that sums and products are exact in every dtype.
Tensor values(int r, DType dt, int64_t n = 12) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = dt == kBool ? (i + r) % 2 : (i + r) % 5 + 1;
  return tensor(v, kFloat64).to(dt);
}

// The reduction of every rank's values, computed locally in float64 (then cast).
Tensor expected_reduce(DType dt, dist::ReduceOp op, int64_t n = 12) {
  Tensor acc = values(0, dt, n).to(kFloat64);
  for (int r = 1; r < world(); ++r) {
    Tensor v = values(r, dt, n).to(kFloat64);
    switch (op) {
      case dist::ReduceOp::SUM:
      case dist::ReduceOp::AVG: acc = dt == kBool ? maximum(acc, v) : acc + v; break;
      case dist::ReduceOp::PRODUCT: acc = dt == kBool ? minimum(acc, v) : acc * v; break;
      case dist::ReduceOp::MIN: acc = minimum(acc, v); break;
      case dist::ReduceOp::MAX: acc = maximum(acc, v); break;
    }
  }
  if (op == dist::ReduceOp::AVG) acc = acc / world();
  return acc.to(dt);
}

// A non-contiguous tensor (a transpose) holding `v`'s values in its logical order.
Tensor non_contiguous(const Tensor& v) {
  Tensor t = empty({4, v.numel() / 4}, v.dtype()).t();
  t.copy_(v.reshape({v.numel() / 4, 4}));
  EXPECT_FALSE(t.is_contiguous());
  return t;
}

// Equal values in logical (row-major) order; `got` may be a non-contiguous reshaping of `want`.
void expect_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.numel(), want.numel()) << what;
  Tensor g = got.contiguous().reshape({got.numel()}), w = want.contiguous().reshape({want.numel()});
  EXPECT_TRUE(equal(g, w)) << what << "\ngot  " << g << "\nwant " << w;
}

const dist::ReduceOp kOps[] = {dist::ReduceOp::SUM, dist::ReduceOp::AVG, dist::ReduceOp::PRODUCT,
                               dist::ReduceOp::MIN, dist::ReduceOp::MAX};

}  // namespace

TEST(Distributed, RankAndWorldSize) {
  ASSERT_GE(world(), 2);
  EXPECT_TRUE(dist::is_initialized());
  EXPECT_EQ(dist::default_group()->backend_name(), "mpi");
  std::vector<Tensor> ranks(world());
  for (auto& t : ranks) t = zeros({1}, kInt32);
  dist::all_gather(ranks, full({1}, rank(), kInt32));
  for (int r = 0; r < world(); ++r) EXPECT_EQ(ranks[r].item<int32_t>(), r);
}

TEST(Distributed, AllReduceEveryDTypeOpAndAlgorithm) {
  for (DType dt : kAllDTypes) {
    for (dist::ReduceOp op : kOps) {
      for (auto algo : {dist::AllreduceAlgorithm::Native, dist::AllreduceAlgorithm::Ring}) {
        const std::string what = std::string(dtype_name(dt)) + " " + dist::reduce_op_name(op) +
                                 (algo == dist::AllreduceAlgorithm::Ring ? " ring" : " native");
        if (op == dist::ReduceOp::AVG && !is_floating_point(dt)) {
          Tensor t = values(rank(), dt);
          EXPECT_ERROR_WITH(dist::all_reduce(t, op, algo),
                            "all_reduce: ReduceOp.AVG needs a floating dtype, got " +
                                std::string(dtype_name(dt)));
          continue;
        }
        // Synchronous, contiguous.
        Tensor a = values(rank(), dt);
        dist::all_reduce(a, op, algo);
        expect_equal(a, expected_reduce(dt, op), what + " sync");
        // Asynchronous, non-contiguous.
        Tensor b = non_contiguous(values(rank(), dt));
        dist::WorkPtr w = dist::all_reduce(b, op, algo, nullptr, /*async_op=*/true);
        w->wait();
        EXPECT_TRUE(w->is_completed());
        EXPECT_TRUE(w->is_success());
        expect_equal(b, expected_reduce(dt, op), what + " async non-contiguous");
      }
    }
  }
}

TEST(Distributed, RingEqualsNativeOnRandomData) {
  // Odd sizes (chunks of unequal length), larger than one chunk per rank, and empty; 300007
  // elements make chunks of several 256 KB segments (int64: 8 bytes each), the last one short.
  for (int64_t n : {0, 1, 7, 1001, 65537, 300007}) {
    manual_seed(1234 + rank());
    Tensor i64 = randint(-1000000, 1000000, {n}, kInt64);
    Tensor f32 = randn({n});
    Tensor i64r = i64.clone(), f32r = f32.clone();
    dist::all_reduce(i64, dist::ReduceOp::SUM, dist::AllreduceAlgorithm::Native);
    dist::all_reduce(i64r, dist::ReduceOp::SUM, dist::AllreduceAlgorithm::Ring);
    EXPECT_TRUE(equal(i64, i64r)) << "int64 sums differ at n=" << n;  // bitwise
    dist::all_reduce(f32, dist::ReduceOp::AVG, dist::AllreduceAlgorithm::Native);
    dist::all_reduce(f32r, dist::ReduceOp::AVG, dist::AllreduceAlgorithm::Ring);
    EXPECT_TRUE(allclose(f32, f32r, 1e-6, 1e-6)) << "float32 averages differ at n=" << n;
  }
}

TEST(Distributed, ManyAsyncAllReducesInFlight) {
  std::vector<Tensor> ts;
  std::vector<dist::WorkPtr> ws;
  for (int i = 0; i < 16; ++i) {
    ts.push_back(full({1000 + i}, static_cast<double>(rank() + i), kFloat32));
    auto algo = i % 2 ? dist::AllreduceAlgorithm::Ring : dist::AllreduceAlgorithm::Native;
    ws.push_back(dist::all_reduce(ts.back(), dist::ReduceOp::SUM, algo, nullptr, true));
  }
  double rank_sum = 0;
  for (int r = 0; r < world(); ++r) rank_sum += r;
  for (int i = 0; i < 16; ++i) {
    ws[i]->wait();
    EXPECT_TRUE(equal(ts[i], full({1000 + i}, rank_sum + world() * i, kFloat32))) << i;
  }
}

TEST(Distributed, BroadcastEveryDType) {
  for (DType dt : kAllDTypes) {
    for (int root = 0; root < world(); ++root) {
      Tensor a = values(rank(), dt);
      dist::broadcast(a, root);
      expect_equal(a, values(root, dt), "broadcast sync");
      Tensor b = non_contiguous(values(rank(), dt));
      dist::broadcast(b, root, nullptr, true)->wait();
      expect_equal(b, values(root, dt), "broadcast async non-contiguous");
    }
  }
}

TEST(Distributed, ReduceEveryDType) {
  const int root = world() - 1;
  for (DType dt : kAllDTypes) {
    for (dist::ReduceOp op : {dist::ReduceOp::SUM, dist::ReduceOp::MAX}) {
      Tensor a = non_contiguous(values(rank(), dt));
      dist::reduce(a, root, op, nullptr, rank() % 2 == 0)->wait();
      // Only the root gets the result; the others keep their tensor.
      expect_equal(a, rank() == root ? expected_reduce(dt, op) : values(rank(), dt), "reduce");
    }
  }
}

TEST(Distributed, AllGatherGatherScatterEveryDType) {
  for (DType dt : kAllDTypes) {
    for (bool async_op : {false, true}) {
      std::vector<Tensor> outs;
      for (int r = 0; r < world(); ++r) outs.push_back(non_contiguous(zeros({12}, dt)));
      dist::all_gather(outs, non_contiguous(values(rank(), dt)), nullptr, async_op)->wait();
      for (int r = 0; r < world(); ++r) expect_equal(outs[r], values(r, dt), "all_gather");

      const int root = 1;
      std::vector<Tensor> gathered;
      if (rank() == root) {
        for (int r = 0; r < world(); ++r) gathered.push_back(non_contiguous(zeros({12}, dt)));
      }
      dist::gather(non_contiguous(values(rank(), dt)), gathered, root, nullptr, async_op)->wait();
      for (int r = 0; r < static_cast<int>(gathered.size()); ++r) {
        expect_equal(gathered[r], values(r, dt), "gather");
      }

      std::vector<Tensor> parts;
      if (rank() == 0) {
        for (int r = 0; r < world(); ++r) parts.push_back(non_contiguous(values(10 + r, dt)));
      }
      Tensor mine = non_contiguous(zeros({12}, dt));
      dist::scatter(mine, parts, 0, nullptr, async_op)->wait();
      expect_equal(mine, values(10 + rank(), dt), "scatter");
    }
  }
}

TEST(Distributed, ReduceScatterEveryDType) {
  for (DType dt : kAllDTypes) {
    // inputs[j] on rank r holds values(r + j): rank j gets the reduction over r of values(r + j).
    std::vector<Tensor> inputs;
    for (int j = 0; j < world(); ++j) inputs.push_back(non_contiguous(values(rank() + j, dt)));
    Tensor out = non_contiguous(zeros({12}, dt));
    dist::reduce_scatter(out, inputs, dist::ReduceOp::SUM, nullptr, rank() == 0)->wait();
    Tensor want = values(rank(), dt).to(kFloat64);
    for (int r = 1; r < world(); ++r) {
      Tensor v = values(r + rank(), dt).to(kFloat64);
      want = dt == kBool ? maximum(want, v) : want + v;
    }
    expect_equal(out, want.to(dt), "reduce_scatter");
  }
}

TEST(Distributed, AllToAllEveryDTypeWithUnequalSizes) {
  for (DType dt : kAllDTypes) {
    // Rank r sends r + j + 1 elements (valued 10 r + j) to rank j.
    std::vector<Tensor> inputs, outputs;
    for (int j = 0; j < world(); ++j) {
      inputs.push_back(full({rank() + j + 1}, (10 * rank() + j) % 2, dt));
      outputs.push_back(zeros({j + rank() + 1}, dt));
    }
    dist::all_to_all(outputs, inputs, nullptr, rank() == 1)->wait();
    for (int j = 0; j < world(); ++j) {
      expect_equal(outputs[j], full({j + rank() + 1}, (10 * j + rank()) % 2, dt), "all_to_all");
    }
  }
}

TEST(Distributed, SendRecvEveryDType) {
  const int peer = rank() == 0 ? 1 : 0;
  for (DType dt : kAllDTypes) {
    if (rank() > 1) continue;
    // Both ranks send first (asynchronously), then receive: no deadlock.
    Tensor out = non_contiguous(values(rank(), dt));
    dist::WorkPtr s = dist::isend(out, peer, nullptr, 7);
    Tensor in = non_contiguous(zeros({12}, dt));
    dist::WorkPtr r = dist::irecv(in, peer, nullptr, 7);
    r->wait();
    s->wait();
    expect_equal(in, values(peer, dt), "isend/irecv");
    // Synchronous: rank 0 sends, then receives.
    Tensor back = zeros({12}, dt);
    if (rank() == 0) {
      dist::send(values(0, dt), 1);
      dist::recv(back, 1);
      expect_equal(back, values(1, dt), "send/recv");
    } else {
      dist::recv(back, 0);
      dist::send(values(1, dt), 0);
      expect_equal(back, values(0, dt), "send/recv");
    }
  }
  dist::barrier();
}

TEST(Distributed, RecvOfTheWrongSizeFails) {
  if (rank() > 1) return;
  if (rank() == 0) {
    dist::send(zeros({3}), 1, nullptr, 3);
  } else {
    Tensor t = zeros({5});
    EXPECT_ERROR_WITH(dist::recv(t, 0, nullptr, 3),
                      "recv: expected 20 bytes (float32 [5]) from rank 0 but got 12");
  }
  dist::barrier();
}

TEST(Distributed, MismatchedShapesAcrossRanksNameOpRanksShapesAndDTypes) {
  Tensor t = zeros({rank() + 2, 3});
  std::string want =
      "all_reduce: tensors differ across ranks: rank 0 has float32 [2, 3], "
      "rank 1 has float32 [3, 3]";
  EXPECT_ERROR_WITH(dist::all_reduce(t), want);
  Tensor u = zeros({4}, rank() == 0 ? kFloat32 : kInt64);
  EXPECT_ERROR_WITH(dist::broadcast(u, 0),
                    "broadcast: tensors differ across ranks: rank 0 has float32 [4], rank 1 has "
                    "int64 [4]");
  Tensor v = zeros({4});
  EXPECT_ERROR_WITH(dist::broadcast(v, rank()),
                    "broadcast: the ranks disagree on the root: rank 0 gave 0, rank 1 gave 1");
  // Different collectives.
  Tensor w = zeros({4});
  if (rank() == 0) {
    EXPECT_ERROR_WITH(dist::all_reduce(w),
                      "all_reduce: the ranks called different collectives: "
                      "rank 0 called all_reduce, rank 1 called broadcast");
  } else {
    EXPECT_ERROR_WITH(dist::broadcast(w, 0),
                      "broadcast: the ranks called different collectives: "
                      "rank 0 called all_reduce, rank 1 called broadcast");
  }
  // The group is still usable.
  Tensor x = ones({2});
  dist::all_reduce(x);
  EXPECT_TRUE(equal(x, full({2}, world(), kFloat32)));
}

TEST(Distributed, LocalArgumentErrors) {
  std::vector<Tensor> outs = {zeros({2})};
  EXPECT_ERROR_WITH(dist::all_gather(outs, zeros({2})),
                    "all_gather: output has 1 tensors but the group has 2 ranks");
  Tensor t = zeros({2});
  EXPECT_ERROR_WITH(dist::broadcast(t, 5), "broadcast: rank 5 is not in the group (of 2 ranks)");
  EXPECT_ERROR_WITH(dist::send(t, rank()),
                    "send: peer " + std::to_string(rank()) + " is not another rank of the group");
  // Only host memory goes through MPI (a meta tensor here; a GPU tensor alike).
  Tensor m = empty({2}, TensorOptions().device(kMeta));
  EXPECT_ERROR_WITH(dist::all_reduce(m), "all_reduce (mpi): the mpi backend works on CPU tensors, "
                                         "got a tensor on meta");
}

TEST(Distributed, NewGroupAndNonMembers) {
  dist::ProcessGroupPtr solo = dist::new_group({1});
  dist::ProcessGroupPtr both = dist::new_group({0, 1});
  EXPECT_EQ(dist::get_world_size(both), 2);
  EXPECT_EQ(dist::get_rank(both), rank());
  Tensor t = full({3}, rank() + 1.0);
  if (rank() == 1) {
    EXPECT_EQ(dist::get_rank(solo), 0);
    EXPECT_EQ(dist::get_world_size(solo), 1);
    dist::all_reduce(t, dist::ReduceOp::SUM, solo);
    EXPECT_TRUE(equal(t, full({3}, 2.0)));
    // World ranks on the functional API: root 1 is group rank 0.
    dist::broadcast(t, 1, solo);
  } else {
    EXPECT_EQ(dist::get_rank(solo), -1);
    EXPECT_ERROR_WITH(dist::all_reduce(t, dist::ReduceOp::SUM, solo),
                      "all_reduce: this process is not a member of the group");
  }
  Tensor u = full({3}, rank() + 1.0);
  dist::all_reduce(u, dist::ReduceOp::MAX, both);
  EXPECT_TRUE(equal(u, full({3}, 2.0)));
  dist::destroy_process_group(solo);
  dist::destroy_process_group(both);
  EXPECT_ERROR_WITH(dist::all_reduce(u, dist::ReduceOp::SUM, both),
                    "all_reduce: the process group was destroyed");
}

TEST(Distributed, MetadataCheckCanBeSwitchedOff) {
  dist::ProcessGroupPtr g = dist::new_group({0, 1});
  g->set_check_metadata(false);
  Tensor t = full({5}, 2.0);
  dist::all_reduce(t, dist::ReduceOp::PRODUCT, g);
  EXPECT_TRUE(equal(t, full({5}, 4.0)));
  dist::destroy_process_group(g);
}

TEST(Distributed, BarrierAndWorkState) {
  dist::WorkPtr w = dist::barrier(nullptr, true);
  EXPECT_TRUE(w->wait());
  EXPECT_TRUE(w->is_success());
  EXPECT_EQ(w->exception(), nullptr);
  EXPECT_EQ(w->op(), "barrier");
}

int main(int argc, char** argv) { return mpi_test_main(argc, argv); }
