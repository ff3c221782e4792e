#!/usr/bin/env bash
# Builds the library and runs the headline benchmark (pass extra arguments,
# e.g. --sweep or --json out.json, to bench_blockattn). Without a GPU it says
# so and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/configure.sh >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target bench_blockattn
exec "$BUILD_DIR"/bench/bench_blockattn "$@"
