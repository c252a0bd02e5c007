#!/usr/bin/env python3
"""Records PyTorch's values of the activations with parameters and the binary math ops at edges.

Covers the ops of ignis/activation_ops.def and ignis/binary_ops.def and their composites (elu with
and without its parameters, selu, celu, hardtanh, relu6, hardswish, hardsigmoid, mish,
log_sigmoid, square, trunc, atan2, fmod, remainder). Writes tests/data/pytorch_activation_cases.txt,
which tests/test_pytorch_activation_parity.cpp reads: one line per op, parameters and dtype
(float32, float64) with the inputs, torch's outputs and torch's gradients of sum(op(...)) with
respect to each input, and the exact values and derivatives (mpmath at 50 digits, rounded to the
dtype; "none" where there is no finite answer) as a second reference: torch itself is off in
places (elu's exp(x) - 1 is 0 for tiny x). Inputs: signed zeros, the kinks (0, +-3, 6, the hardtanh bounds), large
magnitudes where exp overflows, +-inf and NaN; the binary ops take every pair of edge values.

Run with Debian's python3-torch:  /usr/bin/python3 tests/pytorch/gen_activation_cases.py
"""
import math
import os
import sys

import mpmath
import torch
import torch.nn.functional as F

mpmath.mp.dps = 50
SELU_ALPHA = mpmath.mpf("1.6732632423543772848170429916717")
SELU_SCALE = mpmath.mpf("1.0507009873554804934193349852946")


def m_elu(x, alpha=1, scale=1, input_scale=1):
    return scale * x if x > 0 else alpha * scale * mpmath.expm1(x * input_scale)


def m_clamp(x, lo, hi):
    return min(max(x, mpmath.mpf(lo)), mpmath.mpf(hi))


def m_softplus(x):
    return mpmath.log1p(mpmath.exp(x))


def m_sigmoid(x):
    return 1 / (1 + mpmath.exp(-x))


def d_elu(alpha=1, scale=1, input_scale=1):
    # exp's argument x * input_scale rounded to a double, as implementations compute it (its
    # rounding alone moves exp(-125.7) by ~30 ulp)
    return lambda x: scale if x > 0 else alpha * scale * input_scale * mpmath.exp(
        mpmath.mpf(float(x) * float(input_scale)))


def d_clamp(lo, hi):
    return lambda x: 1 if lo < x < hi else 0


def d_mish(x):
    t = mpmath.tanh(m_softplus(x))
    return t + x * m_sigmoid(x) * (1 - t * t)


# The exact function of each (record, args), of mpmath numbers, its derivative, and its kinks
# (where it has none).
EXACT = {
    ("elu", ()): (m_elu, d_elu(), []),
    ("elu", (0.5, 1.5, 2.0)): (lambda x: m_elu(x, mpmath.mpf(0.5), mpmath.mpf(1.5), 2),
                               d_elu(mpmath.mpf(0.5), mpmath.mpf(1.5), 2), [0]),
    ("selu", ()): (lambda x: m_elu(x, SELU_ALPHA, SELU_SCALE), d_elu(SELU_ALPHA, SELU_SCALE), [0]),
    # celu is elu with input_scale = 1 / alpha, that quotient rounded to a double (as PyTorch's)
    ("celu", (0.7,)): (lambda x: m_elu(x, mpmath.mpf(0.7), 1, mpmath.mpf(1 / 0.7)),
                       d_elu(mpmath.mpf(0.7), 1, mpmath.mpf(1 / 0.7)), []),
    ("hardtanh", ()): (lambda x: m_clamp(x, -1, 1), d_clamp(-1, 1), [-1, 1]),
    ("hardtanh", (-0.5, 2.0)): (lambda x: m_clamp(x, -0.5, 2), d_clamp(-0.5, 2), [-0.5, 2]),
    ("relu6", ()): (lambda x: m_clamp(x, 0, 6), d_clamp(0, 6), [0, 6]),
    ("hardswish", ()): (lambda x: x * m_clamp(x + 3, 0, 6) / 6,
                        lambda x: 0 if x < -3 else (1 if x > 3 else (2 * x + 3) / 6), [-3, 3]),
    ("hardsigmoid", ()): (lambda x: m_clamp(x + 3, 0, 6) / 6,
                          lambda x: mpmath.mpf(1) / 6 if -3 < x < 3 else 0, [-3, 3]),
    ("mish", ()): (lambda x: x * mpmath.tanh(m_softplus(x)), d_mish, []),
    ("log_sigmoid", ()): (lambda x: -m_softplus(-x), lambda x: m_sigmoid(-x), []),
    ("square", ()): (lambda x: x * x, lambda x: 2 * x, []),
    ("trunc", ()): (lambda x: mpmath.floor(x) if x >= 0 else mpmath.ceil(x), lambda x: 0, []),
}
def m_remainder(a, b):
    m = mpmath.fmod(a, b)  # exact: a - b floor(a / b) would need the quotient's every digit
    return m + b if m != 0 and (m < 0) != (b < 0) else m


# The exact binary functions and their partial derivatives (None: none).
EXACT2 = {
    "atan2": (mpmath.atan2, lambda a, b: b / (a * a + b * b), lambda a, b: -a / (a * a + b * b)),
    "fmod.Tensor": (mpmath.fmod, lambda a, b: 1,
                    lambda a, b: -(mpmath.floor(a / b) if a / b >= 0 else mpmath.ceil(a / b))),
    "remainder.Tensor": (lambda a, b: m_remainder(a, b), lambda a, b: 1,
                         lambda a, b: -mpmath.floor(a / b)),
}

