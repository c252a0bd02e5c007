// SGD: PyTorch's _single_tensor_sgd, with a fused CPU kernel for float32/float64 and a fused
// multi-tensor CUDA kernel (cuda/optim_kernels.cu).
#include "ignis/optim/sgd.h"

#include "ignis/autograd.h"
#include "ignis/ops.h"
#include "cuda/backend.h"
#include "optim/fused.h"

namespace ignis::optim {

std::vector<HParamRef> SGDOptions::hparams() {
  return {{"lr", &lr_},           {"momentum", &momentum_},
          {"dampening", &dampening_}, {"weight_decay", &weight_decay_},
          {"nesterov", nullptr, &nesterov_}, {"maximize", nullptr, &maximize_}};
}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions defaults)
    : Optimizer("SGD", std::make_unique<SGDOptions>(defaults)) {
  validate_options(defaults);
  IGNIS_CHECK(!groups.empty(), "SGD: got an empty parameter list");
  for (ParamGroup& g : groups) add_param_group(std::move(g));
}

SGD::SGD(std::vector<Tensor> params, SGDOptions defaults)
    : SGD(std::vector<ParamGroup>{ParamGroup(std::move(params))}, std::move(defaults)) {
  IGNIS_CHECK(size() > 0, "SGD: got an empty parameter list");
}

void SGD::validate_options(const OptimizerOptions& options) const {
  auto* o = dynamic_cast<const SGDOptions*>(&options);
  IGNIS_CHECK(o, "SGD: parameter group options must be SGDOptions, got ", options.type_name());
  IGNIS_CHECK(o->lr() >= 0, "SGD: invalid learning rate: ", o->lr(), " (must be >= 0)");
  IGNIS_CHECK(o->momentum() >= 0, "SGD: invalid momentum value: ", o->momentum(),
              " (must be >= 0)");
  IGNIS_CHECK(o->weight_decay() >= 0, "SGD: invalid weight_decay value: ", o->weight_decay(),
              " (must be >= 0)");
  IGNIS_CHECK(!o->nesterov() || (o->momentum() > 0 && o->dampening() == 0),
              "SGD: Nesterov momentum requires a momentum and zero dampening (got momentum=",
              o->momentum(), ", dampening=", o->dampening(), ")");
}

namespace {

// The inner loop, with every operand a value or a restrict pointer so that nothing aliases
// the arrays and the loop vectorises.
template <class T, bool WD, bool MOM, bool NESTEROV, bool FIRST>
void sgd_loop(T* __restrict p, const T* __restrict g, T* __restrict b, int64_t n, T sign, T wd,
              T mom, T one_minus_damp, T neg_lr) {
  T unused = 0;
  for (int64_t i = 0; i < n; ++i) {
    sgd_element<T, WD, MOM, NESTEROV, FIRST>(p[i], g[i], MOM ? b[i] : unused, sign, wd, mom,
                                             one_minus_damp, neg_lr);
  }
}

template <class T>
void sgd_fused(const Tensor& param, const Tensor& grad, Tensor& buf, bool first,
               const SGDOptions& o) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* b = buf.defined() ? buf.data_ptr<T>() : nullptr;
  const T sign = o.maximize() ? T(-1) : T(1);
  const T wd = T(o.weight_decay()), mom = T(o.momentum());
  const T one_minus_damp = T(1 - o.dampening()), neg_lr = T(-o.lr());
  with_flag(o.weight_decay() != 0, [&](auto WD) {
    with_flag(o.momentum() != 0, [&](auto MOM) {
      with_flag(o.nesterov(), [&](auto NESTEROV) {
        with_flag(first, [&](auto FIRST) {
          fused_for(param.numel(), [&](int64_t begin, int64_t end) {
            sgd_loop<T, decltype(WD)::value, decltype(MOM)::value, decltype(NESTEROV)::value,
                     decltype(FIRST)::value>(p + begin, g + begin, b ? b + begin : nullptr,
                                             end - begin, sign, wd, mom, one_minus_damp, neg_lr);
          });
        });
      });
    });
  });
}

}  // namespace

Tensor SGD::step(const LossClosure& closure) {
  Tensor loss = call_closure(closure);
  NoGradGuard no_grad;
  for (ParamGroup& group : groups_) {
    const auto& o = static_cast<const SGDOptions&>(group.options());
    // GPU parameters go to the multi-tensor kernel (launches per device and dtype).
    std::vector<Tensor> cp, cg, cb;
    std::vector<bool> cfirst;
    for (Tensor& p : group.params()) {
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      auto& st = static_cast<SGDParamState&>(state_or_create(p));
      const bool first = !st.momentum_buffer.defined();
      if (fused_cuda_ok(p, grad) && fused_cuda_state_ok(p, st.momentum_buffer)) {
        if (o.momentum() != 0 && first) st.momentum_buffer = empty(p.sizes(), p.options());
        cp.push_back(p);
        cg.push_back(grad);
        cb.push_back(st.momentum_buffer);
        cfirst.push_back(first);
        continue;
      }
      if (fused_ok(p, grad) && fused_state_ok(p, st.momentum_buffer)) {
        if (o.momentum() != 0 && first) st.momentum_buffer = empty(p.sizes(), p.options());
        if (p.dtype() == kFloat32) sgd_fused<float>(p, grad, st.momentum_buffer, first, o);
        else sgd_fused<double>(p, grad, st.momentum_buffer, first, o);
        bump(p);
        bump(st.momentum_buffer);
        continue;
      }
      // Generic path (other dtypes and devices, non-contiguous tensors).
      Tensor g = o.maximize() ? grad.neg() : grad;
      if (o.weight_decay() != 0) g = g.add(p, o.weight_decay());
      if (o.momentum() != 0) {
        Tensor& buf = st.momentum_buffer;
        if (first) {
          buf = g.detach().clone().contiguous();
        } else {
          buf.mul_(o.momentum()).add_(g, 1 - o.dampening());
        }
        g = o.nesterov() ? g.add(buf, o.momentum()) : buf;
      }
      p.add_(g, -o.lr());
    }
    if (!cp.empty()) {
      cuda::detail::sgd_multi_tensor(cp, cg, cb, cfirst,
                                     {o.lr(), o.momentum(), o.dampening(), o.weight_decay(),
                                      o.nesterov(), o.maximize()});
      for (size_t k = 0; k < cp.size(); ++k) {
        bump(cp[k]);
        bump(cb[k]);
      }
    }
  }
  return loss;
}

}  // namespace ignis::optim
