// Adagrad: PyTorch's _single_tensor_adagrad, with a fused CPU kernel for float32/float64 and a
// fused multi-tensor CUDA kernel (cuda/optim_kernels.cu).
#include "ignis/optim/adagrad.h"

#include <cmath>

#include "ignis/autograd.h"
#include "ignis/ops.h"
#include "cuda/backend.h"
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
    adagrad_element<T, WD>(p[i], g[i], sum[i], sign, wd, eps, neg_clr);
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

// GPU parameters of a group, gathered for one multi-tensor launch (cuda/optim_kernels.cu): a
// launch per device and dtype (the first parameter's; others take the generic path).
struct CudaBatch {
  std::vector<Tensor> p, g, sum;
  std::vector<double> clr;
  bool takes(const Tensor& param, const Tensor& grad, const AdagradParamState& st) const {
    return fused_cuda_ok(param, grad) && st.sum.defined() && fused_cuda_state_ok(param, st.sum);
  }
  void run(const AdagradOptions& o) {
    if (p.empty()) return;
    cuda::detail::adagrad_multi_tensor(p, g, sum, clr,
                                       {o.weight_decay(), o.eps(), o.maximize()});
    for (size_t k = 0; k < p.size(); ++k) {
      bump(p[k]);
      bump(sum[k]);
    }
  }
};

}  // namespace

Tensor Adagrad::step(const LossClosure& closure) {
  Tensor loss = call_closure(closure);
  NoGradGuard no_grad;
  for (ParamGroup& group : groups_) {
    const auto& o = static_cast<const AdagradOptions&>(group.options());
    CudaBatch batch;
    for (Tensor& p : group.params()) {
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      init_state(p, o);  // a no-op unless the group was added later or the state was reloaded
      auto& st = static_cast<AdagradParamState&>(*state(p));
      st.step += 1;
      const double clr = o.lr() / (1 + static_cast<double>(st.step - 1) * o.lr_decay());
      if (batch.takes(p, grad, st)) {
        batch.p.push_back(p);
        batch.g.push_back(grad);
        batch.sum.push_back(st.sum);
        batch.clr.push_back(clr);
        continue;
      }
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
    batch.run(o);
  }
  return loss;
}

}  // namespace ignis::optim
