#!/usr/bin/env bash
# Same-run A/B of the dense forward (issue 9) on a GPU machine: builds this
# tree's library and a baseline source folder's, in parallel, runs
# bench/dense_bench.py against each alternately ROUNDS times (SDPA's cuDNN and
# FlashAttention-2 backends timed in every run, on the same inputs), and
# prints one line per config, mask and implementation with every run's
# TFLOP/s side by side ("!" marks a run that was not correct). The dense
# counterpart of tools/ab_bench.sh.
#
# Here:   rm -rf build_ab_src && mkdir build_ab_src && git archive REF | tar -x -C build_ab_src
# There:  (the device tool's run, carry ["build_ab_src"]) tools/dense_ab.sh build_ab_src
#
# Environment: DIMS (default "64;128;256"), CONFIGS, MODES (default
# causal,full), DTYPES (default fp16), ROUNDS (default 2; BENCH_ROUNDS, default
# 1, is dense_bench.py's own --rounds within each run), TESTS=1 (also
# build and run the new tree's DenseForward GPU tests), NEW_CUDA_FLAGS,
# NEW_SRC (the new source folder, default this tree), TAG (suffix of the
# build folders, so that several A/Bs share one device call), OUT.
set -uo pipefail
# shellcheck source=tools/ab_build.sh disable=SC1091
. "$(dirname "$0")/ab_build.sh"
ab_setup "$@"
# shellcheck source=tools/dense_run.sh
. tools/dense_run.sh
base_dir=build_dense_base${TAG:-} new_dir=build_dense_new${TAG:-}
# shellcheck disable=SC2034  # cfg: read by ab_build
cfg=(-G Ninja -DCMAKE_BUILD_TYPE=Release "-DBLOCKATTN_HEAD_DIMS=${DIMS:-64;128;256}" -DBLOCKATTN_BLOCK_SIZES=64
  -DBLOCKATTN_BUILD_BENCH=OFF)
new_targets=(blockattn)
[ -n "${TESTS:-}" ] && new_targets+=(test_gpu)
ab_build dense blockattn "${new_targets[@]}" || exit 1
grep -h "spill stores" "$OUT/dense_build_new.log" | grep dense_forward | grep -v " 0 bytes spill" | sed 's/.*function //' |
  sort -u | head -8

for round in $(seq "$ROUNDS"); do
  for version in base new; do
    dense_run "$([ "$version" = new ] && echo "$new_dir" || echo "$base_dir")" "$OUT/dense${TAG:-}_${version}_$round"
  done
done
python3 tools/dense_summary.py "$OUT/dense${TAG:-}"

if [ -n "${TESTS:-}" ]; then
  "$new_dir"/tests/test_gpu --gtest_filter='DenseForward.*' >"$OUT/dense${TAG:-}_test_gpu.log" 2>&1
  echo "test_gpu DenseForward.*: rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/dense${TAG:-}_test_gpu.log" | tr '\n' ' ')"
fi
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true
