#!/usr/bin/env python3
"""Records PyTorch's values of the nn ops of ignis/nn_ops.h (and pad's modes, interpolate's
bicubic / area / nearest-exact, avg_pool2d's divisor_override, embedding's max_norm).

Writes tests/data/pytorch_nn_extra_cases.txt, which tests/test_nn_extra_torch.cpp reads. Each case
is float64: the op's name, its parameters, its inputs, PyTorch's outputs and the gradients of
sum(out * w) with respect to the floating inputs, where w[k] = sin(k + 1) over out's elements in
row-major order (the test builds the same w). The edges: reflect padding at its maximum width,
circular at the full size, bicubic at the borders (both align_corners), fold with overlapping
blocks and stride / dilation / padding, normalize of a zero vector, cosine_similarity below eps,
pooling with ceil_mode and padding, batch of 1, odd sizes, non-contiguous inputs (the test lays
them out transposed where a case says so).

Run with torch installed:  /usr/bin/python3 tests/pytorch/gen_nn_extra_cases.py
"""
import math
import os

import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
CASES = []


def rnd(*shape):
    return torch.randn(*shape)


def weights(n):
    return torch.tensor([math.sin(k + 1) for k in range(n)])


def case(op, params, inputs, fn, grad=True, extra_out=None):
    """fn(*inputs) -> tensor or tuple; grads of the first output (floating inputs only)."""
    ins = [t.clone().requires_grad_(grad and t.is_floating_point()) for t in inputs]
    out = fn(*ins)
    outs = list(out) if isinstance(out, tuple) else [out]
    grads = []
    if grad:
        w = weights(outs[0].numel()).reshape(outs[0].shape)
        gs = torch.autograd.grad((outs[0] * w).sum(), [t for t in ins if t.requires_grad],
                                 allow_unused=True)
        grads = [g if g is not None else torch.zeros_like(t)
                 for g, t in zip(gs, [t for t in ins if t.requires_grad])]
    if extra_out is not None:
        outs += extra_out(ins)
    CASES.append((op, params, [t.detach() for t in inputs], [o.detach() for o in outs],
                  [g.detach() for g in grads]))


