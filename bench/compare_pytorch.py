#!/usr/bin/python3
"""Runs the `ignis bench` workloads and the same workloads in PyTorch, in one invocation, and
prints ignis against PyTorch per workload.

    /usr/bin/python3 bench/compare_pytorch.py [--ignis build/ignis] [--threads 1,2] [--json]
                                              [--data data/mnist]

Each framework runs every workload at each thread count of --threads (default 1 and 2); per
measurement the best thread count of each framework is kept and reported. PyTorch is Debian's
python3-torch (no PyPI package needed). PyTorch's times are taken from Python, so they include
the interpreter's cost of the call, as a PyTorch user pays it.
"""

import argparse
import datetime
import json
import os
import platform
import gzip
import resource
import statistics
import struct
import subprocess
import sys
import time

WORKLOADS = ("op_overhead", "sgemm", "bf16_gemm", "seed_jit_mlp", "mnist_mlp", "mnist_lenet", "train_step",
             "checkpoint", "gcn", "gin", "ddp_mnist_mlp", "jit_fusion", "jit_fusion_train",
             "jit_dropout_train", "jit_norm_train", "jit_inference", "jit_block", "jit_rmsnorm",
             "jit_rmsnorm_train", "jit_layernorm", "jit_attention", "jit_posemb")
# The CNN training workloads take minutes: run them when asked for.
DEFAULT_WORKLOADS = ("op_overhead", "sgemm", "bf16_gemm", "seed_jit_mlp", "mnist_mlp")

# Per workload: the keys that identify a measurement, its metric, and whether higher is better.
SPECS = {
    "op_overhead": {"keys": ("case", "requires_grad"), "metric": "ns_per_op", "higher": False,
                    "title": "ns per op (lower is better)"},
    "sgemm": {"keys": ("n",), "metric": "gflops", "higher": True,
              "title": "GFLOP/s (higher is better)"},
    "bf16_gemm": {"keys": ("n",), "metric": "gflops", "higher": True,
                  "title": "bfloat16 GFLOP/s (higher is better)"},
    "seed_jit_mlp": {"keys": ("batch",), "metric": "us_per_forward", "higher": False,
                     "title": "us per forward (ignis: its best mode, eager or frozen graph; "
                              "PyTorch: eager and frozen TorchScript) (lower is better)",
                     "extra": ("mode",)},
    "mnist_mlp": {"keys": (), "metric": "s_per_epoch", "higher": False,
                  "title": "seconds per training epoch (lower is better)",
                  "extra": ("test_acc", "peak_rss_mb")},
    "mnist_lenet": {"keys": (), "metric": "s_per_epoch", "higher": False,
                    "title": "s per MNIST epoch of LeNet-5, batch 64 (lower is better)",
                    "extra": ("test_acc", "peak_rss_mb")},
    "train_step": {"keys": ("model", "batch", "image_size"), "metric": "s_per_step",
                   "higher": False, "title": "s per SGD step on synthetic data (lower is better)",
                   "extra": ("peak_rss_mb",)},
    "checkpoint": {"keys": ("model", "batch", "mode"), "metric": "s_per_step", "higher": False,
                   "title": "s per SGD step at 224x224, channels-last, plain and with activation "
                            "checkpointing (ResNet: each residual block; VGG: features in 6 "
                            "segments), reentrant and not (lower is better)"},
    "gcn": {"keys": (), "metric": "s_per_epoch", "higher": False,
            "title": "s per 2-layer GCN epoch, 100k nodes, 1M edges, 128 features (lower is better)"},
    "ddp_mnist_mlp": {"keys": ("ranks",), "metric": "s_per_epoch", "higher": False,
                      "title": "s per data-parallel MNIST MLP epoch, global batch 128, by ranks "
                               "(ignis: MPI, ring all-reduce, its best overlap/bucket setting; PyTorch: DDP over "
                               "gloo) (lower is better)"},
    "jit_fusion": {"keys": ("shape",), "metric": "ms_per_forward", "higher": False,
                   "title": "ms per gelu(x * a + b) * g + r on [4096, 1024] float32 (ignis: its "
                            "best mode, see ignis mode; PyTorch: eager and scripted) (lower is "
                            "better)", "extra": ("mode",)},
    "jit_fusion_train": {"keys": ("shape",), "metric": "ms_per_step", "higher": False,
                         "title": "ms per forward + backward of gelu(x * a + b) * g + r on "
                                  "[4096, 1024] float32, gradients of x, a, b, g (ignis: its best "
                                  "mode, eager or the fused node with backward programs; PyTorch: "
                                  "eager) (lower is better)", "extra": ("mode",)},
    "jit_dropout_train": {"keys": ("shape",), "metric": "ms_per_step", "higher": False,
                          "title": "ms per forward + backward of dropout(relu(x + b), 0.1) on "
                                   "[4096, 1024] float32, gradients of x and b (ignis: its best "
                                   "mode, eager or the fused node drawing the mask in its kernels; "
                                   "PyTorch: eager) (lower is better)", "extra": ("mode",)},
    "jit_norm_train": {"keys": ("shape",), "metric": "ms_per_step", "higher": False,
                       "title": "ms per forward + backward of layer_norm(dropout(gelu(x * a + b), "
                                "0.1) + r) * w + c on [4096, 1024] float32, gradients of x, a, b, "
                                "w, c (ignis: "
                                "its best mode, eager or the fused_reduction node; PyTorch: eager) "
                                "(lower is better)", "extra": ("mode",)},
    "jit_attention": {"keys": ("shape",), "metric": "ms_per_forward", "higher": False,
                      "title": "ms per softmax((s * 0.125).masked_fill(causal, -inf), -1) on "
                               "[96, 128, 128] float32 scores, a bool causal mask (ignis: its best "
                               "mode, eager or one fused_reduction; PyTorch: eager and scripted) "
                               "(lower is better)", "extra": ("mode",)},
    "jit_posemb": {"keys": ("shape",), "metric": "ms_per_forward", "higher": False,
                   "title": "ms per gelu(x + pos) * g on [32, 128, 1024] float32, pos a "
                            "[128, 1024] position table (ignis: its best mode, eager or one "
                            "fused_elementwise; PyTorch: eager and scripted) (lower is better)",
                   "extra": ("mode",)},
    "jit_rmsnorm": {"keys": ("shape",), "metric": "ms_per_forward", "higher": False,
                    "title": "ms per x * rsqrt(mean(x ** 2, -1, keepdim) + 1e-6) * w on [4096, 1024] "
                             "float32, a hand-written RMS norm (ignis: its best mode, eager or one "
                             "fused_reduction; PyTorch: eager and scripted) (lower is better)",
                    "extra": ("mode",)},
    "jit_layernorm": {"keys": ("shape",), "metric": "ms_per_forward", "higher": False,
                      "title": "ms per d = x - mean(x, -1, keepdim); d / sqrt(mean(d ** 2, -1, "
                               "keepdim) + 1e-5) * w + b on [4096, 1024] float32, a hand-written "
                               "layer norm (ignis: its best mode, eager or one fused_reduction; "
                               "PyTorch: eager and scripted) (lower is better)",
                      "extra": ("mode",)},
    "jit_rmsnorm_train": {"keys": ("shape",), "metric": "ms_per_step", "higher": False,
                          "title": "ms per forward + backward of the hand-written RMS norm on "
                                   "[4096, 1024] float32, gradients of x and w (ignis: its best "
                                   "mode, eager or one fused_reduction; PyTorch: eager) (lower is "
                                   "better)", "extra": ("mode",)},
    "jit_inference": {"keys": ("model", "batch"), "metric": "ms_per_forward", "higher": False,
                      "title": "ms per batch-1 224x224 inference, channels-last (ignis: its best "
                               "mode, eager or frozen graph; PyTorch: eager and frozen TorchScript) "
                               "(lower is better)", "extra": ("mode",)},
    "jit_block": {"keys": ("shape", "part"), "metric": "ms_per_forward", "higher": False,
                  "title": "ms per layer_norm(gelu(linear(x))) + x on [4096, 1024] float32 (part "
                           "-: the block; tail: after the product, layer_norm(gelu(h)) + x; "
                           "linear: the product alone) (ignis: its best mode, eager or frozen "
                           "graph; PyTorch: eager and frozen TorchScript) (lower is better)",
                  "extra": ("mode",)},
    "gin": {"keys": (), "metric": "s_per_epoch", "higher": False,
            "title": "s per GIN epoch on 10000 MNIST graphs, batch 64 (lower is better)",
            "extra": ("test_acc",)},
}


