#!/usr/bin/env bash
# Same-run benchmark of several source trees on a GPU machine: a bisection in
# one device call. Builds each tree's benchmark with the same (restricted)
# kernel set, all in parallel, runs them alternately ROUNDS times, and prints
# one line per tree and workload with every round's % of copy side by side.
# tools/ab_bench.sh is the two-tree A/B with tests; this is for finding which
# of several commits moved a figure (e.g. a regression the sweep flagged).
#
# Here (each tree travels as an ignored folder):
#   for c in C1 C2 C3; do mkdir -p build_trees/$c && git archive $c | tar -x -C build_trees/$c; done
# or, for HEAD and prepared patches, tools/make_trees.sh main NAME:PATCH ...
# There (the device tool's run, carry ["build_trees"]):
#   DIMS=64 BLOCKS=128 WORKLOADS=headline-d64 BENCH_ARGS="--block-size 128" \
#     tools/bench_trees.sh build_trees/C1 build_trees/C2 build_trees/C3
#
# Environment: DIMS, BLOCKS (CMake ;-lists, default "64;128" and "64"),
# EXTRA_CMAKE, WORKLOADS, BENCH_ARGS, ROUNDS (default 2), OUT (default gpu_out/),
# TREE_TIMEOUT (seconds per benchmark run, default 180).
#
# A tree with prebuilt/ (tools/prebuild_trees.sh, run here with the same
# DIMS, BLOCKS and EXTRA_CMAKE) is unpacked, not built: the call's minutes go
# to the GPU.
#
# Tests first, in the same call (a kernel change is timed only once it is
# correct): TEST_FILTER runs the first tree's test_gpu with that GoogleTest
# filter (and FUZZ_CASES fuzz cases, default 500), RACE_FILTER runs its
# racecheck with that one (RACE_TIMEOUT seconds, default 150); a failure
# stops the call before any benchmark.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH=/usr/local/cuda/bin:$PATH
OUT=${OUT:-gpu_out}
ROUNDS=${ROUNDS:-2}
WORKLOADS=${WORKLOADS:-headline-d64,headline-d128}
mkdir -p "$OUT"
[ $# -ge 1 ] || { echo "usage: tools/bench_trees.sh TREE..." >&2; exit 2; }
# Every tree's configure, the tests' and the benchmarks' alike: one kernel set.
# EXTRA_CMAKE adds options to all of them (e.g. -DBLOCKATTN_MANUAL_KERNELS=ON,
# to time a manual row with BENCH_ARGS="--backend hopper").
# shellcheck source=tools/tree_options.sh
source tools/tree_options.sh
configure=("${tree_options[@]}")
# A prebuilt tree is used only if it was built with these options
# (prebuild_trees.sh records them in prebuilt/options).
prebuilt() { [ -d "$1/prebuilt" ] && [ "$(cat "$1/prebuilt/options" 2>/dev/null)" = "$(printf '%s\n' "${configure[@]}")" ]; }
for tree in "$@"; do
  if [ -d "$tree/prebuilt" ] && ! prebuilt "$tree"; then
    echo "$tree/prebuilt was built with other options than DIMS, BLOCKS and EXTRA_CMAKE name here:"
    cat "$tree/prebuilt/options" 2>/dev/null; exit 1
  fi
done

if [ -n "${TEST_FILTER:-}${RACE_FILTER:-}" ]; then
  test_build="build_tree_$(basename "$1")_test"
  if prebuilt "$1" && [ -f "$1/prebuilt/test_gpu.xz" ]; then
    mkdir -p "$test_build/tests"
    xz -dc "$1/prebuilt/test_gpu.xz" >"$test_build/tests/test_gpu" && chmod +x "$test_build/tests/test_gpu"
  elif ! (cmake -S "$1" -B "$test_build" "${configure[@]}" && cmake --build "$test_build" -j "$(nproc)" --target test_gpu) \
      >"$OUT/build_test.log" 2>&1; then
    echo "test build of $1 failed:"; tail -20 "$OUT/build_test.log"; exit 1
  fi
  if [ -n "${TEST_FILTER:-}" ]; then
    "$test_build/tests/test_gpu" --gtest_filter="$TEST_FILTER" --cases "${FUZZ_CASES:-500}" >"$OUT/tests.log" 2>&1
    rc=$?
    echo "tests of $1 (rc=$rc): $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tests.log" | head -2 | tr '\n' ' ')"
    [ $rc -eq 0 ] || { grep -E '^\[  FAILED' "$OUT/tests.log" | head; exit 1; }
  fi
  if [ -n "${RACE_FILTER:-}" ]; then
    timeout "${RACE_TIMEOUT:-150}" compute-sanitizer --tool racecheck --error-exitcode 3 "$test_build/tests/test_gpu" \
      --gtest_filter="$RACE_FILTER" >"$OUT/racecheck.log" 2>&1
    rc=$?
    echo "racecheck of $1 (rc=$rc, 124: timed out): $(grep 'RACECHECK SUMMARY' "$OUT/racecheck.log" | tail -1)"
    [ $rc -eq 0 ] || [ $rc -eq 124 ] || exit 1
  fi
