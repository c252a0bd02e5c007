// Convolutions through cuDNN's graph API (cuda/cudnn_graph.h). A problem's plan is built once:
//   tensors (dims in N, C, H, W order, strides giving the layout, unique ids 'x', 'w', 'y')
//   -> a convolution descriptor -> one operation node -> an operation graph
//   -> engine configurations ranked by cuDNN's heuristics (mode A, then the fallback list)
//   -> the first configuration with acceptable numerical notes whose execution plan finalizes
// and is cached per (thread, problem): plans belong to the cuDNN handle they were made with,
// and handles are per (thread, device) (cuda/conv.cu). A forward may carry its bias and ReLU as
// pointwise nodes after the convolution. A call then fills a variant pack (the data pointers
// and a workspace from the caching allocator) and executes the plan.
#include "cuda/cudnn_graph.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "core/tensor_impl.h"
#include "cuda/backend.h"
#include "cuda/cuda_check.h"
#include "cuda/lazy_library.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace ignis::cuda {
namespace {

struct GraphApi {
  detail::LazyLibrary lib{"libcudnn.so." + std::to_string(CUDNN_MAJOR), "cuDNN"};
#define IGNIS_CUDNN_GRAPH_MEMBER(f) decltype(&::f) f = lib.get<decltype(&::f)>(#f);
  IGNIS_CUDNN_GRAPH_MEMBER(cudnnBackendCreateDescriptor)
  IGNIS_CUDNN_GRAPH_MEMBER(cudnnBackendDestroyDescriptor)
  IGNIS_CUDNN_GRAPH_MEMBER(cudnnBackendFinalize)
  IGNIS_CUDNN_GRAPH_MEMBER(cudnnBackendSetAttribute)
  IGNIS_CUDNN_GRAPH_MEMBER(cudnnBackendGetAttribute)
  IGNIS_CUDNN_GRAPH_MEMBER(cudnnBackendExecute)
  IGNIS_CUDNN_GRAPH_MEMBER(cudnnGetErrorString)
#undef IGNIS_CUDNN_GRAPH_MEMBER
};

const GraphApi& api() { return detail::lazy_api<GraphApi>(); }

// A step of building or running a plan that cuDNN refused: why, for the fallback's record.
struct Refused {
  std::string what;
};
// build_plan: a plan exists but its workspace could not be allocated now.
struct ShortOfMemory : Refused {};

void ok(cudnnStatus_t st, const char* what) {
  if (st != CUDNN_STATUS_SUCCESS) {
    throw Refused{std::string(what) + ": " + api().cudnnGetErrorString(st)};
  }
}

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    ok(api().cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
  }
  ~Desc() {
    if (d_ != nullptr) api().cudnnBackendDestroyDescriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }

  template <class T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n,
           const T* values, const char* what) {
    ok(api().cudnnBackendSetAttribute(d_, name, type, n, values), what);
  }
  template <class T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T& value,
           const char* what) {
    set(name, type, 1, &value, what);
  }
  void set_desc(cudnnBackendAttributeName_t name, const Desc& value, const char* what) {
    cudnnBackendDescriptor_t v = value.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v, what);
  }
  void finalize(const char* what) { ok(api().cudnnBackendFinalize(d_), what); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

constexpr int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y', kUidBias = 'b';
constexpr int64_t kUidConv = 'c', kUidBiased = 'a';  // the fused forward's virtual tensors

cudnnDataType_t data_type(DType t) {
  switch (t) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    default: throw Refused{"no cuDNN type for " + std::string(dtype_name(t))};
  }
}

// The largest power of two, at most 16, dividing the address: cuDNN's engines choose their
// vector width from the alignment the tensor descriptor promises.
int64_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int64_t k = 16;
  while (k > 1 && a % static_cast<uintptr_t>(k) != 0) k /= 2;
  return k;
}

// A tensor descriptor of dims [N, C, H, W], dense in the layout (NHWC strides or NCHW's); a
// virtual one is an intermediate of the graph that never reaches memory.
std::unique_ptr<Desc> tensor_desc(const int64_t (&dims)[4], cudnnDataType_t dt, int64_t uid,
                                  bool nhwc, int64_t align, bool is_virtual = false) {
  auto d = std::make_unique<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t c = dims[1], h = dims[2], w = dims[3];
  const int64_t nchw[4] = {c * h * w, h * w, w, 1}, nhwc_s[4] = {h * w * c, 1, w * c, c};
  d->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, dt, "tensor data type");
  d->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, "tensor dimensions");
  d->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, nhwc ? nhwc_s : nchw, "tensor strides");
  d->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, uid, "tensor unique id");
  d->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, align, "tensor alignment");
  if (is_virtual) d->set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, true, "virtual");
  d->finalize("tensor descriptor");
  return d;
}

