#!/usr/bin/env python3
"""Differential check of ignis's ops against PyTorch.

tests/op_table_dump writes every registry call that the op table's samples make (their
arguments, results and, in float64, the gradients of sum(out * w)), each also replayed with
edge values (NaN, +-inf, +-0, domain edges, large magnitudes). This script replays every call in
PyTorch through torch.ops.aten.<op>.<overload> -- ignis's records carry PyTorch's schemas -- and
compares results, dtypes and gradients.

    python3 tests/pytorch/diffcheck.py --dump build/tests/op_table_dump [--out DIR] [--entry S]

Prints a table per op and writes DIR/report.md and DIR/mismatches.jsonl. Differences that are
understood are listed, with the reason, in tests/pytorch/diffcheck_known.txt; the exit status is
1 when any other difference is found, 77 (skip) when torch cannot be imported.
Run it before resolving op work (Debian: apt-get install python3-torch).
"""
import argparse
import collections
import json
import math
import os
import re
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("diffcheck: skipped: python3 cannot import torch (Debian: python3-torch)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {
    "bool": torch.bool, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64,
    "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
TOL = {torch.float32: (1e-5, 1e-4), torch.float64: (1e-9, 1e-7), torch.bfloat16: (2e-2, 2e-2)}
# Calls an entry makes to prepare its inputs (casts, copies): checked by their own entries.
PREPARATION = {"to.dtype", "to.dtype_layout", "to.device", "contiguous", "clone",
               "contiguous.memory_format"}


def tensor(v):
    if v is None:
        return None
    dt = DTYPES[v["dtype"]]
    if dt.is_floating_point:
        t = torch.tensor(v["data"], dtype=torch.float64)
    else:
        t = torch.tensor(v["data"], dtype=torch.int64)
    return t.to(dt).reshape(v["shape"])


def value(v):
    if isinstance(v, dict):
        kind = v["t"]
        if kind == "tensor":
            return tensor(v)
        if kind == "tensors":
            return [tensor(x) for x in v["v"]]
        if kind == "dtype":
            return DTYPES[v["v"]]
        if kind == "device":
            return torch.device(v["v"])
        if kind == "memory_format":
            return torch.channels_last if v["v"] == "channels_last" else torch.contiguous_format
        if kind == "options":
            return v  # expanded into dtype=/device= by build_call
    return v


class SchemaDiffers(Exception):
    pass


def aten_overload(full_name):
    base, _, overload = full_name.partition(".")
    try:
        packet = getattr(torch.ops.aten, base)
        return getattr(packet, overload or "default")
    except (AttributeError, RuntimeError):
        return None


REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}  # ignis's str reduction, aten's int (at::Reduction)
# Arguments aten wants that ignis's schema leaves out, and the value that means ignis's behaviour.
FILL = {"cudnn_enabled": False}


def resolve(full_name, call, values):
    """The aten overload to replay `call` with: the one of the same name, else the first overload
    of the op that takes ignis's arguments (ignis folds some of aten's overloads into one)."""
    base, _, overload = full_name.partition(".")
    first = aten_overload(full_name)
    candidates = [first] if first is not None else []
    try:
        packet = getattr(torch.ops.aten, base)
        candidates += [getattr(packet, o) for o in packet.overloads() if o != (overload or "default")]
    except (AttributeError, RuntimeError):
        pass
    if not candidates:
        return None, None
    error = None
    for op in candidates:
        try:
            return op, build_call(op, call, values)
        except SchemaDiffers as e:
            error = error or e
    raise error


