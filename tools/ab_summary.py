#!/usr/bin/env python3
"""The table of a same-run A/B (tools/ab_bench.sh): for each workload, the
baseline's and this tree's % of copy bandwidth in every round, forward and
backward, and the rotary-over-plain time ratios where the runs had --rotary.

    python3 tools/ab_summary.py OUT_DIR ROUNDS
"""

import json
import sys
from pathlib import Path


def load(out, version, rounds):
    runs = []
    for r in range(1, rounds + 1):
        path = Path(out) / f"ab_{version}_{r}.json"
        if path.exists():
            runs.append({x["workload"]: x for x in json.loads(path.read_text())["results"]})
    return runs


def figures(runs, workload, key):
    return "/".join(f"{run[workload][key]:.1f}" for run in runs if workload in run) or "-"


def ratios(runs, workload, rotary_key, plain_key):
    vals = [run[workload][rotary_key] / run[workload][plain_key] for run in runs
            if workload in run and run[workload][rotary_key] > 0 and run[workload][plain_key] > 0]
    return "/".join(f"{v:.3f}x" for v in vals)


def main():
    out, rounds = sys.argv[1], int(sys.argv[2])
    base, new = load(out, "base", rounds), load(out, "new", rounds)
    if not base or not new:
        sys.exit(f"ab_summary: no results in {out}")
    rotary = any(x["rotary_fwd_ms"] > 0 for run in new for x in run.values())
    head = f"{'workload':24s} {'fwd % base':>18s} {'fwd % new':>18s} {'bwd % base':>18s} {'bwd % new':>18s}"
    print(head + ("   rotary/plain fwd, bwd: base | new" if rotary else ""))
    for workload in new[0]:
        line = (f"{workload:24s} {figures(base, workload, 'fwd_pct_copy'):>18s} "
                f"{figures(new, workload, 'fwd_pct_copy'):>18s} {figures(base, workload, 'bwd_pct_copy'):>18s} "
                f"{figures(new, workload, 'bwd_pct_copy'):>18s}")
        if rotary:
            line += (f"   {ratios(base, workload, 'rotary_fwd_ms', 'fwd_ms')}, "
                     f"{ratios(base, workload, 'rotary_bwd_ms', 'bwd_ms')} | "
                     f"{ratios(new, workload, 'rotary_fwd_ms', 'fwd_ms')}, "
                     f"{ratios(new, workload, 'rotary_bwd_ms', 'bwd_ms')}")
        print(line)


if __name__ == "__main__":
    main()