// t's descriptor ([N, C, H, W] dense in the layout; a bias [C] as [1, C, 1, 1]).
std::unique_ptr<Desc> tensor_desc(const Tensor& t, int64_t uid, bool nhwc) {
  int64_t dims[4] = {1, t.numel(), 1, 1};  // a bias [C] as [1, C, 1, 1]
  if (t.dim() == 4) std::copy_n(t.sizes().begin(), 4, dims);
  return tensor_desc(dims, data_type(t.dtype()), uid, nhwc, alignment(t.data_ptr()));
}

// The numerical notes ignis refuses: a narrower type than the data's (TF32 for float32 is
// CUDNN_NUMERICAL_NOTE_TENSOR_CORE on float data, as PyTorch's filter with allow_tf32 off).
bool acceptable(cudnnBackendDescriptor_t cfg, DType dtype) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  int64_t n = 0;
  ok(api().cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                    1, &n, &e),
     "engine of a configuration");
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  n = 0;
  ok(api().cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                    CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes),
     "numerical notes of an engine");
  for (int64_t i = 0; i < std::min<int64_t>(n, CUDNN_NUMERICAL_NOTE_TYPE_COUNT); ++i) {
    const cudnnBackendNumericalNote_t note = notes[i];
    // Inputs converted to a narrower type, or sums in one (bfloat16 accumulates in float32).
    if (note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
        note == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) {
      return false;
    }
    if (dtype != kBFloat16 && note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE) return false;
  }
  return true;
}

// A problem's execution plan and its workspace, with the descriptors it was built from (tensors,
// convolution, operation, graph, engine configuration), kept alive as long as the plan, as
// cuDNN's frontend keeps them.
struct Plan {
  std::unique_ptr<Desc> plan;
  int64_t workspace = 0;
  std::vector<int64_t> uids;  // of the tensors in memory, in the order execute() takes them
  std::vector<std::shared_ptr<const Desc>> built_from;
};

// The engine configurations cuDNN's heuristics (`mode`) rank for the graph, best first.
std::vector<std::unique_ptr<Desc>> ranked_configs(const Desc& graph, cudnnBackendHeurMode_t mode) {
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, "heuristics' graph");
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, mode, "heuristics' mode");
  heur.finalize("heuristics");
  int64_t count = 0;
  ok(api().cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
     "heuristics' result count");
  std::vector<std::unique_ptr<Desc>> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    cfgs.push_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(cfgs.back()->get());
  }
  int64_t got = 0;
  if (count > 0) {
    ok(api().cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
       "heuristics' results");
  }
  cfgs.resize(static_cast<size_t>(std::clamp<int64_t>(got, 0, count)));
  return cfgs;
}

// How a plan's run went: it ran, its workspace could not be had now (the caching allocator's
// error in `why`; another plan or the legacy API may need less), or cuDNN refused it.
enum class Ran { Yes, NoWorkspace, Refused };

// The data pointers of a call, in Plan::uids' order: x, w, y, then the bias when fused.
struct CallData {
  std::vector<void*> ptrs;
  Device device;
};

Ran execute(cudnnHandle_t h, const Plan& plan, const CallData& o, std::string& why) {
  Tensor ws;
  try {
    ws = make_tensor({std::max<int64_t>(plan.workspace, 1)}, kUInt8, o.device);
  } catch (const Error& e) {
    why = e.what();
    return Ran::NoWorkspace;
  }
  try {
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    void* wsp = ws.data_ptr();
    const auto n = static_cast<int64_t>(plan.uids.size());
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, o.ptrs.data(),
             "data pointers");
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, plan.uids.data(),
             "unique ids");
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp, "workspace");
    pack.finalize("variant pack");
    ok(api().cudnnBackendExecute(h, plan.plan->get(), pack.get()), "cudnnBackendExecute");
  } catch (const Refused& r) {
    why = r.what;
    return Ran::Refused;
  }
  return Ran::Yes;
}

