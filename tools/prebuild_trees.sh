#!/usr/bin/env bash
# Builds tools/bench_trees.sh's trees here, on the CPU machine, so that a
# device call spends its minutes running kernels, not compiling them. In
# session 46 a D = 64 tree's benchmark and GPU tests built here in about two
# minutes on two cores, and the session's last 50 s of device time tested and
# measured a kernel.
#
#   DIMS=64 BLOCKS=64 TESTS=1 tools/prebuild_trees.sh build_trees/new build_trees/main
#
# Each tree gets prebuilt/: bench_blockattn and its libblockattn.so.0.xz, and
# for the first tree with TESTS=1 test_gpu.xz, and the CMake options they were
# built with (tools/tree_options.sh). tools/bench_trees.sh, given the same
# DIMS, BLOCKS and EXTRA_CMAKE, unpacks them instead of building; given
# others, it stops.
# xz keeps the device tool's 64 MiB carry limit within reach of two trees
# with tests: a DIMS="64;128" BLOCKS="64;128" tree's library and test_gpu
# came to 25 MB each with gzip -1, 8.7 and 9.1 MB with xz -6 (session 48;
# about 40 s each on two cores, a second or two to unpack there).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
# shellcheck source=tools/tree_options.sh
source tools/tree_options.sh
[ $# -ge 1 ] || { sed -n '2,14p' "$0"; exit 2; }
first=1
for tree in "$@"; do
  name=$(basename "$tree")
  build=/tmp/prebuild_$name
  targets=(bench_blockattn)
  tests=OFF
  if [ "${TESTS:-0}" = 1 ] && [ $first = 1 ]; then
    targets+=(test_gpu)
    tests=ON
  fi
  cmake -S "$tree" -B "$build" "${tree_options[@]}" -DBLOCKATTN_BUILD_TESTS=$tests >"$build.log" 2>&1
  if ! cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >>"$build.log" 2>&1; then
    echo "prebuild of $tree failed:"
    tail -20 "$build.log"
    exit 1
  fi
  out=$tree/prebuilt
  rm -rf "$out"
  mkdir -p "$out"
  cp "$build/bench/bench_blockattn" "$out/"
  xz -T0 -6 -c "$build/libblockattn.so.0" >"$out/libblockattn.so.0.xz"
  if [ $tests = ON ]; then xz -T0 -6 -c "$build/tests/test_gpu" >"$out/test_gpu.xz"; fi
  printf '%s\n' "${tree_options[@]}" >"$out/options"  # bench_trees.sh checks them against its own
  echo "$out: $(du -sh "$out" | cut -f1) (DIMS=${DIMS:-64;128} BLOCKS=${BLOCKS:-64}${EXTRA_CMAKE:+ $EXTRA_CMAKE})"
  first=0
done
