// Printing tensors the way PyTorch does (torch/_tensor_str.py): one formatter per tensor picks a
// common width and a mode (integer-valued "1.", fixed "1.2500", scientific "1.2500e+08"), rows
// wrap at 80 columns, tensors over 1000 elements are summarised with "...", and suffixes name a
// non-default dtype, the device, and the autograd state.
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"

namespace ignis {

namespace {

constexpr int64_t kThreshold = 1000;  // elements above which a tensor is summarised
constexpr int64_t kEdgeItems = 3;     // items kept at each end of a summarised dim
constexpr int kLineWidth = 80;
constexpr int kPrecision = 4;

// printf with Python's spellings of the non-finite values ("nan", never "-nan").
std::string fmt(const char* spec, double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}

/// The element values, flat in row-major order: doubles for floating dtypes, int64 otherwise.
struct Values {
  DType dtype;
  std::vector<double> f;
  std::vector<int64_t> i;
  bool floating() const { return is_floating_point(dtype); }
};

Values read_values(const Tensor& t) {
  Values v{t.dtype(), {}, {}};
  Tensor c = t.detach();
  if (!c.device().is_cpu()) c = c.to(kCPU);
  c = c.contiguous();
  const int64_t n = c.numel();
  dispatch_dtype(c.dtype(), "print", [&]<class T>() {
    const T* p = static_cast<const T*>(c.data_ptr());
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float> ||
                  std::is_same_v<T, BFloat16>) {
      v.f.resize(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) v.f[k] = static_cast<double>(static_cast<acc_t<T>>(p[k]));
    } else {
      v.i.resize(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) v.i[k] = static_cast<int64_t>(p[k]);
    }
  });
  return v;
}

class Formatter {
 public:
  // `idx`: the flat indices of the values shown (all, or the summarised edges).
  Formatter(const Values& v, const std::vector<int64_t>& idx) : v_(v) {
    if (!v.floating()) {
      for (int64_t k : idx) width_ = std::max(width_, static_cast<int>(format_raw(k).size()));
      return;
    }
    std::vector<double> nz;
    for (int64_t k : idx) {
      const double x = v.f[k];
      if (std::isfinite(x) && x != 0) nz.push_back(x);
    }
    if (nz.empty()) return;
    double lo = std::fabs(nz[0]), hi = lo;
    for (double x : nz) {
      lo = std::min(lo, std::fabs(x));
      hi = std::max(hi, std::fabs(x));
      if (x != std::ceil(x)) int_mode_ = false;
    }
    if (int_mode_) {
      sci_mode_ = hi / lo > 1000.0 || hi > 1.0e8;
    } else {
      sci_mode_ = hi / lo > 1000.0 || hi > 1.0e8 || lo < 1.0e-4;
    }
    for (double x : nz) {
      const int w = sci_mode_   ? static_cast<int>(fmt("%.4e", x).size())
                    : int_mode_ ? static_cast<int>(fmt("%.0f", x).size()) + 1
                                : static_cast<int>(fmt("%.4f", x).size());
      width_ = std::max(width_, w);
    }
  }

  int width() const { return width_; }

  /// The value at flat index k, right-aligned to the common width.
  std::string format(int64_t k) const {
    std::string s = format_raw(k);
    if (static_cast<int>(s.size()) < width_) s.insert(0, width_ - s.size(), ' ');
    return s;
  }

 private:
  std::string format_raw(int64_t k) const {
    if (!v_.floating()) {
      if (v_.dtype == kBool) return v_.i[k] ? "True" : "False";
      return std::to_string(v_.i[k]);
    }
    const double x = v_.f[k];
    static_assert(kPrecision == 4, "the format strings below spell the precision");
    if (sci_mode_) return fmt("%.4e", x);
    if (int_mode_) return std::isfinite(x) ? fmt("%.0f", x) + "." : fmt("%.0f", x);
    return fmt("%.4f", x);
  }

  const Values& v_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  int width_ = 1;
};

class Printer {
 public:
  Printer(const Values& v, IntArrayRef sizes, bool summarize)
      : sizes_(sizes.shape()), strides_(contiguous_strides(sizes)), summarize_(summarize) {
    std::vector<int64_t> shown;
    collect(0, 0, shown);
    fmt_.emplace(v, shown);
  }

  std::string str(int indent) const { return tensor_str(0, 0, indent); }

 private:
  bool cut(int64_t d) const { return summarize_ && sizes_[d] > 2 * kEdgeItems; }