// Two CUDA events, destroyed with the object.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~EventPair() {
    if (start) (void)cudaEventDestroy(start);
    if (stop) (void)cudaEventDestroy(stop);
  }
};

// Times one run of `plan` (after a first run) into `ms`. An error creating, recording or reading
// the events refuses the plan (as cuDNN refusing it would); one found waiting for the GPU (a
// fault of the device) is thrown.
Ran time_plan(cudnnHandle_t h, const Plan& plan, const CallData& o, float& ms, std::string& why) {
  if (const Ran r = execute(h, plan, o, why); r != Ran::Yes) return r;
  const cudaStream_t s = detail::current_stream(o.device);
  auto check = [&](cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw Refused{std::string(what) + ": " + cudaGetErrorString(e)};
    }
  };
  EventPair ev;
  check(cudaEventCreate(&ev.start), "cudaEventCreate");
  check(cudaEventCreate(&ev.stop), "cudaEventCreate");
  check(cudaEventRecord(ev.start, s), "cudaEventRecord");
  const Ran r = execute(h, plan, o, why);
  check(cudaEventRecord(ev.stop, s), "cudaEventRecord");
  detail::count_host_sync();
  IGNIS_CUDA_CHECK(cudaEventSynchronize(ev.stop));
  check(cudaEventElapsedTime(&ms, ev.start, ev.stop), "cudaEventElapsedTime");
  return r;
}

// A pointwise operation of `mode` (in float): y = mode(x) or y = mode(x, b).
std::shared_ptr<Desc> pointwise(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b,
                                const Desc& y, std::vector<std::shared_ptr<const Desc>>& keep) {
  auto pw = std::make_shared<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode, "pointwise mode");
  pw->set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT,
          "pointwise precision");
  pw->finalize("pointwise descriptor");
  auto op = std::make_shared<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *pw, "pointwise");
  op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, "pointwise x");
  if (b) op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b, "pointwise b");
  op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, "pointwise y");
  op->finalize("pointwise operation");
  keep.push_back(pw);
  return op;
}

