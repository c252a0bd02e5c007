#!/usr/bin/env python3
"""PyTorch's side of the GPU benchmarks, run by tools/gpu_check.sh on the GPU machine beside
`ignis bench gpu_matmul` and `ignis bench train_step --device cuda`: the same workloads, the same
sizes, timed the same way, printed as the same key=value lines (workload=torch_...).

  python3 bench/gpu_compare.py [--repeat R] [--train-steps S] [--data DIR] [--workloads W]
                               [--cudnn-benchmark]

--data: MNIST's IDX files, for the MNIST MLP epoch (`ignis bench mnist_mlp --device cuda`).
"""
import argparse
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--train-steps", type=int, default=7)
    ap.add_argument("--data", default="", help="MNIST's IDX files (the MNIST MLP epoch)")
    ap.add_argument("--workloads", default="matmul,mnist,resnet50",
                    help="which to run, comma-separated (default: all three)")
    ap.add_argument("--cudnn-benchmark", action="store_true",
                    help="torch.backends.cudnn.benchmark = True (as ignis's --cudnn-benchmark)")
    args = ap.parse_args()
    run = set(args.workloads.split(","))
    try:
        import torch
    except ImportError:
        print("gpu_compare: python3 has no torch", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("gpu_compare: torch sees no GPU", file=sys.stderr)
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False  # ignis's float32 products are full precision
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    bench_tag = " cudnn_benchmark=on" if args.cudnn_benchmark else ""
    dev = torch.device("cuda:0")

    # Square products, timed with CUDA events over `repeat` queued products (as ignis's).
    for dtype, name in ((torch.float32, "float32"), (torch.bfloat16, "bfloat16")):
        if "matmul" not in run:
            break
        for n in (1024, 2048, 4096, 8192):
            torch.manual_seed(0)
            a = torch.randn(n, n, device=dev, dtype=dtype)
            b = torch.randn(n, n, device=dev, dtype=dtype)
            torch.mm(a, b)
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.repeat):
                torch.mm(a, b)
            stop.record()
            stop.synchronize()
            s = start.elapsed_time(stop) / 1000.0 / args.repeat
            print(f"workload=torch_gpu_matmul dtype={name} n={n} ms={s * 1000:.3f} "
                  f"tflops={2.0 * n ** 3 / s / 1e12:.1f}", flush=True)

    if args.data and "mnist" in run:
        mnist_mlp(torch, dev, args.data)
    if "resnet50" not in run:
        return 0

    # ResNet-50 SGD steps, channels-last, batch 128, as `ignis bench train_step`: median step.
    try:
        import torchvision
    except ImportError:
        print("gpu_compare: no torchvision, no ResNet-50", file=sys.stderr)
        return 0
    for dtype, name in ((torch.float32, "float32"), (torch.bfloat16, "bfloat16")):
        torch.manual_seed(0)
        model = torchvision.models.resnet50(num_classes=1000).to(dev, dtype)
        model = model.to(memory_format=torch.channels_last).train()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = torch.rand(128, 3, 224, 224, device=dev, dtype=dtype)
        x = x.contiguous(memory_format=torch.channels_last)
        y = torch.arange(128, device=dev) * 7919 % 1000

        def step():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            torch.cuda.synchronize()

        for _ in range(2):
            step()
        times = []
        for _ in range(args.train_steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        s = sorted(times)[len(times) // 2]
        print(f"workload=torch_train_step model=resnet50 batch=128 dtype={name}{bench_tag} "
              f"memory_format=channels_last s_per_step={s:.4f} img_per_s={128 / s:.1f}",
              flush=True)
    return 0


def read_idx(torch, path):
    """An IDX file (MNIST's format) as a uint8 tensor of its shape."""
    with open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def mnist_mlp(torch, dev, root):
    """One training epoch of the demo MLP (784-512-256-10, ReLU; SGD lr 0.05 momentum 0.9,
    batch 128, shuffled, cross-entropy), as `ignis bench mnist_mlp --device cuda`: the data
    normalised once in host memory, each batch gathered in one indexing op (a BatchSampler, the
    fast form of PyTorch's DataLoader over a TensorDataset), pinned, copied without blocking; the
    second epoch timed, ending with a synchronize."""
    import os
    x = read_idx(torch, os.path.join(root, "train-images-idx3-ubyte")).float().div_(255)
    x = x.sub_(0.1307).div_(0.3081)
    y = read_idx(torch, os.path.join(root, "train-labels-idx1-ubyte")).long()
    data = torch.utils.data
    loader = data.DataLoader(
        data.TensorDataset(x, y), batch_size=None, pin_memory=True,
        sampler=data.BatchSampler(data.RandomSampler(range(len(y))), 128, drop_last=False))
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                          nn.ReLU(), nn.Linear(256, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def epoch():
        model.train()
        for xb, yb in loader:
            opt.zero_grad()
            xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()

    epoch()  # warm-up, as ignis's
    t0 = time.perf_counter()
    epoch()
    s = time.perf_counter() - t0
    print(f"workload=torch_mnist_mlp device=cuda s_per_epoch={s:.4f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
