// Graph mode: trace a module or function into a graph of registry ops, optimise it with passes,
// run it, save it to one file and load it back without the model's source.
//
//   auto model = models::mlp();
//   model->eval();
//   jit::Graph g = jit::trace(model, {x});      // SSA values, nodes = registry ops
//   std::cout << g.str();                       // one line per node, like torch.fx
//   jit::freeze(g);                             // fold batch norm, fuse conv/linear + relu, DCE
//   TensorList y = g.run({x});
//   g.save("mlp.ignis");                        // graph + weights, one safetensors file
//   jit::Graph again = jit::load("mlp.ignis");  // validated as untrusted input
//
//   auto fast = jit::compile(model);            // an nn::Module: traces on the first call,
//   Tensor out = fast->forward(x);              // re-traces when a shape/dtype/device changes
//
// The graph holds the traced function's ops only: Python-like control flow on tensor values
// is frozen at trace time, and reading a tensor on the host while tracing (item(), an op whose
// output shape depends on values) is refused. docs/graph-mode.md describes the IR, the passes
// and the file format.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ignis/nn/module.h"
#include "ignis/op_registry.h"
#include "ignis/tensor.h"

namespace ignis::jit {

namespace detail {
class PlannedArena;
}

/// What a value of the graph is.
enum class ValueKind {
  Input,      // a graph input, "%x0"
  Parameter,  // a module parameter, by its dotted name: "%fc1.weight"
  Buffer,     // a module buffer: "%bn1.running_mean"
  Constant,   // any other tensor the code did not compute with an op: "%c0"
  Result,     // the output of a node: "%3"
};
std::string_view value_kind_name(ValueKind k);

/// An SSA value: defined once (as an input, a held tensor, or by one node), with its traced
/// shape, dtype and device.
struct Value {
  ValueKind kind = ValueKind::Result;
  std::string name;  // printed with a leading '%'
  Shape sizes;
  DType dtype = DType::Float32;
  Device device = kCPU;
  /// Is it one of the tensors the graph holds (parameter, buffer, constant)?
  bool held() const {
    return kind == ValueKind::Parameter || kind == ValueKind::Buffer || kind == ValueKind::Constant;
  }
};

/// One argument of a node, in schema order: a tensor value (-1 for None), a list of tensor
/// values, or an attribute kept as the boxed value the op was called with.
struct Arg {
  enum class Kind { Attribute, Tensor, TensorList };
  Kind kind = Kind::Attribute;
  int value = -1;
  std::vector<int> values;
  op::IValue attr;
  static Arg tensor(int v) {
    Arg a;
    a.kind = Kind::Tensor;
    a.value = v;
    return a;
  }
  static Arg attribute(op::IValue v) {
    Arg a;
    a.attr = std::move(v);
    return a;
  }
};

/// A call of a registry op: its record, its arguments and the values it defines.
struct Node {
  const op::Record* op = nullptr;
  std::vector<Arg> args;
  std::vector<int> outputs;
  /// The record's full name, "add.Tensor".
  std::string name() const;
  /// The value ids it reads, in argument order (None skipped).
  std::vector<int> inputs() const;
};

/// A traced computation: values (by id), nodes in execution order, the graph's inputs and
/// outputs, and the tensors it holds (parameters, buffers, constants; by value id).
class Graph {
 public:
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;
  std::vector<int> outputs;
  /// tensors[id] is the tensor of a held value (undefined for inputs and results).
  std::vector<Tensor> tensors;

  /// Readable form, one line per node (like torch.fx's graph print):
  ///   graph(%x0 : float32[1, 512]):
  ///     %0 : float32[1, 256] = linear_relu(%x0, %0.weight, %0.bias)
  ///     return (%2)
  ///   parameters: %0.weight : float32[256, 512]; ...
  std::string str() const;
  /// Checks the invariants (each value defined once, before its uses; held values have their
  /// tensor; argument kinds match the schemas); throws naming the fault.
  void lint() const;
  /// Runs the graph on `inputs` (same shapes, dtypes and devices as traced), calling each op
  /// through its front end (so autograd records as in eager). Builds an Executor per call:
  /// hold an Executor to run a graph many times.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  /// The held values of kind Parameter / Buffer, by name (sharing the module's tensors for a
  /// traced graph).
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  /// Number of nodes calling the op `full_name`.
  int count(std::string_view full_name) const;