def build_call(op, call, values):
    """Positional arguments in aten's order, keyword-only ones by name."""
    given = dict(zip(call["names"], values))
    for arg in op._schema.arguments:
        if isinstance(given.get(arg.name), str) and str(arg.type) == "int":
            given[arg.name] = REDUCTIONS.get(given[arg.name], given[arg.name])
        if given.get(arg.name) == [] and str(arg.type) == "Optional[List[int]]":
            given[arg.name] = None  # ignis's dim=[] (every dim) is aten's dim=None
        if arg.name not in given and arg.name in FILL:
            given[arg.name] = FILL[arg.name]
    options = [k for k, v in given.items() if isinstance(v, dict) and v.get("t") == "options"]
    for k in options:
        o = given.pop(k)
        if o["dtype"] is not None:
            given["dtype"] = DTYPES[o["dtype"]]
        given["device"] = torch.device(o["device"])
    positional, keywords, by_name = [], {}, False
    for arg in op._schema.arguments:
        if arg.name not in given:
            if not arg.has_default_value():
                raise SchemaDiffers("aten's argument %s is missing" % arg.name)
            by_name = True  # a default fills it; later ones go by name
            continue
        val = given.pop(arg.name)
        if val is None and not str(arg.type).startswith("Optional"):
            if not arg.has_default_value():
                raise SchemaDiffers("aten's argument %s cannot be None" % arg.name)
            by_name = True
            continue
        if arg.kwarg_only or by_name:
            keywords[arg.name] = val
        else:
            positional.append(val)
    # An argument aten lacks is harmless when it asks for nothing (None, False, []).
    leftover = {k: v for k, v in given.items()
                if not (v is None or v is False or (isinstance(v, list) and not v))}
    if leftover:
        raise SchemaDiffers("arguments aten does not have: " + ", ".join(sorted(leftover)))
    return positional, keywords


def flatten(result):
    if isinstance(result, (tuple, list)):
        out = []
        for r in result:
            out.append(r)
        return out
    return [result]


def close(a, b, dtype):
    """a: ignis's, b: PyTorch's, both float64 tensors of one shape. Returns the worst error."""
    atol, rtol = TOL.get(dtype, (0.0, 0.0))
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)

    def where(mask, what):
        i = tuple(mask.nonzero()[0].tolist())
        return "%s at %s (ignis %r, torch %r)" % (what, list(i), float(a[i]), float(b[i]))
    if not torch.equal(nan_a, nan_b):
        return where(nan_a != nan_b, "NaN where the other is not")
    inf_a, inf_b = torch.isinf(a), torch.isinf(b)
    if not torch.equal(inf_a, inf_b) or not torch.equal(a[inf_a], b[inf_b]):
        return where((inf_a != inf_b) | (inf_a & (a != b)), "inf where the other is not")
    fin = ~(nan_a | inf_a)
    if fin.any():
        err = (a[fin] - b[fin]).abs()
        bound = atol + rtol * b[fin].abs()
        if (err > bound).any():
            i = int(torch.argmax(err - bound))
            return "max |diff| %.3g (ignis %r, torch %r)" % (
                float(err.max()), float(a[fin][i]), float(b[fin][i]))
    return None


def compare_value(ig, th):
    """Returns a (category, message) or None."""
    if ig is None:
        return None if th is None else ("forward", "ignis returned None")
    if isinstance(ig, list):
        if not isinstance(th, (list, tuple)) or len(th) != len(ig):
            return ("forward", "list lengths differ")
        for a, b in zip(ig, th):
            r = compare_value(a, b)
            if r:
                return r
        return None
    if isinstance(ig, torch.Tensor):
        if not isinstance(th, torch.Tensor):
            return ("forward", "torch returned %s" % type(th).__name__)
        if tuple(ig.shape) != tuple(th.shape):
            return ("shape", "shape %s, torch %s" % (list(ig.shape), list(th.shape)))
        if ig.dtype != th.dtype:
            return ("dtype", "dtype %s, torch %s" % (DTYPE_NAMES.get(ig.dtype, ig.dtype),
                                                     DTYPE_NAMES.get(th.dtype, th.dtype)))
        msg = close(ig.double(), th.detach().double(), ig.dtype)
        return ("forward", msg) if msg else None
    if isinstance(th, torch.Tensor) and th.dim() == 0:
        th = th.item()
    if isinstance(ig, float) and isinstance(th, (int, float)):
        if (math.isnan(ig) and math.isnan(th)) or abs(ig - th) <= 1e-6 + 1e-5 * abs(th):
            return None
        return ("forward", "ignis %r, torch %r" % (ig, th))
    return None if ig == th else ("forward", "ignis %r, torch %r" % (ig, th))