// Builds the problem's plan: the first acceptable configuration (heuristics' mode A, then the
// fallback list) that finalizes and runs, or with `benchmark` the fastest of them. A forward
// with an epilogue (a bias, a ReLU) is one graph: the convolution into a virtual float32
// tensor, then the bias added and the ReLU applied in float32, rounded once into y. Throws
// Refused when there is none.
std::shared_ptr<Plan> build_plan(cudnn_graph::Direction dir, cudnnHandle_t h, const Tensor& x,
                                 const Tensor& w, const Tensor& y, const ConvParams& p, bool nhwc,
                                 bool benchmark, const cudnn_graph::Epilogue& epi,
                                 const CallData& operands) {
  const bool fused = epi.bias.defined() || epi.relu;
  std::vector<std::shared_ptr<const Desc>> keep;  // every descriptor the plan is built from
  const std::shared_ptr<const Desc> tx = tensor_desc(x, kUidX, nhwc),
                                    tw = tensor_desc(w, kUidW, nhwc);
  const int64_t y_dims[4] = {y.size(0), y.size(1), y.size(2), y.size(3)};
  std::shared_ptr<const Desc> ty;
  if (fused) {  // the convolution's own output is virtual
    ty = tensor_desc(y_dims, CUDNN_DATA_FLOAT, kUidConv, nhwc, 16, true);
  } else {
    ty = tensor_desc(y, kUidY, nhwc);
  }
  const bool f64 = x.dtype() == kFloat64;
  const auto conv = std::make_shared<Desc>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t comp = f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  const int64_t dims = 2;
  conv->set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, comp, "compute type");
  conv->set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, CUDNN_CROSS_CORRELATION,
            "mode");
  conv->set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, dims, "spatial dims");
  conv->set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, p.dilation, "dilations");
  conv->set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, p.stride, "strides");
  conv->set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, p.pad_l, "pre-paddings");
  conv->set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, p.pad_r, "post-paddings");
  conv->finalize("convolution descriptor");

  // alpha = 1, beta = 0: the result overwrites the output.
  const float one_f = 1, zero_f = 0;
  const double one_d = 1, zero_d = 0;
  const cudnnBackendAttributeType_t st = f64 ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
  const void* one = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* zero = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
  // The operation's descriptor type and its attributes, per direction (x, w, y, conv, alpha,
  // beta; the backward's dx, dw and dy take x's, w's and y's places).
  struct OpAttrs {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  };
  static constexpr OpAttrs kOps[] = {
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
  };
  const OpAttrs& a = kOps[static_cast<int>(dir)];
  const auto op = std::make_shared<Desc>(a.type);
  op->set_desc(a.x, *tx, "x");
  op->set_desc(a.w, *tw, "w");
  op->set_desc(a.y, *ty, "y");
  op->set_desc(a.conv, *conv, "conv");
  op->set(a.alpha, st, 1, one, "alpha");
  op->set(a.beta, st, 1, zero, "beta");
  op->finalize("convolution operation");

  std::vector<cudnnBackendDescriptor_t> ops = {op->get()};
  std::vector<int64_t> uids = {kUidX, kUidW, kUidY};
  if (fused) {
    // conv -> (+ bias) -> (relu) -> y; the last step writes y.
    const std::shared_ptr<const Desc> out = tensor_desc(y, kUidY, nhwc);
    std::shared_ptr<const Desc> cur = ty;
    if (epi.bias.defined()) {
      const std::shared_ptr<const Desc> tb = tensor_desc(epi.bias, kUidBias, nhwc);
      const std::shared_ptr<const Desc> sum =
          epi.relu ? std::shared_ptr<const Desc>(
                         tensor_desc(y_dims, CUDNN_DATA_FLOAT, kUidBiased, nhwc, 16, true))
                   : out;
      const auto add = pointwise(CUDNN_POINTWISE_ADD, *cur, tb.get(), *sum, keep);
      ops.push_back(add->get());
      keep.insert(keep.end(), {tb, sum, add});
      uids.push_back(kUidBias);
      cur = sum;
    }
    if (epi.relu) {
      const auto relu = pointwise(CUDNN_POINTWISE_RELU_FWD, *cur, nullptr, *out, keep);
      ops.push_back(relu->get());
      keep.push_back(relu);
    }
    keep.push_back(out);
  }
  const auto graph = std::make_shared<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
             static_cast<int64_t>(ops.size()), ops.data(), "graph's ops");
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, h, "graph's handle");
  graph->finalize("operation graph");

  // Candidates in rank order; a mode that fails (the fallback list for an unusual problem)
  // only contributes nothing.
  std::vector<std::shared_ptr<const Desc>> cfgs;
  std::string why = "no engine configuration";
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    try {
      for (auto& c : ranked_configs(*graph, mode)) cfgs.push_back(std::move(c));
    } catch (const Refused& r) {
      why = r.what;
    }
  }
  constexpr int kMaxTimed = 8;  // benchmark: the candidates timed
  bool short_of_memory = false;  // a finalized plan could not have its workspace
  std::shared_ptr<Plan> best;
  float best_ms = 0;
  int timed = 0;
  for (const auto& cfg : cfgs) {
    try {
      if (!acceptable(cfg->get(), x.dtype())) {
        why = "no engine with the data's precision";
        continue;
      }
      auto plan = std::make_shared<Plan>();
      plan->uids = uids;
      plan->built_from = keep;
      plan->built_from.insert(plan->built_from.end(), {tx, tw, ty, conv, op, graph, cfg});
      plan->plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan->plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, h, "plan's handle");
      plan->plan->set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *cfg, "plan's engine");
      plan->plan->finalize("execution plan");
      int64_t n = 0;
      ok(api().cudnnBackendGetAttribute(plan->plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                        CUDNN_TYPE_INT64, 1, &n, &plan->workspace),
         "plan's workspace size");
      if (!benchmark) {
        const Ran r = execute(h, *plan, operands, why);
        if (r == Ran::Yes) return plan;
        short_of_memory |= r == Ran::NoWorkspace;
        continue;
      }
      float ms = 0;
      const Ran r = time_plan(h, *plan, operands, ms, why);
      short_of_memory |= r == Ran::NoWorkspace;
      if (r == Ran::Yes && (!best || ms < best_ms)) {
        best = plan;
        best_ms = ms;
      }
      if (++timed == kMaxTimed) break;
    } catch (const Refused& r) {
      why = r.what;
    }
  }
  if (best) {
    // The output holds the last candidate's result: the chosen plan writes it again.
    const Ran r = execute(h, *best, operands, why);
    if (r == Ran::Yes) return best;
    short_of_memory |= r == Ran::NoWorkspace;
  }
  // A plan that only lacked its workspace may run when memory is free: not remembered as none.
  if (short_of_memory) throw ShortOfMemory{why};
  throw Refused{why};
}

