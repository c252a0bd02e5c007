// The floating unary ops, generated from their one-line records in ignis/float_unary_ops.def:
// for each, its kernel stub, its registry records (out of place and in place), its front end
// (the dispatch, the kernel call, the backward recorded in ignis ops) and its methods.
#include "core/op_call.h"
#include "ops/unary.h"

namespace ignis {
namespace {

using autograd::BackwardCtx;
using autograd::SavedVariable;

/// What a backward formula reads: the op's input, its output, or both.
enum class Saves { X, Y };

/// y = stub(x) with float promotion; when x needs a gradient, records the backward
/// `grad(g, x, y)` (an unsaved operand arrives undefined).
template <Saves S, class Grad>
Tensor float_unary_op(const DispatchStub<ElementwiseFn>& stub, const char* op, const Tensor& x,
                      Grad grad) {
  Tensor out = floating_unary(stub, x);
  if (autograd::any_needs_grad({&x})) {
    if constexpr (S == Saves::X) {
      autograd::record(op, {&x}, {&out},
                       [sx = SavedVariable(x, false), grad](BackwardCtx& c, const TensorList& g) {
                         return TensorList{grad(g[0], c.unpack(sx), Tensor())};
                       });
    } else {
      autograd::record(op, {&x}, {&out},
                       [so = save_output(out), grad](BackwardCtx& c, const TensorList& g) {
                         return TensorList{grad(g[0], Tensor(), c.unpack(so))};
                       });
    }
  }
  return out;
}

}  // namespace

#define IGNIS_FLOAT_UNARY_OP(name, Functor, saves, grad_expr)                                  \
  IGNIS_DEFINE_OP_STUB(name);                                                                  \
  IGNIS_OP(name, #name "(Tensor self) -> Tensor", Tensor(const Tensor&), name,                 \
           {.differentiable = true, .stubs = {&name##_stub}});                                 \
  IGNIS_OP_METHOD(name##_, #name "_(Tensor(a!) self) -> Tensor(a!)", Tensor&() const, name##_, \
                  {.differentiable = true, .stubs = {&name##_stub}});                          \
  Tensor name(const Tensor& self) {                                                            \
    IGNIS_DISPATCH(name, name, self);                                                          \
    return float_unary_op<Saves::saves>(                                                       \
        name##_stub, #name, self,                                                              \
        [](const Tensor& g, const Tensor& x, const Tensor& y) { return grad_expr; });          \
  }                                                                                            \
  Tensor Tensor::name() const { return ignis::name(*this); }                                   \
  Tensor& Tensor::name##_() const {                                                            \
    IGNIS_DISPATCH_METHOD(name##_, name##_);                                                   \
    return inplace_unary(mut(), name##_stub, to_floating(dtype()), {}, #name "_",              \
                         Saves::saves == Saves::X,                                             \
                         [](const Tensor& x) { return ignis::name(x); });                      \
  }
#include "ignis/float_unary_ops.def"

}  // namespace ignis
