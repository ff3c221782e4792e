#!/usr/bin/env bash
# Runs a command while nvidia-smi samples the GPU every 200 ms, then prints
# how often each (SM clock, memory clock, throttle reasons) state was seen
# and the power draw's min / median / max. A latency-bound kernel's figure
# moves with the SM clock; session 47 found the H200's mqa-d64-h8x1 backward
# at the 700 W cap, its clock pulled to 1.5-1.75 GHz (reason 0x4, software
# power cap) in the runs that read 73% of copy instead of 84% (docs/perf.md,
# "Session 47", item 5).
#
#   tools/clock_watch.sh build/bench/bench_blockattn --workloads mqa-d64-h8x1
set -uo pipefail
[ $# -ge 1 ] || { sed -n '2,10p' "$0"; exit 2; }
log=$(mktemp)
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,clocks_event_reasons.active --format=csv,noheader,nounits \
  -lms 200 >"$log" &
watcher=$!
"$@"
rc=$?
kill "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null
echo "samples  SM MHz, memory MHz, throttle reasons (0x1 idle, 0x4 software power cap)"
awk -F', ' '{print $1 ", " $2 ", " $4}' "$log" | sort | uniq -c | sort -rn | head -12
awk -F', ' '{print $3}' "$log" | sort -n | awk '{p[NR] = $1} END {if (NR) print "power W: min " p[1] ", median " p[int((NR + 1) / 2)] ", max " p[NR]}'
rm -f "$log"
exit $rc