# ---------------------------------------------------------------- ignis (the `ignis` binary)

def parse_lines(text):
    """The `workload=NAME key=value ...` lines of `ignis bench` output, as dicts."""
    records = []
    for line in text.splitlines():
        if not line.startswith("workload="):
            continue
        rec = {}
        for field in line.split():
            key, _, value = field.partition("=")
            try:
                rec[key] = int(value)
            except ValueError:
                try:
                    rec[key] = float(value)
                except ValueError:
                    rec[key] = value
        records.append(rec)
    return records


def torch_blas(torch):
    """The BLAS library this process loaded for PyTorch (Debian's libtorch links the system
    libblas.so.3, which the alternatives system points at OpenBLAS, BLIS or the reference one):
    read from /proc/self/maps after a float32 product."""
    a = torch.ones(64, 64)
    torch.nn.functional.linear(a, a)
    libs = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            name = os.path.basename(fields[-1]) if len(fields) >= 6 else ""
            if "blas" in name or "blis" in name:
                libs.add(os.path.realpath(fields[-1]))
    if not libs:
        return "unknown"
    names = sorted(libs)
    if any("openblas" in n for n in names):
        return "openblas (" + ", ".join(names) + ")"
    if any("blis" in n for n in names):
        return "blis (" + ", ".join(names) + ")"
    return "reference (" + ", ".join(names) + ")"


def run_ignis(binary, workload, threads, repeat, extra=()):
    cmd = [binary, "bench", workload, "--threads", str(threads), "--repeat", str(repeat)]
    cmd += list(extra)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"compare_pytorch: `{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stderr}")
    return parse_lines(proc.stdout)


# ---------------------------------------------------------------- PyTorch, the same workloads

def calibrate(body, target_s):
    """(iters, seconds) such that body(iters) takes >= target_s seconds (running it is also the
    warm-up)."""
    iters = 1
    while True:
        t0 = time.perf_counter()
        body(iters)
        t = time.perf_counter() - t0
        if t >= target_s:
            return iters, t
        scale = min(100.0, 1.2 * target_s / t) if t > 0 else 100.0
        iters = max(iters + 1, int(iters * scale))


def seconds_per_iter(body, repeat, target_s):
    iters, t = calibrate(body, target_s)
    if t > 2.0:  # one call takes seconds (reference BLAS at n=2048): 3 batches are enough
        repeat = min(repeat, 3)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        body(iters)
        times.append((time.perf_counter() - t0) / iters)
    return statistics.median(times)


def torch_op_overhead(torch, threads, repeat):
    out = []
    add = torch.add
    for n in (1, 64):
        for rg in (0, 1):
            a = torch.full((n,), 1.5, dtype=torch.float32, requires_grad=bool(rg))
            b = torch.full((n,), 2.5, dtype=torch.float32, requires_grad=bool(rg))

            def body(iters, a=a, b=b):
                for _ in range(iters):
                    add(a, b)

            ns = seconds_per_iter(body, repeat, 0.05) * 1e9
            out.append({"workload": "op_overhead", "case": f"add_{n}", "requires_grad": rg,
                        "threads": threads, "variant": "eager", "ns_per_op": ns})
    return out


def torch_sgemm(torch, threads, repeat):
    """torch.matmul (Debian's build sends it to the system BLAS), and, as variant `onednn`, the
    same product through PyTorch's own oneDNN: mkldnn_linear(a, b^T) on tensors converted to
    oneDNN's layout beforehand (the conversion is not timed)."""
    out = []
    gen = torch.Generator().manual_seed(1)
    mkldnn_linear = getattr(torch._C._nn, "mkldnn_linear", None)
    for n in (256, 512, 1024, 2048):
        a = torch.rand((n, n), generator=gen) * 2 - 1
        b = torch.rand((n, n), generator=gen) * 2 - 1

        def body(iters, a=a, b=b):
            for _ in range(iters):
                torch.matmul(a, b)

        variants = [("matmul", body)]
        if mkldnn_linear is not None and torch.backends.mkldnn.is_available():
            am, bt = a.to_mkldnn(), b.t().contiguous().to_mkldnn()

            def body_onednn(iters, am=am, bt=bt):
                for _ in range(iters):
                    mkldnn_linear(am, bt, None)

            variants.append(("onednn", body_onednn))
        for name, fn in variants:
            with torch.no_grad():
                s = seconds_per_iter(fn, repeat, 0.2)
            out.append({"workload": "sgemm", "n": n, "threads": threads, "variant": name,
                        "ms": s * 1e3, "gflops": 2.0 * n ** 3 / s * 1e-9})
    return out


def torch_bf16_gemm(torch, threads, repeat):
    """torch.matmul of bfloat16 matrices (PyTorch's CPU bfloat16 matmul goes to its oneDNN)."""
    out = []
    gen = torch.Generator().manual_seed(1)
    for n in (256, 512, 1024, 2048):
        a = (torch.rand((n, n), generator=gen) * 2 - 1).to(torch.bfloat16)
        b = (torch.rand((n, n), generator=gen) * 2 - 1).to(torch.bfloat16)

        def body(iters, a=a, b=b):
            for _ in range(iters):
                torch.matmul(a, b)

        with torch.no_grad():
            s = seconds_per_iter(body, repeat, 0.2)
        out.append({"workload": "bf16_gemm", "n": n, "threads": threads, "variant": "matmul",
                    "ms": s * 1e3, "gflops": 2.0 * n ** 3 / s * 1e-9})
    return out


