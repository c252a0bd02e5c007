// How fused kernels read their inputs: rows, row maps and chunks (row_layout.h).
#include "jit/row_layout.h"

#include <numeric>
#include <optional>

#include "core/tensor_impl.h"
#include "ignis/small_vector.h"
#include "jit/codegen.h"

namespace ignis::jit::detail {

namespace {

/// A chunk holds at least this many elements: below, a kernel call per chunk would cost more
/// than writing the block out at the output's shape.
constexpr int64_t kMinChunkElements = 256;

/// The input's size at the output's dim d (the shapes aligned on the right).
int64_t size_at(IntArrayRef sizes, const Shape& shape, int64_t d) {
  const int64_t i = d - (static_cast<int64_t>(shape.size()) - static_cast<int64_t>(sizes.size()));
  return i >= 0 ? sizes[static_cast<size_t>(i)] : int64_t{1};
}

/// Whether an input of `sizes` has the output's trailing `dims` dims (a row), or all 1 there (one
/// value per row), or neither.
enum class Kind { row, value, neither };
Kind kind_of(IntArrayRef sizes, const Shape& shape, int64_t dims) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  bool same = true, ones = true;
  for (int64_t d = nd - dims; d < nd; ++d) {
    same = same && size_at(sizes, shape, d) == shape[static_cast<size_t>(d)];
    ones = ones && size_at(sizes, shape, d) == 1;
  }
  return same ? Kind::row : ones ? Kind::value : Kind::neither;
}

/// The map of an input of `sizes` against `shape` (rows of its trailing `dims` dims), or none
/// when the input's trailing dims are neither the row's nor all 1, or its kept leading dims (those
/// not broadcast, ignoring the output's dims of 1) make more than RowMap::kMaxRuns runs.
std::optional<RowMap> map_of(IntArrayRef sizes, const Shape& shape, int64_t dims) {
  const Kind kind = kind_of(sizes, shape, dims);
  if (kind == Kind::neither) return std::nullopt;
  RowMap m;
  m.row = kind == Kind::row;
  // From the last leading dim to the first: q counts the output's rows so far, s the input's.
  int64_t q = 1, s = 1;
  bool in_run = false;
  for (int64_t d = static_cast<int64_t>(shape.size()) - dims - 1; d >= 0; --d) {
    const int64_t o = shape[static_cast<size_t>(d)];
    if (o == 1) continue;
    const bool kept = size_at(sizes, shape, d) == o;
    if (kept && !in_run) {
      if (m.runs == RowMap::kMaxRuns) return std::nullopt;
      m.run[m.runs++] = RowMap::Run{q, 1, s};
    }
    in_run = kept;
    if (kept) {
      m.run[m.runs - 1].p *= o;
      s *= o;
    }
    q *= o;
  }
  return m;
}

/// A map's letter within a chunk (lower case): a chunk reads consecutive rows (values) of the
/// input, or the same one. In one row of everything (`rows` 1), a row is full.
char chunk_letter(const RowMap& m, int64_t rows) {
  if (rows == 1) return m.row ? 'f' : 's';
  return m.row ? (m.moves() ? 'f' : 'r') : (m.moves() ? 'c' : 's');
}

/// How an input is read: in full (its shape the output's, or materialised at it), by its map, or
/// as one value per row materialised (R values).
enum class Read { full, map, per_row };

}  // namespace

char RowLayout::native_letter(size_t i) const {
  return maps[i].native(rows) ? float_layout(layouts[i]) : 'b';
}

void RowLayout::at(const std::vector<const void*>& p, int64_t r0, size_t esize,
                   std::vector<const void*>& out) const {
  out.assign(p.begin(), p.end());
  for (size_t i = 0; i < maps.size(); ++i) {
    const size_t off = static_cast<size_t>(maps[i].offset(r0, cols));
    if (off != 0)
      out[i] = static_cast<const char*>(p[i]) + off * (esize ? esize : keep[i].element_size());
  }
}