  /// A copy of the graph on `device` (nn::Module::to; torch.jit.load's map_location): its held
  /// tensors copied there (parameters stay trainable leaves), every value's device and every
  /// device argument (a factory op's options, a `to`) set to it. On its own device: a copy
  /// sharing the tensors.
  Graph to(Device device) const;

  /// Writes the graph and its tensors to one file (see docs/graph-mode.md), atomically. A graph
  /// on a GPU is written as its CPU copy (the file holds a CPU graph: load(path, device) puts it
  /// back on any device); a meta graph, which holds no data, cannot be saved.
  void save(const std::string& path) const;

  // ---- building and editing (used by the tracer, the loader and the passes)
  int add_value(Value v, Tensor held = Tensor());
  /// Points every use of value `from` (node arguments, graph outputs) at `to`.
  void replace_uses(int from, int to);
  /// Number of uses of each value (node arguments plus graph outputs).
  std::vector<int> use_counts() const;
  /// Drops values that nothing defines or uses (inputs stay) and renumbers the results
  /// (%0, %1, ...) and constants (%c0, ...) in order.
  void compact();
};

struct ExecutorOptions {
  /// Runs independent nodes concurrently: nodes of one level of the graph's dependency DAG
  /// (none reads another's output) run on the OpenMP pool, one thread per node, each op then
  /// single-threaded inside (ignis's loops and oneDNN do not open nested parallel regions), so
  /// the cores are never oversubscribed. It pays for branches of small ops, which cannot use the
  /// cores by themselves. Nodes that write into a tensor or draw random numbers run alone, in
  /// order (barriers). Off by default; with an interposer installed (profiler, tracer) or
  /// saved-tensor hooks (autograd::graph::SavedTensorsHooks) nodes run in order.
  bool parallel_branches = false;
  /// With parallel_branches: a cost model (estimated time per node from its shapes) decides per
  /// level which nodes keep their own intra-op threads, run alone, and which run together, for
  /// the thread count at construction (Executor::schedule()). Off: every level of several nodes
  /// runs together.
  bool branch_cost_model = true;
  /// Serves the CPU memory that nodes allocate (their results and their temporaries, blocks of
  /// more than 4 KiB) from one arena planned by liveness, like ONNX Runtime's memory patterns:
  /// the second run is recorded (each allocation named by its node and its order there, with its
  /// size and lifetime), the allocations it freed are placed in one block (allocations that never
  /// live together share bytes), and later runs take their memory from it. What the recording
  /// does not cover, or whose bytes are still in use (a result kept longer than in the recorded
  /// run), comes from the caching allocator as before, so results never share memory they should
  /// not; a run that missed is recorded again (at most three recordings). Graph outputs never
  /// come from the arena. The arena is held between runs (it is the runs' memory: the caching
  /// allocator's blocks for them are not needed). See Executor::arena_stats().
  bool memory_arena = true;
};

/// The planned arena's counts (ExecutorOptions::memory_arena).
struct ArenaStats {
  int64_t arena_bytes = 0;          // the arena's block (0 before a plan)
  int64_t planned_bytes = 0;        // the planned allocations' bytes added up (no reuse)
  int64_t recorded_peak_bytes = 0;  // the most of them alive at once in the recorded run
  int64_t planned = 0;              // allocations with a place in the arena
  // The last run's allocations: served from the arena; planned but not served (another size,
  // or bytes still in use); not planned (the recorded run kept them past its end: results,
  // tensors saved for backward). The last two come from the caching allocator.
  int64_t served = 0;
  int64_t missed = 0;
  int64_t unplanned = 0;
  int recordings = 0;  // runs recorded so far
};

/// Runs a graph many times: prepares each node's arguments once (hot ops are called unboxed,
/// frozen convolutions and linear_pointwise nodes keep their weights pre-packed), frees each
/// intermediate value after its last use. Not thread-safe: one Executor per thread.
///
/// A pre-packed weight that nothing else can reach — the executor holds the only reference to
/// the graph (it was moved in, as `jit::compile` and `jit::load` + `Executor` do) and the weight
/// tensor is held by that graph alone (batch norm folded into it, or loaded from a file) — is
/// released after a run: the packed copy is then the weight, so a frozen graph holds its weights
/// once, not twice. Where the plain weight is needed again (a profiled run, autograd, another
/// input layout, `graph()`), it is rebuilt from the packed copy, exactly, and kept.
class Executor {
 public:
  explicit Executor(std::shared_ptr<const Graph> graph, ExecutorOptions opts = {});
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  /// The graph it runs (weights it released are rebuilt first).
  const Graph& graph() const;
  /// Whether run() takes these inputs: their number, shapes, dtypes and devices as traced.
  bool accepts(const std::vector<Tensor>& inputs) const;
  /// The bytes of plain weights released so far (and not rebuilt since).
  int64_t released_weight_bytes() const;
  /// The levels of the dependency DAG, in execution order: each the node indices that may run
  /// together.
  const std::vector<std::vector<int>>& levels() const { return levels_; }
  /// What runs with parallel_branches, in order: groups of node indices, a group of several
  /// nodes run concurrently (the levels as the cost model splits them; the levels themselves
  /// without it).
  const std::vector<std::vector<int>>& schedule() const { return schedule_; }
  /// The planned arena's counts (all zero without ExecutorOptions::memory_arena).
  ArenaStats arena_stats() const;

