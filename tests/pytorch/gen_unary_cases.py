#!/usr/bin/env python3
"""Records PyTorch's values of the floating unary ops (ignis/float_unary_ops.def) at edge inputs.

Writes tests/data/pytorch_unary_cases.txt, which tests/test_pytorch_parity.cpp reads: for each
op and dtype (float32, float64), the inputs, torch's outputs and torch's gradients of sum(op(x)),
and the exact values and derivatives (mpmath at 50 digits, rounded to the dtype; "none" where
mpmath has no answer) -- torch itself is off by more than a few ulp in places (erfinv near 1).
The inputs are the values where implementations part ways: signed zeros, the domain's edges and
just outside them, tiny and huge magnitudes, +-inf and NaN.

Run with Debian's python3-torch:  /usr/bin/python3 tests/pytorch/gen_unary_cases.py
"""
import math
import os
import sys

import mpmath
import torch

mpmath.mp.dps = 50
EXACT = {
    "exp": mpmath.exp, "exp2": lambda x: mpmath.power(2, x), "expm1": mpmath.expm1,
    "log": mpmath.log, "log2": lambda x: mpmath.log(x, 2), "log10": mpmath.log10,
    "log1p": mpmath.log1p, "sqrt": mpmath.sqrt, "rsqrt": lambda x: 1 / mpmath.sqrt(x),
    "reciprocal": lambda x: 1 / x, "sin": mpmath.sin, "cos": mpmath.cos, "tan": mpmath.tan,
    "asin": mpmath.asin, "acos": mpmath.acos, "atan": mpmath.atan, "sinh": mpmath.sinh,
    "cosh": mpmath.cosh, "tanh": mpmath.tanh, "asinh": mpmath.asinh, "acosh": mpmath.acosh,
    "atanh": mpmath.atanh, "sigmoid": lambda x: 1 / (1 + mpmath.exp(-x)), "erf": mpmath.erf,
    "erfc": mpmath.erfc, "erfinv": mpmath.erfinv,
}


def exact(op, x, deriv):
    """The exact value (or derivative) at a finite x inside the real domain, else None."""
    if not math.isfinite(x):
        return None
    try:
        f = EXACT[op]
        v = mpmath.diff(f, mpmath.mpf(x)) if deriv else f(mpmath.mpf(x))
        if isinstance(v, mpmath.mpc) or not mpmath.isfinite(v):
            return None
        return float(v)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None

OPS = [
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
    "atanh", "sigmoid", "erf", "erfc", "erfinv",
]

# Shared edge values, then each op's own (its domain's edges and its overflow points).
COMMON = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 1e-30, -1e-30, 1e-7, 3.0, -3.0, 10.0,
          -10.0, math.inf, -math.inf, math.nan]
EXTRA = {
    "exp": [88.0, 89.0, -87.0, -104.0, 709.0, 710.0, -745.0],
    "exp2": [127.0, 128.0, -126.0, -150.0, 1023.0, 1024.0],
    "expm1": [1e-10, -1e-10, 88.0, 89.0, -20.0],
    "log": [1e-38, 1e-45, 1e308, 1e-320],
    "log2": [0.25, 1024.0, 1e-38],
    "log10": [1000.0, 1e-5],
    "log1p": [-0.999999, -1.5, 1e-10, 1e30],
    "sqrt": [1e-38, 1e30, 4.0],
    "rsqrt": [1e-38, 4.0, 1e30],
    "reciprocal": [1e-38, 1e38, 1e-310],
    "sin": [1e5, 1e10, 3.14159265358979],
    "cos": [1e5, 1e10, 1.5707963267949],
    "tan": [1.5707963, 1e5],
    "asin": [0.999999, 1.000001, -1.000001],
    "acos": [0.999999, 1.000001, -1.000001],
    "atan": [1e30, -1e30],
    "sinh": [89.0, 90.0, 710.0, 711.0],
    "cosh": [89.0, 90.0, 710.0, 711.0],
    "tanh": [20.0, -20.0, 1e-10],
    "asinh": [1e30, -1e30, 1e-10],
    "acosh": [1.000001, 0.999999, 1e30],
    "atanh": [0.999999, -0.999999, 1.000001],
    "sigmoid": [-88.0, -100.0, 88.0, 40.0, -40.0],
    "erf": [5.0, -5.0, 1e-10],
    "erfc": [5.0, 10.0, 27.0, -5.0],
    "erfinv": [0.999999, -0.999999, 1.000001, 1e-10, 0.9999999999],
}


def fmt(v):
    if v is None:
        return "none"
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "data", "pytorch_unary_cases.txt")
    lines = [
        "# PyTorch %s: op dtype | inputs | outputs | gradients of sum(op(x)) | exact outputs |"
        " exact gradients" % torch.__version__,
        "# written by tests/pytorch/gen_unary_cases.py; read by tests/test_pytorch_parity.cpp",
    ]
    for op in OPS:
        for dtype, name in ((torch.float32, "float32"), (torch.float64, "float64")):
            xs = COMMON + EXTRA.get(op, [])
            x = torch.tensor(xs, dtype=dtype, requires_grad=True)
            y = getattr(torch, op)(x)
            (g,) = torch.autograd.grad(y.sum(), x)
            cols = [" ".join(fmt(float(v)) for v in t.detach().tolist()) for t in (x, y, g)]
            xr = x.detach().tolist()
            for deriv in (False, True):
                vals = [exact(op, v, deriv) for v in xr]
                # rounded to the dtype (float32 overflow becomes inf: keep None there)
                rounded = []
                for v in vals:
                    r = None if v is None else float(torch.tensor(v, dtype=dtype))
                    rounded.append(r if r is None or math.isfinite(r) else None)
                cols.append(" ".join(fmt(v) for v in rounded))
            lines.append("%s %s | %s" % (op, name, " | ".join(cols)))
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %d cases to %s" % (len(lines) - 2, out_path))


if __name__ == "__main__":
    main()