NOT_DIFFERENTIABLE = re.compile(r"not differentiable with respect to argument '(\w+)'")


def check_grad(op, call, grad, args):
    """Compares ignis's gradients with PyTorch's. Inputs PyTorch does not differentiate (a loss's
    class weights, running statistics) are left out of the comparison."""
    grad = dict(grad)
    while True:
        try:
            return check_grad_once(op, call, grad, args)
        except RuntimeError as e:
            m = NOT_DIFFERENTIABLE.search(str(e))
            if not m or m.group(1) not in call["names"]:
                raise
            arg = call["names"].index(m.group(1))
            keep = [k for k, i in enumerate(grad["inputs"]) if i != arg]
            if len(keep) == len(grad["inputs"]):
                raise
            grad["inputs"] = [grad["inputs"][k] for k in keep]
            grad["values"] = [grad["values"][k] for k in keep]
            if not keep:
                return None


def check_grad_once(op, call, grad, args):
    leaves = []
    values = list(args)
    for i in grad["inputs"]:
        leaf = values[i].detach().clone().requires_grad_(True)
        values[i] = leaf
        leaves.append(leaf)
    positional, keywords = build_call(op, call, values)
    outs = flatten(op(*positional, **keywords))
    loss = None
    for out, w in zip(outs, grad["weights"]):
        if w is None or not isinstance(out, torch.Tensor) or not out.requires_grad:
            continue
        term = (out * tensor(w).to(out.dtype)).sum()
        loss = term if loss is None else loss + term
    if loss is None:
        return ("grad", "torch's outputs do not require grad")
    got = torch.autograd.grad(loss, leaves, allow_unused=True)
    for k, (g_ig, g_th) in enumerate(zip(grad["values"], got)):
        ig = tensor(g_ig)
        if ig is None and g_th is None:
            continue
        leaf = leaves[k]
        ig = torch.zeros_like(leaf) if ig is None else ig
        th = torch.zeros_like(leaf) if g_th is None else g_th
        if tuple(ig.shape) != tuple(th.shape):
            return ("grad", "input %d: shape %s, torch %s" % (
                grad["inputs"][k], list(ig.shape), list(th.shape)))
        msg = close(ig.double(), th.detach().double(), torch.float64)
        if msg:
            return ("grad", "input %d: %s" % (grad["inputs"][k], msg))
    return None


def check(call):
    """Returns (status, message): ok, skip, ignis-only, or a mismatch category."""
    if call["kind"] == "random":
        return ("skip", "random")
    args = [value(a) for a in call["args"]]
    try:
        op, built = resolve(call["op"], call, args)
    except SchemaDiffers as e:
        return ("schema", str(e))
    if op is None:
        return ("ignis-only", "no aten op %s" % call["op"])
    positional, keywords = built
    try:
        result = op(*positional, **keywords)
    except Exception as e:  # PyTorch refused what ignis accepted (or ignis also refused)
        if "error" in call:
            return ("ok", "both refused")
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return ("torch-refused", first[:200])
    if "error" in call:
        return ("ignis-refused", call["error"][:200])
    outs = [value(o) for o in call["outputs"]]
    ths = flatten(result)
    if len(outs) == 1 and isinstance(outs[0], list):
        ths = [list(ths)]
    if len(ths) != len(outs):
        return ("forward", "%d outputs, torch %d" % (len(outs), len(ths)))
    for ig, th in zip(outs, ths):
        r = compare_value(ig, th)
        if r:
            return r
    if "grad" in call:
        if "error" in call["grad"]:
            return ("grad", "ignis's backward failed: " + call["grad"]["error"][:200])
        try:
            r = check_grad(op, call, call["grad"], args)
        except Exception as e:
            r = ("grad", "torch's backward failed: %s" % str(e).strip().splitlines()[0][:200])
        if r:
            return r
    return ("ok", "")


