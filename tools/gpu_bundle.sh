#!/usr/bin/env bash
# Packs what `make gpu-check` runs on a GPU machine that cannot build ignis (no Debian packages
# there: no oneDNN, GoogleTest or OpenMPI): the CUDA test programs, the lecture notes' GPU
# example and the ignis CLI, built here with the CUDA backend, plus every shared library they load
# except those the GPU machine has (the C/C++ runtime, the CUDA driver, cuBLAS), and MNIST's IDX
# files when data/mnist has them (for the MNIST MLP epoch against PyTorch). Output: gpu-bundle/{bin,lib}, stripped, and
# gpu-bundle.tgz, the one file to carry (both git-ignored), checked against the 64 MiB a device
# call can carry. See docs/cuda.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=gpu-bundle
# Every tests/test_cuda*.cpp program, plus the allocators' fake-device tests.
CUDA_TESTS=()
for f in tests/test_cuda*.cpp tests/test_caching_allocator.cpp tests/test_host_caching_allocator.cpp; do
  [ -f "$f" ] && CUDA_TESTS+=("$(basename "$f" .cpp)")
done
PROGRAMS=(test_op_table "${CUDA_TESTS[@]}")
PROGRAMS=("${PROGRAMS[@]/#/tests/}" gpu_async ignis)
grep -q "IGNIS_WITH_CUDA:INTERNAL=ON\|ignis_cuda" "$BUILD/build.ninja" || {
  echo "gpu-bundle: $BUILD has no CUDA backend (configure with -DIGNIS_CUDA=ON)" >&2; exit 2; }
cmake --build "$BUILD" --target "${CUDA_TESTS[@]}" test_op_table gpu_async ignis_cli
rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib"
for p in "${PROGRAMS[@]}"; do
  cp "$BUILD/$p" "$OUT/bin/"
done
# Shared libraries, resolved here; the C/C++ runtime, the CUDA driver and CUDA's own libraries
# (hundreds of MiB; the GPU machine has them, see tools/gpu_check.sh) are left out.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcublas|libcudnn|libnccl|libnvrtc)'
for p in "$OUT"/bin/*; do
  ldd "$p" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ $name =~ $skip ]]; then cp -L "$path" "$OUT/lib/$name"; fi
done
strip --strip-unneeded "$OUT"/bin/* "$OUT"/lib/* 2>/dev/null || true
if [ -f data/mnist/train-images-idx3-ubyte ]; then
  mkdir -p "$OUT/mnist"
  cp data/mnist/*-ubyte "$OUT/mnist/"
fi
# One compressed file travels (the libraries shrink to about a third).
tar -czf "$OUT.tgz" "$OUT"
size=$(du -m "$OUT.tgz" | cut -f1)
echo "gpu-bundle: $(ls "$OUT/lib" | wc -l) libraries, $(du -sm "$OUT" | cut -f1) MiB in $OUT," \
  "${size} MiB in $OUT.tgz (carry $OUT.tgz to the GPU machine)"
if [ "$size" -ge 60 ]; then
  echo "gpu-bundle: ${size} MiB is too close to the 64 MiB a device call carries" >&2
  exit 1
fi
