#!/usr/bin/env bash
# Runs the CUDA checks on a GPU machine from gpu-bundle.tgz (tools/gpu_bundle.sh): the CUDA tests
# (every op against the CPU, copies, streams, events, the allocator, NCCL in a world of one, the
# zoo models), then the lecture notes' timed GPU examples. Prints the GPU and driver first.
# Exit status: 0 when everything passed.
#   [GPU_PROFILE=1] bash tools/gpu_check.sh [all|tests|bench|resnet|profile]   (default all: a
#       device call too short for both can run the tests and the benchmarks apart; resnet: only
#       the ResNet-50 training steps of the benchmarks, both sides; GPU_PROFILE=1 adds the
#       profiles to `all`, after the benchmarks; profile: ResNet-50's training step
#       in both dtypes under the profiler with CUDA_LAUNCH_BLOCKING=1, so that each op's time is
#       its GPU time, for finding what to speed up)
set -uo pipefail
part=${1:-all}
case $part in all|tests|bench|resnet|profile) ;;
  *) echo "gpu-check: expected all, tests, bench, resnet or profile, got '$part'"; exit 2;; esac
cd "$(dirname "$0")/.."
B=gpu-bundle
if [ ! -x "$B/bin/test_cuda" ] && [ -f "$B.tgz" ]; then tar -xzf "$B.tgz"; fi
[ -x "$B/bin/test_cuda" ] || {
  echo "gpu-check: no $B/bin/test_cuda: run 'make gpu-bundle' where ignis builds, then carry $B.tgz"
  exit 2; }
# CUDA's libraries (cuBLAS): the toolkit's, or those of the Python packages beside PyTorch.
cuda_libs=""
for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" $(python3 -c 'import nvidia, os
for p in nvidia.__path__:
    for d in os.listdir(p): print(os.path.join(p, d, "lib"))' 2>/dev/null); do
  [ -d "$d" ] && cuda_libs="$cuda_libs:$d"
done
export LD_LIBRARY_PATH="$PWD/$B/lib$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for l in libcublas.so.13 libcublasLt.so.13 libnvrtc.so.13 libcudnn.so.9 libnccl.so.2; do
  found=$(IFS=:; for d in $LD_LIBRARY_PATH; do [ -e "$d/$l" ] && { echo "$d"; break; }; done)
  echo "gpu-check: $l: ${found:-NOT FOUND on LD_LIBRARY_PATH}"
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
  echo "gpu-check: nvidia-smi found no GPU"
