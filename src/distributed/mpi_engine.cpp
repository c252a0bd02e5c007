#include "distributed/mpi_engine.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "distributed/backend.h"
#include "ignis/autograd.h"
#include "profiler/profiler_hooks.h"

namespace ignis::distributed::mpi {

void check(int rc, const char* op) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  IGNIS_FAIL(op, ": MPI error: ", std::string(text, static_cast<size_t>(len)));
}

const char* op_name(int code) {
  static const char* const names[] = {"?",          "broadcast", "all_reduce", "reduce",
                                      "all_gather", "gather",    "scatter",    "reduce_scatter",
                                      "all_to_all", "barrier"};
  return code > 0 && code <= kBarrier ? names[code] : "?";
}

Engine& Engine::get() {
  static Engine* engine = new Engine();  // never destroyed: the thread is joined by stop()
  return *engine;
}

void Engine::start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { loop(); });
  run([] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    IGNIS_CHECK(!initialized,
                "init_process_group: MPI was initialized before (ignis starts it "
                "once per process; a destroyed process group cannot be made again)");
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
          "init_process_group");
    // This thread makes every MPI call; MPI_THREAD_FUNNELED would do, SERIALIZED is asked for so
    // that MPI takes the locks it needs around its own threads.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  });
}

WorkPtr Engine::post(std::unique_ptr<Op> op) {
  WorkPtr w = op->work_;
  op->posted_ = Clock::now();
  op->deadline_ = op->posted_ + op->timeout_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    IGNIS_CHECK(thread_.joinable() && !stop_, op->name_,
                ": the process group was destroyed (or never initialized)");
    queue_.push_back(std::move(op));
  }
  cv_.notify_one();
  return w;
}

void Engine::run(const std::function<void()>& fn) {
  std::mutex m;
  std::condition_variable cv;
  bool finished = false;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back([&] {
      try {
        fn();
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> l(m);
      finished = true;
      cv.notify_one();
    });
  }
  cv_.notify_one();
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return finished; });
  if (error) std::rethrow_exception(error);
}

