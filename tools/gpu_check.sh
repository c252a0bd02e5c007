#!/usr/bin/env bash
# Runs the CUDA checks on a GPU machine from gpu-bundle.tgz (tools/gpu_bundle.sh): the CUDA tests
# (every op against the CPU, copies, streams, events, the allocator, NCCL in a world of one, the
# zoo models), then the lecture notes' timed GPU examples. Prints the GPU and driver first.
# Exit status: 0 when everything passed.
#   bash tools/gpu_check.sh [all|tests|bench]   (default all: a device call too short for both
#                                                can run the tests and the benchmarks apart)
set -uo pipefail
part=${1:-all}
case $part in all|tests|bench) ;; *) echo "gpu-check: expected all, tests or bench, got '$part'"; exit 2;; esac
cd "$(dirname "$0")/.."
B=gpu-bundle
if [ ! -x "$B/bin/test_cuda" ] && [ -f "$B.tgz" ]; then tar -xzf "$B.tgz"; fi
[ -x "$B/bin/test_cuda" ] || {
  echo "gpu-check: no $B/bin/test_cuda: run 'make gpu-bundle' where ignis builds, then carry $B.tgz"
  exit 2; }
# CUDA's libraries (cuBLAS): the toolkit's, or those of the Python packages beside PyTorch.
cuda_libs=""
for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" $(python3 -c 'import nvidia, os; \
    p = nvidia.__path__[0]; print(" ".join(os.path.join(p, d, "lib") for d in os.listdir(p)))' \
    2>/dev/null); do
  [ -d "$d" ] && cuda_libs="$cuda_libs:$d"
done
export LD_LIBRARY_PATH="$PWD/$B/lib$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
  echo "gpu-check: nvidia-smi found no GPU"
status=0
if [ "$part" != bench ]; then
  for t in "$B"/bin/test_*; do
    [ "$(basename "$t")" = test_op_table ] && continue
    echo "== $(basename "$t")"
    "$t" --gtest_color=no || status=1
  done
  echo "== the op table on the GPU"
  "$B/bin/test_op_table" --gtest_color=no --gtest_filter='OpTableCuda.*' || status=1
  echo "== gpu_async (the lecture notes' GPU examples, timed)"
  "$B/bin/gpu_async" || status=1
fi
[ "$part" = tests ] && exit $status
# The GPU benchmarks, ignis's and PyTorch's side by side (bench/gpu_compare.py), then a summary
# of the ratios for docs/benchmarks.md.
log=$(mktemp)
echo "== benchmarks"
{
  "$B/bin/ignis" bench gpu_matmul
  for dt in float32 bfloat16; do
    "$B/bin/ignis" bench train_step --model resnet50 --batch 128 --device cuda --dtype "$dt" \
      --memory-format channels_last
  done
  if [ -d "$B/mnist" ]; then
    "$B/bin/ignis" bench mnist_mlp --device cuda --data "$B/mnist"
    python3 bench/gpu_compare.py --data "$B/mnist"
  else
    echo "gpu-check: the bundle has no MNIST (data/mnist was empty where it was made)"
    python3 bench/gpu_compare.py
  fi
} 2>&1 | tee "$log"
python3 - "$log" <<'PY'
import re, sys
rows = [dict(kv.split("=", 1) for kv in l.split()) for l in open(sys.argv[1])
        if l.startswith("workload=")]
def find(w, **k):
    for r in rows:
        if r["workload"] == w and all(r.get(a) == b for a, b in k.items()):
            return r
print("== summary (ignis / PyTorch, same GPU, same run)")
i, t = find("mnist_mlp", device="cuda:0"), find("torch_mnist_mlp")
if i and t:
    print(f"MNIST MLP epoch on the GPU: ignis {i['s_per_epoch']} s, PyTorch {t['s_per_epoch']} s:"
          f" {float(t['s_per_epoch']) / float(i['s_per_epoch']):.2f}x faster")
for dt in ("float32", "bfloat16"):
    i, t = find("gpu_matmul", dtype=dt, n="8192"), find("torch_gpu_matmul", dtype=dt, n="8192")
    if i and t:
        print(f"matmul 8192 {dt}: ignis {i['tflops']} TFLOP/s, PyTorch (cuBLAS) {t['tflops']}:"
              f" {float(i['tflops']) / float(t['tflops']):.2f}")
    i, t = find("train_step", dtype=dt), find("torch_train_step", dtype=dt)
    if i and t:
        print(f"ResNet-50 training, batch 128, channels-last, {dt}: ignis {i['img_per_s']} img/s,"
              f" PyTorch {t['img_per_s']}: {float(i['img_per_s']) / float(t['img_per_s']):.2f}")
PY
exit $status
