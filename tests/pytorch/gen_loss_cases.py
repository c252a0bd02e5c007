#!/usr/bin/env python3
"""Reference values of the margin, hinge, triplet, cosine-embedding, Poisson/Gaussian NLL and CTC
losses from PyTorch, for test_loss_torch (which reads them without torch).

    /usr/bin/python3 tests/pytorch/gen_loss_cases.py   # writes tests/data/pytorch_loss_cases.txt

Each case is computed by torch in float64: the loss and the gradient of loss.sum() with respect
to every floating input. ignis runs the case in the dtype the case names (float32 cases compare
with the float64 values at float32 tolerances). Format, one case per block:

    case NAME
    op OP                      (the nn.functional name)
    dtype float32|float64      (ignis's dtype)
    param KEY VALUE            (options; values are numbers, true/false or words)
    input NAME DTYPE RANK DIMS... VALUES...
    output RANK DIMS... VALUES...
    grad NAME VALUES...
    end
"""
import math
import os

import torch
import torch.nn.functional as F

torch.manual_seed(1234)
f64 = torch.float64
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "pytorch_loss_cases.txt")


def fmt(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x)) if isinstance(x, float) else str(x)


def tensor_line(t):
    dims = list(t.shape)
    vals = t.detach().reshape(-1).tolist()
    return " ".join([str(len(dims))] + [str(d) for d in dims] + [fmt(v) for v in vals])


lines = []


def case(name, op, inputs, params, fn, dtype="float64", nograd=("target",)):
    """inputs: list of (name, tensor); floating ones not in nograd are differentiated."""
    leaves = []
    for n, t in inputs:
        if t.is_floating_point():
            t = t.detach().to(f64).requires_grad_(n not in nograd)
        leaves.append((n, t))
    out = fn(*[t for _, t in leaves], **params)
    diff = [(n, t) for n, t in leaves if t.requires_grad]
    grads = torch.autograd.grad(out.sum(), [t for _, t in diff], allow_unused=True)
    lines.append(f"case {name}")
    lines.append(f"op {op}")
    lines.append(f"dtype {dtype}")
    for k, v in params.items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, (tuple, list)):
            v = ",".join(str(e) for e in v)
        lines.append(f"param {k} {v}")
    for n, t in leaves:
        dt = "float64" if t.is_floating_point() else "int64"
        lines.append(f"input {n} {dt} {tensor_line(t)}")
    lines.append(f"output {tensor_line(out)}")
    for (n, t), g in zip(diff, grads):
        if g is None:
            g = torch.zeros_like(t)
        lines.append(f"grad {n} " + " ".join(fmt(v) for v in g.reshape(-1).tolist()))
    lines.append("end")


def rn(*shape, scale=1.0):
    return torch.randn(*shape, dtype=f64) * scale


def signs(*shape):
    return torch.randint(0, 2, shape).to(f64) * 2 - 1


R = ["none", "mean", "sum"]

# ---- margin_ranking_loss
for r in R:
    case(f"margin_ranking_{r}", "margin_ranking_loss",
         [("input1", rn(6)), ("input2", rn(6)), ("target", signs(6))],
         {"margin": 0.3, "reduction": r}, F.margin_ranking_loss)
case("margin_ranking_broadcast", "margin_ranking_loss",
     [("input1", rn(3, 1)), ("input2", rn(1, 4)), ("target", signs(3, 4))],
     {"margin": 0.1, "reduction": "none"}, F.margin_ranking_loss)

# ---- multi_margin_loss
for r in R:
    case(f"multi_margin_{r}", "multi_margin_loss",
         [("input", rn(4, 5)), ("target", torch.tensor([0, 4, 2, 2]))],
         {"p": 1, "margin": 1.0, "reduction": r}, F.multi_margin_loss)
case("multi_margin_p2_weight", "multi_margin_loss",
     [("input", rn(4, 5)), ("target", torch.tensor([1, 3, 0, 4])), ("weight", rn(5).abs() + 0.5)],
     {"p": 2, "margin": 0.7, "reduction": "mean"},
     lambda x, t, w, **k: F.multi_margin_loss(x, t, weight=w, **k), nograd=("target", "weight"))
case("multi_margin_1d", "multi_margin_loss",
     [("input", rn(5)), ("target", torch.tensor(3))],
     {"p": 1, "margin": 1.0, "reduction": "none"}, F.multi_margin_loss)

# ---- multilabel_margin_loss (rows end at the first -1; a row without targets; a full row)
ml_target = torch.tensor([[3, 0, -1, 1, 2], [1, 4, 2, 0, 3], [-1, 1, 2, 0, 0], [2, 2, -1, 0, 0]])
for r in R:
    case(f"multilabel_margin_{r}", "multilabel_margin_loss",
         [("input", rn(4, 5)), ("target", ml_target)], {"reduction": r},
         F.multilabel_margin_loss)
case("multilabel_margin_1d", "multilabel_margin_loss",
     [("input", rn(4)), ("target", torch.tensor([2, 0, -1, 3]))], {"reduction": "none"},
     F.multilabel_margin_loss)

