#!/usr/bin/env python3
"""The table of a same-run A/B: for each workload, the baseline's and this
tree's % of copy bandwidth in every round, forward and backward, and the
rotary-over-plain time ratios (fp32, then bf16 tables) where the runs had
--rotary. Reads the benchmark's --json files, one per round:

    python3 tools/ab_summary.py --base B1.json B2.json --new N1.json N2.json

(tools/ab_bench.sh, and tools/gpu_check.sh's bench step with BASELINE=).
With --tree NAME R1.json R2.json ... (once per tree, tools/bench_trees.sh)
it prints one line per tree and workload instead.
"""

import argparse
import json
from pathlib import Path


def load(paths):
    return [{x["workload"]: x for x in json.loads(Path(p).read_text())["results"]} for p in paths if Path(p).exists()]


def figures(runs, workload, key):
    return "/".join(f"{run[workload][key]:.1f}" for run in runs if workload in run) or "-"


def ratios(runs, workload, rotary_key, plain_key):
    vals = [run[workload][rotary_key] / run[workload][plain_key] for run in runs
            if workload in run and run[workload][rotary_key] > 0 and run[workload][plain_key] > 0]
    return "/".join(f"{v:.3f}x" for v in vals)


def rotary_ratios(runs, workload):
    """Forward and backward, fp32 table; forward and backward, bf16 table."""
    return (f"{ratios(runs, workload, 'rotary_fwd_ms', 'fwd_ms')}, "
            f"{ratios(runs, workload, 'rotary_bwd_ms', 'bwd_ms')}; "
            f"{ratios(runs, workload, 'rotary_bf16_fwd_ms', 'fwd_ms')}, "
            f"{ratios(runs, workload, 'rotary_bf16_bwd_ms', 'bwd_ms')}")


def has_rotary(runs):
    return any(x.get("rotary_fwd_ms", 0) > 0 for run in runs for x in run.values())


def trees_table(trees):
    """One line per tree and workload: every round's % of copy, forward and
    backward, and the rotary ratios where the runs had --rotary (session 29
    lost a device call to reading them from logs that did not come back)."""
    loaded = [(name, load(paths)) for name, *paths in trees]
    rotary = any(has_rotary(runs) for _, runs in loaded)
    print((f"{'tree':<12} {'workload':<24} {'fwd % of copy':<24} {'bwd % of copy':<24}" +
           ("rotary/plain fwd, bwd (fp32 table; bf16 table)" if rotary else "")).rstrip())
    for name, runs in loaded:
        for workload in runs[0] if runs else []:
            line = (f"{name:<12} {workload:<24} {figures(runs, workload, 'fwd_pct_copy'):<24} "
                    f"{figures(runs, workload, 'bwd_pct_copy'):<24}")
            print((line + (rotary_ratios(runs, workload) if rotary else "")).rstrip())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", nargs="+", help="the baseline's JSON, one per round")
    ap.add_argument("--new", nargs="+", help="this tree's JSON, one per round")
    ap.add_argument("--tree", nargs="+", action="append", metavar=("NAME", "JSON"),
                    help="a tree's name and its JSON, one per round (several trees: repeat)")
    args = ap.parse_args()
    if args.tree:
        trees_table(args.tree)
        return
    if not args.base or not args.new:
        ap.error("--base and --new, or --tree")
    base, new = load(args.base), load(args.new)
    if not base or not new:
        raise SystemExit("ab_summary: no results for one side")
    rotary = has_rotary(new)
    head = f"{'workload':24s} {'fwd % base':>18s} {'fwd % new':>18s} {'bwd % base':>18s} {'bwd % new':>18s}"
    print(head + ("   rotary/plain fwd, bwd (fp32 table; bf16 table): base | new" if rotary else ""))
    for workload in new[0]:
        line = (f"{workload:24s} {figures(base, workload, 'fwd_pct_copy'):>18s} "
                f"{figures(new, workload, 'fwd_pct_copy'):>18s} {figures(base, workload, 'bwd_pct_copy'):>18s} "
                f"{figures(new, workload, 'bwd_pct_copy'):>18s}")
        if rotary:
            line += f"   {rotary_ratios(base, workload)} | {rotary_ratios(new, workload)}"
        print(line)


if __name__ == "__main__":
    main()
