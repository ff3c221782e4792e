#!/usr/bin/env bash
# Same-run timing of the dense forward (issue 9) in several source trees on a
# GPU machine: the dense counterpart of tools/bench_trees.sh. Builds each
# tree's library with the same (restricted) kernel set, all in parallel, runs
# bench/dense_bench.py against each tree in turn ROUNDS times (SDPA's cuDNN
# and FlashAttention-2 backends timed in every run, on the same inputs), and
# prints one line per config, mask and implementation with every run's
# TFLOP/s side by side (tools/dense_summary.py; "!" marks a run that was not
# correct). tools/dense_ab.sh is the two-tree form.
#
# Here:   tools/make_trees.sh main NAME:PATCH ...
# There:  (the device tool's run, carry ["build_trees"])
#         tools/dense_trees.sh build_trees/main build_trees/NAME ...
#
# Environment: DIMS (default "64;128;256"), CONFIGS, MODES (default
# causal,full), DTYPES (default fp16), ROUNDS (default 2), BENCH_ROUNDS
# (dense_bench.py's own --rounds within each run, default 1), OUT (default
# gpu_out/). TEST_FILTER runs the first tree's test_gpu with that GoogleTest
# filter first (a failure stops the call before any timing).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=tools/dense_run.sh
. tools/dense_run.sh
export PATH=/usr/local/cuda/bin:$PATH
OUT=${OUT:-gpu_out}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
[ $# -ge 1 ] || { echo "usage: tools/dense_trees.sh TREE..." >&2; exit 2; }
configure=(-G Ninja -DCMAKE_BUILD_TYPE=Release "-DBLOCKATTN_HEAD_DIMS=${DIMS:-64;128;256}" -DBLOCKATTN_BLOCK_SIZES=64
  -DBLOCKATTN_BUILD_BENCH=OFF)

# Oversubscribed 1.5x, as bench_trees.sh: trees whose units finish early leave their cores to the others.
jobs_each=$(( ($(nproc) * 3 / 2 + $# - 1) / $# ))
pids=() names=()
first=1
for tree in "$@"; do
  name=$(basename "$tree")
  names+=("$name")
  targets=(blockattn)
  [ -n "${TEST_FILTER:-}" ] && [ $first = 1 ] && targets+=(test_gpu)
  tests=OFF
  [ ${#targets[@]} -gt 1 ] && tests=ON
  first=0
  ( cmake -S "$tree" -B "build_dense_$name" "${configure[@]}" "-DBLOCKATTN_BUILD_TESTS=$tests" &&
    cmake --build "build_dense_$name" -j "$jobs_each" --target "${targets[@]}" ) >"$OUT/dense_build_$name.log" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "build of ${names[$i]} failed:"; tail -20 "$OUT/dense_build_${names[$i]}.log"; exit 1; }
  grep -h "spill stores" "$OUT/dense_build_${names[$i]}.log" | grep dense_forward | grep -v " 0 bytes spill" |
    sed "s/.*function /${names[$i]}: /" | sort -u | head -4
done

if [ -n "${TEST_FILTER:-}" ]; then
  "build_dense_${names[0]}/tests/test_gpu" --gtest_filter="$TEST_FILTER" >"$OUT/dense_tests.log" 2>&1
  rc=$?
  echo "tests of ${names[0]} (rc=$rc): $(grep -E '^\[  (PASSED|FAILED)' "$OUT/dense_tests.log" | head -2 | tr '\n' ' ')"
  [ $rc -eq 0 ] || { grep -E '^\[  FAILED' "$OUT/dense_tests.log" | head; exit 1; }
fi

for round in $(seq "$ROUNDS"); do
  for name in "${names[@]}"; do
    dense_run "build_dense_$name" "$OUT/dense_${name}_$round"
  done
done
python3 tools/dense_summary.py "$OUT/dense"
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true
