// The activation modules with options (ignis/nn/activation.h): printing and parameters.
#include "ignis/nn/activation.h"

#include <sstream>

#include "ignis/autograd.h"
#include "ignis/error.h"

namespace ignis::nn {
namespace {
/// A double as PyTorch prints it in a module's repr: 1.0, 0.25, -1.0.
std::string num(double v) {
  std::ostringstream os;
  os << v;
  std::string s = os.str();
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}
std::string with_inplace(std::string s, bool inplace) {
  if (!inplace) return s;
  return s.empty() ? "inplace=True" : s + ", inplace=True";
}
}  // namespace

std::string ELU::extra_repr() const {
  return with_inplace("alpha=" + num(options.alpha()), options.inplace());
}
std::string SELU::extra_repr() const { return with_inplace("", options.inplace()); }
std::string CELU::extra_repr() const {
  return with_inplace("alpha=" + num(options.alpha()), options.inplace());
}

Hardtanh::Hardtanh(const HardtanhOptions& options) : options(options) {
  IGNIS_CHECK(options.max_val() > options.min_val(), "Hardtanh: max_val (", options.max_val(),
              ") must be greater than min_val (", options.min_val(), ")");
}
std::string Hardtanh::extra_repr() const {
  return with_inplace("min_val=" + num(options.min_val()) + ", max_val=" + num(options.max_val()),
                      options.inplace());
}
std::string ReLU::extra_repr() const { return with_inplace("", options.inplace()); }
std::string ReLU6::extra_repr() const { return with_inplace("", options.inplace()); }

PReLU::PReLU(const PReLUOptions& options) : options(options) {
  IGNIS_CHECK(options.num_parameters() >= 1, "PReLU: num_parameters must be at least 1, but got ",
              options.num_parameters());
  weight = register_parameter("weight", empty({options.num_parameters()}));
  reset_parameters();
}
void PReLU::reset_parameters() {
  NoGradGuard ng;
  weight.fill_(options.init());
}
std::string PReLU::extra_repr() const {
  return "num_parameters=" + std::to_string(options.num_parameters());
}

}  // namespace ignis::nn