 private:
  void run_step(size_t i);
  /// Releases the plain copies of packed weights nothing else holds (see the class comment).
  void release_packed_weights();
  /// Rebuilds step i's released weight from its packed copy and keeps it.
  void rebuild_weight(size_t i) const;
  /// The planned arena to run with (recording or serving), or null.
  detail::PlannedArena* arena_for_run();
  void arena_after_run(bool ok);
  struct Step {
    const op::Record* op;
    /// The op's front end called with the node's arguments unboxed (hot ops), else null.
    Tensor (*direct)(const Node& n, const std::vector<Tensor>& env, void* state) = nullptr;
    /// What the direct call keeps between runs (a convolution's pre-packed weight), or null.
    std::shared_ptr<void> state;
    /// The constant the state packs (used by this node alone), which may be released; else -1.
    int weight = -1;
    std::vector<op::IValue> frame;  // the boxed arguments; tensor slots filled per run
    std::vector<int> frame_values;  // per argument: its value id (Tensor args), else -1
    std::vector<int> outputs;
    std::vector<int> release;  // values whose last use is this node
  };
  std::shared_ptr<const Graph> graph_;
  std::shared_ptr<Graph> own_;  // graph_'s own copy, once a weight was released from it
  ExecutorOptions opts_;
  std::vector<Step> steps_;
  std::vector<std::vector<int>> levels_;
  std::vector<std::vector<int>> schedule_;
  std::vector<std::vector<int>> level_release_;  // values freed after each group of schedule_
  mutable std::vector<Tensor> env_;              // (graph() may rebuild released weights into it)
  std::shared_ptr<detail::PlannedArena> arena_;  // released, not deleted: storages may hold it
  int runs_ = 0;
  int recordings_ = 0;
  bool arena_grad_ = false;    // the grad mode the arena was recorded in
  bool arena_missed_ = false;  // the last served run missed: record again
};

/// Traces fn(example_inputs): records the registry ops it calls (at the top level; an op's inner
/// calls belong to it) as a graph. `parameters` and `buffers` name the held tensors they list;
/// other tensors it reads become constants. Throws, naming the op, when the function reads tensor
/// data on the host (item(), data_ptr() of a traced value, an op returning a host value such as
/// equal, an op whose output shape depends on values such as nonzero).
Graph trace(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
            const std::vector<Tensor>& example_inputs,
            const std::vector<std::pair<std::string, Tensor>>& parameters = {},
            const std::vector<std::pair<std::string, Tensor>>& buffers = {});
/// Traces module->forward on its one input, naming the module's parameters and buffers by their
/// dotted names (named_parameters(), named_buffers()). The graph shares the
/// module's tensors: an optimizer step on the module is seen by the graph.
Graph trace(const std::shared_ptr<nn::Module>& module, const std::vector<Tensor>& example_inputs);

// ---- passes: each rewrites the graph in place and returns the number of rewrites.

/// Removes nodes that return their input itself (dropout with train=False or p=0): their
/// readers read the input, so that elementwise chains run through them (bias + relu + dropout in
/// eval mode fuses into one node).
int eliminate_identities(Graph& g);
/// Dead-code elimination: removes nodes none of whose outputs are used (ops that write into
/// their inputs, random ops and training-mode batch norm are kept), then unused held values.
int eliminate_dead_code(Graph& g);
/// Common-subexpression elimination: a pure node with the same op, attributes and inputs as an
/// earlier one is replaced by it.
int eliminate_common_subexpressions(Graph& g);
/// Turns parameters and buffers into constants (detached; the graph keeps their names):
/// what the folding passes may fold. The graph no longer follows the module's training.
int freeze_parameters(Graph& g);
/// Constant folding: a pure, deterministic node whose tensor inputs are all constants is run
/// once and replaced by its result.
int fold_constants(Graph& g);
/// Folds eval-mode batch_norm into the preceding conv2d (new constant weight and bias), when the
/// convolution's output feeds only the batch norm and both read constants.
int fold_batch_norm(Graph& g);
/// conv2d -> relu and linear -> relu (the relu the only use) become conv2d_relu / linear_relu
/// (oneDNN's post-op for the convolution; the relu in place on the product for linear);
/// conv2d -> add -> relu (a residual block's end) becomes conv2d_add_relu (oneDNN's sum and
/// relu post-ops); a linear without bias followed by the add of a constant vector takes it as
/// its bias; batch_norm -> relu and batch_norm -> add -> relu (a training graph's) become
/// batch_norm_relu (normalisation, residual and ReLU in one pass).
int fuse_ops(Graph& g);

/// Elementwise fusion: each maximal chain of elementwise ops (add, sub, mul, div, maximum,
/// minimum, neg, abs, pow by a nonzero number, relu, gelu, silu, leaky_relu and the floating
/// unary ops: exp, tanh, sigmoid, ...) on one float32 or float64 shape, whose intermediate values
/// nothing else reads, becomes one `fused_elementwise` node: one pass over memory instead of one
/// per op. Masks join too: comparisons, logical ops, where and masked_fill, a bool input read as 1
/// or 0. Its program runs as C++ generated from the ops' functors and compiled at run time, or
/// through an interpreter over the same functors (see set_fusion_backend).
int fuse_elementwise(Graph& g);

/// How fused_elementwise and fused_reduction run on the CPU: "auto" (compile generated C++ with the
/// system compiler — $IGNIS_JIT_CXX, else c++ — into the cache $IGNIS_JIT_CACHE, else
/// ~/.cache/ignis/jit; the interpreter when that fails), "compiler" (an error when it fails),
/// "interpreter" (no compiler: the program tile by tile through the functors; same results).
void set_fusion_backend(const std::string& backend);
/// The backend in effect; for "auto" after a compiler failure, also why.
std::string fusion_backend();

/// A linear whose output only feeds a gelu (either approximation), silu or relu becomes a
/// `linear_pointwise` with that activation; a linear, linear_relu or linear_pointwise without a
/// residual whose output only feeds an add (alpha 1) of a tensor of the output's shape and dtype
/// becomes a `linear_pointwise` with that tensor as its residual `other`, placed where the add
/// was; an activation of such a sum (no activation yet) joins it with `add_first`. For float32
/// inference the fused op is one oneDNN matmul with post-ops.
int fuse_linear_pointwise(Graph& g);
/// The same for convolutions (run after fuse_ops, which makes conv2d_relu and conv2d_add_relu):
/// a conv2d whose output only feeds a gelu or silu, or an add of a tensor of its shape and dtype
/// (a conv2d_relu too), and then an activation of that sum, become one `conv2d_pointwise`: for
/// float32 inference one oneDNN convolution with post-ops.
int fuse_conv_pointwise(Graph& g);

/// Reduction fusion: each layer_norm (over trailing dims), softmax and log_softmax over the last
/// dim, together with the elementwise op or fused_elementwise node computing its input (the
/// prologue: its output read by nothing else) and the chain of elementwise ops / fused nodes
/// consuming its result (the epilogue: each value read by the next alone; layer_norm's weight
/// and bias become its first ops), becomes one `fused_reduction` node: one pass over memory per
/// row. A layer_norm is fused even alone (its composite makes several passes); a softmax only
/// with a prologue or an epilogue. So does a sum (no dtype), mean, amax or amin over trailing
/// dims (max() and min() over all), and var and std as a chain of two (the mean, then the
/// squared deviations' sum over C - correction > 0; in float32 also the deviations' sum, which
/// corrects the mean's rounding; std's square root taken of its relu, whose
/// derivative gives eager's 0 at rows of equal values) and norm(x, 2) as the sum of squares and
/// its square root (likewise of its relu), with a prologue or an epilogue: its consumers of one
/// value per row, then, with keepdim, of the rows' shape (a hand-written RMS norm is one node);
/// without keepdim only ops whose other operands hold one element. Last, a node of statistics
/// reading the result of another (of the rows' shape or one value per row, over the same rows, read
/// by nothing else; either may be a bare sum, mean, amax or amin op) is chained with it: one node
/// of several statistics whose programs recompute the first's epilogue where they read its
/// result, a stage equal to an earlier one taken once (a
/// hand-written layer norm — the mean, then the variance, or var and mean — or softmax is one
/// node).
int fuse_reductions(Graph& g);

/// Runs a fused elementwise program (the fusion pass's node; the program's syntax is in
/// docs/graph-mode.md) on inputs of one float dtype (and bool masks) that broadcast together. With
/// an input that requires grad it records one node whose backward is the program differentiated in
/// reverse mode: one fused pass for every input's gradient (on a GPU and with create_graph, a fused
/// program per input); a program using an op without a derivative there (maximum, minimum) runs
/// its ops one by one, so each records its own backward.
Tensor fused_elementwise(const std::vector<Tensor>& inputs, const std::string& program);
/// A row-wise reduction with an elementwise prologue and epilogue (fuse_reductions' node): over
/// rows of the inputs' broadcast shape's trailing `dims` dims, x = prologue(inputs) (empty: input
/// 0), y = `reduction`(x) — "layer_norm" ((x - mean) / sqrt(var + eps), no affine part),
/// "rms_norm", "softmax" or "log_softmax" (dims 1), each of x's shape; or a statistic of each row,
/// "sum", "mean", "amax" or "amin" (one value per row: the trailing dims kept as 1 with
/// `keepdim`, else dropped) — and out = epilogue(inputs..., y) (y is its input i<n>, n the number
/// of inputs; empty: out = y). A statistic's epilogue gives one value per row or, reading inputs
/// of the rows' shape, the rows' shape (`x * rsqrt(mean(x * x) + eps)`); without `keepdim` it
/// reads one-element inputs only; its programs have no dropout. Statistics may be chained: up to
/// four separated by commas ("amax,sum"), with one prologue per stage separated by '|' (empty:
/// input 0); stage k's prologue reads the inputs and the earlier statistics as i<n>..i<n+k-1>,
/// the epilogue all K as i<n>..i<n+K-1> (none: the output is the last statistic); in training
/// each stage is a fused_reduction of its own, the last one carrying the epilogue (without
/// keepdim, the epilogue is a fused_elementwise of its own).
/// Programs as fused_elementwise's.
/// With an input that requires grad: one node whose backward recomputes the programs and the
/// reduction (on the CPU and a GPU), else the ops one by one.
Tensor fused_reduction(const std::vector<Tensor>& inputs, const std::string& reduction,
                       int64_t dims, const std::string& prologue, const std::string& epilogue,
                       double eps = 1e-5, bool keepdim = true);
/// activation(linear(input, weight, bias)) + other, or activation(linear(...) + other) with
/// `add_first` (fuse_linear_pointwise's node; activation "none", "relu", "gelu", "gelu_tanh" or
/// "silu"; other may be undefined). Float32 CPU inference with `other` of the output's shape runs
/// one oneDNN matmul with post-ops; otherwise the ops one by one.
Tensor linear_pointwise(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        const Tensor& other = Tensor(), const std::string& activation = "none",
                        bool add_first = false);
/// activation(conv2d(input, weight, bias, ...)) + other, or activation(conv2d(...) + other) with
/// `add_first` (fuse_conv_pointwise's node; activations as linear_pointwise's; other may be
/// undefined). Float32 CPU inference with `other` of the output's shape runs one oneDNN
/// convolution with post-ops; otherwise the ops one by one.
Tensor conv2d_pointwise(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        const Tensor& other = Tensor(), IntArrayRef stride = {1},
                        IntArrayRef padding = {0}, IntArrayRef dilation = {1}, int64_t groups = 1,
                        const std::string& activation = "none", bool add_first = false);

/// Inference freeze (torch.jit.freeze): eliminate_identities, freeze_parameters,
/// fold_batch_norm, fold_constants, fuse_ops, fuse_linear_pointwise, fuse_conv_pointwise, CSE,
/// fuse_elementwise, fuse_reductions and DCE. The graph's results are those of the module in eval
/// mode.
void freeze(Graph& g);
/// The passes that keep a graph trainable: eliminate_identities, CSE, fuse_ops,
/// fuse_linear_pointwise, fuse_conv_pointwise, fuse_elementwise, fuse_reductions, DCE.
void optimize(Graph& g);

// ---- memory

/// The memory of a graph's intermediate values (node results that own a buffer: a view or an
/// in-place op's result shares its input's), by liveness: a buffer lives from the node that
/// makes it to the last node that reads it or a view of it (graph outputs to the end).
struct MemoryPlan {
  /// Every intermediate buffer held until the end of the run (nothing freed).
  int64_t unplanned_bytes = 0;
  /// The most bytes alive at once when each buffer is freed after its last use (what the
  /// executor does, through the caching allocator).
  int64_t peak_live_bytes = 0;
  /// The size of one arena holding every buffer at a fixed offset, buffers whose lifetimes do
  /// not overlap sharing bytes (greedy placement, largest first).
  int64_t arena_bytes = 0;
  /// Per value id: its buffer's offset in the arena; -1 for values without a buffer of their own
  /// (inputs, held values, views and in-place results).
  std::vector<int64_t> offsets;
  /// Per value id: the value whose buffer it uses (itself for a buffer; -1 when none).
  std::vector<int> buffer_of;
  /// Per value id: [first, last] node indices of its buffer's lifetime (-1 when none).
  std::vector<std::pair<int, int>> lifetime;
};
MemoryPlan plan_memory(const Graph& g);

// ---- save and load

/// The graph format version this build writes and reads.
constexpr int kGraphFormatVersion = 1;
/// Reads a file written by Graph::save. The file is untrusted: every op name, attribute, value
/// reference, dtype and shape is validated (the graph is run on the meta device and every
/// node's output must match its recorded shape), and an error names what is wrong. The graph is
/// then moved to `device` (Graph::to; torch.jit.load's map_location).
Graph load(const std::string& path, Device device = kCPU);
/// The graph part of the format (the JSON stored in the file), for tools and the fuzzer:
/// `tensors` supplies the held values by name.
std::string graph_to_json(const Graph& g);
Graph graph_from_json(std::string_view json, const std::map<std::string, Tensor>& tensors);

// ---- compile

struct CompileOptions {
  /// Also run freeze() on each traced graph: only for eval-mode inference with fixed weights.
  bool freeze = false;
  /// Run independent branches concurrently (ExecutorOptions::parallel_branches), as the cost
  /// model plans (ExecutorOptions::branch_cost_model).
  bool parallel_branches = false;
  bool branch_cost_model = true;
  /// Serve each graph's allocations from a planned arena (ExecutorOptions::memory_arena).
  bool memory_arena = true;
};

/// A module run through graphs: forward traces the wrapped module on the first call and on
/// every call whose inputs differ in shape, dtype or device from every graph it holds (or when
/// train()/eval() changed), like torch.compile(dynamic=False); otherwise it runs the graph it
/// traced for that signature. Parameters are the wrapped module's, so optimizers and fit see
/// them, and the graph's ops record autograd as eager ones do. Not thread-safe: one thread
/// calls forward at a time (its executors own their runs' value tables).
class CompiledModule : public nn::Module {
 public:
  CompiledModule(std::shared_ptr<nn::Module> module, CompileOptions opts);
  std::string type_name() const override { return "CompiledModule"; }
  Tensor forward(const Tensor& x) override;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs);
  /// How many times it has traced.
  int traces() const { return traces_; }
  /// The graph used for the most recent call (throws before the first).
  const Graph& graph() const;
  /// The planned arena's counts of that graph's executor.
  ArenaStats arena_stats() const;
  std::shared_ptr<nn::Module> module() const { return module_; }

 private:
  std::string signature(const std::vector<Tensor>& inputs) const;
  bool matches_last(const std::vector<Tensor>& inputs) const;
  std::shared_ptr<nn::Module> module_;
  CompileOptions opts_;
  std::map<std::string, std::unique_ptr<Executor>> cache_;
  Executor* last_ = nullptr;
  bool last_training_ = false;
  int traces_ = 0;
};

std::shared_ptr<CompiledModule> compile(std::shared_ptr<nn::Module> module,
                                        CompileOptions opts = {});

}  // namespace ignis::jit
