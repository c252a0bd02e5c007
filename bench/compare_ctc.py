#!/usr/bin/env python3
"""PyTorch's CPU ctc_loss on the shapes of BM_ctc_loss (bench/bench_losses.cpp): forward, and
forward + backward through log_softmax. Prints microseconds per iteration (median of 5 runs).

    /usr/bin/python3 bench/compare_ctc.py [--threads N]
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=0)
args = p.parse_args()
if args.threads:
    torch.set_num_threads(args.threads)
torch.manual_seed(0)
for T, N, C, S in [(50, 16, 20, 10), (200, 32, 40, 50)]:
    for bwd in (0, 1):
        logits = torch.randn(T, N, C, requires_grad=bool(bwd))
        targets = torch.randint(1, C, (N, S))
        il = torch.full((N,), T, dtype=torch.long)
        tl = torch.full((N,), S, dtype=torch.long)

        def step():
            loss = F.ctc_loss(logits.log_softmax(2), targets, il, tl)
            if bwd:
                torch.autograd.grad(loss, logits)

        for _ in range(3):
            step()
        runs = []
        for _ in range(5):
            iters, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < 0.3:
                step()
                iters += 1
            runs.append((time.perf_counter() - t0) / iters * 1e6)
        print(f"ctc_loss T={T} N={N} C={C} S={S} bwd={bwd} time_us={statistics.median(runs):.1f}"
              f" threads={torch.get_num_threads()}")