def to_dtype(v, dtype):
    """An exact value rounded to the dtype (+-inf beyond its range), or None."""
    if v is None:
        return None
    return float(torch.tensor(float(v), dtype=dtype))


def exact_unary(key, xs, dtype):
    f, df, kinks = EXACT[key]
    ys, gs = [], []
    for x in xs:
        if not math.isfinite(x):
            ys.append(None)
            gs.append(None)
            continue
        xm = mpmath.mpf(x)
        ys.append(to_dtype(f(xm), dtype))
        gs.append(None if x in kinks else to_dtype(df(xm), dtype))
    return ys, [gs]


def exact_binary(name, as_, bs, dtype):
    f, da, db = EXACT2[name]
    ys, gas, gbs = [], [], []
    for a, b in zip(as_, bs):
        if not (math.isfinite(a) and math.isfinite(b)) or b == 0:
            ys.append(None)
            gas.append(None)
            gbs.append(None)
            continue
        am, bm = mpmath.mpf(a), mpmath.mpf(b)
        ys.append(to_dtype(f(am, bm), dtype))
        gas.append(to_dtype(da(am, bm), dtype))
        gbs.append(to_dtype(db(am, bm), dtype))
    return ys, [gas, gbs]

# (record name as ignis registers it, its scalar arguments, the torch function of (x[, other])).
UNARY = [
    ("elu", [], lambda x: F.elu(x)),
    ("elu", [0.5, 1.5, 2.0], lambda x: torch.ops.aten.elu(x, 0.5, 1.5, 2.0)),
    ("selu", [], torch.selu),
    ("celu", [0.7], lambda x: torch.celu(x, 0.7)),
    ("hardtanh", [], F.hardtanh),
    ("hardtanh", [-0.5, 2.0], lambda x: F.hardtanh(x, -0.5, 2.0)),
    ("relu6", [], F.relu6),
    ("hardswish", [], F.hardswish),
    ("hardsigmoid", [], F.hardsigmoid),
    ("mish", [], F.mish),
    ("log_sigmoid", [], F.logsigmoid),
    ("square", [], torch.square),
    ("trunc", [], torch.trunc),
]
BINARY = [
    ("atan2", torch.atan2),
    ("fmod.Tensor", torch.fmod),
    ("remainder.Tensor", torch.remainder),
]

UNARY_X = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 2.9999, 3.0001, -2.9999,
           -3.0001, 6.0, 5.999, 6.001, 1e-30, -1e-30, 1e-7, 10.0, -10.0, 20.0, -20.0, 40.0, -40.0,
           88.0, -88.0, 100.0, -100.0, 800.0, -800.0, 1e30, -1e30, math.inf, -math.inf, math.nan]
BINARY_A = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 7.0, -7.0, 1e30, -1e-30, math.inf, -math.inf,
            math.nan]
BINARY_B = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.3, 1e-30, math.inf, -math.inf, math.nan]


def fmt(v):
    if v is None:
        return "none"
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)


def row(values):
    return " ".join(fmt(None if v is None else float(v)) for v in values)


def run(fn, inputs, dtype):
    ts = [torch.tensor(v, dtype=dtype, requires_grad=True) for v in inputs]
    y = fn(*ts)
    grads = torch.autograd.grad(y.sum(), ts, allow_unused=True)
    grads = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, ts)]
    return [t.detach() for t in ts], y.detach(), [g.detach() for g in grads]


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "data", "pytorch_activation_cases.txt")
    lines = [
        "# PyTorch %s: op dtype | scalar args | x | other | y | grad x | grad other | exact y |"
        " exact grad x | exact grad other ('-': no such column)" % torch.__version__,
        "# written by tests/pytorch/gen_activation_cases.py; read by"
        " tests/test_pytorch_activation_parity.cpp",
    ]
    cases = [(name, args, fn, [UNARY_X]) for name, args, fn in UNARY]
    pairs_a = [a for a in BINARY_A for _ in BINARY_B]
    pairs_b = [b for _ in BINARY_A for b in BINARY_B]
    cases += [(name, [], fn, [pairs_a, pairs_b]) for name, fn in BINARY]
    for name, args, fn, inputs in cases:
        for dtype, dname in ((torch.float32, "float32"), (torch.float64, "float64")):
            xs, y, gs = run(fn, inputs, dtype)
            if len(xs) == 1:
                y64, gs64 = exact_unary((name, tuple(args)), xs[0].tolist(), dtype)
            else:
                y64, gs64 = exact_binary(name, xs[0].tolist(), xs[1].tolist(), dtype)
            other = row(xs[1].tolist()) if len(xs) > 1 else "-"
            gother = row(gs[1].tolist()) if len(gs) > 1 else "-"
            gother64 = row(gs64[1]) if len(gs64) > 1 else "-"
            cols = [" ".join(repr(a) for a in args) or "-", row(xs[0].tolist()), other,
                    row(y.tolist()), row(gs[0].tolist()), gother, row(y64),
                    row(gs64[0]), gother64]
            lines.append("%s %s | %s" % (name, dname, " | ".join(cols)))
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %d cases to %s" % (len(lines) - 2, out_path))


if __name__ == "__main__":
    main()
