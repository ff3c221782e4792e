#!/usr/bin/env bash
# One call on a GPU machine: build, read the kernels' resource use and SASS,
# run the GPU tests (and the malformed-offsets ones under compute-sanitizer),
# the Python suite, and the benchmarks; print a short summary table last.
#
#   STEPS="build sass test sanitize fuzz bench python latency compare layer dense regress" tools/gpu_check.sh
# Logs and JSON go to $OUT (default: gpu_out/).
# A device call lasts at most 10 minutes; on the lent H100 (2026-11-25) the
# full build plus `test` took about 9 (ctest 6, of which the
# add_subdirectory package test, which builds the library again, 4), and each
# sanitizer 4-5: run `build test` in one call and `sanitize` (SANITIZERS=...)
# in the next, while the machine is warm and keeps the build.
#
# After any kernel change, run `build regress` (about 2 minutes on the H100):
# every recorded figure measured again. An A/B on the rows a change was made
# for does not see the other rows that run the same kernel (session 27: the
# grouped kernel's TMA stores, measured on the grouped rows, cost the
# FewBlocks kernel, the same code with a group of one, 6 points at
# sweep-d64-L256-f0.5; docs/perf.md, "TMA stores in the FewBlocks kernel").
#
# BASELINE=<dir>: a checkout of an earlier version (e.g. `git archive` of a
# commit into an ignored folder, carried to the GPU machine); the bench step
# then builds its benchmark too and runs old and new alternately, REPEAT times
# (default 2), so a change is judged against the same card in the same run.
set -uo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-"build sass test sanitize bench python regress"}
OUT=${OUT:-gpu_out}
BENCH_ARGS=${BENCH_ARGS:-"--workloads headline-d128,headline-d64,sweep-d128-L256-f0.5,sweep-d64-L256-f0.5 --rotary"}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
summary=()
note() { summary+=("$(printf '%-10s %s' "$1" "$2")"); }
want() { [[ " $STEPS " == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

if want build; then
  # The full kernel table, manual rows included, even in a build folder
  # configured earlier with a restricted set (CMake keeps cached values).
  if cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBLOCKATTN_HEAD_DIMS= -DBLOCKATTN_BLOCK_SIZES= \
       -DBLOCKATTN_MANUAL_KERNELS=ON \
       >"$OUT/build.log" 2>&1 &&
     cmake --build build -j 16 >>"$OUT/build.log" 2>&1; then
    note build "ok ($(grep -c 'spill' "$OUT/build.log") ptxas spill lines, $(grep -c 'C7510' "$OUT/build.log") wgmma serialized by a call, $(grep -c 'C7512' "$OUT/build.log") for registers: the prepared rotary backward's, chosen)"
  else
    tail -40 "$OUT/build.log"; note build FAILED; printf '%s\n' "${summary[@]}"; exit 1
  fi
fi

if want sass; then
  cuobjdump -res-usage build/libblockattn.so 2>&1 | c++filt | grep -E "Function|REG" >"$OUT/resources.txt"
  cuobjdump -sass build/libblockattn.so 2>/dev/null | c++filt >"$OUT/sass.txt"
  awk '/Function :/ {f=$0; n[f]=1} / HMMA/ {h[f]++} / HGMMA/ {g[f]++} /LDL|STL/ {l[f]++}
       END {for (k in n) printf "%s HMMA=%d HGMMA=%d LDL/STL=%d\n", k, h[k], g[k], l[k]}' \
    "$OUT/sass.txt" | sed 's/.*Function : //' | sort >"$OUT/sass_summary.txt"
  cat "$OUT/sass_summary.txt"
  note sass "$(grep -c 'HMMA=[1-9]' "$OUT/sass_summary.txt") kernels with HMMA, $(grep -c 'HGMMA=[1-9]' "$OUT/sass_summary.txt") with HGMMA, $(grep -c 'LDL/STL=[1-9]' "$OUT/sass_summary.txt") with local memory"
fi

if want test; then
  ctest --test-dir build --output-on-failure -j 4 >"$OUT/ctest.log" 2>&1
  rc=$?
  build/tests/test_gpu --gtest_filter='*KernelTest*:*Malformed*' 2>&1 | grep -E "^\[ RUN|rel_l2" >"$OUT/accuracy.txt"
  note tests "$(grep -E 'tests passed' "$OUT/ctest.log") (rc=$rc)"
  [ $rc -eq 0 ] || grep -E "Failed|FAILED|Expected|Which is|error" "$OUT/ctest.log" | head -40
fi

if want sanitize; then
  # Every kernel (both paths, both dtypes, every head dim: the Hq == Hkv packed
  # cases), the grouped-query and malformed-offsets cases and the schedule
  # kernel under the four compute-sanitizer tools (exact-size allocations:
  # memcheck reports any access past a tensor). On the full build each tool
  # takes 4-5 minutes (H100, 2026-11-25), so the four together do not fit one
  # 10-minute device call: SANITIZERS picks the tools of this call, and
  # SANITIZE_FILTER narrows the cases (e.g. '*KernelTest*_d192_*').
  filter=${SANITIZE_FILTER:-'*Malformed*:*PackedShort*:ScheduleKernel*:ReuseSchedule*:*KernelTest*_hq4_hkv4_packed_valid:*KernelTest*_rope*:DenseForward.Edge*'}
  tools=${SANITIZERS:-memcheck racecheck synccheck initcheck}
  for tool in $tools; do
    compute-sanitizer --tool $tool --error-exitcode 3 build/tests/test_gpu --gtest_filter="$filter" >"$OUT/$tool.log" 2>&1
    note $tool "rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/$tool.log" | tail -1)"
  done
  # Races between one tile's last accesses and the next tile's first show only
  # where CTAs walk many tiles: racecheck over LongWalks cases too (the grid
  # capped at three CTAs; about 30-60 s a case on the H100). This found the
  # shared-tile backward's race (docs/perf.md, session 24) that the KernelTest
  # cases, a tile or two per CTA, never showed.
  if [[ " $tools " == *" racecheck "* ]]; then
    walks=${LONG_WALKS_RACE_FILTER:-'*LongWalks*/bf16_d64_hq4_hkv4_packed_valid_b128:*LongWalks*/bf16_d128_hq4_hkv4_packed_valid:*LongWalks*/bf16_d64_hq3_hkv1_headmajor_valid'}
    compute-sanitizer --tool racecheck --error-exitcode 3 build/tests/test_gpu --gtest_filter="$walks" \
      >"$OUT/racecheck_walks.log" 2>&1
    note racecheck "long walks rc=$? $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck_walks.log" | tail -1)"
  fi
  compute-sanitizer --tool memcheck --error-exitcode 3 build/tests/test_sm90 >"$OUT/memcheck_sm90.log" 2>&1
  note memcheck "sm90 primitives rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_sm90.log" | tail -1)"
