#!/usr/bin/env bash
# Source-level ncu profile of one kernel launch of bench_blockattn, in bench
# conditions (clocks and caches as the benchmark sees them), exported as text
# a machine without ncu can read:
#
#   KERNEL=regex:backward_kernel NAME=bwd_d64 tools/profile_kernel.sh BUILD_DIR -- --workloads headline-d64 --backend hopper
#
# Writes to $OUT (default gpu_out/): NAME.ncu-rep, NAME.details.csv (every
# section of --set full) and NAME.sass.csv (per SASS instruction: executions
# and sampled warp stalls by reason; ncu 2025's CUDA-source view exports the
# source text without the metrics, so read the SASS around the landmarks:
# SYNCS.PHASECHK waits, BAR.SYNC, WARPGROUP.DEPBAR, STG).
# SKIP (default 1) launches of the kernel are passed over first: the
# benchmark's warm-up. KERNEL_NAME_BASE=mangled matches KERNEL against the
# mangled name, which tells template instances apart (e.g.
# KERNEL='regex:forward_kernel.*FusionE1' for a rotary forward); the default,
# `function`, is the bare name.
set -uo pipefail
build=${1:?build dir}
shift
[ "${1:-}" = "--" ] && shift
OUT=${OUT:-gpu_out}
NAME=${NAME:-profile}
mkdir -p "$OUT"
# Beside --set full: DRAM bytes read and written, and the L2's sectors by
# direction (is the kernel moving more than the bytes it must? Session 16's
# headline-d64 backward profile read 82% of DRAM peak, 12.7 GB by the
# throughput figure, for 11.7 GB that must move, and --set full alone does
# not say which direction the rest is).
metrics=${METRICS:-dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum}
ncu --clock-control none --cache-control none --set full --metrics "$metrics" --import-source yes \
  --kernel-name-base "${KERNEL_NAME_BASE:-function}" -k "${KERNEL:?KERNEL=regex:...}" -s "${SKIP:-1}" -c 1 -f -o "$OUT/$NAME" \
  "$build/bench/bench_blockattn" --reps 1 "$@" >"$OUT/$NAME.log" 2>&1 || {
  tail -20 "$OUT/$NAME.log"
  exit 1
}
ncu -i "$OUT/$NAME.ncu-rep" --page details --csv >"$OUT/$NAME.details.csv" 2>&1
ncu -i "$OUT/$NAME.ncu-rep" --page source --csv --print-source sass >"$OUT/$NAME.sass.csv" 2>&1 ||
  echo "source page not exported: $(head -c 300 "$OUT/$NAME.sass.csv")"
grep -E '"(Duration|DRAM Throughput|Issue Slots Busy|Eligible Warps Per Scheduler|dram__bytes_(read|write).sum|lts__t_sectors_srcunit_tex_op_(read|write).sum)"' "$OUT/$NAME.details.csv" |
  awk -F'","' '{print $(NF - 2), $(NF - 1), $NF}' | tr -d '"'
echo "per instruction and region: python3 tools/sass_stalls.py $OUT/$NAME.sass.csv"
