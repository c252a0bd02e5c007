// Adam and AdamW: PyTorch's _single_tensor_adam / _single_tensor_adamw, with a fused CPU
// kernel for float32/float64 and a fused multi-tensor CUDA kernel (cuda/optim_kernels.cu).
#include "ignis/optim/adam.h"

#include <cmath>

#include "ignis/autograd.h"
#include "ignis/ops.h"
#include "cuda/backend.h"
#include "optim/fused.h"

namespace ignis::optim {

std::vector<HParamRef> AdamOptions::hparams() {
  return {{"lr", &lr_},
          {"betas.0", &std::get<0>(betas_)},
          {"betas.1", &std::get<1>(betas_)},
          {"eps", &eps_},
          {"weight_decay", &weight_decay_},
          {"amsgrad", nullptr, &amsgrad_},
          {"maximize", nullptr, &maximize_}};
}

std::vector<HParamRef> AdamWOptions::hparams() {
  return {{"lr", &lr_},
          {"betas.0", &std::get<0>(betas_)},
          {"betas.1", &std::get<1>(betas_)},
          {"eps", &eps_},
          {"weight_decay", &weight_decay_},
          {"amsgrad", nullptr, &amsgrad_},
          {"maximize", nullptr, &maximize_}};
}

namespace {

// The options of Adam and AdamW in one plain struct.
struct AdamHyper {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, maximize;
  bool decoupled;  // AdamW
};

template <class O>
AdamHyper hyper_of(const O& o, bool decoupled) {
  return {o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(),
          o.amsgrad(), o.maximize(), decoupled};
}

void check_adam(const char* name, const AdamHyper& h) {
  IGNIS_CHECK(h.lr >= 0, name, ": invalid learning rate: ", h.lr, " (must be >= 0)");
  IGNIS_CHECK(h.eps >= 0, name, ": invalid epsilon value: ", h.eps, " (must be >= 0)");
  IGNIS_CHECK(h.beta1 >= 0 && h.beta1 < 1, name, ": invalid beta parameter at index 0: ",
              h.beta1, " (must be in [0, 1))");
  IGNIS_CHECK(h.beta2 >= 0 && h.beta2 < 1, name, ": invalid beta parameter at index 1: ",
              h.beta2, " (must be in [0, 1))");
  IGNIS_CHECK(h.weight_decay >= 0, name, ": invalid weight_decay value: ", h.weight_decay,
              " (must be >= 0)");
}

// The inner loop, with every operand a value or a restrict pointer so that nothing aliases
// the arrays and the loop vectorises.
template <class T, bool L2, bool DECOUPLED, bool AMSGRAD, bool SMALL_W1>
void adam_loop(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v,
               T* __restrict vmax, int64_t n, const AdamScalars<T> c) {
  for (int64_t i = 0; i < n; ++i) {
    adam_element<T, L2, DECOUPLED, AMSGRAD, SMALL_W1>(p[i], g[i], m[i], v[i],
                                                      AMSGRAD ? vmax + i : nullptr, c);
  }
}

template <class T>
void adam_fused(const Tensor& param, const Tensor& grad, AdamParamState& st, const AdamHyper& h,
                double step_size, double bc2_sqrt) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* m = st.exp_avg.data_ptr<T>();
  T* v = st.exp_avg_sq.data_ptr<T>();
  T* vmax = h.amsgrad ? st.max_exp_avg_sq.data_ptr<T>() : nullptr;
  const AdamScalars<T> c{h.maximize ? T(-1) : T(1), T(h.weight_decay),
                         T(1 - h.lr * h.weight_decay), T(1 - h.beta1), T(h.beta2),
                         T(1 - h.beta2), T(-step_size), T(bc2_sqrt), T(h.eps)};
  const bool small_w1 = c.w1 < T(0.5) && c.w1 > T(-0.5);
  with_flag(h.weight_decay != 0 && !h.decoupled, [&](auto L2) {
    with_flag(h.weight_decay != 0 && h.decoupled, [&](auto DECOUPLED) {
      with_flag(h.amsgrad, [&](auto AMSGRAD) {
        with_flag(small_w1, [&](auto SMALL_W1) {
          fused_for(param.numel(), [&](int64_t begin, int64_t end) {
            adam_loop<T, decltype(L2)::value, decltype(DECOUPLED)::value,
                      decltype(AMSGRAD)::value, decltype(SMALL_W1)::value>(
                p + begin, g + begin, m + begin, v + begin, vmax ? vmax + begin : nullptr,
                end - begin, c);
          });
        });
      });
    });
  });
}

// GPU parameters of a group, gathered for one multi-tensor launch (cuda/optim_kernels.cu).
struct CudaBatch {
  std::vector<Tensor> p, g, m, v, vmax;
  std::vector<double> step_size, bc2_sqrt;
  bool takes(const Tensor& param, const Tensor& grad, const AdamParamState& st, bool amsgrad) {
    return fused_cuda_ok(param, grad) && fused_cuda_state_ok(param, st.exp_avg) &&
           fused_cuda_state_ok(param, st.exp_avg_sq) &&
           (!amsgrad || fused_cuda_state_ok(param, st.max_exp_avg_sq));
  }
  void run(const AdamHyper& h) {
    if (p.empty()) return;
    cuda::detail::adam_multi_tensor(p, g, m, v, vmax, step_size, bc2_sqrt,
                                    {h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.amsgrad,
                                     h.maximize, h.decoupled});
    for (size_t k = 0; k < p.size(); ++k) {
      bump(p[k]);
      bump(m[k]);
      bump(v[k]);
      if (h.amsgrad) bump(vmax[k]);
    }
  }
};

// One Adam/AdamW update of p (which has a gradient); a GPU parameter the CUDA kernel takes is
// added to `batch` instead.
void adam_update(Tensor& p, const Tensor& grad, AdamParamState& st, const AdamHyper& h,
                 CudaBatch& batch) {
  if (!st.exp_avg.defined()) st.exp_avg = zeros(p.sizes(), p.options());
  if (!st.exp_avg_sq.defined()) st.exp_avg_sq = zeros(p.sizes(), p.options());
  if (h.amsgrad && !st.max_exp_avg_sq.defined()) st.max_exp_avg_sq = zeros(p.sizes(), p.options());
  st.step += 1;
  const double step = static_cast<double>(st.step);
  const double bias_correction1 = 1 - std::pow(h.beta1, step);
  const double bias_correction2 = 1 - std::pow(h.beta2, step);
  const double step_size = h.lr / bias_correction1;
  const double bc2_sqrt = std::sqrt(bias_correction2);

  if (batch.takes(p, grad, st, h.amsgrad)) {
    batch.p.push_back(p);
    batch.g.push_back(grad);
    batch.m.push_back(st.exp_avg);
    batch.v.push_back(st.exp_avg_sq);
    batch.vmax.push_back(st.max_exp_avg_sq);
    batch.step_size.push_back(step_size);
    batch.bc2_sqrt.push_back(bc2_sqrt);
    return;
  }

  if (fused_ok(p, grad) && fused_state_ok(p, st.exp_avg) && fused_state_ok(p, st.exp_avg_sq) &&
      (!h.amsgrad || fused_state_ok(p, st.max_exp_avg_sq))) {
    if (p.dtype() == kFloat32) adam_fused<float>(p, grad, st, h, step_size, bc2_sqrt);
    else adam_fused<double>(p, grad, st, h, step_size, bc2_sqrt);
    bump(p);
    bump(st.exp_avg);
    bump(st.exp_avg_sq);
    if (h.amsgrad) bump(st.max_exp_avg_sq);
    return;
  }
  // Generic path (other dtypes and devices, non-contiguous tensors).
  Tensor g = h.maximize ? grad.neg() : grad;
  if (h.decoupled) {
    p.mul_(1 - h.lr * h.weight_decay);
  } else if (h.weight_decay != 0) {
    g = g.add(p, h.weight_decay);
  }
  lerp_(st.exp_avg, g, 1 - h.beta1);
  st.exp_avg_sq.mul_(h.beta2).add_(g.mul(1 - h.beta2).mul_(g));  // addcmul order
  Tensor denom;
  if (h.amsgrad) {
    st.max_exp_avg_sq.copy_(maximum(st.max_exp_avg_sq, st.exp_avg_sq));
    denom = st.max_exp_avg_sq.sqrt();
  } else {
    denom = st.exp_avg_sq.sqrt();
  }
  denom.div_(bc2_sqrt).add_(h.eps);
  p.add_(st.exp_avg.mul(-step_size).div_(denom));  // addcdiv order: (value * m) / denom
}

}  // namespace

