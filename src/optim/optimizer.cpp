// Optimizer base: parameter groups, zero_grad, and the flat named-tensor state_dict.
#include "ignis/optim/optimizer.h"

#include <charconv>
#include <map>
#include <set>
#include <sstream>
#include <unordered_set>

#include "core/tensor_impl.h"
#include "ignis/autograd.h"
#include "ignis/ops.h"

namespace ignis::optim {

// ---- OptimizerOptions

static HParamRef find_hparam(OptimizerOptions& o, const std::string& name) {
  for (const HParamRef& h : o.hparams()) {
    if (name == h.name) return h;
  }
  std::string names;
  for (const HParamRef& h : o.hparams()) names += std::string(names.empty() ? "" : ", ") + h.name;
  IGNIS_FAIL(o.type_name(), ": no hyperparameter named '", name, "' (it has ", names, ")");
}

double OptimizerOptions::get_lr() const {
  return const_cast<OptimizerOptions*>(this)->hparams().front().get();
}
void OptimizerOptions::set_lr(double lr) { hparams().front().set(lr); }

bool OptimizerOptions::has(const std::string& name) const {
  for (const HParamRef& h : const_cast<OptimizerOptions*>(this)->hparams()) {
    if (name == h.name) return true;
  }
  return false;
}
double OptimizerOptions::get(const std::string& name) const {
  return find_hparam(*const_cast<OptimizerOptions*>(this), name).get();
}
void OptimizerOptions::set(const std::string& name, double value) {
  find_hparam(*this, name).set(value);
}

// ---- ParamGroup

ParamGroup::ParamGroup(const ParamGroup& o)
    : initial_lr(o.initial_lr), params_(o.params_),
      options_(o.options_ ? o.options_->clone() : nullptr) {}

ParamGroup& ParamGroup::operator=(const ParamGroup& o) {
  if (this != &o) {
    params_ = o.params_;
    options_ = o.options_ ? o.options_->clone() : nullptr;
    initial_lr = o.initial_lr;
  }
  return *this;
}

OptimizerOptions& ParamGroup::options() {
  IGNIS_CHECK(options_, "ParamGroup: this group has no options (it gets the optimizer's defaults "
              "when added to an optimizer)");
  return *options_;
}
const OptimizerOptions& ParamGroup::options() const {
  return const_cast<ParamGroup*>(this)->options();
}

// ---- Optimizer

Optimizer::Optimizer(std::string name, std::unique_ptr<OptimizerOptions> defaults)
    : name_(std::move(name)), defaults_(std::move(defaults)) {}

void Optimizer::add_param_group(ParamGroup group) {
  std::unordered_set<const TensorImpl*> seen;
  for (const ParamGroup& g : groups_) {
    for (const Tensor& p : g.params()) seen.insert(p.impl());
  }
  const size_t gi = groups_.size();
  for (size_t k = 0; k < group.params().size(); ++k) {
    const Tensor& p = group.params()[k];
    IGNIS_CHECK(p.defined(), name_, ": parameter ", k, " of group ", gi, " is an undefined tensor");
    IGNIS_CHECK(p.is_floating_point(), name_, ": can only optimize floating point tensors, but "
                "parameter ", k, " of group ", gi, " has dtype ", p.dtype());
    IGNIS_CHECK(p.is_leaf() || p.retains_grad(), name_, ": can't optimize a non-leaf tensor "
                "(parameter ", k, " of group ", gi, "); optimize the leaf it was computed from");
    IGNIS_CHECK(seen.insert(p.impl()).second, name_, ": parameter ", k, " of group ", gi,
                " (shape ", p.sizes(), ") appears more than once in the parameter groups");
  }
  if (!group.has_options()) group.set_options(defaults_->clone());
  validate_options(group.options());
  groups_.push_back(std::move(group));
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (const ParamGroup& g : groups_) out.insert(out.end(), g.params().begin(), g.params().end());
  return out;
}

size_t Optimizer::size() const {
  size_t n = 0;
  for (const ParamGroup& g : groups_) n += g.params().size();
  return n;
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (ParamGroup& g : groups_) {
    for (Tensor p : g.params()) {
      if (!p.grad().defined()) continue;
      Tensor& grad = p.mutable_grad();
      if (set_to_none) {
        grad = Tensor();
        continue;
      }
      if (grad.grad_fn()) {
        grad.detach_();
      } else {
        grad.requires_grad_(false);
      }
      grad.zero_();
    }
  }
}

OptimizerParamState* Optimizer::state(const Tensor& param) {
  auto it = state_.find(param.impl());
  return it == state_.end() ? nullptr : it->second.get();
}
const OptimizerParamState* Optimizer::state(const Tensor& param) const {
  auto it = state_.find(param.impl());
  return it == state_.end() ? nullptr : it->second.get();
}

OptimizerParamState& Optimizer::state_or_create(const Tensor& param) {
  auto& slot = state_[param.impl()];
  if (!slot) slot = make_state();
  return *slot;
}

Tensor Optimizer::call_closure(const LossClosure& closure) {
  if (!closure) return Tensor();
  AutoGradMode enable(true);
  return closure();
}

// ---- state_dict

OptimizerStateDict Optimizer::state_dict() const {
  NoGradGuard no_grad;
  OptimizerStateDict out;
  int64_t index = 0;
  for (const ParamGroup& g : groups_) {
    for (const Tensor& p : g.params()) {
      auto it = state_.find(p.impl());
      if (it != state_.end()) {
        const std::string prefix = "state." + std::to_string(index) + ".";
        if (int64_t* step = it->second->step_count()) {
          out.emplace_back(prefix + "step", scalar_tensor(*step, kInt64));
        }
        for (auto& [slot, t] : it->second->tensors()) {
          if (t->defined()) out.emplace_back(prefix + slot, t->detach().clone());
        }
      }
      ++index;
    }
  }
  index = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    const std::string prefix = "param_groups." + std::to_string(gi) + ".";
    std::vector<int64_t> ids;
    for (size_t k = 0; k < g.params().size(); ++k) ids.push_back(index++);
    out.emplace_back(prefix + "params", tensor(ids, kInt64));
    for (const HParamRef& h : const_cast<OptimizerOptions&>(g.options()).hparams()) {
      out.emplace_back(prefix + h.name, scalar_tensor(h.get(), kFloat64));
    }
    if (g.initial_lr) {
      out.emplace_back(prefix + "initial_lr", scalar_tensor(*g.initial_lr, kFloat64));
    }
  }
  return out;
}