def torch_seed_jit_mlp(torch, threads, repeat):
    torch.manual_seed(0)
    nn = torch.nn
    # nn.Linear's default init is U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
    model = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 2)).eval()
    x = torch.rand(1, 512) * 2 - 1
    forwards = 1000
    variants = [("eager", model)]
    try:  # the lecture's TorchScript variant, frozen for inference
        with torch.no_grad():
            variants.append(("torchscript", torch.jit.freeze(torch.jit.script(model))))
    except Exception as e:  # pragma: no cover - depends on the torch build
        print(f"compare_pytorch: TorchScript variant skipped: {e}", file=sys.stderr)
    out = []
    for name, m in variants:
        with torch.no_grad():
            for _ in range(100):  # warm-up (TorchScript profiles its first runs)
                m(x)
            us = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                for _ in range(forwards):
                    m(x)
                us.append((time.perf_counter() - t0) / forwards * 1e6)
        out.append({"workload": "seed_jit_mlp", "batch": 1, "forwards": forwards,
                    "threads": threads, "variant": name, "us_per_forward": statistics.median(us)})
    return out


def eager_and_scripted(torch, workload, block, args, shape, threads, repeat):
    """ms per forward of `block(*args)` without grad, eager and as TorchScript (whose profiling
    executor fuses elementwise chains after its first runs: five warm-up calls each)."""
    variants = [("eager", block)]
    try:
        variants.append(("torchscript", torch.jit.script(block)))
    except Exception as e:  # pragma: no cover - depends on the torch build
        print(f"compare_pytorch: TorchScript variant skipped: {e}", file=sys.stderr)
    out = []
    with torch.no_grad():
        for name, f in variants:
            for _ in range(5):
                f(*args)
            out.append({"workload": workload, "shape": shape, "threads": threads,
                        "variant": name,
                        "ms_per_forward": median_step_ms(lambda: f(*args), repeat)})
    return out


def torch_jit_fusion(torch, threads, repeat):
    """The elementwise block of `ignis bench jit_fusion`, eager and as TorchScript."""
    rows, cols = 4096, 1024
    torch.manual_seed(0)
    x, r = torch.randn(rows, cols), torch.randn(rows, cols)
    a, b, g = torch.randn(cols), torch.randn(cols), torch.randn(cols)

    def block(x, r, a, b, g):
        return torch.nn.functional.gelu(x * a + b) * g + r

    return eager_and_scripted(torch, "jit_fusion", block, (x, r, a, b, g), f"{rows}x{cols}",
                              threads, repeat)


def rms_norm_block(torch):
    """LLaMA's RMSNorm as PyTorch code writes it (the block of `ignis bench jit_rmsnorm`)."""
    def block(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    return block


def torch_jit_rmsnorm(torch, threads, repeat):
    """The hand-written RMS norm, eager and as TorchScript."""
    rows, cols = 4096, 1024
    torch.manual_seed(0)
    x, w = torch.randn(rows, cols), torch.randn(cols)
    return eager_and_scripted(torch, "jit_rmsnorm", rms_norm_block(torch), (x, w),
                              f"{rows}x{cols}", threads, repeat)


def torch_jit_layernorm(torch, threads, repeat):
    """The hand-written layer norm of `ignis bench jit_layernorm`, eager and as TorchScript."""
    rows, cols = 4096, 1024
    torch.manual_seed(0)
    x, w, b = torch.randn(rows, cols), torch.randn(cols), torch.randn(cols)

    def block(x, w, b):
        d = x - x.mean(-1, keepdim=True)
        return d / torch.sqrt(d.pow(2).mean(-1, keepdim=True) + 1e-5) * w + b

    return eager_and_scripted(torch, "jit_layernorm", block, (x, w, b), f"{rows}x{cols}",
                              threads, repeat)


def torch_jit_attention(torch, threads, repeat):
    """The masked attention softmax of `ignis bench jit_attention`, eager and as TorchScript."""
    heads, tokens = 96, 128
    torch.manual_seed(0)
    s = torch.randn(heads, tokens, tokens)
    causal = torch.arange(tokens).unsqueeze(1) < torch.arange(tokens).unsqueeze(0)

    def block(s, causal):
        return torch.softmax((s * 0.125).masked_fill(causal, float("-inf")), -1)

    return eager_and_scripted(torch, "jit_attention", block, (s, causal),
                              f"{heads}x{tokens}x{tokens}", threads, repeat)


def torch_jit_posemb(torch, threads, repeat):
    """The position-table block of `ignis bench jit_posemb`, eager and as TorchScript."""
    batch, tokens, dim = 32, 128, 1024
    torch.manual_seed(0)
    x, pos, g = torch.randn(batch, tokens, dim), torch.randn(tokens, dim), torch.randn(dim)

    def block(x, pos, g):
        return torch.nn.functional.gelu(x + pos) * g

    return eager_and_scripted(torch, "jit_posemb", block, (x, pos, g),
                              f"{batch}x{tokens}x{dim}", threads, repeat)


def torch_jit_rmsnorm_train(torch, threads, repeat):
    """The hand-written RMS norm forward and backward in eager PyTorch, gradients of x and w."""
    rows, cols = 4096, 1024
    torch.manual_seed(0)
    x, w = torch.randn(rows, cols, requires_grad=True), torch.randn(cols, requires_grad=True)
    gy = torch.randn(rows, cols)
    block = rms_norm_block(torch)

    def step():
        return torch.autograd.grad([block(x, w)], [x, w], [gy])

    return [{"workload": "jit_rmsnorm_train", "shape": f"{rows}x{cols}", "threads": threads,
             "variant": "eager", "ms_per_step": median_step_ms(step, repeat)}]


def median_step_ms(step, repeat):
    """Two warm-up calls of `step`, then the median of `repeat` timed ones, in ms."""
    for _ in range(2):
        step()
    ms = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        step()
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms)


def torch_jit_fusion_train(torch, threads, repeat):
    """The block of `ignis bench jit_fusion_train`: forward and backward in eager PyTorch,
    gradients of x, a, b and g for a given output gradient."""
    rows, cols = 4096, 1024
    torch.manual_seed(0)
    x, r = torch.randn(rows, cols, requires_grad=True), torch.randn(rows, cols)
    a, b, g = (torch.randn(cols, requires_grad=True) for _ in range(3))
    gy = torch.randn(rows, cols)

    def step():
        y = torch.nn.functional.gelu(x * a + b) * g + r
        return torch.autograd.grad([y], [x, a, b, g], [gy])

    return [{"workload": "jit_fusion_train", "shape": f"{rows}x{cols}", "threads": threads,
             "variant": "eager", "ms_per_step": median_step_ms(step, repeat)}]


def torch_jit_norm_train(torch, threads, repeat):
    """The block of `ignis bench jit_norm_train`: layer_norm(dropout(gelu(x * a + b), 0.1) + r,
    w, c) forward and backward in eager PyTorch, gradients of x, a, b, w and c for a given
    output gradient."""
    rows, cols = 4096, 1024
    torch.manual_seed(0)
    x, r = torch.randn(rows, cols, requires_grad=True), torch.randn(rows, cols)
    a, b, w, c = (torch.randn(cols, requires_grad=True) for _ in range(4))
    gy = torch.randn(rows, cols)

    def step():
        h = torch.nn.functional.dropout(torch.nn.functional.gelu(x * a + b), 0.1, training=True)
        y = torch.nn.functional.layer_norm(h + r, (cols,), w, c)
        return torch.autograd.grad([y], [x, a, b, w, c], [gy])

    return [{"workload": "jit_norm_train", "shape": f"{rows}x{cols}", "threads": threads,
             "variant": "eager", "ms_per_step": median_step_ms(step, repeat)}]


