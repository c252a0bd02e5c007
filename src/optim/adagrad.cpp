// Adagrad: PyTorch's _single_tensor_adagrad, with a fused CPU kernel for float32/float64.
#include "ignis/optim/adagrad.h"

#include <cmath>

#include "ignis/autograd.h"
#include "ignis/ops.h"
#include "optim/fused.h"

namespace ignis::optim {

std::vector<HParamRef> AdagradOptions::hparams() {
  return {{"lr", &lr_},
          {"lr_decay", &lr_decay_},
          {"weight_decay", &weight_decay_},
          {"initial_accumulator_value", &initial_accumulator_value_},
          {"eps", &eps_},
          {"maximize", nullptr, &maximize_}};
}

Adagrad::Adagrad(std::vector<ParamGroup> groups, AdagradOptions defaults)
    : Optimizer("Adagrad", std::make_unique<AdagradOptions>(defaults)) {
  validate_options(defaults);
  IGNIS_CHECK(!groups.empty(), "Adagrad: got an empty parameter list");
  for (ParamGroup& g : groups) add_param_group(std::move(g));
  // PyTorch creates the accumulators with the optimizer (so state_dict() has them at once).
  NoGradGuard no_grad;
  for (ParamGroup& g : groups_) {
    const auto& o = static_cast<const AdagradOptions&>(g.options());
    for (const Tensor& p : g.params()) init_state(p, o);
  }
}

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions defaults)
    : Adagrad(std::vector<ParamGroup>{ParamGroup(std::move(params))}, std::move(defaults)) {
  IGNIS_CHECK(size() > 0, "Adagrad: got an empty parameter list");
}

void Adagrad::validate_options(const OptimizerOptions& options) const {
  auto* o = dynamic_cast<const AdagradOptions*>(&options);
  IGNIS_CHECK(o, "Adagrad: parameter group options must be AdagradOptions, got ",
              options.type_name());
  IGNIS_CHECK(o->lr() >= 0, "Adagrad: invalid learning rate: ", o->lr(), " (must be >= 0)");
  IGNIS_CHECK(o->lr_decay() >= 0, "Adagrad: invalid lr_decay value: ", o->lr_decay(),
              " (must be >= 0)");
  IGNIS_CHECK(o->weight_decay() >= 0, "Adagrad: invalid weight_decay value: ", o->weight_decay(),
              " (must be >= 0)");
  IGNIS_CHECK(o->initial_accumulator_value() >= 0,
              "Adagrad: invalid initial_accumulator_value value: ",
              o->initial_accumulator_value(), " (must be >= 0)");
  IGNIS_CHECK(o->eps() >= 0, "Adagrad: invalid epsilon value: ", o->eps(), " (must be >= 0)");
}

void Adagrad::init_state(const Tensor& p, const AdagradOptions& o) {
  auto& st = static_cast<AdagradParamState&>(state_or_create(p));
  if (!st.sum.defined()) st.sum = full(p.sizes(), o.initial_accumulator_value(), p.options());
}

namespace {

// The inner loop, with every operand a value or a restrict pointer so that nothing aliases
// the arrays and the loop vectorises.
template <class T, bool WD>
void adagrad_loop(T* __restrict p, const T* __restrict g, T* __restrict sum, int64_t n, T sign,
                  T wd, T eps, T neg_clr) {
  for (int64_t i = 0; i < n; ++i) {
    T gi = g[i] * sign;
    if constexpr (WD) gi = gi + wd * p[i];
    T si = sum[i] + T(1) * gi * gi;
    sum[i] = si;
    p[i] = p[i] + neg_clr * gi / (std::sqrt(si) + eps);
  }
}

template <class T>
void adagrad_fused(const Tensor& param, const Tensor& grad, AdagradParamState& st,
                   const AdagradOptions& o, double clr) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* sum = st.sum.data_ptr<T>();
  const T sign = o.maximize() ? T(-1) : T(1);
  const T wd = T(o.weight_decay()), eps = T(o.eps()), neg_clr = T(-clr);
  with_flag(o.weight_decay() != 0, [&](auto WD) {
    fused_for(param.numel(), [&](int64_t begin, int64_t end) {
      adagrad_loop<T, decltype(WD)::value>(p + begin, g + begin, sum + begin, end - begin, sign,
                                           wd, eps, neg_clr);
    });
  });
}

}  // namespace

Tensor Adagrad::step(const LossClosure& closure) {
  Tensor loss = call_closure(closure);
  NoGradGuard no_grad;
  for (ParamGroup& group : groups_) {
    const auto& o = static_cast<const AdagradOptions&>(group.options());
    for (Tensor& p : group.params()) {
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      init_state(p, o);  // a no-op unless the group was added later or the state was reloaded
      auto& st = static_cast<AdagradParamState&>(*state(p));
      st.step += 1;
      const double clr = o.lr() / (1 + static_cast<double>(st.step - 1) * o.lr_decay());
      if (fused_ok(p, grad) && fused_state_ok(p, st.sum)) {
        if (p.dtype() == kFloat32) adagrad_fused<float>(p, grad, st, o, clr);
        else adagrad_fused<double>(p, grad, st, o, clr);
        bump(p);
        bump(st.sum);
        continue;
      }
      // Generic path (other dtypes and devices, non-contiguous tensors).
      Tensor g = o.maximize() ? grad.neg() : grad;
      if (o.weight_decay() != 0) g = g.add(p, o.weight_decay());
      st.sum.add_(g.mul(g));
      Tensor std_ = st.sum.sqrt().add_(o.eps());
      p.add_(g.mul(-clr).div_(std_));
    }
  }
  return loss;
}

}  // namespace ignis::optim
