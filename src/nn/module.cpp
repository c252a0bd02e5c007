#include "ignis/nn/module.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "ignis/autograd.h"
#include "ignis/ops.h"
#include "core/tensor_impl.h"

namespace ignis::nn {

namespace {
void check_name(const std::string& name, const char* what) {
  IGNIS_CHECK(!name.empty() && name.find('.') == std::string::npos, "Module::register_", what,
              ": name '", name, "' must be non-empty and contain no '.'");
}
template <class List>
bool has(const List& l, const std::string& name) {
  return std::any_of(l.begin(), l.end(), [&](const auto& p) { return p.first == name; });
}
}  // namespace

Tensor Module::forward(const Tensor&) {
  IGNIS_FAIL(type_name(), ": forward(Tensor) is not defined for this module");
}

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_name(name, "parameter");
  IGNIS_CHECK(!has(params_, name) && !has(buffers_, name) && !has(children_, name),
              "Module::register_parameter: '", name, "' is already registered in ", type_name());
  if (t.defined() && requires_grad) t.requires_grad_(true);
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  check_name(name, "buffer");
  IGNIS_CHECK(!has(params_, name) && !has(buffers_, name) && !has(children_, name),
              "Module::register_buffer: '", name, "' is already registered in ", type_name());
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_name(name, "module");
  IGNIS_CHECK(m != nullptr, "Module::register_module: '", name, "' is null");
  IGNIS_CHECK(!has(params_, name) && !has(buffers_, name) && !has(children_, name),
              "Module::register_module: '", name, "' is already registered in ", type_name());
  children_.emplace_back(name, std::move(m));
}

void Module::replace_module(const std::string& name, std::shared_ptr<Module> m) {
  for (auto& [n, c] : children_) {
    if (n == name) {
      c = std::move(m);
      return;
    }
  }
  add_child(name, std::move(m));
}

void Module::collect(const std::string& prefix, bool recurse, bool params,
                     NamedTensors& out) const {
  for (const auto& [n, t] : params ? params_ : buffers_) {
    if (t.defined()) out.emplace_back(prefix + n, t);
  }
  if (!recurse) return;
  for (const auto& [n, c] : children_) c->collect(prefix + n + ".", true, params, out);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect("", recurse, true, out);
  // A tensor shared by two modules (tied weights) is listed once, like PyTorch.
  std::set<const TensorImpl*> seen;
  NamedTensors unique;
  for (auto& p : out) {
    if (seen.insert(p.second.impl()).second) unique.push_back(std::move(p));
  }
  return unique;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> v;
  for (auto& [n, t] : named_parameters(recurse)) v.push_back(t);
  return v;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect("", recurse, false, out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> v;
  for (auto& [n, t] : named_buffers(recurse)) v.push_back(t);
  return v;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> v;
  for (const auto& [n, c] : children_) v.push_back(c);
  return v;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::function<void(const std::string&, const std::shared_ptr<Module>&)> walk =
      [&](const std::string& prefix, const std::shared_ptr<Module>& m) {
        out.emplace_back(prefix, m);
        for (const auto& [n, c] : m->children_) walk(prefix.empty() ? n : prefix + "." + n, c);
      };
  std::shared_ptr<Module> self;
  try {
    self = shared_from_this();
  } catch (const std::bad_weak_ptr&) {
    self = std::shared_ptr<Module>(this, [](Module*) {});  // a module not owned by a shared_ptr
  }
  walk("", self);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules() {
  std::vector<std::shared_ptr<Module>> v;
  for (auto& [n, m] : named_modules()) v.push_back(m);
  return v;
}

std::shared_ptr<Module> Module::child(const std::string& name) const {
  for (const auto& [n, c] : children_) {
    if (n == name) return c;
  }
  IGNIS_FAIL(type_name(), ": no submodule named '", name, "'");
}

Tensor& Module::get(const std::string& dotted) {
  const size_t dot = dotted.find('.');
  if (dot != std::string::npos) return child(dotted.substr(0, dot))->get(dotted.substr(dot + 1));
  for (auto& [n, t] : params_) {
    if (n == dotted) return t;
  }
  for (auto& [n, t] : buffers_) {
    if (n == dotted) return t;
  }
  std::ostringstream names;
  for (auto& [n, t] : params_) names << " " << n;
  for (auto& [n, t] : buffers_) names << " " << n;
  IGNIS_FAIL(type_name(), ": no parameter or buffer named '", dotted, "' (has:", names.str(), ")");
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad(bool set_to_none) {
  for (Tensor& p : parameters()) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      NoGradGuard ng;
      p.mutable_grad().zero_();
    }
  }
}

namespace {
// Converts a registered tensor in place: the handle keeps its identity (optimizers hold it).
void move_tensor(Tensor& t, const std::function<Tensor(const Tensor&)>& conv) {
  if (!t.defined()) return;
  NoGradGuard ng;
  Tensor moved = conv(t.detach());
  if (moved.impl()->storage() == t.impl()->storage()) return;
  Tensor grad = t.grad();
  t.set_data(moved);
  if (grad.defined()) t.set_grad(conv(grad));
}
}  // namespace

void Module::to(Device device) {
  apply([&](Module& m) {
    for (auto& [n, t] : m.params_) move_tensor(t, [&](const Tensor& x) { return x.to(device); });
    for (auto& [n, t] : m.buffers_) move_tensor(t, [&](const Tensor& x) { return x.to(device); });
  });
}

void Module::to(DType dtype) {
  IGNIS_CHECK(is_floating_point(dtype), "Module::to: only floating dtypes are allowed, got ",
              dtype);
  auto conv = [&](const Tensor& x) { return x.is_floating_point() ? x.to(dtype) : x; };
  apply([&](Module& m) {
    for (auto& [n, t] : m.params_) move_tensor(t, conv);
    for (auto& [n, t] : m.buffers_) move_tensor(t, conv);
  });
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [n, c] : children_) c->apply(fn);
  fn(*this);
}