  // The indices shown along dim d.
  std::vector<int64_t> rows(int64_t d) const {
    std::vector<int64_t> r;
    const int64_t n = sizes_[d];
    if (cut(d)) {
      for (int64_t k = 0; k < kEdgeItems; ++k) r.push_back(k);
      for (int64_t k = n - kEdgeItems; k < n; ++k) r.push_back(k);
    } else {
      for (int64_t k = 0; k < n; ++k) r.push_back(k);
    }
    return r;
  }

  void collect(int64_t d, int64_t base, std::vector<int64_t>& out) const {
    if (d == static_cast<int64_t>(sizes_.size())) {
      out.push_back(base);
      return;
    }
    for (int64_t k : rows(d)) collect(d + 1, base + k * strides_[d], out);
  }

  std::string tensor_str(int64_t d, int64_t base, int indent) const {
    const int64_t nd = static_cast<int64_t>(sizes_.size());
    if (nd == 0) return fmt_->format(base);
    const std::vector<int64_t> r = rows(d);
    const bool gap = cut(d);
    std::vector<std::string> parts;
    if (d == nd - 1) {
      const int elem = fmt_->width() + 2;
      const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / elem);
      for (size_t k = 0; k < r.size(); ++k) {
        if (gap && k == static_cast<size_t>(kEdgeItems)) parts.push_back(" ...");
        parts.push_back(fmt_->format(base + r[k] * strides_[d]));
      }
      std::string s = "[";
      for (size_t k = 0; k < parts.size(); ++k) {
        if (k > 0) {
          s += k % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
        }
        s += parts[k];
      }
      return s + "]";
    }
    for (size_t k = 0; k < r.size(); ++k) {
      if (gap && k == static_cast<size_t>(kEdgeItems)) parts.push_back("...");
      parts.push_back(tensor_str(d + 1, base + r[k] * strides_[d], indent + 1));
    }
    const std::string sep = "," + std::string(nd - d - 1, '\n') + std::string(indent + 1, ' ');
    std::string s = "[";
    for (size_t k = 0; k < parts.size(); ++k) s += (k ? sep : "") + parts[k];
    return s + "]";
  }

  Shape sizes_, strides_;
  bool summarize_;
  std::optional<Formatter> fmt_;
};

std::string tuple_str(IntArrayRef s) {
  std::string r = "(";
  for (size_t k = 0; k < s.size(); ++k) r += (k ? ", " : "") + std::to_string(s[k]);
  return r + (s.size() == 1 ? ",)" : ")");
}

}  // namespace

std::string Tensor::toString() const {
  if (!defined()) return "[ Tensor (undefined) ]";
  const std::string prefix = "tensor(";
  const int indent = static_cast<int>(prefix.size());
  std::vector<std::string> suffixes;
  if (!device().is_cpu()) suffixes.push_back("device='" + device().str() + "'");
  std::string body;
  if (device().is_meta()) {  // PyTorch's form: no values to show
    suffixes.insert(suffixes.begin(), "size=" + tuple_str(sizes()));
    if (dtype() != default_dtype()) suffixes.push_back("dtype=" + std::string(dtype_name(dtype())));
    body = "...";
  } else if (numel() == 0) {
    if (dim() != 1) suffixes.push_back("size=" + tuple_str(sizes()));
    if (dtype() != default_dtype()) suffixes.push_back("dtype=" + std::string(dtype_name(dtype())));
    body = "[]";
  } else {
    if (dtype() != default_dtype() && dtype() != kInt64 && dtype() != kBool) {
      suffixes.push_back("dtype=" + std::string(dtype_name(dtype())));
    }
    const Values v = read_values(*this);
    body = Printer(v, sizes(), numel() > kThreshold).str(indent);
  }
  if (auto fn = grad_fn()) {
    suffixes.push_back("grad_fn=<" + fn->name() + ">");
  } else if (requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }
  std::string s = prefix + body;
  const size_t nl = s.rfind('\n');
  int64_t last = nl == std::string::npos ? static_cast<int64_t>(s.size()) + 2
                                         : static_cast<int64_t>(s.size() - nl + 1);
  for (const std::string& suf : suffixes) {
    const int64_t len = static_cast<int64_t>(suf.size());
    if (last + len + 2 > kLineWidth) {
      s += ",\n" + std::string(indent, ' ') + suf;
      last = indent + len;
    } else {
      s += ", " + suf;
      last += len + 2;
    }
  }
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.toString(); }

}  // namespace ignis
