// The op tracer: the first interposer on the registry's call path and the seed of graph mode.
// Tracing runs a function once and records the ops it calls at the top level (an op's own
// inner calls belong to it), with their attributes and output shapes; replaying the trace calls
// the same records again, by name, through the dispatcher.
//
//   jit::OpTrace t = jit::trace_ops([&](const TensorList& in) { return
//   TensorList{model->forward(in[0])}; },
//                                   {x});
//   std::cout << t.str();                 // one line per op
//   TensorList y = t.replay({x});         // bit for bit what the traced call returned
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ignis/op_registry.h"
#include "ignis/tensor.h"

namespace ignis::jit {

/// A value of the trace: a graph input, a constant (a tensor the traced code did not compute
/// through an op: parameters, buffers, tensors built from host data) or an op's result.
struct TraceValue {
  enum class Kind { Input, Constant, Result };
  Kind kind = Kind::Result;
  int index = 0;  // the input's position, the constant's number, or the result's number
  Shape sizes;
  DType dtype = DType::Float32;
  std::string name() const;  // "%x0", "%c3", "%12"
};

/// One recorded op call. Tensor arguments are value ids (`tensor_args[i]`, -1 when argument i
/// is not a tensor; `list_args[i]` for Tensor[] arguments); the others are kept as they were.
struct TracedCall {
  std::string op;  // the record's full name, "add.Tensor"
  std::vector<op::IValue> args;
  std::vector<int> tensor_args;
  std::vector<std::vector<int>> list_args;
  std::vector<int> outputs;  // value ids of the results
};

class OpTrace {
 public:
  std::vector<TraceValue> values;
  std::vector<TracedCall> calls;
  std::vector<int> inputs;        // value ids of the example inputs
  std::vector<int> outputs;       // value ids of what the function returned
  std::vector<Tensor> constants;  // by TraceValue::index of constant values

  /// The trace, one line per op: "%3 : float32[64, 512] = relu(%2)".
  std::string str() const;
  /// Runs the recorded ops again on `inputs` (shapes as traced), through the registry.
  /// Throws naming the op for an unknown op name or an argument of the wrong type.
  std::vector<Tensor> replay(const std::vector<Tensor>& inputs) const;
};

/// Calls fn(example_inputs) once, recording its ops. The returned tensors must come from ops
/// (or be inputs or constants).
OpTrace trace_ops(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                  const std::vector<Tensor>& example_inputs);

}  // namespace ignis::jit
