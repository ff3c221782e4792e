# shellcheck shell=bash
# shellcheck disable=SC2154  # base_dir, new_dir, cfg: set by the caller
# Sourced by tools/ab_bench.sh and tools/dense_ab.sh, the first half of a
# same-run A/B:
#
#   ab_setup "$@"     the repository root as working folder; base_src (the
#                     script's first argument), OUT, ROUNDS and NEW_SRC with
#                     their defaults; OUT created
#   ab_build PREFIX BASE_TARGET NEW_TARGET...
#                     configures the baseline and the new source folder with
#                     the same CMake arguments and builds both in parallel
#
# ab_build reads what ab_setup set, and the caller's base_dir, new_dir, cfg (an
# array of CMake arguments) and NEW_CUDA_FLAGS; it logs to
# $OUT/PREFIX_{cfg,build}_{base,new}.log and on failure prints the failing
# log's tail and returns 1.
ab_setup() {
  cd "$(dirname "$0")/.." || exit 1
  base_src=${1:?baseline source folder (see the header)}
  export PATH=/usr/local/cuda/bin:$PATH
  OUT=${OUT:-gpu_out}
  ROUNDS=${ROUNDS:-2}
  NEW_SRC=${NEW_SRC:-.}
  mkdir -p "$OUT"
}

ab_build() {
  local prefix=$1 base_target=$2
  shift 2
  if ! cmake -S "$base_src" -B "$base_dir" "${cfg[@]}" -DBLOCKATTN_BUILD_TESTS=OFF >"$OUT/${prefix}_cfg_base.log" 2>&1 ||
    ! cmake -S "$NEW_SRC" -B "$new_dir" "${cfg[@]}" "-DCMAKE_CUDA_FLAGS=${NEW_CUDA_FLAGS:-}" \
      >"$OUT/${prefix}_cfg_new.log" 2>&1; then
    tail -20 "$OUT/${prefix}"_cfg_*.log
    return 1
  fi
  cmake --build "$new_dir" -j "$(nproc)" --target "$@" >"$OUT/${prefix}_build_new.log" 2>&1 &
  local new_build=$!
  cmake --build "$base_dir" -j "$(nproc)" --target "$base_target" >"$OUT/${prefix}_build_base.log" 2>&1 || {
    tail -30 "$OUT/${prefix}_build_base.log"
    return 1
  }
  wait $new_build || {
    tail -30 "$OUT/${prefix}_build_new.log"
    return 1
  }
}