fi

if want fuzz; then
  # Soak: FUZZ_CASES differential cases (the ctest suite runs 200).
  build/tests/test_gpu --gtest_filter='Shards/Fuzz.*' --cases "${FUZZ_CASES:-2000}" >"$OUT/fuzz.log" 2>&1
  note fuzz "rc=$? $(grep -c '^  case ' "$OUT/fuzz.log") cases, $(grep -E '^\[  (PASSED|FAILED)' "$OUT/fuzz.log" | tr '\n' ' ')"
fi

if want bench; then
  versions=(new)
  if [ -n "${BASELINE:-}" ]; then
    if cmake -S "$BASELINE" -B build_baseline -G Ninja -DCMAKE_BUILD_TYPE=Release -DBLOCKATTN_BUILD_TESTS=OFF \
         >"$OUT/build_baseline.log" 2>&1 && cmake --build build_baseline -j 16 --target bench_blockattn >>"$OUT/build_baseline.log" 2>&1; then
      versions=(new baseline)
    else
      note baseline "build FAILED (build_baseline.log)"
    fi
  fi
  for round in $(seq 1 "${REPEAT:-1}"); do
    for backend in portable auto; do
      for version in "${versions[@]}"; do
        dir=build; [ "$version" = baseline ] && dir=build_baseline
        tag=${backend}; [ "$version" = baseline ] && tag=${backend}_baseline
        "$dir"/bench/bench_blockattn $BENCH_ARGS --backend $backend --json "$OUT/bench_${tag}_r$round.json" 2>&1 |
          tee "$OUT/bench_${tag}_r$round.log"
        note bench "$tag round $round: rc=${PIPESTATUS[0]}"
      done
    done
  done
  if [ ${#versions[@]} -gt 1 ]; then  # the auto backend's rounds side by side (tools/ab_summary.py)
    python3 tools/ab_summary.py --base "$OUT"/bench_auto_baseline_r*.json --new "$OUT"/bench_auto_r*.json |
      tee "$OUT/bench_ab.txt"
  fi
fi

if want python && [ -d tests/python ]; then
  # The documented offline install (the in-tree build backend needs no
  # package), then an import and the environment report from outside the checkout.
  if PIP_NO_INDEX=1 python3 -m pip install -q --no-deps --target /tmp/ba_site ./python >"$OUT/pip.log" 2>&1 &&
     (cd /tmp && PYTHONPATH=/tmp/ba_site python3 -m blockattn) >>"$OUT/pip.log" 2>&1; then
    note pip "installed; $(grep -m1 'library:' "$OUT/pip.log")"
  else
    note pip "FAILED (pip.log)"; tail -5 "$OUT/pip.log"
  fi
  # This machine has torch, so the build made the compiled fast path: its
  # tests must run, not skip. Then the block-attention tests once more on the
  # ctypes route alone (what an install without the module runs).
  PYTHONPATH=python BLOCKATTN_LIBRARY="$PWD/build/libblockattn.so" BLOCKATTN_EXPECT_EXTENSION=1 timeout 900 \
    python3 -m pytest -v -s -p no:cacheprovider -rs tests/python >"$OUT/pytest.log" 2>&1
  note pytest "rc=$? $(tail -1 "$OUT/pytest.log")"
  PYTHONPATH=python BLOCKATTN_LIBRARY="$PWD/build/libblockattn.so" BLOCKATTN_NO_EXTENSION=1 timeout 600 \
    python3 -m pytest -v -s -p no:cacheprovider -rs tests/python/test_block_attention.py >"$OUT/pytest_ctypes.log" 2>&1
  note pytest "ctypes route: rc=$? $(tail -1 "$OUT/pytest_ctypes.log")"
fi

if want compare && [ -f bench/compare.py ]; then
  PYTHONPATH=python BLOCKATTN_LIBRARY="$PWD/build/libblockattn.so" PYTHONUNBUFFERED=1 timeout 400 \
    python3 bench/compare.py ${COMPARE_ARGS:-} --json "$OUT/compare.json" --png "$OUT/compare.png" >"$OUT/compare.log" 2>&1
  note compare "rc=$? (compare.log)"
  tail -40 "$OUT/compare.log"
fi

if want latency; then
  # Wall time per call of small problems against FA2 varlen (issue 10).
  PYTHONPATH=python BLOCKATTN_LIBRARY="$PWD/build/libblockattn.so" PYTHONUNBUFFERED=1 timeout 300 \
    python3 bench/latency.py ${LATENCY_ARGS:-} >"$OUT/latency.log" 2>&1
  note latency "rc=$? (latency.log)"
  tail -12 "$OUT/latency.log"
fi

if want layer && [ -f bench/layer_compare.py ]; then
  # Rotary and projection-layer pipelines against FA2 varlen + compiled rotary (issue 8).
  PYTHONPATH=python BLOCKATTN_LIBRARY="$PWD/build/libblockattn.so" PYTHONUNBUFFERED=1 timeout 500 \
    python3 bench/layer_compare.py ${LAYER_ARGS:-} --json "$OUT/layer_compare.json" >"$OUT/layer_compare.log" 2>&1
  note layer "rc=$? (layer_compare.log)"
  tail -30 "$OUT/layer_compare.log"
  build/bench/bench_layer 2>&1 | tee "$OUT/bench_layer.log"
  note layer "C++ bench_layer rc=${PIPESTATUS[0]}"
fi

if want dense && [ -f bench/dense_bench.py ]; then
  # The dense forward against SDPA's FA2 and cuDNN backends and FlexAttention (issue 9).
  PYTHONPATH=python BLOCKATTN_LIBRARY="$PWD/build/libblockattn.so" PYTHONUNBUFFERED=1 timeout 500 \
    python3 bench/dense_bench.py ${DENSE_ARGS:-} --json "$OUT/dense_bench.json" --chart "$OUT/dense_bench.svg" \
    >"$OUT/dense_bench.log" 2>&1
  note dense "rc=$? (dense_bench.log)"
  cat "$OUT/dense_bench.log"
fi

if want regress; then
  # Every figure the README cites (docs/results/recorded.json) measured again:
  # a drop of more than 2 points (ratios: 0.03; the dense forward's ratio to
  # cuDNN: 0.05) against its record is a regression. The dense records are
  # compared where the dense step of this call wrote its JSON.
  dense_json=()
  [ -f "$OUT/dense_bench.json" ] && dense_json=(--dense-results "$OUT/dense_bench.json")
  python3 tools/regression_check.py --bench build/bench/bench_blockattn --out "$OUT/regress" "${dense_json[@]}" \
    ${REGRESS_ARGS:-} >"$OUT/regress.log" 2>&1
  note regress "rc=$? $(tail -1 "$OUT/regress.log")"
  grep -E "REGRESSION|NOT MEASURED|better" "$OUT/regress.log" | head -20
fi

echo
echo "==== summary ===="
printf '%s\n' "${summary[@]}"
for log in "$OUT"/bench_*_r*.log; do
  [ -f "$log" ] || continue
  echo "-- $(basename "$log" .log)"
  grep -E "^GPU" "$log" | cut -c1-110
  sed -n '/^workload/,$p' "$log"
done

# PACK_LOGS=1 (for remote runs that return only a few files): pack the logs
# and results into one archive and keep only it and the charts.
if [ "${PACK_LOGS:-0}" = 1 ]; then
  tar czf /tmp/gpu_check_logs.tgz -C "$OUT" --exclude sass.txt --exclude '*.png' . &&
    find "$OUT" -maxdepth 1 -type f ! -name '*.png' -delete &&
    mv /tmp/gpu_check_logs.tgz "$OUT/logs.tgz"
fi
exit 0