std::atomic<int64_t> executions{0}, fallbacks{0}, fused_executions{0};
std::mutex reason_mu;
std::string last_reason;

}  // namespace

namespace cudnn_graph {

bool convolution(Direction dir, cudnnHandle_t h, const Tensor& x, const Tensor& w, const Tensor& y,
                 const ConvParams& p, bool nhwc, bool benchmark, const Epilogue& epi) {
  IGNIS_CHECK(dir == Direction::Forward || (!epi.bias.defined() && !epi.relu),
              "cudnn_graph::convolution: an epilogue is a forward's");
  const bool fused = epi.bias.defined() || epi.relu;
  CallData operands{{x.data_ptr(), w.data_ptr(), y.data_ptr()}, x.device()};
  if (epi.bias.defined()) operands.ptrs.push_back(epi.bias.data_ptr());
  // Per thread (plans belong to this thread's handle), per problem: its plan, or null when the
  // graph API has none.
  thread_local std::map<std::vector<int64_t>, std::shared_ptr<Plan>> plans;
  std::vector<int64_t> key = {static_cast<int64_t>(dir),
                              x.device().index,
                              static_cast<int64_t>(x.dtype()),
                              nhwc,
                              benchmark,
                              epi.bias.defined() ? static_cast<int64_t>(epi.bias.dtype()) : -1,
                              epi.relu};
  for (void* ptr : operands.ptrs) key.push_back(alignment(ptr));
  for (const Tensor* t : {&x, &w, &y}) key.insert(key.end(), t->sizes().begin(), t->sizes().end());
  key.insert(key.end(), {p.pad_l[0], p.pad_l[1], p.pad_r[0], p.pad_r[1], p.stride[0], p.stride[1],
                         p.dilation[0], p.dilation[1], p.groups});
  // Remembers a problem's plan (null: none), within a bound for programs of endless shapes.
  auto remember = [&](std::shared_ptr<Plan> plan) {
    if (plans.size() >= 1024) plans.clear();
    plans[key] = std::move(plan);
  };
  std::string why;
  const auto it = plans.find(key);
  if (it != plans.end()) {
    if (!it->second) return false;
    switch (execute(h, *it->second, operands, why)) {
      case Ran::Yes:
        executions.fetch_add(1, std::memory_order_relaxed);
        if (fused) fused_executions.fetch_add(1, std::memory_order_relaxed);
        return true;
      case Ran::NoWorkspace: return false;  // this time only: memory may be free next time
      case Ran::Refused: break;
    }
  } else {
    try {
      remember(build_plan(dir, h, x, w, y, p, nhwc, benchmark, epi, operands));
      executions.fetch_add(1, std::memory_order_relaxed);
      if (fused) fused_executions.fetch_add(1, std::memory_order_relaxed);
      return true;
    } catch (const ShortOfMemory&) {
      return false;  // this time only, as for a remembered plan
    } catch (const Refused& r) {
      why = r.what;
    }
  }
  remember(nullptr);
  // A fused problem without a plan is not a fallback yet: the caller tries the plain graph.
  if (fused) return false;
  fallbacks.fetch_add(1, std::memory_order_relaxed);
  static const char* names[] = {"forward", "backward data", "backward filter"};
  std::ostringstream os;
  os << "conv2d " << names[static_cast<int>(dir)] << ", " << x.dtype() << (nhwc ? " NHWC" : " NCHW")
     << ", x " << x.sizes() << ", w " << w.sizes() << ": " << why;
  std::lock_guard<std::mutex> g(reason_mu);
  last_reason = os.str();
  return false;
}

}  // namespace cudnn_graph

namespace detail {

CudnnGraphStats cudnn_graph_stats() {
  CudnnGraphStats s;
  s.executions = executions.load();
  s.fallbacks = fallbacks.load();
  s.fused_executions = fused_executions.load();
  std::lock_guard<std::mutex> g(reason_mu);
  s.last_fallback = last_reason;
  return s;
}

}  // namespace detail
}  // namespace ignis::cuda