# ---- soft_margin_loss (large |input|: float64 exp does not overflow at 60)
for r in R:
    case(f"soft_margin_{r}", "soft_margin_loss", [("input", rn(3, 4)), ("target", signs(3, 4))],
         {"reduction": r}, F.soft_margin_loss)
case("soft_margin_large", "soft_margin_loss",
     [("input", torch.tensor([60.0, -60.0, 60.0, -60.0, 30.0, 1e-3], dtype=f64)),
      ("target", torch.tensor([-1.0, 1.0, 1.0, -1.0, -1.0, 1.0], dtype=f64))],
     {"reduction": "none"}, F.soft_margin_loss)
# torch's float32 log1p(exp(100)) is inf; ignis's float32 stays finite (the float64 values).
case("soft_margin_large_float32", "soft_margin_loss",
     [("input", torch.tensor([100.0, -100.0, 60.0, 0.5], dtype=f64)),
      ("target", torch.tensor([-1.0, 1.0, 1.0, -1.0], dtype=f64))],
     {"reduction": "none"}, F.soft_margin_loss, dtype="float32")

# ---- multilabel_soft_margin_loss
for r in R:
    case(f"multilabel_soft_margin_{r}", "multilabel_soft_margin_loss",
         [("input", rn(3, 5)), ("target", torch.randint(0, 2, (3, 5)).to(f64))],
         {"reduction": r}, F.multilabel_soft_margin_loss)
case("multilabel_soft_margin_weight_large", "multilabel_soft_margin_loss",
     [("input", torch.tensor([[50.0, -50.0, 0.3], [-40.0, 45.0, -0.2]], dtype=f64)),
      ("target", torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]], dtype=f64)),
      ("weight", torch.tensor([0.5, 2.0, 1.5], dtype=f64))],
     {"reduction": "none"}, lambda x, t, w, **k: F.multilabel_soft_margin_loss(x, t, weight=w, **k))

# ---- hinge_embedding_loss (a target 0 gets both of PyTorch's terms)
for r in R:
    case(f"hinge_embedding_{r}", "hinge_embedding_loss",
         [("input", rn(2, 5)), ("target", torch.tensor([[1.0, -1, -1, 1, 0], [-1, -1, 1, 1, -1]], dtype=f64))],
         {"margin": 1.5, "reduction": r}, F.hinge_embedding_loss)

# ---- triplet_margin_loss
for r in R:
    case(f"triplet_margin_{r}", "triplet_margin_loss",
         [("anchor", rn(4, 6)), ("positive", rn(4, 6)), ("negative", rn(4, 6))],
         {"margin": 1.0, "p": 2.0, "eps": 1e-6, "swap": False, "reduction": r},
         F.triplet_margin_loss)
case("triplet_margin_p1_swap", "triplet_margin_loss",
     [("anchor", rn(5, 3)), ("positive", rn(5, 3)), ("negative", rn(5, 3))],
     {"margin": 2.0, "p": 1.0, "eps": 1e-3, "swap": True, "reduction": "none"},
     F.triplet_margin_loss)
case("triplet_margin_p3_1d", "triplet_margin_loss",
     [("anchor", rn(4)), ("positive", rn(4)), ("negative", rn(4))],
     {"margin": 3.0, "p": 3.0, "eps": 1e-6, "swap": True, "reduction": "none"},
     F.triplet_margin_loss)

# ---- cosine_embedding_loss
for r in R:
    case(f"cosine_embedding_{r}", "cosine_embedding_loss",
         [("input1", rn(5, 3)), ("input2", rn(5, 3)), ("target", torch.tensor([1, -1, -1, 1, -1]))],
         {"margin": 0.1, "reduction": r}, F.cosine_embedding_loss)
case("cosine_embedding_1d", "cosine_embedding_loss",
     [("input1", rn(4)), ("input2", rn(4)), ("target", torch.tensor(-1))],
     {"margin": -0.5, "reduction": "none"}, F.cosine_embedding_loss)

# ---- poisson_nll_loss (targets 0, 1, fractional and > 1 for Stirling's term)
p_target = torch.tensor([[0.0, 1.0, 0.5, 3.0], [10.0, 2.0, 1.5, 0.0]], dtype=f64)
for log_input in (True, False):
    for full in (False, True):
        for r in R:
            x = rn(2, 4) if log_input else torch.rand(2, 4, dtype=f64) * 3 + 0.1
            case(f"poisson_nll_{'log' if log_input else 'lin'}_{'full' if full else 'part'}_{r}",
                 "poisson_nll_loss", [("input", x), ("target", p_target.clone())],
                 {"log_input": log_input, "full": full, "eps": 1e-8, "reduction": r},
                 F.poisson_nll_loss)

# ---- gaussian_nll_loss (var of input's shape, one dim short, last dim 1; clamped entries)
for r in R:
    case(f"gaussian_nll_{r}", "gaussian_nll_loss",
         [("input", rn(3, 4)), ("target", rn(3, 4)), ("var", torch.rand(3, 4, dtype=f64) + 0.1)],
         {"full": False, "eps": 1e-6, "reduction": r}, F.gaussian_nll_loss)