def torch_jit_dropout_train(torch, threads, repeat):
    """The block of `ignis bench jit_dropout_train`: dropout(relu(x + b), 0.1) forward and
    backward in eager PyTorch, gradients of x and b for a given output gradient."""
    rows, cols = 4096, 1024
    torch.manual_seed(0)
    x, b = torch.randn(rows, cols, requires_grad=True), torch.randn(cols, requires_grad=True)
    gy = torch.randn(rows, cols)

    def step():
        y = torch.nn.functional.dropout(torch.relu(x + b), 0.1, training=True)
        return torch.autograd.grad([y], [x, b], [gy])

    return [{"workload": "jit_dropout_train", "shape": f"{rows}x{cols}", "threads": threads,
             "variant": "eager", "ms_per_step": median_step_ms(step, repeat)}]


def torch_jit_block(torch, threads, repeat):
    """The block of `ignis bench jit_block`, layer_norm(gelu(linear(x))) + x, its tail after the
    product and the product alone, eager and as frozen TorchScript."""
    rows, cols = 4096, 1024
    torch.manual_seed(0)
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(cols, cols)
            self.ln = nn.LayerNorm(cols)

        def forward(self, x):
            return self.ln(torch.nn.functional.gelu(self.linear(x))) + x

    class Tail(nn.Module):
        def __init__(self, ln):
            super().__init__()
            self.ln = ln

        def forward(self, h, x):
            return self.ln(torch.nn.functional.gelu(h)) + x

    block = Block().eval()
    tail = Tail(block.ln).eval()
    x = torch.randn(rows, cols)
    with torch.no_grad():
        h = block.linear(x)
    cases = [(None, block, (x,)), ("tail", tail, (h, x)), ("linear", block.linear, (x,))]
    out = []
    with torch.no_grad():
        for part, module, inputs in cases:
            variants = [("eager", module)]
            try:
                variants.append(("torchscript", torch.jit.freeze(torch.jit.script(module))))
            except Exception as e:  # pragma: no cover - depends on the torch build
                print(f"compare_pytorch: TorchScript variant skipped: {e}", file=sys.stderr)
            for name, f in variants:
                for _ in range(5):  # warm-up (TorchScript profiles, then optimises)
                    f(*inputs)
                ms = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    f(*inputs)
                    ms.append((time.perf_counter() - t0) * 1e3)
                rec = {"workload": "jit_block", "shape": f"{rows}x{cols}", "threads": threads,
                       "variant": name, "ms_per_forward": statistics.median(ms)}
                if part:
                    rec["part"] = part
                out.append(rec)
    return out


