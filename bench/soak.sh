#!/usr/bin/env bash
# Soak run (a benchmark, not a test): builds ignis_soak in $BUILD (default build/) and trains for
# STEPS steps (default 10,000), printing RSS and allocator statistics every 500 steps; fails
# when they grow beyond the bounds stated in bench/soak/soak.cpp. Results: docs/reliability.md.
set -euo pipefail
BUILD=${BUILD:-build}
cmake --build "$BUILD" --target ignis_soak
/usr/bin/time -v "./$BUILD/bench/ignis_soak" "${STEPS:-10000}" 2> >(grep -E "Maximum resident|Elapsed" >&2)