def conv3d_cases():
    for n, c, o, size, k, s, p, d, g in [
        (2, 3, 4, (5, 6, 7), (3, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1), 1),
        (1, 4, 6, (5, 4, 6), (2, 3, 1), (2, 1, 2), (1, 1, 0), (1, 1, 1), 2),
        (2, 2, 2, (7, 5, 5), (3, 2, 2), (2, 2, 1), (2, 0, 1), (2, 1, 2), 1),
        (1, 1, 3, (3, 3, 3), (1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 1, 1), 1),
    ]:
        x, w, b = rnd(n, c, *size), rnd(o, c // g, *k), rnd(o)
        case("conv3d", {"stride": s, "padding": p, "dilation": d, "groups": [g]}, [x, w, b],
             lambda x, w, b: F.conv3d(x, w, b, s, p, d, g))


def conv_transpose1d_cases():
    for n, c, o, l, k, s, p, op, g, d in [
        (2, 3, 2, 5, 3, 1, 0, 0, 1, 1),
        (1, 4, 6, 6, 4, 2, 1, 1, 2, 1),
        (2, 2, 4, 7, 3, 3, 2, 1, 1, 2),
    ]:
        x, w, b = rnd(n, c, l), rnd(c, o // g, k), rnd(o)
        case("conv_transpose1d", {"stride": [s], "padding": [p], "output_padding": [op],
                                  "groups": [g], "dilation": [d]}, [x, w, b],
             lambda x, w, b: F.conv_transpose1d(x, w, b, s, p, op, g, d))


def pool_cases():
    for shape, k, s, p, d, ceil in [
        ((2, 3, 9), 3, 2, 1, 1, False), ((1, 2, 10), 4, 3, 2, 2, True), ((2, 1, 7), 2, 2, 0, 1, True),
    ]:
        x = rnd(*shape)
        case("max_pool1d", {"kernel": [k], "stride": [s], "padding": [p], "dilation": [d],
                            "ceil_mode": [int(ceil)]}, [x],
             lambda x: F.max_pool1d(x, k, s, p, d, ceil, return_indices=True))
        case("avg_pool1d", {"kernel": [k], "stride": [s], "padding": [p], "ceil_mode": [int(ceil)],
                            "count_include_pad": [int(p == 1)]}, [x],
             lambda x: F.avg_pool1d(x, k, s, p, ceil, p == 1))
    for shape, k, s, p, d, ceil in [
        ((2, 2, 5, 6, 7), (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), False),
        ((1, 3, 6, 5, 4), (2, 3, 2), (1, 2, 2), (1, 0, 1), (2, 1, 1), True),
        ((1, 1, 4, 4, 4), (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False),
    ]:
        x = rnd(*shape)
        case("max_pool3d", {"kernel": k, "stride": s, "padding": p, "dilation": d,
                            "ceil_mode": [int(ceil)]}, [x],
             lambda x: F.max_pool3d(x, k, s, p, d, ceil, return_indices=True))
        for cip, div in [(True, None), (False, None), (True, 5)]:
            params = {"kernel": k, "stride": s, "padding": p, "ceil_mode": [int(ceil)],
                      "count_include_pad": [int(cip)]}
            if div is not None:
                params["divisor_override"] = [div]
            case("avg_pool3d", params, [x],
                 lambda x: F.avg_pool3d(x, k, s, p, ceil, cip, div))
    for shape, k, s, p, ceil, div in [((2, 3, 7, 6), (3, 2), (2, 2), (1, 1), True, 4),
                                      ((1, 1, 5, 5), (2, 2), (1, 1), (0, 0), False, 3)]:
        x = rnd(*shape)
        case("avg_pool2d", {"kernel": k, "stride": s, "padding": p, "ceil_mode": [int(ceil)],
                            "divisor_override": [div]}, [x],
             lambda x: F.avg_pool2d(x, k, s, p, ceil, True, div))


def norm_cases():
    for shape in [(2, 3, 5), (1, 2, 4, 3), (2, 2, 3, 2, 3)]:
        c = shape[1]
        x, w, b = rnd(*shape) * 2 + 1, rnd(c), rnd(c)
        rm, rv = rnd(c), rnd(c).abs() + 0.5

        def fn(x, w, b, rm=rm.clone(), rv=rv.clone()):
            return F.instance_norm(x, rm, rv, w, b, True, 0.2, 1e-5)

        rm2, rv2 = rm.clone(), rv.clone()
        F.instance_norm(x.detach(), rm2, rv2, w.detach(), b.detach(), True, 0.2, 1e-5)
        case("instance_norm", {"use_input_stats": [1], "momentum": [0.2], "eps": [1e-5]},
             [x, w, b, rm, rv], lambda x, w, b, rm_, rv_: fn(x, w, b),
             extra_out=lambda ins: [rm2, rv2])
        case("instance_norm", {"use_input_stats": [0], "momentum": [0.2], "eps": [1e-5]},
             [x, w, b, rm, rv],
             lambda x, w, b, rm_, rv_: F.instance_norm(x, rm_.detach(), rv_.detach(), w, b, False,
                                                       0.2, 1e-5))
    x = rnd(3, 4, 5)
    x[1, :, 2] = 0  # a zero vector along dim 1
    for p, dim in [(2.0, 1), (1.0, 1), (3.0, -1), (2.0, 0)]:
        case("normalize", {"p": [p], "dim": [dim], "eps": [1e-12]}, [x],
             lambda x: F.normalize(x, p, dim, 1e-12))
    case("normalize", {"p": [2.0], "dim": [1], "eps": [0.5]}, [rnd(2, 3) * 0.1],
         lambda x: F.normalize(x, 2.0, 1, 0.5))
    for s1, s2, dim, eps in [((4, 5), (4, 5), 1, 1e-8), ((3, 1, 6), (1, 4, 6), -1, 1e-8),
                             ((2, 3, 4), (2, 3, 4), 0, 1e-8)]:
        case("cosine_similarity", {"dim": [dim], "eps": [eps]}, [rnd(*s1), rnd(*s2)],
             lambda a, b: F.cosine_similarity(a, b, dim, eps))
    # below eps: forward only (PyTorch clamps the norms in place, outside autograd)
    case("cosine_similarity", {"dim": [1], "eps": [0.5]}, [rnd(3, 2) * 0.1, rnd(3, 2)],
         lambda a, b: F.cosine_similarity(a, b, 1, 0.5), grad=False)
    for s1, s2, p, eps, keep in [((4, 5), (4, 5), 2.0, 1e-6, False), ((3, 6), (1, 6), 1.0, 1e-6, True),
                                 ((2, 3, 4), (2, 3, 4), 3.0, 1e-3, False), ((5,), (5,), 2.0, 1e-6, False)]:
        case("pairwise_distance", {"p": [p], "eps": [eps], "keepdim": [int(keep)]},
             [rnd(*s1), rnd(*s2)], lambda a, b: F.pairwise_distance(a, b, p, eps, keep))


def shuffle_fold_cases():
    for shape, r in [((2, 8, 3, 5), 2), ((1, 9, 2, 2), 3), ((2, 2, 4, 3, 2), 1), ((18, 3, 1), 3)]:
        case("pixel_shuffle", {"factor": [r]}, [rnd(*shape)], lambda x: F.pixel_shuffle(x, r))
    for shape, r in [((2, 2, 6, 4), 2), ((1, 1, 9, 3), 3), ((3, 4, 2), 2)]:
        case("pixel_unshuffle", {"factor": [r]}, [rnd(*shape)], lambda x: F.pixel_unshuffle(x, r))
    for shape, k, d, p, s in [((2, 3, 5, 6), (2, 3), (1, 1), (0, 0), (1, 1)),
                              ((1, 2, 7, 7), (3, 3), (2, 1), (1, 2), (2, 3)),
                              ((3, 5, 4), (2, 2), (1, 1), (1, 1), (1, 1))]:
        case("unfold", {"kernel": k, "dilation": d, "padding": p, "stride": s}, [rnd(*shape)],
             lambda x: F.unfold(x, k, d, p, s))
    for n, c, out, k, d, p, s in [(2, 3, (4, 5), (2, 2), (1, 1), (0, 0), (1, 1)),
                                  (1, 2, (7, 6), (3, 2), (2, 1), (1, 1), (2, 2)),
                                  (0, 1, (3, 3), (2, 2), (1, 1), (0, 0), (1, 1))]:
        lh = (out[0] + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
        lw = (out[1] + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
        shape = (c * k[0] * k[1], lh * lw) if n == 0 else (n, c * k[0] * k[1], lh * lw)
        case("fold", {"output_size": out, "kernel": k, "dilation": d, "padding": p, "stride": s},
             [rnd(*shape)], lambda x: F.fold(x, out, k, d, p, s))


def pad_cases():
    for shape, pad, mode in [
        ((2, 3, 5), (4, 4), "reflect"), ((1, 2, 4, 5), (4, 3, 3, 1), "reflect"),
        ((1, 1, 3, 4, 5), (1, 2, 2, 0, 1, 1), "reflect"),
        ((2, 3, 5), (5, 5), "circular"), ((1, 2, 4, 5), (5, 2, 4, 1), "circular"),
        ((1, 2, 3, 3, 4), (1, 2, 3, 0, 1, 1), "circular"),
        ((2, 3, 5), (3, 6), "replicate"), ((1, 2, 4, 5), (2, 3, 0, 4), "replicate"),
        ((1, 1, 2, 3, 4), (2, 1, 0, 2, 1, 1), "replicate"),
    ]:
        case("pad", {"pad": pad, "mode": mode}, [rnd(*shape)], lambda x: F.pad(x, pad, mode))


def interpolate_cases():
    x = rnd(2, 3, 5, 6)
    for size, sf, ac in [((9, 11), None, False), ((9, 11), None, True), ((3, 4), None, False),
                         ((3, 4), None, True), (None, (2.0, 1.5), False), (None, (0.6, 1.7), True),
                         ((1, 1), None, False), ((1, 7), None, True)]:
        params = {"mode": "bicubic", "align_corners": [int(ac)]}
        if size:
            params["size"] = size
        else:
            params["scale_factor"] = sf
        case("interpolate", params, [x],
             lambda x: F.interpolate(x, size=size, scale_factor=sf, mode="bicubic",
                                     align_corners=ac))
    for xs, size, sf in [((2, 3, 7, 9), (3, 4), None), ((1, 2, 5, 5), (7, 8), None),
                         ((2, 2, 10), (4,), None), ((1, 2, 6, 9), None, (0.5, 0.34))]:
        xx = rnd(*xs)
        for mode in ["area", "nearest-exact"]:
            params = {"mode": mode}
            if size:
                params["size"] = size
            else:
                params["scale_factor"] = sf
            case("interpolate", params, [xx],
                 lambda x: F.interpolate(x, size=size, scale_factor=sf, mode=mode))


def embedding_cases():
    for max_norm, norm_type in [(1.0, 2.0), (0.5, 1.0), (10.0, 2.0)]:
        w = rnd(6, 4)
        idx = torch.tensor([[0, 2, 2], [5, 0, 3]])
        w2 = w.clone()
        out = F.embedding(idx, w2, max_norm=max_norm, norm_type=norm_type)
        CASES.append(("embedding", {"max_norm": [max_norm], "norm_type": [norm_type]}, [w, idx],
                      [out, w2], []))


def fmt(v):
    return repr(float(v))


def write(path):
    with open(path, "w") as f:
        f.write("# generated by tests/pytorch/gen_nn_extra_cases.py with torch %s; do not edit\n"
                % torch.__version__)
        for op, params, ins, outs, grads in CASES:
            f.write("case %s\n" % op)
            for k, v in params.items():
                if isinstance(v, str):
                    f.write("param %s %s\n" % (k, v))
                else:
                    f.write("param %s %s\n" % (k, " ".join(fmt(e) for e in v)))
            for tag, ts in (("input", ins), ("output", outs), ("grad", grads)):
                for t in ts:
                    t = t.contiguous()
                    kind = "int" if not t.is_floating_point() else "float"
                    f.write("%s %s %d %s : %s\n" % (
                        tag, kind, t.dim(), " ".join(str(s) for s in t.shape),
                        " ".join(fmt(e) for e in t.reshape(-1).tolist())))
            f.write("end\n")


conv3d_cases()
conv_transpose1d_cases()
pool_cases()
norm_cases()
shuffle_fold_cases()
pad_cases()
interpolate_cases()
embedding_cases()
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                   "pytorch_nn_extra_cases.txt")
write(out)
print("wrote %d cases to %s" % (len(CASES), os.path.normpath(out)))