def torch_jit_inference(torch, threads, repeat, args):
    """ResNet inference at batch 1, 224x224, channels-last (PyTorch's best CPU inference here),
    eager and frozen TorchScript, for the models of --jit-models, in --dtype."""
    out = []
    dt = getattr(torch, args.dtype)
    for name in args.jit_models.split(","):
        torch.manual_seed(0)
        model = zoo_model(torch, name, 3, 224, 1000).eval().to(dtype=dt,
                                                                memory_format=torch.channels_last)
        x = torch.rand(1, 3, 224, 224).to(dt).contiguous(memory_format=torch.channels_last)
        variants = [("eager", model)]
        with torch.no_grad():
            try:
                variants.append(("torchscript", torch.jit.freeze(torch.jit.script(model))))
            except Exception as e:  # pragma: no cover - depends on the torch build
                print(f"compare_pytorch: TorchScript variant skipped: {e}", file=sys.stderr)
            for variant, m in variants:
                for _ in range(3):  # warm-up (TorchScript profiles its first runs)
                    m(x)
                ms = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    m(x)
                    ms.append((time.perf_counter() - t0) * 1e3)
                out.append({"workload": "jit_inference", "model": name, "batch": 1,
                            "threads": threads, "variant": variant,
                            "ms_per_forward": statistics.median(ms)})
    return out


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def read_idx(path):
    """An IDX file (the MNIST format, plain or .gz) as a numpy uint8 array of its dimensions."""
    import numpy as np
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        sys.exit(f"compare_pytorch: {path} is not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def mnist_file(root, stem):
    for cand in (os.path.join(root, stem), os.path.join(root, stem + ".gz")):
        if os.path.exists(cand):
            return cand
    sys.exit(f"compare_pytorch: {os.path.join(root, stem)} not found; run "
             f"`build/ignis fetch mnist --dir {root}` or pass --data DIR")


def load_mnist(torch, root, train):
    """(images float32 [N, 1, 28, 28] normalised as (x / 255 - 0.1307) / 0.3081, labels int64),
    computed once, in place, as the ignis workload does."""
    prefix = "train" if train else "t10k"
    images = read_idx(mnist_file(root, prefix + "-images-idx3-ubyte"))
    labels = read_idx(mnist_file(root, prefix + "-labels-idx1-ubyte"))
    x = torch.from_numpy(images.copy()).unsqueeze(1).float()
    x.div_(255).sub_(0.1307).div_(0.3081)
    return x, torch.from_numpy(labels.copy()).long()


def torch_mnist_mlp(torch, threads, repeat, args):
    """The ignis mnist_mlp workload: Flatten-Linear(784,512)-ReLU-Linear(512,256)-ReLU-
    Linear(256,10) with nn.Linear's default init, SGD lr 0.05 momentum 0.9, batch 128, one
    epoch over a fixed-seed shuffle (each batch one gather of rows of the normalised tensor, no
    per-sample DataLoader), then the test accuracy. Only the training epoch is timed."""
    nn = torch.nn
    xtr, ytr = load_mnist(torch, args.data, True)
    xte, yte = load_mnist(torch, args.data, False)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                          nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.functional.cross_entropy
    perm = torch.randperm(xtr.shape[0], generator=torch.Generator().manual_seed(0))
    model.train()
    t0 = time.perf_counter()
    for i in range(0, xtr.shape[0], 128):
        idx = perm[i:i + 128]
        x, y = xtr.index_select(0, idx), ytr.index_select(0, idx)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    epoch_s = time.perf_counter() - t0
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, xte.shape[0], 1000):
            correct += int((model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum())
    return [{"workload": "mnist_mlp", "threads": threads, "variant": "eager",
             "s_per_epoch": epoch_s, "test_acc": correct / xte.shape[0],
             "peak_rss_mb": peak_rss_mb()}]

def lenet(torch, in_channels, image_size, classes):
    """The LeNet-5 of `ignis bench mnist_lenet` (models::lenet)."""
    nn = torch.nn
    s = image_size // 2 // 2
    return nn.Sequential(nn.Conv2d(in_channels, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * s * s, 512), nn.ReLU(),
                         nn.Linear(512, classes))


def torch_mnist_lenet_one(threads, data, channels_last):
    """One epoch of LeNet-5 in one memory format (run in a fresh process, so that its peak RSS is
    this run's alone)."""
    import torch
    torch.set_num_threads(threads)
    xtr, ytr = load_mnist(torch, data, True)
    xte, yte = load_mnist(torch, data, False)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    torch.manual_seed(0)
    model = lenet(torch, 1, 28, 10).to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    loss_fn = torch.nn.functional.cross_entropy
    t0 = time.perf_counter()
    perm = torch.randperm(xtr.shape[0], generator=torch.Generator().manual_seed(0))
    for i in range(0, xtr.shape[0], 64):
        idx = perm[i:i + 64]
        opt.zero_grad()
        loss_fn(model(xtr[idx].contiguous(memory_format=fmt)), ytr[idx]).backward()
        opt.step()
    epoch_s = time.perf_counter() - t0
    with torch.no_grad():
        correct = sum(int((model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum())
                      for i in range(0, xte.shape[0], 1000))
    return {"workload": "mnist_lenet", "threads": threads,
            "variant": "channels_last" if channels_last else "eager",
            "s_per_epoch": epoch_s, "test_acc": correct / xte.shape[0],
            "peak_rss_mb": peak_rss_mb()}


def torch_mnist_lenet(torch, threads, repeat, args):
    """One epoch of LeNet-5 on MNIST (SGD lr 0.02 momentum 0.9, batch 64, shuffled), then the
    test accuracy; batches are sliced from normalised tensors, as ignis's TensorDataset does. In
    both memory formats (PyTorch's channels_last: the model and each batch converted), each in its
    own process, so that ignis is compared with PyTorch's better one."""
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        return [pool.apply(torch_mnist_lenet_one, (threads, args.data, cl)) for cl in (False, True)]


def zoo_model(torch, name, in_channels, image_size, classes):
    """torchvision's model `name` with ignis's small-image changes (models.h): the CIFAR stems
    of ResNet and AlexNet when image_size <= 32."""
    if name == "lenet":
        return lenet(torch, in_channels, image_size, classes)
    import torchvision
    nn = torch.nn
    m = getattr(torchvision.models, name)(num_classes=classes)
    if name.startswith("resnet"):
        if image_size <= 32:
            m.conv1, m.maxpool = nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False), nn.Identity()
        elif in_channels != 3:
            m.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
    elif name == "alexnet":
        if image_size <= 32:
            m.features[0] = nn.Conv2d(in_channels, 64, 3, 1, 1)
        elif in_channels != 3:
            m.features[0] = nn.Conv2d(in_channels, 64, 11, 4, 2)
    elif in_channels != 3:  # vgg
        m.features[0] = nn.Conv2d(in_channels, 64, 3, padding=1)
    return m


def torch_train_step_one(name, threads, repeat, batch, image_size, classes, channels_last,
                         dtype="float32"):
    """One model's train_step measurement (run in a fresh process, so that its peak RSS is this
    model's alone), in contiguous or channels_last memory format, the parameters and the input in
    `dtype` (as `ignis bench train_step --dtype`)."""
    import torch
    torch.set_num_threads(threads)
    natural = (1, 28, 10) if name == "lenet" else (3, 224, 1000)
    c = natural[0]
    s = image_size or natural[1]
    k = classes or natural[2]
    torch.manual_seed(0)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    dt = getattr(torch, dtype)
    model = zoo_model(torch, name, c, s, k).train().to(dtype=dt, memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = (torch.rand(batch, c, s, s) * 2 - 1).to(dt).contiguous(memory_format=fmt)
    y = torch.tensor([(i * 7919) % k for i in range(batch)])

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    t = median_step_ms(step, repeat) / 1e3
    return {"workload": "train_step", "model": name, "batch": batch, "image_size": s,
            "threads": threads, "variant": "channels_last" if channels_last else "eager",
            "s_per_step": t, "img_per_s": batch / t,
            "peak_rss_mb": peak_rss_mb()}


def torch_train_step(torch, threads, repeat, args):
    """SGD steps (lr 0.01, momentum 0.9) of a model on one synthetic batch, as `ignis bench
    train_step`: 2 warm-up steps, then the median of `repeat` timed steps; each model in its own
    process (ru_maxrss is a process's maximum)."""
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    out = []
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        for name in args.train_step_models.split(","):
            for cl in (False, True):
                out.append(pool.apply(torch_train_step_one, (name, threads, repeat, args.batch,
                                                             args.image_size, args.classes, cl,
                                                             args.dtype)))
    return out


def torch_checkpoint_one(name, threads, repeat, batch):
    """`ignis bench checkpoint` in PyTorch (a fresh process): torchvision's model, channels-last,
    SGD steps plain and with torch.utils.checkpoint on the same blocks as ignis checkpoints."""
    import torch
    import torch.utils.checkpoint as ck
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    fmt = torch.channels_last
    model = zoo_model(torch, name, 3, 224, 1000).train().to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = (torch.rand(batch, 3, 224, 224) * 2 - 1).contiguous(memory_format=fmt)
    y = torch.tensor([(i * 7919) % 1000 for i in range(batch)])

    def forward(mode):
        if mode == "plain":
            return model(x)
        reentrant = mode == "reentrant"
        if name.startswith("resnet"):
            m = model
            h = m.maxpool(m.relu(m.bn1(m.conv1(x))))
            for layer in (m.layer1, m.layer2, m.layer3, m.layer4):
                for block in layer:
                    # The reentrant form needs an input that requires grad for gradients to flow.
                    if reentrant and not h.requires_grad:
                        h = h.detach().requires_grad_(True)
                    h = ck.checkpoint(block, h, use_reentrant=reentrant)
            return m.fc(torch.flatten(m.avgpool(h), 1))
        h = x.detach().requires_grad_(True) if reentrant else x
        # PyTorch 1.13 refuses an in-place ReLU starting a checkpointed segment ("a leaf
        # Variable that requires grad is being used in an in-place operation"; ignis copies
        # the input instead): out-of-place ReLUs here, the usual workaround.
        for i, mod in enumerate(model.features):
            if isinstance(mod, torch.nn.ReLU):
                model.features[i] = torch.nn.ReLU(inplace=False)
        segments = 6
        mods = list(model.features)
        n = len(mods)
        for k in range(segments):
            seg = torch.nn.Sequential(*mods[k * n // segments:(k + 1) * n // segments])
            h = seg(h) if k + 1 == segments else ck.checkpoint(seg, h, use_reentrant=reentrant)
        return model.classifier(torch.flatten(model.avgpool(h), 1))

    out = []
    for mode in ("plain", "reentrant", "non_reentrant"):
        def step(mode=mode):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(forward(mode), y).backward()
            opt.step()
        out.append({"workload": "checkpoint", "model": name, "batch": batch, "mode": mode,
                    "threads": threads, "variant": "channels_last",
                    "s_per_step": median_step_ms(step, repeat) / 1e3})
    return out


def torch_checkpoint(torch, threads, repeat, args):
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    out = []
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        for name in args.checkpoint_models.split(","):
            out += pool.apply(torch_checkpoint_one, (name, threads, repeat, args.checkpoint_batch))
    return out


# ---------------------------------------------------------------- graph neural networks
# The models of `ignis bench gcn` / `gin` (src/cli/bench_gnn.cpp) in plain PyTorch, message
# passing written with index_add_ (or scatter_add_), as one does without PyTorch Geometric.

_GCN_GRAPH = {}


def power_law_edges(n, e, seed):
    """The benchmark graph of bench_gnn.cpp, from the same splitmix64 stream, bit for bit."""
    key = (n, e, seed)
    if key in _GCN_GRAPH:
        return _GCN_GRAPH[key]
    mask = (1 << 64) - 1
    s = seed
    src, dst = [0] * e, [0] * e

    def nxt():
        nonlocal s
        s = (s + 0x9E3779B97F4A7C15) & mask
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return (z ^ (z >> 31)) % n

    for k in range(e):
        src[k] = nxt()
        a, b, c = nxt(), nxt(), nxt()
        dst[k] = a * b // n * c // n
    _GCN_GRAPH[key] = (src, dst)
    return src, dst


def torch_gcn(torch, threads, repeat):
    n, e, f, hidden, classes = 100000, 1000000, 128, 128, 16
    src, dst = power_law_edges(n, e, 1)
    loop = torch.arange(n)
    row = torch.cat([torch.tensor(src), loop])  # sources, then self-loops
    col = torch.cat([torch.tensor(dst), loop])  # targets
    deg = torch.zeros(n).index_add_(0, col, torch.ones(col.numel()))
    dis = deg.pow(-0.5)
    dis[deg == 0] = 0
    w = (dis[row] * dis[col]).unsqueeze(1)  # computed once, as the cached GCNConv does
    torch.manual_seed(0)
    x = torch.randn(n, f)
    y = torch.randint(0, classes, (n,))
    out = []
    for variant in ("index_add_", "scatter_add_"):
        torch.manual_seed(0)
        lin1, lin2 = torch.nn.Linear(f, hidden), torch.nn.Linear(hidden, classes)
        opt = torch.optim.Adam(list(lin1.parameters()) + list(lin2.parameters()), lr=0.01)

        def conv(h, lin, variant=variant):
            msg = (h @ lin.weight.t())[row] * w
            if variant == "index_add_":
                agg = torch.zeros(n, msg.size(1)).index_add_(0, col, msg)
            else:
                agg = torch.zeros(n, msg.size(1)).scatter_add_(
                    0, col.unsqueeze(1).expand(-1, msg.size(1)), msg)
            return agg + lin.bias

        def epoch():
            opt.zero_grad()
            logits = conv(torch.relu(conv(x, lin1)), lin2)
            torch.nn.functional.cross_entropy(logits, y).backward()
            opt.step()

        epoch()  # warm-up
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            epoch()
            times.append(time.perf_counter() - t0)
        out.append({"workload": "gcn", "threads": threads, "variant": variant,
                    "s_per_epoch": statistics.median(times)})
    return out


def mnist_graphs(torch, images, labels, threshold=0.5, k=8):
    """MNIST digits as graphs, as data::mnist_graphs builds them: pixels above the threshold are
    nodes (intensity, row / 27, column / 27), each with edges from its k nearest other nodes
    within a 5x5 window (nearest first, ties in the window's row-major order)."""
    offsets = [(dr, dc) for dr in range(-2, 3) for dc in range(-2, 3) if (dr, dc) != (0, 0)]
    offsets.sort(key=lambda o: o[0] * o[0] + o[1] * o[1])  # stable: ties keep scan order
    dr = torch.tensor([o[0] for o in offsets])
    dc = torch.tensor([o[1] for o in offsets])
    graphs = []
    px = images.float() / 255.0
    for i in range(images.size(0)):
        img = px[i]
        mask = img > threshold
        nz = mask.nonzero()  # row-major: the node order
        nodes = nz.size(0)
        if nodes == 0:
            graphs.append((torch.tensor([[0.0, 0.5, 0.5]]), torch.zeros(2, 0, dtype=torch.long),
                           int(labels[i])))
            continue
        node_of = torch.full((32, 32), -1, dtype=torch.long)
        node_of[nz[:, 0] + 2, nz[:, 1] + 2] = torch.arange(nodes)
        nb = node_of[nz[:, 0:1] + 2 + dr, nz[:, 1:2] + 2 + dc]  # [nodes, 24]
        valid = nb >= 0
        take = valid & (valid.cumsum(1) <= k)
        pos = take.nonzero()  # node-major, then window order
        edge_index = torch.stack([nb[pos[:, 0], pos[:, 1]], pos[:, 0]])
        x = torch.stack([img[nz[:, 0], nz[:, 1]], nz[:, 0].float() / 27, nz[:, 1].float() / 27], 1)
        graphs.append((x, edge_index, int(labels[i])))
    return graphs


def collate(torch, graphs):
    xs, eis, batch, off = [], [], [], 0
    for g, (x, ei, _) in enumerate(graphs):
        xs.append(x)
        eis.append(ei + off)
        batch.append(torch.full((x.size(0),), g, dtype=torch.long))
        off += x.size(0)
    y = torch.tensor([label for _, _, label in graphs])
    return torch.cat(xs), torch.cat(eis, 1), torch.cat(batch), y


def torch_gin(torch, threads, repeat, args):
    load = lambda stem: torch.from_numpy(read_idx(mnist_file(args.data, stem)).copy())
    train = mnist_graphs(torch, load("train-images-idx3-ubyte")[:10000],
                         load("train-labels-idx1-ubyte")[:10000])
    test = mnist_graphs(torch, load("t10k-images-idx3-ubyte"), load("t10k-labels-idx1-ubyte"))

    class GIN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            def mlp(i, o):
                return torch.nn.Sequential(torch.nn.Linear(i, o), torch.nn.BatchNorm1d(o),
                                           torch.nn.ReLU(), torch.nn.Linear(o, o))
            self.mlps = torch.nn.ModuleList([mlp(3, 32), mlp(32, 32), mlp(32, 32)])
            self.eps = torch.nn.Parameter(torch.zeros(3))
            self.head = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                            torch.nn.Linear(32, 10))

        def forward(self, x, ei, batch, graphs):
            for l, m in enumerate(self.mlps):
                agg = torch.zeros_like(x).index_add_(0, ei[1], x[ei[0]])
                x = torch.relu(m(agg + (1 + self.eps[l]) * x))
            pooled = torch.zeros(graphs, x.size(1)).index_add_(0, batch, x)
            return self.head(pooled)

    torch.manual_seed(0)
    model = GIN()
    opt = torch.optim.Adam(model.parameters(), lr=0.005)
    times = []
    for _ in range(max(1, repeat // 3)):
        model.train()
        t0 = time.perf_counter()
        perm = torch.randperm(len(train)).tolist()
        for b in range(0, len(perm), 64):
            x, ei, batch, y = collate(torch, [train[i] for i in perm[b:b + 64]])
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x, ei, batch, y.numel()), y).backward()
            opt.step()
        times.append(time.perf_counter() - t0)
    model.eval()
    correct = 0
    with torch.no_grad():
        for b in range(0, len(test), 1000):
            x, ei, batch, y = collate(torch, test[b:b + 1000])
            correct += int((model(x, ei, batch, y.numel()).argmax(1) == y).sum())
    return [{"workload": "gin", "threads": threads, "variant": "index_add_",
             "s_per_epoch": statistics.median(times), "test_acc": correct / len(test)}]


def torch_ddp_rank(rank, world, threads, port, data, out):
    """One rank of PyTorch's DDP (gloo) run of ignis's ddp_mnist_mlp: the demo MLP, SGD lr 0.05
    momentum 0.9, global batch 128 (128 / world per rank on its DistributedSampler shard, each
    batch one gather of rows), one timed epoch; rank 0 puts the slowest rank's seconds in `out`."""
    import torch
    import torch.distributed as dist
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    nn = torch.nn
    xtr, ytr = load_mnist(torch, data, True)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                      nn.ReLU(), nn.Linear(256, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sampler = torch.utils.data.DistributedSampler(range(xtr.shape[0]), num_replicas=world,
                                                  rank=rank, shuffle=True, seed=0)
    idx_all = torch.tensor(list(iter(sampler)))
    per_rank = 128 // world
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(0, idx_all.shape[0], per_rank):
        idx = idx_all[i:i + per_rank]
        x, y = xtr.index_select(0, idx), ytr.index_select(0, idx)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        out.put(float(t))
    dist.destroy_process_group()


def torch_ddp_mnist_mlp(torch, threads, repeat, args):
    """PyTorch DDP over gloo at 1 and 2 ranks (processes on this machine), `threads` intra-op
    threads per rank."""
    import torch.multiprocessing as mp
    records = []
    for world in (1, 2):
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        port = 29500 + (os.getpid() + world * 7 + threads) % 2000
        procs = [ctx.Process(target=torch_ddp_rank, args=(r, world, threads, port, args.data, out))
                 for r in range(world)]
        for p in procs:
            p.start()
        seconds = out.get(timeout=1800)
        for p in procs:
            p.join()
        records.append({"workload": "ddp_mnist_mlp", "ranks": world, "threads": threads,
                        "variant": "DDP gloo", "s_per_epoch": seconds})
    return records


def ignis_extra_args(workload, args):
    """The options of `ignis bench` that a workload takes, from this script's options."""
    if workload == "mnist_mlp":
        return [["--data", args.data]]
    if workload == "mnist_lenet":
        return [["--data", args.data, "--memory-format", args.memory_format]]
    if workload == "gin":
        return [["--data", args.data]]
    if workload == "ddp_mnist_mlp":  # ignis launches itself under mpirun -np N
        return [["--data", args.data, "--ranks", "1"], ["--data", args.data, "--ranks", "2"]]
    if workload == "jit_inference":  # ignis reports eager and graph; the best is compared
        return [["--model", name, "--batch", "1", "--memory-format", "channels_last",
                 "--dtype", args.dtype] for name in args.jit_models.split(",")]
    if workload == "checkpoint":
        return [["--model", name, "--batch", str(args.checkpoint_batch)]
                for name in args.checkpoint_models.split(",")]
    if workload == "train_step":
        runs = []
        for name in args.train_step_models.split(","):
            extra = ["--model", name, "--batch", str(args.batch),
                     "--memory-format", args.memory_format]
            if args.image_size:
                extra += ["--image-size", str(args.image_size)]
            if args.classes:
                extra += ["--classes", str(args.classes)]
            if args.dtype != "float32":
                extra += ["--dtype", args.dtype]
            runs.append(extra)
        return runs
    return [[]]


TORCH_WORKLOADS = {"op_overhead": torch_op_overhead, "sgemm": torch_sgemm,
                   "bf16_gemm": torch_bf16_gemm,
                   "seed_jit_mlp": torch_seed_jit_mlp, "mnist_mlp": torch_mnist_mlp,
                   "mnist_lenet": torch_mnist_lenet, "train_step": torch_train_step,
                   "checkpoint": torch_checkpoint,
                   "gcn": torch_gcn, "gin": torch_gin, "ddp_mnist_mlp": torch_ddp_mnist_mlp,
                   "jit_fusion": torch_jit_fusion, "jit_fusion_train": torch_jit_fusion_train,
                   "jit_dropout_train": torch_jit_dropout_train,
                   "jit_norm_train": torch_jit_norm_train,
                   "jit_inference": torch_jit_inference,
                   "jit_block": torch_jit_block,
                   "jit_rmsnorm": torch_jit_rmsnorm,
                   "jit_rmsnorm_train": torch_jit_rmsnorm_train,
                   "jit_layernorm": torch_jit_layernorm,
                   "jit_attention": torch_jit_attention,
                   "jit_posemb": torch_jit_posemb}
# Workloads whose PyTorch function also takes this script's options.
TAKES_ARGS = ("mnist_mlp", "mnist_lenet", "train_step", "checkpoint", "gin", "ddp_mnist_mlp",
              "jit_inference")


# ---------------------------------------------------------------- comparison

def best_by_key(records, spec, extra_key=None):
    """{identity: best record over thread counts} for one framework."""
    best = {}
    for r in records:
        ident = tuple(r.get(k) for k in spec["keys"]) + ((r.get(extra_key),) if extra_key else ())
        v = r[spec["metric"]]
        cur = best.get(ident)
        if cur is None or (v > cur[spec["metric"]] if spec["higher"] else v < cur[spec["metric"]]):
            best[ident] = r
    return best


def compare(workload, ignis_records, torch_records):
    """Rows pairing ignis's and PyTorch's best measurement of each case."""
    spec = SPECS[workload]
    metric = spec["metric"]
    # Summary lines (a workload's speedup line) carry no metric: not measurements.
    ig = best_by_key([r for r in ignis_records if metric in r], spec)
    pt = best_by_key(torch_records, spec, "variant")
    rows = []
    for ident, r in ig.items():
        matches = [(k, v) for k, v in pt.items() if k[:len(ident)] == ident]
        for pk, p in (matches or [(None, None)]):
            row = {"workload": workload}
            row.update({k: r.get(k) for k in spec["keys"]})
            row["metric"] = metric
            row["ignis"] = r[metric]
            row["ignis_threads"] = r.get("threads")
            if workload == "sgemm":
                row["onednn_gflops"] = r.get("onednn_gflops")
                row["ignis_vs_onednn"] = r.get("ratio")
            for k in spec.get("extra", ()):
                row["ignis_" + k] = r.get(k)
            if p is not None:
                for k in spec.get("extra", ()):
                    row["pytorch_" + k] = p.get(k)
                row["pytorch_variant"] = p.get("variant")
                row["pytorch"] = p[metric]
                row["pytorch_threads"] = p.get("threads")
                # ignis/PyTorch time (< 1: ignis is faster) and its inverse, the speedup.
                ratio = (p[metric] / r[metric]) if spec["higher"] else (r[metric] / p[metric])
                row["time_ratio"] = ratio
                row["speedup"] = 1.0 / ratio
            rows.append(row)
    return rows


def fmt(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


LABELS = {"case": "case", "requires_grad": "grad", "n": "n", "batch": "batch", "model": "model",
          "image_size": "size", "ranks": "ranks", "shape": "shape", "part": "part", "mode": "mode"}


def print_table(workload, rows):
    spec = SPECS[workload]
    print(f"\n== {workload}: {spec['title']}")
    cols = [(LABELS[k], lambda r, k=k: fmt(r.get(k))) for k in spec["keys"]]
    cols.append(("PyTorch variant", lambda r: fmt(r.get("pytorch_variant"))))
    cols.append(("ignis", lambda r: f"{fmt(r['ignis'])} ({r['ignis_threads']}T)"))
    cols.append(("PyTorch", lambda r: f"{fmt(r.get('pytorch'))} ({r.get('pytorch_threads', '-')}T)"))
    if workload in ("mnist_mlp", "mnist_lenet", "train_step", "checkpoint", "gcn", "gin",
                    "ddp_mnist_mlp",
                    "jit_fusion", "jit_fusion_train", "jit_dropout_train", "jit_norm_train",
                    "jit_inference", "jit_block", "seed_jit_mlp", "jit_rmsnorm",
                    "jit_rmsnorm_train", "jit_layernorm", "jit_attention", "jit_posemb"):
        cols[-2] = ("ignis", lambda r: f"{fmt(r['ignis'], 3)} ({r['ignis_threads']}T)")
        cols[-1] = ("PyTorch",
                    lambda r: f"{fmt(r.get('pytorch'), 3)} ({r.get('pytorch_threads', '-')}T)")
        for k in spec.get("extra", ()):
            for who in ("ignis", "pytorch"):
                cols.append((f"{who} {k}", lambda r, c=f"{who}_{k}": fmt(
                    r.get(c), 4 if c.endswith("acc") else 1)))
    if workload == "sgemm":
        cols.append(("raw oneDNN", lambda r: fmt(r.get("onednn_gflops"))))
        cols.append(("ignis/oneDNN", lambda r: fmt(r.get("ignis_vs_onednn"), 3)))
    cols.append(("ignis/PyTorch time", lambda r: fmt(r.get("time_ratio"), 3)))
    cols.append(("speedup", lambda r: f"{fmt(r.get('speedup'), 2)}x"))
    table = [[label for label, _ in cols]] + [[get(r) for _, get in cols] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(cols))]
    for line in table:
        print("  ".join(c.ljust(w) if i < len(spec["keys"]) + 1 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(line, widths))))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ignis", default=os.path.join(os.path.dirname(here), "build", "ignis"),
                    help="the ignis binary (default: build/ignis)")
    ap.add_argument("--threads", default="1,2",
                    help="comma-separated thread counts to try; the best is kept (default 1,2)")
    ap.add_argument("--repeat", type=int, default=7,
                    help="timed batches per measurement, the median is reported (default 7)")
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                    help=f"comma-separated subset of {', '.join(WORKLOADS)} (default: "
                         f"{', '.join(DEFAULT_WORKLOADS)})")
    ap.add_argument("--train-step-models", default="resnet18",
                    help="train_step: comma-separated zoo models (lenet, alexnet, vgg11, vgg16, "
                         "resnet18, resnet34, resnet50, ...)")
    ap.add_argument("--checkpoint-models", default="resnet50",
                    help="checkpoint: the zoo models (ResNets, VGGs; default resnet50)")
    ap.add_argument("--checkpoint-batch", type=int, default=4,
                    help="checkpoint: batch size (default 4)")
    ap.add_argument("--jit-models", default="resnet18,resnet50",
                    help="jit_inference: the zoo models (default resnet18,resnet50)")
    ap.add_argument("--batch", type=int, default=32, help="train_step: batch size")
    ap.add_argument("--memory-format", default="channels_last",
                    choices=("channels_last", "contiguous"),
                    help="mnist_lenet, train_step: ignis's input layout (PyTorch runs both "
                         "and its faster one is compared)")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                    help="train_step, jit_inference: the parameters' and inputs' dtype (default "
                         "float32)")
    ap.add_argument("--image-size", type=int, default=0,
                    help="train_step: image size (default: the model's, 224 or 28 for lenet)")
    ap.add_argument("--classes", type=int, default=0,
                    help="train_step: classes (default: the model's, 1000 or 10 for lenet)")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(here), "data", "mnist"),
                    help="MNIST IDX files for mnist_mlp and mnist_lenet (default: data/mnist of "
                         "the checkout)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    ap.add_argument("--save", metavar="FILE", help="also write the JSON results to FILE")
    args = ap.parse_args()

    try:
        threads = [int(t) for t in args.threads.split(",") if t]
    except ValueError:
        ap.error(f"--threads expects integers separated by commas, got '{args.threads}'")
    if not threads or min(threads) < 1:
        ap.error("--threads: thread counts must be >= 1")
    workloads = [w for w in args.workloads.split(",") if w]
    for w in workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload '{w}' (choose from {', '.join(WORKLOADS)})")
    if not os.access(args.ignis, os.X_OK):
        ap.error(f"no ignis binary at {args.ignis} (build it, or pass --ignis PATH)")
    try:
        import torch
    except ImportError:
        sys.exit("compare_pytorch: PyTorch is not importable; run with /usr/bin/python3 "
                 "(Debian's python3-torch)")

    blas = torch_blas(torch)
    if "reference" in blas:
        print("compare_pytorch: PyTorch's float32 Linear runs on the reference BLAS here, far from "
              "its best; install libopenblas0 (Debian) for a fair comparison", file=sys.stderr)
    version = subprocess.run([args.ignis, "version"], stdout=subprocess.PIPE, text=True).stdout
    meta = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                     if l.startswith("model name")), platform.processor()),
        "ignis": version.splitlines()[0] if version else None,
        "pytorch": torch.__version__,
        "threads_tried": threads,
        "repeat": args.repeat,
        "torch_threads_default": torch.get_num_threads(),
        "pytorch_blas": blas,
    }
    results = []
    for w in workloads:
        ig, pt = [], []
        for t in threads:
            print(f"compare_pytorch: {w}, {t} thread(s)...", file=sys.stderr, flush=True)
            for extra in ignis_extra_args(w, args):
                ig += run_ignis(args.ignis, w, t, args.repeat, extra)
            if w == "seed_jit_mlp":  # the graph's line is workload=seed_jit_mlp_graph
                for r in ig:
                    r.setdefault("mode", "graph" if r["workload"].endswith("_graph") else "eager")
            torch.set_num_threads(t)
            if w in TAKES_ARGS:
                pt += TORCH_WORKLOADS[w](torch, t, args.repeat, args)
            else:
                pt += TORCH_WORKLOADS[w](torch, t, args.repeat)
        results.append((w, compare(w, ig, pt)))

    doc = {"meta": meta, "results": [r for _, rows in results for r in rows]}
    if args.save:
        with open(args.save, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    if args.json:
        json.dump(doc, sys.stdout, indent=2)
        print()
        return
    print(f"ignis vs PyTorch {meta['pytorch']} (BLAS: {blas}) on {meta['cpu']} "
          f"({meta['cpus']} CPUs), {meta['date']}; best of threads {threads} per framework "
          f"(shown as nT)")
    for w, rows in results:
        print_table(w, rows)
    print("\nignis/PyTorch time < 1 (speedup > 1x) means ignis is faster.")


if __name__ == "__main__":
    main()