fi

# Oversubscribed 1.5x: trees whose units finish early leave their cores to the others.
jobs_each=$(( ($(nproc) * 3 / 2 + $# - 1) / $# ))
pids=() names=()
for tree in "$@"; do
  name=$(basename "$tree")
  names+=("$name")
  if prebuilt "$tree"; then
    mkdir -p "build_tree_$name/bench"
    cp "$tree/prebuilt/bench_blockattn" "build_tree_$name/bench/"
    xz -dc "$tree/prebuilt/libblockattn.so.0.xz" >"build_tree_$name/libblockattn.so.0"
    continue
  fi
  ( cmake -S "$tree" -B "build_tree_$name" "${configure[@]}" -DBLOCKATTN_BUILD_TESTS=OFF &&
    cmake --build "build_tree_$name" -j "$jobs_each" --target bench_blockattn ) >"$OUT/build_$name.log" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "build of ${names[$i]} failed:"; tail -20 "$OUT/build_${names[$i]}.log"; exit 1; }
done

# A tree whose kernel hangs (a barrier waited on one phase too far: session
# 27's six K/V pairs) must not take the whole device call with it: each run
# gets TREE_TIMEOUT seconds (default 180), line-buffered output so its log
# shows the last workload it finished, and a tree that timed out is skipped
# in later rounds.
hung=" "
for round in $(seq "$ROUNDS"); do
  for tree in "$@"; do
    name=$(basename "$tree")
    [[ "$hung" == *" $name "* ]] && continue
    # The tree's own library first: a prebuilt benchmark's run path names
    # the CPU machine's build folder.
    # shellcheck disable=SC2086  # BENCH_ARGS is split into several arguments on purpose
    LD_LIBRARY_PATH="build_tree_$name${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      timeout "${TREE_TIMEOUT:-180}" stdbuf -oL "build_tree_$name/bench/bench_blockattn" --workloads "$WORKLOADS" \
      ${BENCH_ARGS:-} --json "$OUT/tree_${name}_$round.json" >"$OUT/tree_${name}_$round.log" 2>&1
    rc=$?
    if [ $rc -eq 124 ]; then
      hung+="$name "
      echo "tree $name: timed out after ${TREE_TIMEOUT:-180} s in round $round (hung?); last lines of its log:"
      tail -3 "$OUT/tree_${name}_$round.log"
    elif [ $rc -ne 0 ]; then
      tail -3 "$OUT/tree_${name}_$round.log"
    fi
  done
done

trees=()
for name in "${names[@]}"; do
  trees+=(--tree "$name")
  for round in $(seq "$ROUNDS"); do trees+=("$OUT/tree_${name}_$round.json"); done
done
python3 tools/ab_summary.py "${trees[@]}"
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true
