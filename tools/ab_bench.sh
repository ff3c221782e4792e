#!/usr/bin/env bash
# Same-run A/B of the C++ benchmark on a GPU machine: builds this tree and a
# baseline source folder with the same (restricted) kernel set, in parallel,
# runs their benchmarks alternately ROUNDS times, optionally runs a GPU test
# filter on this tree, and prints one line per workload with every round's
# figures side by side (tools/ab_summary.py). A change is judged against the
# same card in the same run; this is the script for it.
#
# Here (the baseline must travel with the tree; build* folders are ignored):
#   rm -rf build_ab_src && mkdir build_ab_src && git archive REF | tar -x -C build_ab_src
# There (the device tool's run, carry ["build_ab_src"]):
#   DIMS="64;128" WORKLOADS=headline-d64,tail-d64 tools/ab_bench.sh build_ab_src
#
# Environment: DIMS, BLOCKS (CMake ;-lists, default "64;128" and "64"),
# WORKLOADS (bench_blockattn --workloads), ROUNDS (default 2), BENCH_ARGS
# (e.g. "--rotary" or "--backend hopper"), TESTS (a gtest filter for this
# tree's test_gpu; empty: no tests), NEW_CUDA_FLAGS (added to this tree's
# CUDA flags: an experiment's macros), NEW_SRC (the new source folder, default
# this tree: an experiment's patch applied to a git archive), EXTRA_CMAKE
# (CMake arguments for both builds, e.g. -DBLOCKATTN_MANUAL_KERNELS=ON), TAG
# (suffix of the build folders, so that several A/Bs share one device call),
# BASE_BUILD (the baseline's build folder, default build_ab_base$TAG: name an
# earlier A/B's, built with the same DIMS and BLOCKS, and the baseline is not
# built again), OUT (default gpu_out/).
set -uo pipefail
# shellcheck source=tools/ab_build.sh disable=SC1091
. "$(dirname "$0")/ab_build.sh"
ab_setup "$@"
WORKLOADS=${WORKLOADS:-headline-d64,headline-d128,sweep-d64-L256-f0.5,sweep-d128-L256-f0.5,tail-d64,tail-d128}
TESTS=${TESTS:-}
base_dir=${BASE_BUILD:-build_ab_base${TAG:-}} new_dir=build_ab_new${TAG:-}
# shellcheck disable=SC2206
cfg=(-G Ninja -DCMAKE_BUILD_TYPE=Release "-DBLOCKATTN_HEAD_DIMS=${DIMS:-64;128}" "-DBLOCKATTN_BLOCK_SIZES=${BLOCKS:-64}" ${EXTRA_CMAKE:-})
targets=(bench_blockattn)
[ -n "$TESTS" ] && targets+=(test_gpu)

ab_build ab bench_blockattn "${targets[@]}" || exit 1
grep -h "spill stores" "$OUT/ab_build_new.log" | grep -v " 0 bytes spill" | sed 's/.*function //' | sort -u | head -8

for round in $(seq "$ROUNDS"); do
  for version in base new; do
    dir=${base_dir}; [ "$version" = new ] && dir=${new_dir}
    # shellcheck disable=SC2086  # BENCH_ARGS is split into several arguments on purpose
    "$dir"/bench/bench_blockattn --workloads "$WORKLOADS" ${BENCH_ARGS:-} \
      --json "$OUT/ab_${version}_$round.json" >"$OUT/ab_${version}_$round.log" 2>&1 ||
      tail -3 "$OUT/ab_${version}_$round.log"
  done
done
python3 tools/ab_summary.py --base "$OUT"/ab_base_*.json --new "$OUT"/ab_new_*.json

if [ -n "$TESTS" ]; then
  "$new_dir"/tests/test_gpu --gtest_filter="$TESTS" >"$OUT/ab_test_gpu.log" 2>&1
  echo "test_gpu ($TESTS): rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/ab_test_gpu.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED' "$OUT/ab_test_gpu.log" | head -5
fi
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true