StateDict Module::state_dict() const {
  StateDict out;
  NamedTensors p, b;
  collect("", true, true, p);
  collect("", true, false, b);
  for (auto& [n, t] : p) out.emplace_back(n, t.detach());
  for (auto& [n, t] : b) out.emplace_back(n, t.detach());
  return out;
}

void Module::check_state_dict(const StateDict& state, bool strict) const {
  NamedTensors mine;
  collect("", true, true, mine);
  collect("", true, false, mine);
  std::map<std::string, const Tensor*> given;
  for (const auto& [n, t] : state) given[n] = &t;
  std::vector<std::string> missing, unexpected, mismatched;
  std::set<std::string> known;
  for (auto& [n, t] : mine) {
    known.insert(n);
    auto it = given.find(n);
    if (it == given.end()) {
      missing.push_back(n);
    } else if (!it->second->sizes().equals(t.sizes())) {
      std::ostringstream os;
      os << n << ": checkpoint " << it->second->sizes() << " vs model " << t.sizes();
      mismatched.push_back(os.str());
    }
  }
  for (const auto& [n, t] : state) {
    if (!known.count(n)) unexpected.push_back(n);
  }
  if ((strict && (!missing.empty() || !unexpected.empty())) || !mismatched.empty()) {
    std::ostringstream os;
    os << "load_state_dict: error(s) in loading state_dict for " << type_name() << ":";
    auto list = [&](const char* what, const std::vector<std::string>& v) {
      if (v.empty()) return;
      os << " " << what << ":";
      for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : " ") << v[i];
      os << ".";
    };
    list("missing keys", strict ? missing : std::vector<std::string>{});
    list("unexpected keys", strict ? unexpected : std::vector<std::string>{});
    list("size mismatches", mismatched);
    IGNIS_FAIL(os.str());
  }
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  check_state_dict(state, strict);  // throws before anything is copied
  std::map<std::string, const Tensor*> given;
  for (const auto& [n, t] : state) given[n] = &t;
  NamedTensors mine;
  collect("", true, true, mine);
  collect("", true, false, mine);
  NoGradGuard ng;
  for (auto& [n, t] : mine) {
    auto it = given.find(n);
    if (it != given.end()) get(n).copy_(*it->second);
  }
}

int64_t Module::num_parameters(bool trainable_only) const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) {
    if (!trainable_only || p.requires_grad()) n += p.numel();
  }
  return n;
}

void Module::pretty_print(std::ostream& os, int indent) const {
  os << type_name() << "(" << extra_repr();
  if (!children_.empty()) {
    os << "\n";
    for (const auto& [n, c] : children_) {
      os << std::string(static_cast<size_t>(indent + 2), ' ') << "(" << n << "): ";
      c->pretty_print(os, indent + 2);
      os << "\n";
    }
    os << std::string(static_cast<size_t>(indent), ' ');
  }
  os << ")";
}

std::string Module::summary() const {
  std::ostringstream os;
  os << std::left << std::setw(40) << "Layer (type)" << std::setw(24) << "Param shapes"
     << std::right << std::setw(12) << "Param #" << "\n"
     << std::string(76, '=') << "\n";
  std::function<void(const std::string&, const Module&)> walk = [&](const std::string& name,
                                                                    const Module& m) {
    int64_t own = 0;
    std::ostringstream shapes;
    for (const auto& [n, t] : m.params_) {
      if (!t.defined()) continue;
      own += t.numel();
      shapes << (shapes.tellp() > 0 ? " " : "") << t.sizes();
    }
    if (!name.empty() || m.children_.empty()) {
      std::string label = (name.empty() ? std::string("") : name + " ") + "(" + m.type_name() + ")";
      os << std::left << std::setw(40) << label << std::setw(24) << shapes.str() << std::right
         << std::setw(12) << own << "\n";
    }
    for (const auto& [n, c] : m.children_) walk(name.empty() ? n : name + "." + n, *c);
  };
  walk("", *this);
  os << std::string(76, '=') << "\n"
     << "Total params: " << num_parameters() << "\n"
     << "Trainable params: " << num_parameters(true) << "\n"
     << "Non-trainable params: " << num_parameters() - num_parameters(true) << "\n";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Module& m) {
  m.pretty_print(os);
  return os;
}

}  // namespace ignis::nn
