#!/usr/bin/env python3
"""The DDP scaling model of docs/distributed.md: predicted step time and weak-scaling efficiency
of data-parallel training with ring all-reduce, from a per-message latency alpha (s), a link
bandwidth (bytes/s), the per-rank compute time of a step and the gradient buckets.

  T_ar(S, p)   = 2 (p - 1) alpha + 2 (p - 1) / p * S / B        (ring all-reduce of S bytes)
  T_comm(p)    = sum over buckets of T_ar(S_i, p)                 (buckets go one after another)
  T_exposed(p) = max(T_ar(S_last, p), T_comm(p) - T_backward)     (communication not hidden: the
                 last bucket is ready only when backward ends; the others overlap backward)
  T_step(p)    = T_compute + T_exposed(p),  efficiency E(p) = T_compute / T_step(p)

usage: ddp_scaling_model.py [--alpha 1e-5] [--gbits 10 100]
       ddp_scaling_model.py --check --alpha A --gbits G [--ranks 2] [--compute S] [--backward S]
                            [--buckets BYTES ...] [--steps 469]
  --check: the model's all-reduce times for `ignis bench allreduce`'s sizes and the MNIST MLP's
  step and epoch time at one link, to set beside what bench/netns_ddp.sh measures.
"""
import argparse


def buckets(total_bytes, first=1 << 20, cap=25 << 20):
    """Bucket sizes of DDP's defaults for a model whose parameters are of roughly even size."""
    out, left = [], total_bytes
    for size in [first] + [cap] * (total_bytes // cap + 1):
        if left <= 0:
            break
        out.append(min(size, left))
        left -= size
    return out


def t_allreduce(s, p, alpha, bw):
    return 0.0 if p == 1 else 2 * (p - 1) * alpha + 2 * (p - 1) / p * s / bw


def step(model, p, alpha, bw):
    bs = model["buckets"]
    comm = sum(t_allreduce(s, p, alpha, bw) for s in bs)
    exposed = max(t_allreduce(bs[-1], p, alpha, bw), comm - model["backward"])
    if len(bs) == 1:
        exposed = comm  # one bucket: it starts when backward ends
    return model["compute"] + exposed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--alpha", type=float, default=10e-6, help="per-message latency, s")
    ap.add_argument("--gbits", type=float, nargs="+", default=[10, 100])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--compute", type=float, default=1.96e-3, help="per-rank step compute, s")
    ap.add_argument("--backward", type=float, default=1.0e-3, help="of which backward, s")
    ap.add_argument("--buckets", type=int, nargs="+", default=[535818 * 4],
                    help="bucket sizes in bytes, in all-reduce order")
    ap.add_argument("--steps", type=int, default=469, help="steps per epoch")
    args = ap.parse_args()
    if args.check:
        p, bw = args.ranks, args.gbits[0] * 1e9 / 8
        print(f"link {args.gbits[0]:g} Gbit/s, alpha {args.alpha * 1e6:g} us, p = {p}")
        size = 4096
        while size <= 64 << 20:
            print(f"  all_reduce {size:>9} bytes: {t_allreduce(size, p, args.alpha, bw) * 1e6:10.1f} us")
            size *= 4
        m = {"buckets": args.buckets, "compute": args.compute, "backward": args.backward}
        t = step(m, p, args.alpha, bw)
        print(f"  step {t * 1e3:.3f} ms (compute {args.compute * 1e3:.3f} ms), epoch of "
              f"{args.steps} steps {t * args.steps:.3f} s, efficiency {args.compute / t:.2f}")
        return
    models = {
        # 535,818 float32 parameters in one bucket; per-rank step at batch 64 measured on the
        # 2-core machine (forward 0.62 ms, backward 1.0 ms, optimizer and data 0.34 ms).
        "mnist_mlp": {"buckets": [535818 * 4], "compute": 1.96e-3, "backward": 1.0e-3},
        # 25,557,032 float32 parameters; compute ASSUMED 0.2 s per step (a GPU node at batch 32),
        # backward two thirds of it.
        "resnet50": {"buckets": buckets(25557032 * 4), "compute": 0.2, "backward": 0.133},
    }
    for gbits in args.gbits:
        bw = gbits * 1e9 / 8
        print(f"link {gbits:g} Gbit/s, alpha {args.alpha * 1e6:g} us")
        print(f"  {'model':<10} {'p':>5} {'T_step ms':>10} {'efficiency':>10}")
        for name, m in models.items():
            for p in [2, 4, 8, 16, 64, 256, 1024]:
                t = step(m, p, args.alpha, bw)
                print(f"  {name:<10} {p:>5} {t * 1e3:>10.2f} {m['compute'] / t:>10.2f}")


if __name__ == "__main__":
    main()
