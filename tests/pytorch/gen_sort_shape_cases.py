#!/usr/bin/env python3
"""Records PyTorch's results of sorting, selection, scans, NaN-aware reductions, einsum and the
shape ops of ignis/sort.h, einsum.h and shape_extra.h at their edges.

Writes tests/data/pytorch_sort_shape_cases.txt, which tests/test_sort_shape.cpp reads: one case
per line, `op | arguments | outputs | gradient`, the op by its registry name (ignis calls it through
op::call_boxed with the same arguments), arguments separated by " ; ":
  T dtype [shape] values...   a tensor (values in row-major order; nan, inf, -inf)
  L a & b & ...               a list of tensors (each as T ...)
  i N | b 0/1 | f X | S X | s text | I n... | d dtype | n
                              int, bool, float, Scalar, str, int list, dtype, None
outputs: the op's results the same way (X: not compared -- PyTorch leaves the order of tied
indices in topk unspecified, so those cases record no gradient either); gradient: of sum(out0 * w) with respect to the first tensor
argument, w[i] = (i % 3) - 0.5 over out0's elements in row-major order ("-" when not
differentiable). Edge values: NaN (greater than +inf when sorting), +-inf, ties, zeros (cumprod's
exact gradient), -inf (logcumsumexp), empty and 0-d tensors, non-contiguous inputs.

Run with Debian's python3-torch:  /usr/bin/python3 tests/pytorch/gen_sort_shape_cases.py
"""
import math
import os

import torch

NAN, INF = math.nan, math.inf
OUT = os.path.join(os.path.dirname(__file__), "..", "data", "pytorch_sort_shape_cases.txt")
DT = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64",
      torch.int32: "int32", torch.bool: "bool"}