void Engine::stop() {
  if (!thread_.joinable()) return;
  run([this] {
    if (!any_broken_) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    }
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Engine::fail(Op& op, std::exception_ptr e) { op.work_->finish(std::move(e)); }

namespace {

std::string describe(const Meta& m) {
  std::ostringstream os;
  if (m.dtype < 0) return "no tensor";
  os << static_cast<DType>(m.dtype) << " [";
  for (int64_t d = 0; d < m.ndim && d < Meta::kDims; ++d) os << (d ? ", " : "") << m.sizes[d];
  if (m.ndim > Meta::kDims) os << ", ...";
  os << "]";
  return os.str();
}

Meta unpack(const int64_t* w) {
  Meta m;
  m.op = w[0], m.dtype = w[1], m.ndim = w[2], m.numel = w[3], m.root = w[4], m.reduce_op = w[5];
  for (int i = 0; i < Meta::kDims; ++i) m.sizes[i] = w[6 + i];
  return m;
}

void pack(const Meta& m, int64_t* w) {
  w[0] = m.op, w[1] = m.dtype, w[2] = m.ndim, w[3] = m.numel, w[4] = m.root, w[5] = m.reduce_op;
  for (int i = 0; i < Meta::kDims; ++i) w[6 + i] = m.sizes[i];
}

// "rank 0 has float32 [4, 3], rank 1 has float32 [5]": every rank, or the first 8.
std::string list_ranks(const std::vector<Meta>& all,
                       const std::function<std::string(const Meta&)>& f) {
  std::ostringstream os;
  for (size_t r = 0; r < all.size() && r < 8; ++r)
    os << (r ? ", " : "") << "rank " << r << " " << f(all[r]);
  if (all.size() > 8) os << ", ...";
  return os.str();
}

}  // namespace

// Op names by Meta::op code are the Work names; the group sets meta_.op to a stable code.
void Engine::check_meta(Op& op) {
  const int n = op.group_->size;
  std::vector<Meta> all;
  for (int r = 0; r < n; ++r) all.push_back(unpack(op.meta_all_.data() + r * Meta::kWords));
  const Meta& mine = all[op.group_->rank];
  bool same_op = true, same_tensor = true, same_root = true, same_red = true;
  for (const Meta& m : all) {
    same_op = same_op && m.op == mine.op;
    same_tensor = same_tensor && m.dtype == mine.dtype && m.ndim == mine.ndim &&
                  m.numel == mine.numel && m.sizes == mine.sizes;
    same_root = same_root && m.root == mine.root;
    same_red = same_red && m.reduce_op == mine.reduce_op;
  }
  if (!same_op) {
    IGNIS_FAIL(op.name_,
               ": the ranks called different collectives: ", list_ranks(all, [](const Meta& m) {
                 return std::string("called ") + op_name(static_cast<int>(m.op));
               }));
  }
  IGNIS_CHECK(same_tensor, op.name_, ": tensors differ across ranks: ",
              list_ranks(all, [](const Meta& m) { return "has " + describe(m); }));
  IGNIS_CHECK(same_root, op.name_, ": the ranks disagree on the root: ",
              list_ranks(all, [](const Meta& m) { return "gave " + std::to_string(m.root); }));
  IGNIS_CHECK(same_red, op.name_,
              ": the ranks disagree on the reduce op: ", list_ranks(all, [](const Meta& m) {
                return std::string("gave ") + reduce_op_name(static_cast<ReduceOp>(m.reduce_op));
              }));
}

bool Engine::step() {
  bool progressed = false;
  // Collectives of a group start in posting order; a group whose earliest unstarted collective
  // still waits for its metadata holds back the later ones.
  std::vector<GroupState*> held;
  auto is_held = [&](GroupState* g) {
    return std::find(held.begin(), held.end(), g) != held.end();
  };
  for (auto& op : inflight_) {
    if (op->work_->is_completed() || op->started_) continue;
    GroupState& g = *op->group_;
    try {
      if (g.broken) IGNIS_FAIL(op->name_, ": ", g.broken_reason);
      if (op->check_ && !op->meta_posted_) {
        op->meta_all_.assign(static_cast<size_t>(g.size) * Meta::kWords, 0);
        pack(op->meta_, op->meta_all_.data() + g.rank * Meta::kWords);
        check(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, op->meta_all_.data(), Meta::kWords,
                             MPI_INT64_T, g.meta, &op->meta_req_),
              op->name_);
        op->meta_posted_ = true;
      }
      if (op->check_ && !op->meta_done_) {
        int flag = 0;
        check(MPI_Test(&op->meta_req_, &flag, MPI_STATUS_IGNORE), op->name_);
        if (flag) {
          op->meta_done_ = true;
          progressed = true;
          check_meta(*op);
        }
      }
      const bool ready = !op->check_ || op->meta_done_;
      if (op->ordered_ && (!ready || is_held(&g))) {
        held.push_back(&g);
        continue;
      }
      if (!ready) continue;
      op->started_ = true;
      progressed = true;
      op->start();
    } catch (...) {
      fail(*op, std::current_exception());
    }
  }
  for (auto& op : inflight_) {
    if (!op->started_ || op->work_->is_completed()) continue;
    try {
      if (op->progress()) {
        op->finish();
        if (profiler::detail::enabled()) {  // from post to completion, on its own row
          profiler::detail::record_track_interval(
              op->name_, "communication", "communication", op->posted_, Clock::now(),
              "[[" + std::to_string(op->meta_.numel) + "]]");
        }
        op->work_->finish();
        progressed = true;
      }
    } catch (...) {
      fail(*op, std::current_exception());
    }
  }
  // Deadlines: a timed-out operation leaves its group unusable (MPI can't cancel a collective).
  const auto now = Clock::now();
  for (auto& op : inflight_) {
    if (op->work_->is_completed() || now < op->deadline_) continue;
    GroupState& g = *op->group_;
    std::ostringstream os;
    os << op->name_ << ": timed out after " << op->timeout_.count() << " ms on rank " << g.rank
       << " of " << g.size
       << " (a peer did not call it, died, or is stuck); the process group is unusable now";
    if (!g.broken) {
      g.broken = true;
      g.broken_reason =
          "the process group is unusable after an earlier timeout (" + std::string(op->name_) + ")";
    }
    any_broken_ = true;
    fail(*op, std::make_exception_ptr(Error(os.str())));
    progressed = true;
  }
  // Completed ops leave; those that timed out with MPI requests pending are kept alive.
  for (auto& op : inflight_) {
    if (!op->work_->is_completed()) continue;
    if (op->group_->broken && (op->started_ || op->meta_posted_)) {
      graveyard_.push_back(std::move(op));
    } else {
      op.reset();
    }
  }
  std::erase(inflight_, nullptr);
  return progressed;
}

void Engine::loop() {
  NoGradGuard no_grad;  // copies back into the callers' tensors are not recorded
  // Short sleeps between polls must stay short (Linux adds 50 us of slack by default).
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  const std::atomic<int>& waiters = detail::blocked_waiters();
  int idle = 0;
  bool was_waited_on = false;
  // IGNIS_MPI_WAIT_SPIN_US: how long to poll without sleeping while a thread waits (default
  // 500 us; 0 on a machine with more busy threads than cores).
  const char* spin_env = std::getenv("IGNIS_MPI_WAIT_SPIN_US");
  const long wait_spin_us = spin_env != nullptr ? std::max(0L, std::atol(spin_env)) : 500L;
  Clock::time_point last_progress = Clock::now();
  for (;;) {
    std::deque<std::function<void()>> tasks;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (inflight_.empty()) {
        cv_.wait(lock, [&] { return stop_ || !queue_.empty() || !tasks_.empty(); });
      }
      if (stop_ && queue_.empty() && tasks_.empty() && inflight_.empty()) break;
      if (!queue_.empty()) {  // new work: poll eagerly again
        idle = 0;
        last_progress = Clock::now();
      }
      while (!queue_.empty()) {
        inflight_.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      tasks.swap(tasks_);
    }
    for (auto& t : tasks) t();
    if (inflight_.empty()) continue;
    // Poll without sleeping for a while after each progress (or new work): 50 us, or 500 us
    // while a thread is blocked in Work::wait (its core is free, and the result is on its
    // critical path; on shared memory MPI moves a large message's fragments only inside MPI
    // calls, so sleeping would stretch the transfer it waits for). Then sleep 2, 4, ... up to
    // 64 us between polls (MPI only progresses inside MPI calls: never stop polling). The
    // sleeps leave the core to the computation (backward while buckets are in flight), and keep
    // a loaded machine usable: a thread that spins on a busy core gets only its fair share, at
    // other times than its peer's, while one that wakes from a sleep is scheduled at once.
    const auto now = Clock::now();
    const bool waited_on = waiters.load(std::memory_order_relaxed) > 0;
    if (waited_on && !was_waited_on) {  // someone just started to wait: poll eagerly again
      idle = 0;
      last_progress = now;
    }
    was_waited_on = waited_on;
    const auto window = std::chrono::microseconds(waited_on ? wait_spin_us : 50);
    if (step()) {
      idle = 0;
      last_progress = Clock::now();
    } else if (now - last_progress > window) {
      std::this_thread::sleep_for(std::chrono::microseconds(2 << std::min(idle++, 5)));
    }
  }
}

}  // namespace ignis::distributed::mpi
