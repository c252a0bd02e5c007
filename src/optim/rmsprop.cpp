// RMSprop: PyTorch's _single_tensor_rmsprop, with a fused CPU kernel for float32/float64 and a
// fused multi-tensor CUDA kernel (cuda/optim_kernels.cu).
#include "ignis/optim/rmsprop.h"

#include <cmath>

#include "ignis/autograd.h"
#include "ignis/ops.h"
#include "cuda/backend.h"
#include "optim/fused.h"

namespace ignis::optim {

std::vector<HParamRef> RMSpropOptions::hparams() {
  return {{"lr", &lr_},
          {"alpha", &alpha_},
          {"eps", &eps_},
          {"weight_decay", &weight_decay_},
          {"momentum", &momentum_},
          {"centered", nullptr, &centered_},
          {"maximize", nullptr, &maximize_}};
}

RMSprop::RMSprop(std::vector<ParamGroup> groups, RMSpropOptions defaults)
    : Optimizer("RMSprop", std::make_unique<RMSpropOptions>(defaults)) {
  validate_options(defaults);
  IGNIS_CHECK(!groups.empty(), "RMSprop: got an empty parameter list");
  for (ParamGroup& g : groups) add_param_group(std::move(g));
}

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions defaults)
    : RMSprop(std::vector<ParamGroup>{ParamGroup(std::move(params))}, std::move(defaults)) {
  IGNIS_CHECK(size() > 0, "RMSprop: got an empty parameter list");
}

void RMSprop::validate_options(const OptimizerOptions& options) const {
  auto* o = dynamic_cast<const RMSpropOptions*>(&options);
  IGNIS_CHECK(o, "RMSprop: parameter group options must be RMSpropOptions, got ",
              options.type_name());
  IGNIS_CHECK(o->lr() >= 0, "RMSprop: invalid learning rate: ", o->lr(), " (must be >= 0)");
  IGNIS_CHECK(o->eps() >= 0, "RMSprop: invalid epsilon value: ", o->eps(), " (must be >= 0)");
  IGNIS_CHECK(o->momentum() >= 0, "RMSprop: invalid momentum value: ", o->momentum(),
              " (must be >= 0)");
  IGNIS_CHECK(o->weight_decay() >= 0, "RMSprop: invalid weight_decay value: ", o->weight_decay(),
              " (must be >= 0)");
  IGNIS_CHECK(o->alpha() >= 0, "RMSprop: invalid alpha value: ", o->alpha(), " (must be >= 0)");
}

namespace {

// The inner loop, with every operand a value or a restrict pointer so that nothing aliases
// the arrays and the loop vectorises.
template <class T, bool WD, bool CENTERED, bool MOM, bool SMALL_W>
void rmsprop_loop(T* __restrict p, const T* __restrict g, T* __restrict sq, T* __restrict ga,
                  T* __restrict buf, int64_t n, const RMSpropScalars<T> c) {
  for (int64_t i = 0; i < n; ++i) {
    rmsprop_element<T, WD, CENTERED, MOM, SMALL_W>(p[i], g[i], sq[i], CENTERED ? ga + i : nullptr,
                                                   MOM ? buf + i : nullptr, c);
  }
}

template <class T>
void rmsprop_fused(const Tensor& param, const Tensor& grad, RMSpropParamState& st,
                   const RMSpropOptions& o) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* sq = st.square_avg.data_ptr<T>();
  T* ga = o.centered() ? st.grad_avg.data_ptr<T>() : nullptr;
  T* buf = o.momentum() > 0 ? st.momentum_buffer.data_ptr<T>() : nullptr;
  const RMSpropScalars<T> c{o.maximize() ? T(-1) : T(1), T(o.weight_decay()), T(o.alpha()),
                            T(1 - o.alpha()), T(o.eps()), T(o.momentum()), T(-o.lr())};
  const bool small_w = c.one_minus_alpha < T(0.5) && c.one_minus_alpha > T(-0.5);
  with_flag(o.weight_decay() != 0, [&](auto WD) {
    with_flag(o.centered(), [&](auto CENTERED) {
      with_flag(o.momentum() > 0, [&](auto MOM) {
        with_flag(small_w, [&](auto SMALL_W) {
          fused_for(param.numel(), [&](int64_t begin, int64_t end) {
            rmsprop_loop<T, decltype(WD)::value, decltype(CENTERED)::value, decltype(MOM)::value,
                         decltype(SMALL_W)::value>(
                p + begin, g + begin, sq + begin, ga ? ga + begin : nullptr,
                buf ? buf + begin : nullptr, end - begin, c);
          });
        });
      });
    });
  });
}

