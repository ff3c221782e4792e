#!/usr/bin/env python3
"""One line per dense config, dtype, mask and implementation with every run's
TFLOP/s side by side, from bench/dense_bench.py --json files named
PREFIX_<tree>_<round>.json ("!" marks a run whose output was not correct).
blockattn's rows are per tree; the SDPA backends ran in every tree's runs and
are listed once, all their runs together.

    python3 tools/dense_summary.py gpu_out/dense     # gpu_out/dense_base_1.json, gpu_out/dense_new_1.json, ...

Used by tools/dense_ab.sh and tools/dense_trees.sh.
"""

import collections
import glob
import json
import sys


def main(prefix: str) -> int:
    runs = collections.defaultdict(list)
    paths = sorted(glob.glob(prefix + "_*_[0-9]*.json"))
    for path in paths:
        tree = path[len(prefix) + 1 :].rsplit("_", 1)[0]
        for r in json.load(open(path))["rows"]:
            if "tflops" in r:
                impl = f"blockattn {tree}" if r["impl"] == "blockattn" else r["impl"]
                mark = "" if r["correct"] else "!"
                runs[(r["config"], r["dtype"], "causal" if r["causal"] else "full", impl)].append(f"{r['tflops']:.0f}{mark}")
    if not paths:
        print(f"dense_summary: no {prefix}_<tree>_<round>.json files", file=sys.stderr)
        return 1
    print("TFLOP/s per run (the SDPA backends ran in every tree's runs)")
    for key in sorted(runs):
        print(f"{key[0]:16} {key[1]:5} {key[2]:7} {key[3]:22}", " ".join(runs[key]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