def load_known(path):
    known = {}
    if not os.path.exists(path):
        return known
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 3:
                raise SystemExit("diffcheck: %s: want 'op category reason': %r" % (path, line))
            known[(parts[0], parts[1])] = parts[2]
    return known


FAILURES = ("forward", "grad", "dtype", "shape", "schema", "torch-refused", "ignis-refused")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dump", help="the op_table_dump program (runs it)")
    ap.add_argument("--calls", help="a JSON-lines file op_table_dump wrote (instead of --dump)")
    ap.add_argument("--entry", default="", help="only op-table entries containing this")
    ap.add_argument("--out", default=None, help="directory for report.md and mismatches.jsonl")
    ap.add_argument("--known", default=os.path.join(HERE, "diffcheck_known.txt"))
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    path = a.calls
    if not path:
        if not a.dump:
            ap.error("give --dump or --calls")
        path = os.path.join(a.out or tempfile.mkdtemp(), "calls.jsonl")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        cmd = [a.dump, path] + ([a.entry] if a.entry else [])
        subprocess.run(cmd, check=True)
    known = load_known(a.known)
    stats = collections.defaultdict(collections.Counter)
    first = {}
    mismatches = []
    with open(path) as f:
        for line in f:
            call = json.loads(line)
            if a.entry and a.entry not in call["entry"]:
                continue
            if call["op"] in PREPARATION and not call["entry"].startswith(call["op"].split(".")[0]):
                continue
            status, msg = check(call)
            key = call["op"]
            if status in FAILURES and ((key, status) in known or (key, "any") in known):
                status = "known"
            stats[key][status] += 1
            if status in FAILURES or (a.verbose and status not in ("ok", "skip")):
                first.setdefault((key, status), (call["entry"], call["sample"], call["variant"], msg))
                mismatches.append({"op": key, "status": status, "entry": call["entry"],
                                   "sample": call["sample"], "variant": call["variant"],
                                   "message": msg})
    cols = ["ok", "known", "ignis-only", "skip"] + list(FAILURES)
    lines = ["| op | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for op in sorted(stats):
        c = stats[op]
        lines.append("| %s | %s |" % (op, " | ".join(str(c[k]) if c[k] else "" for k in cols)))
    total = collections.Counter()
    for c in stats.values():
        total.update(c)
    summary = ", ".join("%s %d" % (k, total[k]) for k in cols if total[k])
    bad = sorted(first)
    report = ["# Differential check against PyTorch %s" % torch.__version__, "",
              "%d ops, %d calls: %s" % (len(stats), sum(total.values()), summary), ""]
    if bad:
        report += ["## Unexplained differences (first of each op and kind)", ""]
        for (op, status) in bad:
            entry, sample, variant, msg = first[(op, status)]
            report.append("- `%s` %s — entry %s, sample \"%s\", %s: %s" % (
                op, status, entry, sample, variant, msg))
        report.append("")
    report += ["## Per op", ""] + lines
    text = "\n".join(report) + "\n"
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "report.md"), "w") as f:
            f.write(text)
        with open(os.path.join(a.out, "mismatches.jsonl"), "w") as f:
            for m in mismatches:
                f.write(json.dumps(m) + "\n")
    for line in report[:report.index("## Per op")]:
        print(line)
    if a.verbose:
        print("\n".join(lines))
    print("diffcheck: %s" % ("%d unexplained difference(s)" % len(bad) if bad else "no unexplained differences"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
