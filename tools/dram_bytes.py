#!/usr/bin/env python3
"""DRAM bytes each block-attention kernel moves, against the bytes it must move.

For every workload, one forward and one backward kernel launch of
bench_blockattn (the second of each, past the warm-up) under ncu, in bench
conditions (no clock lock, no cache flush): `dram__bytes_read.sum` and
`dram__bytes_write.sum` against the floor's inputs and outputs, from the
workload's shape (2-byte elements):

    forward   reads q, k, v           writes out
    backward  reads q, k, v, dO       writes dq, dk, dv

A kernel that reads past its inputs (a read ratio over 1.02 or so) moves
bytes the floor does not count: session 32 found the sm_90 backward at
D = 160 reading 15% past its inputs (L2 fills straddling heads) and the
short-sequence backward at D = 64 14% (64-row boxes over packed tiles);
docs/perf.md, "Session 32". Run on a GPU machine with ncu:

    python3 tools/dram_bytes.py build [--workloads a,b] [-- extra bench_blockattn args]

Prints one line per workload and direction; the last column is the kernel's
time under ncu.
"""

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

DEFAULT_WORKLOADS = (
    "headline-d128,headline-d64,sweep-d128-L256-f0.5,sweep-d64-L256-f0.5,tail-d128,tail-d64,"
    "gqa-d128-h8x2,mqa-d64-h8x1,headdim-d32-h16,headdim-d96-h5,headdim-d160-h3,headdim-d192-h3,"
    "headdim-d224-h2,headdim-d256-h2"
)
METRICS = "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum"


def shape_of(bench, workload, extra):
    """The workload's shape as the benchmark reports it (one quick run)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([bench, "--workloads", workload, "--reps", "20", "--json", out.name] + extra,
                       check=True, stdout=subprocess.DEVNULL)
        return json.load(open(out.name))["results"][0]


def measure(bench, workload, kernel_regex, extra):
    """{metric: value in base units} of the second launch matching the regex."""
    cmd = ["ncu", "--clock-control", "none", "--csv", "--print-units", "base", "--metrics", METRICS,
           "-k", "regex:" + kernel_regex, "-s", "1", "-c", "1", bench, "--reps", "1", "--workloads", workload] + extra
    text = subprocess.run(cmd, capture_output=True, text=True).stdout
    rows = [line for line in text.splitlines() if line.startswith('"')]
    values = {}
    for row in csv.DictReader(io.StringIO("\n".join(rows))):
        try:
            values[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            pass
    return values


def floors(shape):
    """(forward read, write, backward read, write) bytes of the floor."""
    row_q = shape["tokens"] * shape["heads"] * shape["head_dim"] * 2
    row_kv = shape["tokens"] * shape["kv_heads"] * shape["head_dim"] * 2
    return row_q + 2 * row_kv, row_q, 2 * row_q + 2 * row_kv, row_q + 2 * row_kv


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build", help="a build folder with bench/bench_blockattn")
    parser.add_argument("--workloads", default=DEFAULT_WORKLOADS)
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    bench = os.path.join(args.build, "bench", "bench_blockattn")
    print(f"{'workload':<24} {'dir':<4} {'read GB':>8} {'floor':>7} {'ratio':>6} "
          f"{'write GB':>8} {'floor':>7} {'ratio':>6} {'ms':>7}")
    for workload in args.workloads.split(","):
        shape = shape_of(bench, workload, extra)
        fwd_read, fwd_write, bwd_read, bwd_write = floors(shape)
        for direction, regex, read_floor, write_floor in (("fwd", "forward_kernel", fwd_read, fwd_write),
                                                         ("bwd", "backward_kernel", bwd_read, bwd_write)):
            m = measure(bench, workload, regex, extra)
            if "dram__bytes_read.sum" not in m:
                print(f"{workload:<24} {direction:<4} (no kernel matched {regex})")
                continue
            read, write = m["dram__bytes_read.sum"], m.get("dram__bytes_write.sum", 0.0)
            ms = m.get("gpu__time_duration.sum", 0.0) / 1e6
            print(f"{workload:<24} {direction:<4} {read / 1e9:8.3f} {read_floor / 1e9:7.3f} {read / read_floor:6.3f} "
                  f"{write / 1e9:8.3f} {write_floor / 1e9:7.3f} {write / write_floor:6.3f} {ms:7.3f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