// GPU parameters of a group, gathered for one multi-tensor launch (cuda/optim_kernels.cu): a
// launch per device and dtype (the first parameter's; others take the generic path).
struct CudaBatch {
  std::vector<Tensor> p, g, sq, ga, buf;
  bool takes(const Tensor& param, const Tensor& grad, const RMSpropParamState& st,
             const RMSpropOptions& o) const {
    return fused_cuda_ok(param, grad) && fused_cuda_state_ok(param, st.square_avg) &&
           (o.momentum() <= 0 || fused_cuda_state_ok(param, st.momentum_buffer)) &&
           (!o.centered() || fused_cuda_state_ok(param, st.grad_avg));
  }
  void run(const RMSpropOptions& o) {
    if (p.empty()) return;
    cuda::detail::rmsprop_multi_tensor(p, g, sq, ga, buf,
                                       {o.lr(), o.alpha(), o.eps(), o.weight_decay(),
                                        o.momentum(), o.centered(), o.maximize()});
    for (size_t k = 0; k < p.size(); ++k) {
      bump(p[k]);
      bump(sq[k]);
      if (o.momentum() > 0) bump(buf[k]);
      if (o.centered()) bump(ga[k]);
    }
  }
};

}  // namespace

Tensor RMSprop::step(const LossClosure& closure) {
  Tensor loss = call_closure(closure);
  NoGradGuard no_grad;
  for (ParamGroup& group : groups_) {
    const auto& o = static_cast<const RMSpropOptions&>(group.options());
    CudaBatch batch;
    for (Tensor& p : group.params()) {
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      auto& st = static_cast<RMSpropParamState&>(state_or_create(p));
      if (!st.square_avg.defined()) st.square_avg = zeros(p.sizes(), p.options());
      if (o.momentum() > 0 && !st.momentum_buffer.defined()) {
        st.momentum_buffer = zeros(p.sizes(), p.options());
      }
      if (o.centered() && !st.grad_avg.defined()) st.grad_avg = zeros(p.sizes(), p.options());
      st.step += 1;
      if (batch.takes(p, grad, st, o)) {
        batch.p.push_back(p);
        batch.g.push_back(grad);
        batch.sq.push_back(st.square_avg);
        batch.ga.push_back(st.grad_avg);
        batch.buf.push_back(st.momentum_buffer);
        continue;
      }
      if (fused_ok(p, grad) && fused_state_ok(p, st.square_avg) &&
          fused_state_ok(p, st.momentum_buffer) && fused_state_ok(p, st.grad_avg)) {
        if (p.dtype() == kFloat32) rmsprop_fused<float>(p, grad, st, o);
        else rmsprop_fused<double>(p, grad, st, o);
        bump(p);
        bump(st.square_avg);
        if (o.momentum() > 0) bump(st.momentum_buffer);
        if (o.centered()) bump(st.grad_avg);
        continue;
      }
      // Generic path (other dtypes and devices, non-contiguous tensors).
      Tensor g = o.maximize() ? grad.neg() : grad;
      if (o.weight_decay() != 0) g = g.add(p, o.weight_decay());
      st.square_avg.mul_(o.alpha()).add_(g.mul(1 - o.alpha()).mul_(g));
      Tensor avg;
      if (o.centered()) {
        lerp_(st.grad_avg, g, 1 - o.alpha());
        avg = st.square_avg.add(st.grad_avg.mul(-1.0).mul_(st.grad_avg)).sqrt_();
      } else {
        avg = st.square_avg.sqrt();
      }
      avg.add_(o.eps());
      if (o.momentum() > 0) {
        st.momentum_buffer.mul_(o.momentum()).add_(g.div(avg));
        p.add_(st.momentum_buffer, -o.lr());
      } else {
        p.add_(g.mul(-o.lr()).div_(avg));
      }
    }
    batch.run(o);
  }
  return loss;
}

}  // namespace ignis::optim
