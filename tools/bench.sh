#!/usr/bin/env bash
# Builds the library and runs the headline benchmark (pass extra arguments,
# e.g. --sweep or --json out.json, to bench_blockattn). Without a GPU it says
# so and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target bench_blockattn
exec "$BUILD_DIR"/bench/bench_blockattn "$@"
