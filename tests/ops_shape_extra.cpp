// Op table entries of index_fill(_), roll, tile, unbind, repeat_interleave, meshgrid, mv,
// baddbmm and einsum. einsum's reference is a brute-force sum over every assignment of the
// subscripts (size-1 dims broadcast), written with letters where the equation has "...".
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "op_table.h"

namespace ignis::testing {
namespace {

using TL = std::vector<Tensor>;
using Values = std::vector<double>;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor in(IntArrayRef shape, uint64_t seed) { return make_input(shape, seed); }
Tensor idx(std::vector<int64_t> v) { return tensor(v); }

/// Row-major offset of a multi-index.
int64_t offset(IntArrayRef shape, const std::vector<int64_t>& at) {
  int64_t o = 0;
  for (size_t d = 0; d < at.size(); ++d) o = o * shape[d] + at[d];
  return o;
}
/// Calls f(multi-index) for every element of a shape, in row-major order.
void for_each_index(IntArrayRef shape, const std::function<void(const std::vector<int64_t>&)>& f) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<int64_t> at(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i;
    for (size_t d = shape.size(); d-- > 0;) {
      at[d] = rem % shape[d];
      rem /= shape[d];
    }
    f(at);
  }
}

/// out[at] = x[src(at)] for every index of out_shape.
Tensor ref_map(const Tensor& x, IntArrayRef out_shape,
               const std::function<std::vector<int64_t>(const std::vector<int64_t>&)>& src) {
  const Values v = values(x);
  Values o;
  for_each_index(out_shape, [&](const std::vector<int64_t>& at) {
    o.push_back(v[offset(x.sizes(), src(at))]);
  });
  return from_values(o, out_shape);
}

OpInfo make(std::string name, std::function<Tensor(const TL&)> fn,
            std::function<Tensor(const TL&)> ref, std::function<std::vector<OpSample>()> samples) {
  OpInfo o;
  o.name = std::move(name);
  o.fn = std::move(fn);
  o.ref = std::move(ref);
  o.samples = std::move(samples);
  return o;
}

// ---- index_fill / index_fill_ (inputs: x, index): the index's range is read on the host
Tensor ref_index_fill(const Tensor& x, int64_t dim, const Tensor& index, double value) {
  const int64_t nd = x.dim(), d = nd == 0 ? 0 : (dim + nd) % nd, n = nd == 0 ? 1 : x.size(d);
  std::vector<bool> hit(static_cast<size_t>(n), false);
  for (double i : values(index)) hit[static_cast<size_t>((static_cast<int64_t>(i) + n) % n)] = true;
  Values v = values(x);
  size_t k = 0;
  for_each_index(x.sizes(), [&](const std::vector<int64_t>& at) {
    if (hit[nd == 0 ? 0 : at[d]]) v[k] = value;
    ++k;
  });
  return from_values(v, x.sizes());
}
std::vector<OpSample> index_fill_samples() {
  return {{"3x4 index [0, 2]", {in({3, 4}, 1), idx({0, 2})}},
          {"negative and repeated", {in({3, 4}, 2), idx({-1, 1, 1})}},
          {"noncontiguous", {make_noncontiguous({3, 4}, 3), idx({3})}},
          {"0-d index", {in({2, 5}, 4), idx({-2}).reshape({})}},
          {"empty index", {in({3, 4}, 5), tensor(std::vector<int64_t>{})}},
          {"empty self", {in({0, 4}, 6), idx({1})}}};
}
OpInfo index_fill_entry(std::string name, bool in_place) {
  OpInfo o = make(
      std::move(name),
      [in_place](const TL& x) {
        if (!in_place) return index_fill(x[0], 1, x[1], 2.5);
        Tensor y = x[0].clone();
        y.index_fill_(-1, x[1], 2.5);
        return y;
      },
      [](const TL& x) { return ref_index_fill(x[0], 1, x[1], 2.5); }, index_fill_samples);
  o.meta_skip = "reads the index's range on the host";
  return o;
}
IGNIS_OP_INFO(covering(index_fill_entry("index_fill dim=1", false), {"index_fill.int_Scalar"}));
IGNIS_OP_INFO(covering(index_fill_entry("index_fill_ dim=-1", true), {"index_fill_.int_Scalar"}));
IGNIS_OP_INFO([] {
  OpInfo o = make(
      "index_fill 0-d self", [](const TL& x) { return x[0].index_fill(0, x[1], -1); },
      [](const TL& x) { return ref_index_fill(x[0], 0, x[1], -1); },
      [] {
        return std::vector<OpSample>{{"0-d", {in({}, 7), idx({0})}},
                                     {"0-d, -1", {in({}, 8), idx({-1})}}};
      });
  o.meta_skip = "reads the index's range on the host";
  return o;
}());

// ---- roll
Tensor ref_roll(const Tensor& x, std::vector<int64_t> shifts, std::vector<int64_t> dims) {
  if (dims.empty()) {
    const Tensor flat = x.reshape({x.numel()});
    return ref_roll(flat, shifts, {0}).reshape(x.sizes());
  }
  return ref_map(x, x.sizes(), [&](std::vector<int64_t> at) {
    for (size_t i = 0; i < dims.size(); ++i) {
      const int64_t d = (dims[i] + x.dim()) % x.dim(), n = x.size(d);
      at[d] = (((at[d] - shifts[i]) % n) + n) % n;
    }
    return at;
  });
}
IGNIS_OP_INFO(covering(make(
                           "roll shifts=1,-5 dims=0,-1",
                           [](const TL& x) {
                             return roll(x[0], {1, -5}, {0, -1});
                           },
                           [](const TL& x) {
                             return ref_roll(x[0], {1, -5}, {0, -1});
                           },
                           [] {
                             return std::vector<OpSample>{
                                 {"3x4", {in({3, 4}, 9)}},
                                 {"noncontiguous", {make_noncontiguous({3, 4}, 10)}},
                                 {"transposed 2x5", {in({5, 2}, 11).t()}},
                                 {"empty 0x4", {in({0, 4}, 12)}}};
                           }),
                       {"roll"}));
IGNIS_OP_INFO(make(
    "roll flattened shift=7", [](const TL& x) { return x[0].roll({7}); },
    [](const TL& x) { return x[0].dim() == 0 ? x[0].clone() : ref_roll(x[0], {7}, {}); },
    [] {
      return std::vector<OpSample>{{"3x4", {in({3, 4}, 13)}},
                                   {"transposed 4x3", {in({3, 4}, 14).t()}},
                                   {"0-d", {in({}, 15)}},
                                   {"empty", {in({0, 3}, 16)}}};
    }));
IGNIS_OP_INFO(make(
    "roll shift=0 and full turns",
    [](const TL& x) {
      return roll(x[0], {0, 4}, {0, 1});
    },
    [](const TL& x) { return x[0].clone(); },
    [] {
      return std::vector<OpSample>{{"3x4", {in({3, 4}, 17)}}};
    }));

// ---- tile
Tensor ref_tile(const Tensor& x, std::vector<int64_t> reps) {
  Shape xs = x.sizes().shape();
  while (reps.size() < xs.size()) reps.insert(reps.begin(), 1);
  while (xs.size() < reps.size()) xs.insert(xs.begin(), 1);
  const Tensor xv = x.reshape(xs);
  Shape out;
  for (size_t d = 0; d < xs.size(); ++d) out.push_back(xs[d] * reps[d]);
  return ref_map(xv, out, [&](std::vector<int64_t> at) {
    for (size_t d = 0; d < at.size(); ++d) at[d] %= xs[d];
    return at;
  });
}
auto tile_samples = [] {
  return std::vector<OpSample>{{"2x3", {in({2, 3}, 18)}},
                               {"noncontiguous 3x4", {make_noncontiguous({3, 4}, 19)}},
                               {"0-d", {in({}, 20)}},
                               {"empty 0x3", {in({0, 3}, 21)}}};
};
IGNIS_OP_INFO(covering(make(
                           "tile dims=2 (padded)", [](const TL& x) { return tile(x[0], {2}); },
                           [](const TL& x) { return ref_tile(x[0], {2}); }, tile_samples),
                       {"tile"}));
IGNIS_OP_INFO(make(
    "tile dims=2,1,3 (rank grows)",
    [](const TL& x) {
      return x[0].tile({2, 1, 3});
    },
    [](const TL& x) {
      return ref_tile(x[0], {2, 1, 3});
    },
    tile_samples));

// ---- unbind: the last and first slices, stacked (views of x)
IGNIS_OP_INFO(covering(make(
                           "unbind dim=1",
                           [](const TL& x) {
                             const std::vector<Tensor> u = unbind(x[0], -2);
                             return stack({u.back(), u.front()});
                           },
                           [](const TL& x) {
                             const int64_t d = x[0].dim() - 2, n = x[0].size(d);
                             Shape s = x[0].sizes().shape();
                             s.erase(s.begin() + d);
                             s.insert(s.begin(), 2);
                             return ref_map(x[0], s, [&](std::vector<int64_t> at) {
                               const int64_t which = at[0] == 0 ? n - 1 : 0;
                               at.erase(at.begin());
                               at.insert(at.begin() + d, which);
                               return at;
                             });
                           },
                           [] {
                             return std::vector<OpSample>{{"3x4", {in({3, 4}, 22)}},
                                                          {"2x3x4", {in({2, 3, 4}, 23)}},
                                                          {"transposed", {in({4, 3}, 24).t()}}};
                           }),
                       {"unbind.int"}));

// ---- repeat_interleave
Tensor ref_repeat_interleave(const Tensor& x, const std::vector<int64_t>& reps,
                             std::optional<int64_t> dim) {
  const Tensor xl = !dim ? x.reshape({x.numel()}) : x.dim() == 0 ? x.reshape({1}) : x;
  const int64_t d = dim ? (*dim + xl.dim()) % xl.dim() : 0;
  std::vector<int64_t> src;
  for (int64_t i = 0; i < xl.size(d); ++i) {
    const int64_t r = reps.size() == 1 ? reps[0] : reps[static_cast<size_t>(i)];
    for (int64_t k = 0; k < r; ++k) src.push_back(i);
  }
  Shape s = xl.sizes().shape();
  s[d] = static_cast<int64_t>(src.size());
  return ref_map(xl, s, [&](std::vector<int64_t> at) {
    at[d] = src[static_cast<size_t>(at[d])];
    return at;
  });
}
IGNIS_OP_INFO(covering(make(
                           "repeat_interleave repeats=3 dim=1",
                           [](const TL& x) { return repeat_interleave(x[0], 3, 1); },
                           [](const TL& x) { return ref_repeat_interleave(x[0], {3}, 1); },
                           [] {
                             return std::vector<OpSample>{
                                 {"2x3", {in({2, 3}, 25)}},
                                 {"noncontiguous", {make_noncontiguous({3, 4}, 26)}},
                                 {"empty 0x2", {in({0, 2}, 27)}}};
                           }),
                       {"repeat_interleave.self_int"}));
IGNIS_OP_INFO(make(
    "repeat_interleave repeats=2 flattened", [](const TL& x) { return x[0].repeat_interleave(2); },
    [](const TL& x) { return ref_repeat_interleave(x[0], {2}, std::nullopt); },
    [] {
      return std::vector<OpSample>{
          {"2x3", {in({2, 3}, 28)}}, {"0-d", {in({}, 29)}}, {"transposed", {in({3, 2}, 30).t()}}};
    }));
IGNIS_OP_INFO(make(
    "repeat_interleave repeats=0 dim=0 output_size=0",
    [](const TL& x) { return repeat_interleave(x[0], 0, 0, 0); },
    [](const TL& x) {
      return from_values({}, {0, x[0].size(1)});
    },
    [] {
      return std::vector<OpSample>{{"2x3", {in({2, 3}, 31)}}};
    }));
IGNIS_OP_INFO([] {
  OpInfo o = covering(
      make(
          "repeat_interleave tensor repeats dim=0",
          [](const TL& x) { return repeat_interleave(x[0], x[1], 0); },
          [](const TL& x) {
            std::vector<int64_t> r;
            for (double v : values(x[1])) r.push_back(static_cast<int64_t>(v));
            return ref_repeat_interleave(x[0], r, 0);
          },
          [] {
            return std::vector<OpSample>{
                {"3x2 repeats [1, 0, 2]", {in({3, 2}, 32), idx({1, 0, 2})}},
                {"transposed repeats [2, 2, 1, 3]", {in({2, 4}, 33).t(), idx({2, 2, 1, 3})}},
                {"one repeat for all", {in({2, 3}, 34), idx({2})}}};
          }),
      {"repeat_interleave.self_Tensor"});
  o.meta_skip = "the output's shape depends on the repeats' values";
  o.grad_inputs = {0};
  return o;
}());
IGNIS_OP_INFO([] {
  OpInfo o = covering(
      make(
          "repeat_interleave of repeats", [](const TL& x) { return repeat_interleave(x[0]); },
          [](const TL& x) {
            Values o;
            const Values r = values(x[0]);
            for (size_t i = 0; i < r.size(); ++i) o.insert(o.end(), static_cast<size_t>(r[i]), i);
            return from_values(o, {static_cast<int64_t>(o.size())});
          },
          [] {
            return std::vector<OpSample>{{"[2, 0, 3]", {idx({2, 0, 3})}},
                                         {"empty", {tensor(std::vector<int64_t>{})}}};
          }),
      {"repeat_interleave.Tensor"});
  o.meta_skip = "the output's shape depends on the repeats' values";
  o.differentiable = o.twice_differentiable = false;
  return o;
}());

// ---- meshgrid: the grids stacked
Tensor ref_meshgrid(const TL& x, bool xy) {
  Shape s;
  for (const Tensor& t : x) s.push_back(t.numel());
  xy = xy && s.size() >= 2;
  if (xy) std::swap(s[0], s[1]);
  Values o;
  for (size_t k = 0; k < x.size(); ++k) {
    const Values v = values(x[k]);
    for_each_index(s, [&](const std::vector<int64_t>& at) {
      const size_t pos = xy && k < 2 ? 1 - k : k;
      o.push_back(v[static_cast<size_t>(at[pos])]);
    });
  }
  Shape out = s;
  out.insert(out.begin(), static_cast<int64_t>(x.size()));
  return from_values(o, out);
}
auto meshgrid_samples = [] {
  return std::vector<OpSample>{{"3 and 4", {in({3}, 35), in({4}, 36)}},
                               {"2, 0-d and 3", {in({2}, 37), in({}, 38), in({3}, 39)}},
                               {"one", {in({5}, 40)}},
                               {"strided and empty", {in({6}, 41).slice(0, 0, 6, 2), in({0}, 42)}}};
};
IGNIS_OP_INFO(make(
    "meshgrid", [](const TL& x) { return stack(meshgrid(x)); },
    [](const TL& x) { return ref_meshgrid(x, false); }, meshgrid_samples));
IGNIS_OP_INFO(covering(make(
                           "meshgrid indexing=xy",
                           [](const TL& x) { return stack(meshgrid(x, "xy")); },
                           [](const TL& x) { return ref_meshgrid(x, true); }, meshgrid_samples),
                       {"meshgrid.indexing"}));
IGNIS_OP_INFO(make(
    "meshgrid indexing=ij", [](const TL& x) { return stack(meshgrid(x, "ij")); },
    [](const TL& x) { return ref_meshgrid(x, false); }, meshgrid_samples));

// ---- einsum, with a brute-force reference
/// Evaluates an explicit, letters-only equation by summing over every subscript assignment.
/// A size-1 dim broadcasts against the subscript's size elsewhere.
Tensor ref_einsum(const std::string& eq, const TL& x) {
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  for (size_t s = 0;;) {
    const size_t c = std::min(eq.find(',', s), arrow);
    terms.push_back(eq.substr(s, c - s));
    if (c == arrow) break;
    s = c + 1;
  }
  const std::string out = eq.substr(arrow + 2);
  std::map<char, int64_t> size;
  for (size_t k = 0; k < terms.size(); ++k) {
    for (size_t i = 0; i < terms[k].size(); ++i) {
      size[terms[k][i]] = std::max(size[terms[k][i]], x[k].size(static_cast<int64_t>(i)));
    }
  }
  std::vector<char> labels;
  Shape all;
  for (auto [c, n] : size) {
    labels.push_back(c);
    all.push_back(n);
  }
  Shape out_shape;
  for (char c : out) out_shape.push_back(size[c]);
  int64_t on = 1;
  for (int64_t s : out_shape) on *= s;
  Values o(static_cast<size_t>(on), 0.0);
  std::vector<Values> xv;
  for (const Tensor& t : x) xv.push_back(values(t));
  for_each_index(all, [&](const std::vector<int64_t>& at) {
    auto value_of = [&](char c) {
      return at[std::find(labels.begin(), labels.end(), c) - labels.begin()];
    };
    double p = 1;
    for (size_t k = 0; k < terms.size(); ++k) {
      std::vector<int64_t> ix;
      for (size_t i = 0; i < terms[k].size(); ++i) {
        ix.push_back(x[k].size(static_cast<int64_t>(i)) == 1 ? 0 : value_of(terms[k][i]));
      }
      p *= xv[k][static_cast<size_t>(offset(x[k].sizes(), ix))];
    }
    std::vector<int64_t> oi;
    for (char c : out) oi.push_back(value_of(c));
    o[static_cast<size_t>(offset(out_shape, oi))] += p;
  });
  return from_values(o, out_shape);
}
/// An einsum entry: `eq` under test, `ref_eq` its explicit letters-only form.
OpInfo einsum_entry(const std::string& eq, const std::string& ref_eq,
                    std::vector<std::vector<Shape>> shapes, const std::string& note = "") {
  OpInfo o = make(
      "einsum " + eq + note, [eq](const TL& x) { return einsum(eq, x); },
      [ref_eq](const TL& x) { return ref_einsum(ref_eq, x); },
      [shapes] {
        std::vector<OpSample> s;
        uint64_t seed = 50;
        for (const auto& shape_set : shapes) {
          OpSample sample{"", {}};
          for (const Shape& sh : shape_set) {
            std::ostringstream os;
            os << IntArrayRef(sh);
            if (!sample.desc.empty()) sample.desc += ' ';  // (not "" + ...: GCC 12's -Wrestrict)
            sample.desc += os.str();
            sample.inputs.push_back(in(sh, seed++));
          }
          s.push_back(sample);
        }
        return s;
      });
  o.ops = {"einsum"};
  return o;
}
IGNIS_OP_INFO(einsum_entry("ij,jk->ik", "ij,jk->ik",
                           {{{2, 3}, {3, 4}}, {{0, 3}, {3, 2}}, {{2, 0}, {0, 3}}}));
IGNIS_OP_INFO(einsum_entry("ij,jk", "ij,jk->ik", {{{3, 2}, {2, 5}}}));
IGNIS_OP_INFO(einsum_entry("bij,bjk->bik", "bij,bjk->bik",
                           {{{2, 3, 4}, {2, 4, 5}}, {{1, 3, 4}, {2, 4, 2}}}));
IGNIS_OP_INFO(einsum_entry("ii->i", "ii->i", {{{3, 3}}}));
IGNIS_OP_INFO(einsum_entry("ii", "ii->", {{{4, 4}}}));
IGNIS_OP_INFO(einsum_entry("iij->ji", "iij->ji", {{{3, 3, 2}}}));
IGNIS_OP_INFO(einsum_entry("i,j->ij", "i,j->ij", {{{3}, {4}}}));
IGNIS_OP_INFO(einsum_entry("i,i", "i,i->", {{{5}, {5}}}));
IGNIS_OP_INFO(einsum_entry("ij->ji", "ij->ji", {{{2, 3}}}));
IGNIS_OP_INFO(einsum_entry("ij->", "ij->", {{{2, 3}}, {{0, 3}}}));
IGNIS_OP_INFO(einsum_entry("ba,Ab", "ba,Ab->Aa", {{{2, 3}, {4, 2}}}));
IGNIS_OP_INFO(einsum_entry("ij,ij->i", "ij,ij->i", {{{2, 1}, {2, 3}}, {{2, 3}, {2, 3}}}));
IGNIS_OP_INFO(einsum_entry("bn,anm,bm->ba", "bn,anm,bm->ba", {{{2, 3}, {4, 3, 5}, {2, 5}}}));
IGNIS_OP_INFO(einsum_entry("...ij,...jk->...ik", "xij,xjk->xik", {{{2, 3, 4}, {1, 4, 2}}}));
IGNIS_OP_INFO(einsum_entry("...ij,jk", "xij,jk->xik", {{{2, 2, 3}, {3, 4}}}));
IGNIS_OP_INFO(einsum_entry(" i j , j k -> k i ", "ij,jk->ki", {{{2, 3}, {3, 2}}}));
IGNIS_OP_INFO(einsum_entry("...ij->ij", "xij->ij", {{{2, 3, 4}}}));
IGNIS_OP_INFO(einsum_entry("i...->...", "ix->x", {{{3, 2}}}));
IGNIS_OP_INFO(einsum_entry("i...->...", "i->", {{{3}}}, " (empty ellipsis)"));
IGNIS_OP_INFO(einsum_entry("ij,kl->", "ij,kl->", {{{2, 3}, {2, 2}}}));
IGNIS_OP_INFO(einsum_entry("", "->", {{{}}}));

// ---- mv, baddbmm
IGNIS_OP_INFO(make(
    "mv", [](const TL& x) { return mv(x[0], x[1]); },
    [](const TL& x) { return ref_einsum("ij,j->i", x); },
    [] {
      return std::vector<OpSample>{
          {"3x4", {in({3, 4}, 60), in({4}, 61)}},
          {"transposed", {in({4, 3}, 62).t(), in({4}, 63)}},
          {"noncontiguous", {make_noncontiguous({2, 3}, 64), in({6}, 65).slice(0, 0, 6, 2)}},
          {"empty k", {in({3, 0}, 66), in({0}, 67)}}};
    }));
IGNIS_OP_INFO(make(
    "mv method", [](const TL& x) { return x[0].mv(x[1]); },
    [](const TL& x) { return ref_einsum("ij,j->i", x); },
    [] {
      return std::vector<OpSample>{{"2x5", {in({2, 5}, 68), in({5}, 69)}}};
    }));
Tensor ref_baddbmm(const TL& x, double beta, double alpha) {
  const Tensor p = ref_einsum("bij,bjk->bik", {x[1], x[2]});
  const Tensor s = x[0].expand(p.sizes()).contiguous();
  Values o = values(p), sv = values(s);
  for (size_t i = 0; i < o.size(); ++i) o[i] = (beta == 0 ? 0 : beta * sv[i]) + alpha * o[i];
  return from_values(o, p.sizes());
}
auto baddbmm_samples = [] {
  return std::vector<OpSample>{
      {"2x3x5", {in({2, 3, 5}, 70), in({2, 3, 4}, 71), in({2, 4, 5}, 72)}},
      {"self broadcast [5]", {in({5}, 73), in({2, 3, 4}, 74), in({2, 4, 5}, 75)}},
      {"self [3, 1], transposed batch2",
       {in({3, 1}, 76), in({2, 3, 4}, 77), in({2, 5, 4}, 78).transpose(1, 2)}},
      {"empty k", {in({2, 3, 5}, 79), in({2, 3, 0}, 80), in({2, 0, 5}, 81)}}};
};
IGNIS_OP_INFO(covering(make(
                           "baddbmm beta=0.5 alpha=2",
                           [](const TL& x) { return baddbmm(x[0], x[1], x[2], 0.5, 2); },
                           [](const TL& x) { return ref_baddbmm(x, 0.5, 2); }, baddbmm_samples),
                       {"baddbmm"}));
IGNIS_OP_INFO(make(
    "baddbmm defaults", [](const TL& x) { return x[0].baddbmm(x[1], x[2]); },
    [](const TL& x) { return ref_baddbmm(x, 1, 1); }, baddbmm_samples));
IGNIS_OP_INFO([] {
  OpInfo o = make(
      "baddbmm beta=0 ignores NaN self", [](const TL& x) { return baddbmm(x[0], x[1], x[2], 0); },
      [](const TL& x) { return ref_baddbmm(x, 0, 1); },
      [] {
        return std::vector<OpSample>{
            {"NaN self", {full({2, 3, 5}, kNaN, kFloat64), in({2, 3, 4}, 82), in({2, 4, 5}, 83)}}};
      });
  o.grad_inputs = {1, 2};
  return o;
}());

}  // namespace
}  // namespace ignis::testing
