#!/usr/bin/env bash
# Builds every fuzz target with clang (libFuzzer + ASan + UBSan) and runs each for FUZZ_SECONDS
# from its seeds, with the shared dictionary; prints one summary line per target. Called by
# `make fuzz` after the library is built in $BUILD. Exit status: non-zero if a target found a
# crash (its reproducer is left in $BUILD/fuzz/, the log in $BUILD/fuzz/<target>.log).
#
# The parsers (src/io, src/data/idx.cpp, cifar.cpp, graph_pickle.cpp, graph_tu.cpp,
# src/train/checkpoint.cpp, the graph loader src/jit/serialize.cpp, the fused programs'
# parser and differentiation src/jit/fused_program.cpp, fused_autodiff.cpp) are compiled into
# each target with coverage and sanitizers; the rest of ignis (tensors, ops, modules) comes from
# the already built libignis.so, whose code is not instrumented (only the parsers are fuzzed).
set -euo pipefail
BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
TARGETS=${FUZZ_TARGETS:-"idx idx_gz cifar safetensors_header safetensors checkpoint graph pickle tu fused_program"}
out=$BUILD/fuzz
mkdir -p "$out"
lib=$(cd "$BUILD" && pwd)
cxx=(clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Wno-unknown-warning-option
     -Iinclude -Isrc -Ifuzz)
with_lib=(-L"$lib" -lignis -Wl,-rpath,"$lib" -lz)
io=(src/io/serialize.cpp src/io/safetensors_header.cpp src/io/json.cpp)

sources() {
  case $1 in
    idx | idx_gz) echo "src/data/idx.cpp" ;;
    cifar) echo "src/data/cifar.cpp" ;;
    safetensors_header) echo "src/io/safetensors_header.cpp src/io/json.cpp" ;;
    safetensors) echo "${io[*]}" ;;
    checkpoint) echo "${io[*]} src/train/checkpoint.cpp" ;;
    graph) echo "${io[*]} src/jit/serialize.cpp" ;;
    pickle) echo "src/data/graph_pickle.cpp" ;;
    tu) echo "src/data/graph_tu.cpp" ;;
    fused_program) echo "src/jit/fused_program.cpp src/jit/fused_autodiff.cpp" ;;
  esac
}

# Seeds, written by the library itself.
clang++ -std=c++20 -O1 -Wno-unknown-warning-option -Iinclude -Isrc fuzz/make_seeds.cpp "${with_lib[@]}" -o "$out/make_seeds"
"$out/make_seeds" "$out/seeds"

status=0
for t in $TARGETS; do
  # shellcheck disable=SC2046
  "${cxx[@]}" "fuzz/${t}_fuzzer.cpp" $(sources "$t") "${with_lib[@]}" -o "$out/${t}_fuzzer"
  mkdir -p "$out/corpus/$t" "$out/seeds/${t%_header}"
  dirs=("$out/corpus/$t" "$out/seeds/${t%_header}")
  [ -d "fuzz/seeds/${t%_header}" ] && dirs+=("fuzz/seeds/${t%_header}")
  max_len=4096
  [ "$t" = cifar ] && max_len=9300
  set +e
  (cd "$out" && ASAN_OPTIONS=detect_leaks=1 "./${t}_fuzzer" -max_total_time="$FUZZ_SECONDS" \
     -max_len=$max_len -dict="$OLDPWD/fuzz/ignis.dict" -print_final_stats=1 \
     $(for d in "${dirs[@]}"; do case $d in /*) echo "$d" ;; *) echo "$OLDPWD/$d" ;; esac; done) \
     > "$t.log" 2>&1)
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$t.log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$out/$t.log" | tail -1 | grep -o '[0-9]*' || echo "?")
  echo "fuzz $t: ${FUZZ_SECONDS} s, $runs inputs, coverage $cov edges, $([ $rc = 0 ] && echo 'no crash' || echo "FAILED (exit $rc, see $out/$t.log)")"
  [ $rc = 0 ] || status=1
done
exit $status
