#!/usr/bin/env bash
# Device-side runner for the patches session 20 prepared (perf.md, "Prepared
# for session 21"): each patch applied to a copy of this tree (no .git on the
# device: tar, then patch -p1), then a same-run A/B against this tree
# (tools/ab_bench.sh, NEW_SRC), its GPU tests and, where the patch moves
# shared-memory ownership, racecheck. Three groups, one device call each:
#
#   docs/experiments/run_prepared.sh wide      # D = 224/256: narrow column split, rotary column split
#   docs/experiments/run_prepared.sh forward   # D = 96/160 sm90 forward in exact boxes
#   docs/experiments/run_prepared.sh backward  # backward read-ahead, split wait
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export PATH=/usr/local/cuda/bin:$PATH

# copy_with PATCH DIR: this tree (build folders left out) with PATCH applied.
copy_with() {
  rm -rf "$2" && mkdir -p "$2" &&
    tar --exclude='./build*' --exclude='./gpu_out' --exclude='./.git' -cf - . | tar -xf - -C "$2" &&
    patch -s -p1 -d "$2" <"docs/experiments/$1.patch"
}

racecheck() {  # racecheck BUILD FILTER
  timeout 240 compute-sanitizer --tool racecheck --error-exitcode 9 "$1/tests/test_gpu" --gtest_filter="$2" \
    >"build_out/racecheck_$(basename "$1").log" 2>&1
  echo "racecheck $1 rc=$? $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "build_out/racecheck_$(basename "$1").log" | tr '\n' ' ')"
}

mkdir -p build_out
t0=$SECONDS
case "${1:-}" in
  wide)
    copy_with column-split-narrow-d224 build_exp_cs224
    echo "=== column split in 32-column chunks, D = 224"
    TAG=_cs224 OUT=build_out/cs224 NEW_SRC=build_exp_cs224 DIMS="64;224" ROUNDS=3 WORKLOADS=headdim-d224-h2 \
      TESTS='*KernelTest*d224*:*Packed*d224*:*Malformed*' tools/ab_bench.sh .
    racecheck build_ab_new_cs224 '*KernelTest*bf16_d224*:*Packed*d224*'
    echo "[$((SECONDS - t0)) s] === rotary on the column-split backward, D = 224 and 256"
    copy_with rotary-column-split-backward build_exp_rcs
    TAG=_rcs OUT=build_out/rcs NEW_SRC=build_exp_rcs DIMS="64;224;256" ROUNDS=1 BENCH_ARGS=--rotary \
      WORKLOADS=headdim-d224-h2,headdim-d256-h2 \
      TESTS='*KernelTest*d224*rope*:*KernelTest*d256*rope*:*Packed*d224*rope*:*Packed*d256*rope*' tools/ab_bench.sh .
    build_ab_new_rcs/bench/bench_blockattn --workloads headdim-d224-h2,headdim-d256-h2 --rotary 2>&1 | tail -4
    racecheck build_ab_new_rcs '*KernelTest*bf16_d256*rope*:*Packed*d224*rope*'
    ;;
  forward)
    echo "=== sm90 forward in exact 32-column boxes at D = 96 and 160 (two, then three consumers at 96)"
    copy_with narrow-forward-d96-d160 build_exp_nf
    for variant in two three; do
      flags=""
      [ $variant = three ] && flags=-DBLOCKATTN_EXP_NARROW_FORWARD_THREE
      TAG=_nf OUT=build_out/nf_$variant NEW_SRC=build_exp_nf NEW_CUDA_FLAGS="$flags" DIMS="64;96;160" \
        EXTRA_CMAKE=-DBLOCKATTN_MANUAL_KERNELS=ON BENCH_ARGS="--backend hopper" \
        WORKLOADS=headdim-d96-h5,headdim-d160-h3 TESTS='*KernelTest*d96*:*KernelTest*d160*:*Packed*d96*' \
        tools/ab_bench.sh .
    done
    ;;
  backward)
    echo "=== backward: schedule read a tile ahead; S and dP in two wgmma groups"
    for exp in backward-read-ahead:BLOCKATTN_EXP_BWD_READ_AHEAD backward-split-wait:BLOCKATTN_EXP_BWD_SPLIT_WAIT; do
      copy_with "${exp%%:*}" "build_exp_${exp%%:*}"
      TAG="_${exp%%:*}" OUT="build_out/${exp%%:*}" NEW_SRC="build_exp_${exp%%:*}" NEW_CUDA_FLAGS="-D${exp#*:}" \
        DIMS="64;96;128" EXTRA_CMAKE=-DBLOCKATTN_MANUAL_KERNELS=ON BENCH_ARGS="--backend hopper" \
        WORKLOADS=headline-d64,headline-d128,tail-d128,headdim-d96-h5 TESTS='*KernelTest*d96*:*KernelTest*d128*' \
        tools/ab_bench.sh .
    done
    ;;
  *)
    echo "usage: $0 wide|forward|backward" >&2
    exit 2
    ;;
esac
echo "[done in $((SECONDS - t0)) s]"