RowLayout lay_out_rows(const std::vector<Tensor>& inputs, const Shape& shape, int64_t dims,
                       bool blocks, int full_input, bool flat) {
  RowLayout l;
  const int64_t nd = static_cast<int64_t>(shape.size());
  dims = std::min(dims, nd);
  for (int64_t d = nd - dims; d < nd; ++d) l.cols *= shape[static_cast<size_t>(d)];
  l.n = shape_numel(shape);
  l.rows = l.cols == 0 ? 0 : l.n / l.cols;
  const size_t k = inputs.size();
  // An expanded view (a dim of stride 0 and size > 1: a per-row gradient expanded to the rows,
  // a bias expanded by the caller) is read as the tensor it expands, its size-1 dims kept — one
  // value per row, a repeated row, one value — not copied out at the rows' shape.
  // `compact` holds those views (empty when there are none: nothing allocated per call).
  std::vector<Tensor> compact;
  for (size_t i = 0; i < k; ++i) {
    if (static_cast<int>(i) == full_input) continue;
    const Tensor& t = inputs[i];
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (t.stride(d) != 0 || t.size(d) <= 1) continue;
      if (compact.empty()) compact.resize(k);
      Tensor& c = compact[i];
      c = (c.defined() ? c : t).narrow(d, 0, 1);
    }
  }
  auto input = [&](size_t i) -> const Tensor& {
    return !compact.empty() && compact[i].defined() ? compact[i] : inputs[i];
  };
  SmallVector<Read, 8> read(k, Read::full);
  SmallVector<RowMap, 8> maps(k);
  for (size_t i = 0; i < k; ++i) {
    const Tensor& t = input(i);
    if (static_cast<int>(i) == full_input || t.sizes().equals(shape)) continue;
    if (t.numel() == 1) {  // one value
      read[i] = Read::map;
      maps[i] = RowMap{};
      maps[i].row = false;
    } else if (const std::optional<RowMap> m = map_of(t.sizes(), shape, dims)) {
      read[i] = Read::map;
      maps[i] = *m;
    } else if (kind_of(t.sizes(), shape, dims) == Kind::value) {
      read[i] = Read::per_row;
    }
  }
  // A block (a map that needs chunks) materialised: a row kind's at the output's shape, a value
  // kind's as one value per row.
  auto materialise_blocks = [&] {
    for (size_t i = 0; i < k; ++i)
      if (read[i] == Read::map && !maps[i].native(l.rows))
        read[i] = maps[i].row ? Read::full : Read::per_row;
  };
  // Rows per chunk: within one, each run's rows advance one by one (q 1: a divisor of p) or
  // stay (a divisor of q).
  auto chunk_of = [&] {
    int64_t c = std::max<int64_t>(l.rows, 1);
    for (size_t i = 0; i < k; ++i)
      if (read[i] == Read::map)
        for (int j = 0; j < maps[i].runs; ++j) {
          const RowMap::Run& u = maps[i].run[j];
          c = std::gcd(c, u.q == 1 ? u.p : u.q);
        }
    return c;
  };
  if (!blocks) materialise_blocks();
  l.chunk = chunk_of();
  if (l.chunk < l.rows && l.chunk * l.cols < kMinChunkElements) {
    materialise_blocks();
    l.chunk = chunk_of();
  }
  if (flat && l.rows > 1) {
    bool rows_needed = false;
    for (size_t i = 0; i < k; ++i)
      rows_needed =
          rows_needed || read[i] == Read::per_row ||
          (read[i] == Read::map && (maps[i].row ? !maps[i].full(l.rows) : maps[i].runs > 0));
    if (!rows_needed) {  // one row of every element: the kernels' flat loop
      l.cols = l.n;
      l.rows = l.chunk = 1;
    }
  }
  auto dense = [](const Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); };
  l.keep.reserve(k);
  l.ptrs.reserve(k + 2);  // (and a kernel's dropout streams)
  l.maps.reserve(k);
  for (size_t i = 0; i < k; ++i) {
    const Tensor& t = input(i);
    Tensor d;
    RowMap m;  // full: one run over all rows
    m.runs = 1;
    m.run[0] = RowMap::Run{1, l.rows, 1};
    if (read[i] == Read::full) {
      // No op call for an input already dense: a profiler sees the fused op alone.
      d = t.sizes().equals(shape) ? dense(t) : t.expand(shape).contiguous();
    } else if (read[i] == Read::per_row) {
      Shape per_row = shape;
      for (int64_t j = nd - dims; j < nd; ++j) per_row[static_cast<size_t>(j)] = 1;
      d = t.expand(per_row).contiguous();
      m.row = false;
    } else {
      d = dense(t);
      m = maps[i];
      if (l.rows == 1) m.runs = 0;
    }
    l.layouts += layout_letter(chunk_letter(m, l.rows), t.dtype());
    l.maps.push_back(m);
    l.ptrs.push_back(d.data_ptr());
    l.keep.push_back(std::move(d));
  }
  return l;
}

}  // namespace ignis::jit::detail