status=0
# Each test program runs in the background with its log in $LOGS (the op table's two GPU tests
# apart), so that the whole suite fits a short device call. A program that dies (a CUDA error is
# sticky, so one bad kernel would hide every later test) is run again without the test, or the
# op-table sample, it died in, up to 6 times; the test is reported as crashed.
LOGS=${GPU_LOG_DIR:-gpu-logs}
mkdir -p "$LOGS"
deadline=$(( $(date +%s) + ${GPU_TEST_SECONDS:-300} ))
run_program() {  # log-name program positive-filter
  local name=$1 prog=$2 pos=$3 neg="" skip="" tries=0 rc last left
  : >"$LOGS/$name.log"
  while :; do
    left=$(( deadline - $(date +%s) ))
    [ "$left" -gt 5 ] || { echo "gpu-check: $name: out of time" >>"$LOGS/$name.log"; return 1; }
    IGNIS_OPTABLE_TRACE=1 IGNIS_OPTABLE_SKIP="$skip" timeout -k 5 "$left" "$prog" \
      --gtest_color=no --gtest_filter="$pos${neg:+-$neg}" >"$LOGS/$name.try" 2>&1
    rc=$?
    cat "$LOGS/$name.try" >>"$LOGS/$name.log"
    [ $rc -lt 124 ] && return $rc
    tries=$((tries + 1))
    last=$(grep -a '^\[ RUN      \]' "$LOGS/$name.try" | tail -1 | awk '{print $4}')
    echo "gpu-check: $name: exit status $rc in ${last:-?} (try $tries)" | tee -a "$LOGS/$name.log"
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && return 1
    [ $tries -ge 6 ] && return 1
    case $last in
      OpTableCuda.*)
        local sample
        sample=$(grep -a '^optable: ' "$LOGS/$name.try" | grep -v '^optable: skipped' | tail -1)
        sample=${sample#optable: }
        [ -n "$sample" ] || return 1
        echo "CRASHED sample: $sample" | tee -a "$LOGS/$name.log"
        skip="${skip:+$skip|}$sample";;
      "") return 1;;
      *) echo "CRASHED test: $last" | tee -a "$LOGS/$name.log"
         neg="${neg:+$neg:}$last";;
    esac
  done
}
if [ "$part" = all ] || [ "$part" = tests ]; then
  t0=$(date +%s)
  pids=()
  # a dozen programs share the cores: few OpenMP threads each, and no spinning
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-3} OMP_WAIT_POLICY=passive
  for t in "$B"/bin/test_*; do
    n=$(basename "$t")
    if [ "$n" = test_op_table ]; then
      run_program optable_entries "$t" 'OpTableCuda.EveryEntry*' & pids+=($!)
      run_program optable_gradchecks "$t" 'OpTableCuda.EveryGradcheck*' & pids+=($!)
    else
      run_program "$n" "$t" '*' & pids+=($!)
    fi
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  echo "== tests: $(( $(date +%s) - t0 )) s"
  for f in "$LOGS"/*.log; do
    echo "== $(basename "$f" .log)"
    # The outcome lines, failures with their messages, and what the op table printed.
    grep -a -E '^\[  (PASSED|FAILED) |^\[  FAILED  \]|^CRASHED|^gpu-check|Failure$|^op table|^gradchecks through|^  [a-z_0-9]+ \[|Expected|Which is|Value of|Actual|samples differ|fail:' "$f" |
      head -c 6000
    echo
  done
  rm -f "$LOGS"/*.try
  unset OMP_NUM_THREADS OMP_WAIT_POLICY
  echo "== gpu_async (the lecture notes' GPU examples, timed)"
  timeout 60 "$B/bin/gpu_async" || status=1
fi
[ "$part" = tests ] && exit $status
# ResNet-50's training step under the profiler with launches blocking (each op's time is then
# its GPU time), and the MNIST MLP epoch's host time: what to speed up next.
profile() {
  for dt in bfloat16 float32; do
    echo "== profile: ResNet-50 training step, batch 128, channels-last, $dt (launches blocking)"
    CUDA_LAUNCH_BLOCKING=1 timeout 120 "$B/bin/ignis" bench train_step --model resnet50 \
      --batch 128 --device cuda --dtype "$dt" --memory-format channels_last --repeat 2 \
      --profile "${GPU_LOG_DIR:-gpu-logs}/resnet50_$dt.json" | head -c 12000 || status=1
  done
  if [ -d "$B/mnist" ]; then
    echo "== profile: the MNIST MLP epoch on the GPU (launches queued: where the host's time goes)"
    timeout 60 "$B/bin/ignis" bench mnist_mlp --device cuda --data "$B/mnist" \
      --profile "${GPU_LOG_DIR:-gpu-logs}/mnist_mlp.json" | head -c 8000 || status=1
  fi
}
if [ "$part" = profile ]; then
  profile
  exit $status
fi
# The GPU benchmarks, ignis's and PyTorch's side by side (bench/gpu_compare.py), then a summary
# of the ratios for docs/benchmarks.md.
log=$(mktemp)
echo "== benchmarks (the tests took ${SECONDS} s since the start)"
bench_start=$SECONDS
{
  [ "$part" = resnet ] || timeout 90 "$B/bin/ignis" bench gpu_matmul
  # graph mode's fusion-bound block (issue 13's 2x target) on the GPU: eager against the frozen
  # graph, whose gelu + layer_norm + residual is one generated (NVRTC) kernel
  [ "$part" = resnet ] || timeout 90 "$B/bin/ignis" bench jit_block --device cuda --repeat 20
  for dt in float32 bfloat16; do
    timeout 90 "$B/bin/ignis" bench train_step --model resnet50 --batch 128 --device cuda --dtype "$dt" \
      --memory-format channels_last
  done
  # cuDNN's legacy API alone (every convolution as before the graph API), for the comparison
  for dt in float32 bfloat16; do
    timeout 90 "$B/bin/ignis" bench train_step --model resnet50 --batch 128 --device cuda --dtype "$dt" \
      --memory-format channels_last --cudnn-api legacy
  done
  # cuDNN's timed algorithm choice (torch.backends.cudnn.benchmark), both sides
  for dt in float32 bfloat16; do
    timeout 90 "$B/bin/ignis" bench train_step --model resnet50 --batch 128 --device cuda \
      --dtype "$dt" --memory-format channels_last --cudnn-benchmark
  done
  timeout 120 python3 bench/gpu_compare.py --workloads resnet50 --cudnn-benchmark
  if [ "$part" = resnet ]; then
    timeout 120 python3 bench/gpu_compare.py --workloads resnet50
  elif [ -d "$B/mnist" ]; then
    timeout 90 "$B/bin/ignis" bench mnist_mlp --device cuda --data "$B/mnist"
    timeout 200 python3 bench/gpu_compare.py --data "$B/mnist"
  else
    echo "gpu-check: the bundle has no MNIST (data/mnist was empty where it was made)"
    timeout 200 python3 bench/gpu_compare.py
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
e = find("jit_block", mode="eager", part=None)
c = find("jit_block", mode="compiler", part=None)
if e and c:
    print(f"jit_block on the GPU: eager {e['ms_per_forward']} ms, graph {c['ms_per_forward']} ms:"
          f" {float(e['ms_per_forward']) / float(c['ms_per_forward']):.2f}x")
i, t = find("mnist_mlp", device="cuda:0"), find("torch_mnist_mlp")
if i and t:
    print(f"MNIST MLP epoch on the GPU: ignis {i['s_per_epoch']} s, PyTorch {t['s_per_epoch']} s:"
          f" {float(t['s_per_epoch']) / float(i['s_per_epoch']):.2f}x faster")
for dt in ("float32", "bfloat16"):
    i, t = find("gpu_matmul", dtype=dt, n="8192"), find("torch_gpu_matmul", dtype=dt, n="8192")
    if i and t:
        print(f"matmul 8192 {dt}: ignis {i['tflops']} TFLOP/s, PyTorch (cuBLAS) {t['tflops']}:"
              f" {float(i['tflops']) / float(t['tflops']):.2f}")
    for mode in (None, "on"):
        i = find("train_step", dtype=dt, cudnn_benchmark=mode, cudnn_api=None)
        t = find("torch_train_step", dtype=dt, cudnn_benchmark=mode)
        if i and t:
            print(f"ResNet-50 training, batch 128, channels-last, {dt}"
                  f"{', cudnn benchmark' if mode else ''}: ignis {i['img_per_s']} img/s,"
                  f" PyTorch {t['img_per_s']}: {float(i['img_per_s']) / float(t['img_per_s']):.2f}")
    i = find("train_step", dtype=dt, cudnn_benchmark=None, cudnn_api=None)
    l = find("train_step", dtype=dt, cudnn_benchmark=None, cudnn_api="legacy")
    if i and l:
        print(f"ResNet-50 training, {dt}: cuDNN's graph API {i['img_per_s']} img/s, legacy API"
              f" {l['img_per_s']}: {float(i['img_per_s']) / float(l['img_per_s']):.2f}")
PY
# GPU_PROFILE=1 with `all`: the profiles too, after the benchmarks.
echo "gpu-check: the benchmarks took $(( SECONDS - bench_start )) s"
if [ "$part" = all ] && [ -n "${GPU_PROFILE:-}" ]; then profile; fi
echo "gpu-check: ${SECONDS} s in all"
exit $status
