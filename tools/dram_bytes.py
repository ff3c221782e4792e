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

With `-- --rotary`, four more lines per workload: the forward and backward
with q, k, v rotated, fp32 table ("r32") and 16-bit table ("r16"), found by
their place in bench_blockattn's launch order (LAUNCHES_PER_VARIANT below).

Prints one line per workload and direction: DRAM bytes against the floor,
warp instructions executed (millions), the kernel's time under ncu, and the
SMs' busy cycles (least busy SM and mean, % of the kernel's elapsed
cycles): a persistent kernel whose static walk leaves SMs idle at the end
shows a low minimum (session 35: the sm80 forward at D = 256 had 75 / 94%
before its tiles were claimed at run time, FA2 99.8%). With
--fa2, a third line per workload ("fa2") has FlashAttention-2 varlen's
forward on the same batch (tools/fa2_forward_once.py; PyTorch with CUDA and
this checkout's Python package built): session 34 found FA2 reading its
inputs exactly at D = 256 with a quarter fewer instructions per tile than
the portable forward (docs/perf.md, "Session 34").
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
METRICS = (
    "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,smsp__inst_executed.sum,"
    "sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_elapsed.avg"
)


def shape_of(bench, workload, extra):
    """The workload's shape as the benchmark reports it (one quick run)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([bench, "--workloads", workload, "--reps", "20", "--json", out.name] + extra,
                       check=True, stdout=subprocess.DEVNULL)
        return json.load(open(out.name))["results"][0]


# bench_blockattn launches each kernel once, then median_ms's 3 warm-ups and
# its reps (at least 20) for every variant it times: the plain kernels, then
# with --rotary the fp32-table and the 16-bit-table ones.
BENCH_REPS = 20
LAUNCHES_PER_VARIANT = 1 + 3 + BENCH_REPS


def measure(program, kernel_regex, skip=1):
    """{metric: value in base units} of the launch matching the regex after
    skipping `skip` of them (1: the second, past the warm-up)."""
    cmd = ["ncu", "--clock-control", "none", "--csv", "--print-units", "base", "--metrics", METRICS,
           "-k", "regex:" + kernel_regex, "-s", str(skip), "-c", "1"] + program
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
    parser.add_argument("--fa2", action="store_true", help="FA2 varlen's forward on each workload too")
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    bench = os.path.join(args.build, "bench", "bench_blockattn")
    fa2_once = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fa2_forward_once.py")
    print(f"{'workload':<24} {'dir':<8} {'read GB':>8} {'floor':>7} {'ratio':>6} "
          f"{'write GB':>8} {'floor':>7} {'ratio':>6} {'inst M':>8} {'ms':>7} {'SM busy min/mean %':>18}")
    for workload in args.workloads.split(","):
        shape = shape_of(bench, workload, extra)
        fwd_read, fwd_write, bwd_read, bwd_write = floors(shape)
        ours = [bench, "--reps", str(BENCH_REPS), "--workloads", workload] + extra
        runs = [("fwd", ours, "forward_kernel", fwd_read, fwd_write, 1),
                ("bwd", ours, "backward_kernel", bwd_read, bwd_write, 1)]
        if "--rotary" in extra:  # the same kernels with q, k, v rotated: fp32 table, then 16-bit
            for i, table in ((1, "r32"), (2, "r16")):
                runs += [(f"fwd {table}", ours, "forward_kernel", fwd_read, fwd_write, i * LAUNCHES_PER_VARIANT + 1),
                         (f"bwd {table}", ours, "backward_kernel", bwd_read, bwd_write, i * LAUNCHES_PER_VARIANT + 1)]
        if args.fa2:
            runs.append(("fa2", [sys.executable, fa2_once, workload], "flash_fwd", fwd_read, fwd_write, 1))
        for direction, program, regex, read_floor, write_floor, skip in runs:
            m = measure(program, regex, skip)
            if "dram__bytes_read.sum" not in m:
                print(f"{workload:<24} {direction:<8} (no kernel matched {regex})")
                continue
            read, write = m["dram__bytes_read.sum"], m.get("dram__bytes_write.sum", 0.0)
            ms = m.get("gpu__time_duration.sum", 0.0) / 1e6
            inst = m.get("smsp__inst_executed.sum", 0.0) / 1e6
            elapsed = m.get("sm__cycles_elapsed.avg", 0.0) or 1.0
            least, mean = (100 * m.get(f"sm__cycles_active.{s}", 0.0) / elapsed for s in ("min", "avg"))
            busy = f"{least:.1f} / {mean:.1f}"
            print(f"{workload:<24} {direction:<8} {read / 1e9:8.3f} {read_floor / 1e9:7.3f} {read / read_floor:6.3f} "
                  f"{write / 1e9:8.3f} {write_floor / 1e9:7.3f} {write / write_floor:6.3f} {inst:8.1f} {ms:7.3f} {busy:>18}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