case("gaussian_nll_full_short_var", "gaussian_nll_loss",
     [("input", rn(3, 4)), ("target", rn(3, 4)), ("var", torch.rand(3, dtype=f64) + 0.1)],
     {"full": True, "eps": 1e-6, "reduction": "none"}, F.gaussian_nll_loss)
case("gaussian_nll_var_last_1", "gaussian_nll_loss",
     [("input", rn(2, 3, 2)), ("target", rn(2, 3, 2)), ("var", torch.rand(2, 3, 1, dtype=f64) + 0.1)],
     {"full": False, "eps": 1e-6, "reduction": "sum"}, F.gaussian_nll_loss)
case("gaussian_nll_clamp", "gaussian_nll_loss",
     [("input", torch.tensor([0.3, 0.1, -0.2, 1.0], dtype=f64)),
      ("target", torch.tensor([0.0, 0.1, 0.3, 0.5], dtype=f64)),
      ("var", torch.tensor([1e-9, 0.0, 0.02, 2.0], dtype=f64))],
     {"full": False, "eps": 1e-2, "reduction": "none"}, F.gaussian_nll_loss)
case("gaussian_nll_target_broadcast", "gaussian_nll_loss",
     [("input", rn(2, 3)), ("target", rn(3)), ("var", torch.rand(2, 3, dtype=f64) + 0.5)],
     {"full": False, "eps": 1e-6, "reduction": "mean"}, F.gaussian_nll_loss)


# ---- ctc_loss: log_probs are the leaves (log_softmax outputs, as in training)
def ctc_case(name, T, N, C, targets, il, tl, dtype="float64", **params):
    lp = torch.randn(T, N, C, dtype=f64).log_softmax(-1) if N else None
    if N == 0:  # unbatched
        lp = torch.randn(T, C, dtype=f64).log_softmax(-1)
    case(name, "ctc_loss",
         [("log_probs", lp), ("targets", targets), ("input_lengths", torch.tensor(il)),
          ("target_lengths", torch.tensor(tl))],
         params, F.ctc_loss, dtype=dtype)


for r in R:
    ctc_case(f"ctc_padded_{r}", 6, 3, 5, torch.tensor([[1, 2, 3], [4, 4, 0], [2, 0, 0]]),
             [6, 5, 4], [3, 2, 1], blank=0, reduction=r, zero_infinity=False)
ctc_case("ctc_concatenated", 7, 3, 4, torch.tensor([1, 2, 2, 3, 1, 3, 3]), [7, 7, 6], [3, 1, 3],
         blank=0, reduction="mean", zero_infinity=False)
ctc_case("ctc_repeated_labels", 5, 2, 3, torch.tensor([[1, 1, 1], [2, 2, 0]]), [5, 3], [3, 2],
         blank=0, reduction="none", zero_infinity=False)
# "1 1 1" needs 5 frames; in 4 it is impossible: inf, NaN gradients (as torch) or zeros.
ctc_case("ctc_impossible", 4, 2, 3, torch.tensor([[1, 1, 1], [2, 1, 0]]), [4, 4], [3, 2],
         blank=0, reduction="none", zero_infinity=False)
ctc_case("ctc_impossible_zero_infinity", 4, 2, 3, torch.tensor([[1, 1, 1], [2, 1, 0]]), [4, 4],
         [3, 2], blank=0, reduction="mean", zero_infinity=True)
ctc_case("ctc_target_longer_zero_infinity", 3, 2, 4, torch.tensor([[1, 2, 3, 1], [3, 2, 0, 0]]),
         [3, 2], [4, 2], blank=0, reduction="sum", zero_infinity=True)
ctc_case("ctc_empty_targets", 5, 3, 4, torch.tensor([[1, 2], [0, 0], [3, 0]]), [5, 4, 5],
         [2, 0, 1], blank=0, reduction="mean", zero_infinity=False)
ctc_case("ctc_blank_last", 6, 2, 5, torch.tensor([[0, 1, 3], [2, 2, 1]]), [6, 6], [3, 3],
         blank=4, reduction="sum", zero_infinity=False)
ctc_case("ctc_unbatched", 6, 0, 4, torch.tensor([3, 1, 1]), 6, 3, blank=0, reduction="none",
         zero_infinity=False)
ctc_case("ctc_long_float32", 40, 3, 10, torch.randint(1, 10, (3, 12)), [40, 35, 30],
         [12, 10, 12], dtype="float32", blank=0, reduction="mean", zero_infinity=False)
ctc_case("ctc_long_float64", 60, 2, 12, torch.randint(1, 12, (2, 20)), [60, 50], [20, 18],
         blank=0, reduction="none", zero_infinity=False)

with open(OUT, "w") as f:
    f.write("# Generated by tests/pytorch/gen_loss_cases.py with torch " + torch.__version__ + "\n")
    f.write("\n".join(lines) + "\n")
print("wrote", OUT, sum(1 for l in lines if l.startswith("case ")), "cases")