// ---- Adam

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions defaults)
    : Optimizer("Adam", std::make_unique<AdamOptions>(defaults)) {
  validate_options(defaults);
  IGNIS_CHECK(!groups.empty(), "Adam: got an empty parameter list");
  for (ParamGroup& g : groups) add_param_group(std::move(g));
}

Adam::Adam(std::vector<Tensor> params, AdamOptions defaults)
    : Adam(std::vector<ParamGroup>{ParamGroup(std::move(params))}, std::move(defaults)) {
  IGNIS_CHECK(size() > 0, "Adam: got an empty parameter list");
}

void Adam::validate_options(const OptimizerOptions& options) const {
  auto* o = dynamic_cast<const AdamOptions*>(&options);
  IGNIS_CHECK(o, "Adam: parameter group options must be AdamOptions, got ", options.type_name());
  check_adam("Adam", hyper_of(*o, false));
}

Tensor Adam::step(const LossClosure& closure) {
  Tensor loss = call_closure(closure);
  NoGradGuard no_grad;
  for (ParamGroup& group : groups_) {
    const AdamHyper h = hyper_of(static_cast<const AdamOptions&>(group.options()), false);
    CudaBatch batch;
    for (Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      adam_update(p, p.grad(), static_cast<AdamParamState&>(state_or_create(p)), h, batch);
    }
    batch.run(h);
  }
  return loss;
}

// ---- AdamW

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults)
    : Optimizer("AdamW", std::make_unique<AdamWOptions>(defaults)) {
  validate_options(defaults);
  IGNIS_CHECK(!groups.empty(), "AdamW: got an empty parameter list");
  for (ParamGroup& g : groups) add_param_group(std::move(g));
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions defaults)
    : AdamW(std::vector<ParamGroup>{ParamGroup(std::move(params))}, std::move(defaults)) {
  IGNIS_CHECK(size() > 0, "AdamW: got an empty parameter list");
}

void AdamW::validate_options(const OptimizerOptions& options) const {
  auto* o = dynamic_cast<const AdamWOptions*>(&options);
  IGNIS_CHECK(o, "AdamW: parameter group options must be AdamWOptions, got ",
              options.type_name());
  check_adam("AdamW", hyper_of(*o, true));
}

Tensor AdamW::step(const LossClosure& closure) {
  Tensor loss = call_closure(closure);
  NoGradGuard no_grad;
  for (ParamGroup& group : groups_) {
    const AdamHyper h = hyper_of(static_cast<const AdamWOptions&>(group.options()), true);
    CudaBatch batch;
    for (Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      adam_update(p, p.grad(), static_cast<AdamParamState&>(state_or_create(p)), h, batch);
    }
    batch.run(h);
  }
  return loss;
}

}  // namespace ignis::optim