namespace {

// "12.rest" -> (12, "rest"); nullopt when the text does not start with a number and a dot.
std::optional<std::pair<int64_t, std::string>> split_index(const std::string& s) {
  size_t dot = s.find('.');
  if (dot == std::string::npos || dot == 0) return std::nullopt;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + dot, v);
  if (ec != std::errc() || ptr != s.data() + dot || v < 0) return std::nullopt;
  return std::make_pair(v, s.substr(dot + 1));
}

double scalar_value(const Tensor& t) { return t.item().to_double(); }

}  // namespace

// What load_state_dict will apply, computed (and every entry checked) by plan_load.
struct Optimizer::LoadPlan {
  std::map<int64_t, std::map<std::string, Tensor>> state_entries;  // saved id -> slot -> value
  std::map<int64_t, Tensor> id_to_param;
  std::vector<std::unique_ptr<OptimizerOptions>> new_options;
  std::vector<std::optional<double>> new_initial_lr;
};

void Optimizer::plan_load(const OptimizerStateDict& sd, LoadPlan& plan) const {
  NoGradGuard no_grad;
  const std::string op = name_ + ".load_state_dict";
  std::vector<std::string> problems;

  // Sort the entries into per-group and per-saved-parameter maps.
  std::map<int64_t, std::map<std::string, Tensor>> group_entries;
  auto& state_entries = plan.state_entries;
  for (const auto& [key, value] : sd) {
    std::optional<std::pair<int64_t, std::string>> rest;
    if (key.rfind("state.", 0) == 0 && (rest = split_index(key.substr(6)))) {
      state_entries[rest->first][rest->second] = value;
    } else if (key.rfind("param_groups.", 0) == 0 && (rest = split_index(key.substr(13)))) {
      group_entries[rest->first][rest->second] = value;
    } else {
      problems.push_back("unexpected key '" + key + "'");
    }
    if (!value.defined()) problems.push_back("entry '" + key + "' is an undefined tensor");
  }

  // Groups: same count, same sizes; saved ids map to the optimizer's parameters by position.
  int64_t saved_groups = group_entries.empty() ? 0 : group_entries.rbegin()->first + 1;
  if (saved_groups != static_cast<int64_t>(groups_.size())) {
    detail::throw_error(op, ": the state dict has ", saved_groups, " parameter groups but the ",
                        "optimizer has ", groups_.size());
  }
  auto& id_to_param = plan.id_to_param;
  auto& new_options = plan.new_options;
  auto& new_initial_lr = plan.new_initial_lr;
  new_options.resize(groups_.size());
  new_initial_lr.resize(groups_.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const std::string gname = "param_groups." + std::to_string(gi);
    auto git = group_entries.find(static_cast<int64_t>(gi));
    if (git == group_entries.end()) {
      problems.push_back("missing entries of " + gname);
      continue;
    }
    std::map<std::string, Tensor> entries = git->second;
    const std::vector<Tensor>& params = groups_[gi].params();
    auto pit = entries.find("params");
    if (pit == entries.end()) {
      problems.push_back("missing key '" + gname + ".params'");
    } else if (pit->second.defined()) {
      const Tensor& ids = pit->second;
      if (ids.dim() != 1 || is_floating_point(ids.dtype())) {
        problems.push_back("'" + gname + ".params' must be a 1-D integer tensor of parameter "
                           "indices");
      } else if (ids.numel() != static_cast<int64_t>(params.size())) {
        problems.push_back(gname + " has " + std::to_string(ids.numel()) +
                           " parameters in the state dict but " + std::to_string(params.size()) +
                           " in the optimizer");
      } else {
        Tensor ids64 = ids.to(kInt64).contiguous();
        const int64_t* d = ids64.data_ptr<int64_t>();
        for (size_t k = 0; k < params.size(); ++k) {
          if (!id_to_param.emplace(d[k], params[k]).second) {
            problems.push_back("parameter index " + std::to_string(d[k]) +
                               " appears in more than one group");
          }
        }
      }
      entries.erase(pit);
    }
    auto opts = groups_[gi].options().clone();
    for (const HParamRef& h : opts->hparams()) {
      auto it = entries.find(h.name);
      if (it == entries.end()) {
        problems.push_back("missing key '" + gname + "." + h.name + "'");
        continue;
      }
      if (it->second.defined() && it->second.numel() == 1) {
        h.set(scalar_value(it->second));
      } else if (it->second.defined()) {
        problems.push_back("'" + gname + "." + h.name + "' must hold one value");
      }
      entries.erase(it);
    }
    if (auto it = entries.find("initial_lr"); it != entries.end()) {
      if (it->second.defined() && it->second.numel() == 1) {
        new_initial_lr[gi] = scalar_value(it->second);
      }
      entries.erase(it);
    }
    for (const auto& [k, v] : entries) {
      problems.push_back("unexpected key '" + gname + "." + k + "'");
    }
    try {
      validate_options(*opts);
    } catch (const Error& e) {
      problems.push_back(gname + " has invalid options: " + e.what());
    }
    new_options[gi] = std::move(opts);
  }

  // Per-parameter state: known slot names, the parameter's shape.
  std::unique_ptr<OptimizerParamState> probe = make_state();
  for (const auto& [id, entries] : state_entries) {
    const std::string sname = "state." + std::to_string(id);
    auto pit = id_to_param.find(id);
    if (pit == id_to_param.end()) {
      problems.push_back(sname + " belongs to no parameter of the parameter groups");
      continue;
    }
    const Tensor& p = pit->second;
    for (const auto& [slot, value] : entries) {
      if (!value.defined()) continue;
      if (slot == "step" && probe->step_count()) {
        if (value.numel() != 1) problems.push_back("'" + sname + ".step' must hold one value");
        continue;
      }
      bool known = false;
      for (auto& [name, t] : probe->tensors()) known |= slot == name;
      if (!known) {
        problems.push_back("unexpected key '" + sname + "." + slot + "'");
      } else if (!value.sizes().equals(p.sizes())) {
        std::ostringstream os;
        os << "'" << sname << "." << slot << "' has shape " << value.sizes() << " but parameter "
           << id << " has shape " << p.sizes();
        problems.push_back(os.str());
      }
    }
  }

  if (!problems.empty()) {
    std::string msg;
    for (const std::string& s : problems) msg += (msg.empty() ? "" : "; ") + s;
    detail::throw_error(op, ": ", msg);
  }
}

void Optimizer::check_state_dict(const OptimizerStateDict& sd) const {
  LoadPlan plan;
  plan_load(sd, plan);
}

void Optimizer::load_state_dict(const OptimizerStateDict& sd) {
  LoadPlan plan;
  plan_load(sd, plan);  // throws before anything changes
  NoGradGuard no_grad;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    groups_[gi].set_options(std::move(plan.new_options[gi]));
    groups_[gi].initial_lr = plan.new_initial_lr[gi];
  }
  state_.clear();
  for (const auto& [id, entries] : plan.state_entries) {
    const Tensor& p = plan.id_to_param.at(id);
    std::unique_ptr<OptimizerParamState> st = make_state();
    for (const auto& [slot, value] : entries) {
      if (!value.defined()) continue;
      if (slot == "step") {
        *st->step_count() = static_cast<int64_t>(scalar_value(value));
        continue;
      }
      for (auto& [name, t] : st->tensors()) {
        if (slot == name) *t = value.detach().to(p.options(), /*non_blocking=*/false, /*copy=*/true).contiguous();
      }
    }
    state_[p.impl()] = std::move(st);
  }
}

}  // namespace ignis::optim