def num(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(float(v))


def tens(t):
    vals = t.detach().reshape(-1).tolist()
    return "T %s [%s] %s" % (DT[t.dtype], ",".join(str(s) for s in t.shape),
                             " ".join(num(v) for v in vals))


class Tag:
    def __init__(self, kind, value):
        self.kind, self.value = kind, value


def arg(a):
    if isinstance(a, torch.Tensor):
        return tens(a)
    if isinstance(a, list) and a and isinstance(a[0], torch.Tensor):
        return "L " + " & ".join(tens(t) for t in a)
    if isinstance(a, Tag):
        if a.kind == "I":
            return "I " + " ".join(str(v) for v in a.value)
        return "%s %s" % (a.kind, a.value)
    if a is None:
        return "n"
    if isinstance(a, bool):
        return "b %d" % a
    if isinstance(a, int):
        return "i %d" % a
    if isinstance(a, str):
        return "s " + a
    if isinstance(a, torch.dtype):
        return "d " + DT[a]
    raise TypeError(a)


def unwrap(a):
    """The value torch is called with."""
    if isinstance(a, Tag):
        return tuple(a.value) if a.kind == "I" else float(a.value)
    return a


def ints(*v):
    return Tag("I", v)


def scalar(v):
    return Tag("S", num(v))


lines = []


def case(name, fn, args, skip=(), grad=True):
    """Runs fn(*args) in torch and records it under the ignis op `name`."""
    args = [a.clone() if isinstance(a, torch.Tensor) else
            [t.clone() for t in a] if isinstance(a, list) else a for a in args]
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if first is None:
        first = next(a for a in args if isinstance(a, list))[0]
    differentiable = grad and first.is_floating_point() and not skip  # skipped: ties' order
    if differentiable:
        first.requires_grad_(True)
    out = fn(*[unwrap(a) for a in args])
    outs = list(out) if isinstance(out, tuple) else [out]
    if isinstance(out, (list, tuple)) and not isinstance(out, tuple):
        outs = [list(out)]
    shown = ["X" if i in skip else arg(o) for i, o in enumerate(outs)]
    g = "-"
    if differentiable:
        o0 = outs[0] if isinstance(outs[0], torch.Tensor) else outs[0][0]
        w = (torch.arange(o0.numel(), dtype=torch.float64) % 3 - 0.5).reshape(o0.shape)
        if o0.numel() and o0.requires_grad:
            (o0 * w.to(o0.dtype)).sum().backward()
            g = tens(first.grad) if first.grad is not None else tens(torch.zeros_like(first))
        else:
            g = tens(torch.zeros_like(first))
    lines.append(" | ".join([name, " ; ".join(arg(a) for a in args), " ; ".join(shown), g]))


def T(values, dtype=torch.float64, shape=None):
    t = torch.tensor(values, dtype=dtype)
    return t.reshape(shape) if shape is not None else t


SPECIAL = [3., NAN, 1., INF, -INF, 1., NAN, 2., -INF, -INF, 0., 0., NAN, NAN, NAN, 1.]
TIES = [1., 2., 2., 1., 3., 2., 1., 0., 5., 5., 4., 5., 4., 4., 5., 0.]

for dt in (torch.float32, torch.float64):
    s = T(SPECIAL, dt, (4, 4))
    ties = T(TIES, dt, (4, 4))
    # ---- sort / argsort: NaN above +inf, stable
    for x in (s, ties, s.t(), T([2., 1., 3.], dt)):
        case("sort", torch.sort, [x, -1, False])
        case("sort", torch.sort, [x, 0, True])
        case("sort.stable", lambda a, st, d, de: torch.sort(a, stable=st, dim=d, descending=de),
             [x, True, -1, True])
        case("argsort", torch.argsort, [x, 0, True])
        case("argsort.stable",
             lambda a, st, d, de: torch.argsort(a, stable=st, dim=d, descending=de),
             [x, True, x.dim() - 1, False])
    case("sort", torch.sort, [T(5., dt), 0, False])
    case("sort", torch.sort, [T([], dt, (0, 3)), 1, False])
    # ---- topk: the order of tied indices is unspecified in PyTorch (not compared)
    for x in (s, ties):
        case("topk", torch.topk, [x, 2, -1, True, True], skip=(1,))
        case("topk", torch.topk, [x, 3, 0, False, True], skip=(1,))
    case("topk", torch.topk, [T([4., 1., 3., 2.], dt), 4, 0, True, True])
    case("topk", torch.topk, [T([4., NAN, 3., INF], dt), 2, 0, True, True])
    case("topk", torch.topk, [T(7., dt), 1, -1, True, True])
    case("topk", torch.topk, [T([1., 2.], dt), 0, 0, True, True])
    # ---- median: the lower middle value, NaN propagates (index of the first NaN)
    for x in (T([4., 1., 3., 2.], dt), T([1., NAN, 3.], dt), T([], dt), T(2.5, dt), ties, s):
        case("median", torch.median, [x])
    for x in (s, ties, ties.t()):
        case("median.dim", torch.median, [x, 1, False])
        case("median.dim", torch.median, [x, 0, True])
    case("median.dim", torch.median, [T([NAN, 1., NAN], dt), 0, False])
    # ---- mode: most frequent, ties -> smallest value, index of its last occurrence. No NaN:
    # torch's mode sorts with `<`, which NaN breaks (its result then depends on the sort).
    for x in (ties, ties.t(), T([[3., 1., 3., 1., 2.]], dt), T([[-INF, INF, INF, -INF]], dt)):
        case("mode", torch.mode, [x, -1, False])
        case("mode", torch.mode, [x, 0, True])
    case("mode", torch.mode, [T(5., dt), 0, False])
    # ---- cumprod: zeros (the exact gradient), inf, NaN; logcumsumexp: -inf, inf, NaN
    z = T([2., 0., 3., 0., 4., 0.5, -1., 0., 2., 3., 1.5, 2.], dt, (3, 4))
    for x in (z, z.t(), T([0., 2., 3.], dt), T([1., 2., 0.], dt), T([INF, 0., 2.], dt),
              T([1., NAN, 2.], dt), T(3., dt)):
        case("cumprod", lambda a, d, t: torch.cumprod(a, d, dtype=t), [x, -1, None])
        case("cumprod", lambda a, d, t: torch.cumprod(a, d, dtype=t), [x, 0, None])
    big = T([1000., 999., -1000., 0.5, 88., 90.], dt)
    for x in (T([-INF, -INF, 0., INF, 1.], dt), T([-INF, -INF], dt), T([1., NAN, 2.], dt), big,
              T([-INF, 2., -INF, 3.], dt), z, z.t(), T(1.5, dt), T([], dt)):
        case("logcumsumexp", torch.logcumsumexp, [x, 0])
    case("logcumsumexp", torch.logcumsumexp, [z, -1])
    # ---- var_mean / std_mean (correction as PyTorch's unbiased), nansum / nanmean
    v = T([1., 2., 4., 7., -3., 0.5], dt, (2, 3))
    for x in (v, v.t()):
        for corr in (0, 1, 2):
            case("var_mean", lambda a, d, c, k: torch.var_mean(a, d, correction=c, keepdim=k),
                 [x, ints(1), corr, False])
            case("std_mean", lambda a, d, c, k: torch.std_mean(a, d, correction=c, keepdim=k),
                 [x, ints(0), corr, True])
        case("var_mean", lambda a, d, c, k: torch.var_mean(a, unbiased=c == 1), [x, ints(), 1, False])
    nan_rows = T([1., NAN, 2., NAN, NAN, NAN, -1., 4., INF], dt, (3, 3))
    for x in (nan_rows, nan_rows.t(), T([], dt, (0, 3)), T(NAN, dt)):
        case("nansum", lambda a, d, k, t: torch.nansum(a, d, keepdim=k, dtype=t),
             [x, ints(), False, None])
        case("nanmean", lambda a, d, k, t: torch.nanmean(a, d, keepdim=k, dtype=t),
             [x, ints(), False, None])
        if x.dim() == 2:
            case("nansum", lambda a, d, k, t: torch.nansum(a, d, keepdim=k, dtype=t),
                 [x, ints(1), True, None])
            case("nanmean", lambda a, d, k, t: torch.nanmean(a, d, keepdim=k, dtype=t),
                 [x, ints(0), False, None])

# ---- integer inputs
iv = T([3, 1, 2, 1, 3, 3, 0, 2], torch.int64, (2, 4))
case("sort", torch.sort, [iv, 1, True])
case("median.dim", torch.median, [iv, 1, False])
case("mode", torch.mode, [iv, 1, False])
case("cumprod", lambda a, d, t: torch.cumprod(a, d, dtype=t), [iv, 1, None])
case("cumprod", lambda a, d, t: torch.cumprod(a, d, dtype=t), [iv, 1, torch.float64])
case("cumprod", lambda a, d, t: torch.cumprod(a, d, dtype=t),
     [T([True, True, False], torch.bool), 0, None])
case("nansum", lambda a, d, k, t: torch.nansum(a, d, keepdim=k, dtype=t),
     [iv, ints(0), False, None])

# ---- products
a = torch.linspace(-2, 2, 12, dtype=torch.float64).reshape(3, 4)
b = torch.linspace(1, -1, 20, dtype=torch.float64).reshape(4, 5)
case("mv", torch.mv, [a, T([1., -2., 0.5, 3.])])
case("mv", torch.mv, [a.t(), T([1., 2., 3.])])
b1 = torch.linspace(-1, 1, 24, dtype=torch.float64).reshape(2, 3, 4)
b2 = torch.linspace(2, -2, 40, dtype=torch.float64).reshape(2, 4, 5)
case("baddbmm", lambda s_, x, y, be, al: torch.baddbmm(s_, x, y, beta=be, alpha=al),
     [T([1., 2., 3., 4., 5.]), b1, b2, scalar(0.5), scalar(2.)])
case("baddbmm", lambda s_, x, y, be, al: torch.baddbmm(s_, x, y, beta=be, alpha=al),
     [torch.full((2, 3, 5), NAN, dtype=torch.float64), b1, b2, scalar(0.), scalar(1.)])
x3 = torch.linspace(-1, 2, 9, dtype=torch.float64).reshape(3, 3)
for eq, ops in [("ij,jk->ik", [a, b]), ("ij,jk", [a, b]), ("ii->i", [x3]), ("ii", [x3]),
                ("ij->ji", [a]), ("i,j->ij", [T([1., 2.]), T([3., 4., 5.])]),
                ("bij,bjk->bik", [b1, b2]), ("...ij,...jk->...ik", [b1, b2[:1]]),
                ("ba,Ab", [a.t(), b.t()]), ("i...->...", [b1]),
                ("ij,ij->i", [a[:, :1], a]), ("bn,anm,bm->ba", [a, b2, torch.linspace(0, 1, 15, dtype=torch.float64).reshape(3, 5)]),
                (" i j , j k -> k i ", [a, b]), ("iij->ji", [torch.stack([x3, x3 * 2], -1)]),
                ("...ij->ij", [b1])]:
    case("einsum", lambda e, ts: torch.einsum(e, ts), [eq, ops])

# ---- shape ops
m = torch.arange(12, dtype=torch.float64).reshape(3, 4) * 0.5 - 1
case("index_fill.int_Scalar", lambda x, d, i, v: x.index_fill(d, i, v),
     [m, 1, T([-1, 0, 0], torch.int64), scalar(NAN)])
case("index_fill.int_Scalar", lambda x, d, i, v: x.index_fill(d, i, v),
     [m.t(), 0, T(2, torch.int64), scalar(7)])
case("index_fill.int_Scalar", lambda x, d, i, v: x.index_fill(d, i, v),
     [T([[1, 2], [3, 4]], torch.int64), 0, T([1], torch.int64), scalar(-2.5)])
case("roll", torch.roll, [m, ints(1, -5), ints(0, 1)])
case("roll", lambda x, s_, d: torch.roll(x, s_, d), [m.t(), ints(7), ints()])
case("tile", torch.tile, [m, ints(2)])
case("tile", torch.tile, [m[0], ints(2, 1, 2)])
case("unbind.int", torch.unbind, [m, 1])
case("unbind.int", torch.unbind, [m.t(), -2])
case("repeat_interleave.self_int",
     lambda x, r, d, o: torch.repeat_interleave(x, r, dim=d, output_size=o), [m, 2, 0, None])
case("repeat_interleave.self_int",
     lambda x, r, d, o: torch.repeat_interleave(x, r, dim=d, output_size=o), [m.t(), 2, None, 24])
case("repeat_interleave.self_Tensor",
     lambda x, r, d, o: torch.repeat_interleave(x, r, dim=d, output_size=o),
     [m, T([1, 0, 3], torch.int64), 0, None])
case("repeat_interleave.self_Tensor",
     lambda x, r, d, o: torch.repeat_interleave(x, r, dim=d, output_size=o),
     [m, T([2], torch.int64), -1, None])
case("repeat_interleave.Tensor", lambda r, o: torch.repeat_interleave(r, output_size=o),
     [T([2, 0, 1, 3], torch.int64), None])
for idx in ("ij", "xy"):
    case("meshgrid.indexing", lambda ts, ix: torch.meshgrid(ts, indexing=ix),
         [[T([1., 2., 3.]), T([4., 5.])], idx])
    case("meshgrid.indexing", lambda ts, ix: torch.meshgrid(ts, indexing=ix),
         [[T([1., 2.]), T(7.), T([4., 5., 6.])], idx])

with open(OUT, "w") as f:
    f.write("# PyTorch %s: op | arguments | outputs | gradient of sum(out0 * w)\n" % torch.__version__)
    f.write("# written by tests/pytorch/gen_sort_shape_cases.py; read by tests/test_sort_shape.cpp\n")
    for line in lines:
        f.write(line + "\n")
print("wrote %d cases to %s" % (len(lines), os.path.normpath(OUT)))
