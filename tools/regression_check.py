#!/usr/bin/env python3
"""Regression sweep: every recorded figure (docs/results/recorded.json, the
figures the README cites) against the same workload measured now.

    python3 tools/regression_check.py --bench build/bench/bench_blockattn --out gpu_out
    python3 tools/regression_check.py --results run1.json run2.json   # compare existing runs
    ... --dense-results dense_bench.json   # also the dense forward's records

With --bench it runs the benchmark once per group of records that share a
command line (backend, block size, dtype, rotary), --rounds times, and keeps
each workload's best round, so that one noisy round does not raise an alarm.
A record is compared only on a GPU whose name contains the record's `gpu`.
Figures are % of the copy bandwidth measured in the same run (higher is
better) and, for rotary records, the rotary kernels' time over the plain
ones' (lower is better). A figure more than --tolerance points (ratios:
--ratio-tolerance) worse than its record is a regression, and the exit
status is 1; one as far better is marked, so that the record can be raised.

Dense-forward records name a `config` of bench/dense_bench.py with its
dtype and mask, and carry `vs_cudnn`, the blockattn / cuDNN TFLOP/s ratio of
one run (cuDNN's own figure moves by up to 9% between runs, so the same-run
ratio is what compares); a dense row that is not `correct` is a regression
too. They are compared only where --dense-results is given
(bench/dense_bench.py --json needs PyTorch; tools/gpu_check.sh's dense step
writes it).

Why: the 32-token D = 128 backward lost 16 points between 2026-11-22 and
2026-11-26 and nobody saw it, because every A/B compared against the
previous commit only (docs/perf.md, "The sm80 backward's schedule entries,
read ahead").
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "docs" / "results" / "recorded.json"

# Figures a record may carry: (key in the record, how to read it from a benchmark result). Percentages of
# copy: higher is better; rotary / plain time ratios: lower is better.
PCT_FIGURES = (("fwd_pct_copy", lambda r: r["fwd_pct_copy"]), ("bwd_pct_copy", lambda r: r["bwd_pct_copy"]))
# Rotary ratios with fp32 tables, and with 16-bit tables (the inputs' type: "t16"), which the sm_90 forward
# at D = 128 stages in shared memory (docs/perf.md, "Session 43").
RATIO_FIGURES = (("rotary_fwd_ratio", lambda r: r["rotary_fwd_ms"] / r["fwd_ms"]),
                 ("rotary_bwd_ratio", lambda r: r["rotary_bwd_ms"] / r["bwd_ms"]),
                 ("rotary_t16_fwd_ratio", lambda r: r["rotary_bf16_fwd_ms"] / r["fwd_ms"]),
                 ("rotary_t16_bwd_ratio", lambda r: r["rotary_bf16_bwd_ms"] / r["bwd_ms"]))
SPOT_CHECK_LIMIT = 1e-2  # bench_blockattn's own limit on a workload's relative L2 error against fp64


def is_dense(record):
    return "config" in record


def group_key(record):
    """The benchmark command line a record needs, as a hashable tuple."""
    return (record.get("backend", "auto"), record.get("block_size", 64), record.get("dtype", "bf16"),
            bool(record.get("rotary", False)))


def run_key(run):
    """The command line a benchmark --json file was made with."""
    return (run.get("backend", "auto"), run.get("block_size", 64), run.get("dtype", "bf16"),
            any(r.get("rotary_fwd_ms", 0) > 0 for r in run["results"]))


def gpu_name():
    """This machine's first GPU, or None where nvidia-smi cannot say."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.splitlines()[0].strip() if out.strip() else None


def bench_command(bench, key, workloads, json_path):
    backend, block_size, dtype, rotary = key
    cmd = [str(bench), "--workloads", ",".join(workloads), "--backend", backend, "--block-size", str(block_size),
           "--dtype", dtype, "--json", str(json_path)]
    return cmd + (["--rotary"] if rotary else [])


def best_results(runs):
    """{(command key, workload): {figure: best value over the runs}} plus the runs' GPU names. A workload
    whose spot check failed in any run gets "failed": True (its figures time wrong results)."""
    best, gpus = {}, set()
    for run in runs:
        gpus.add(run["gpu"])
        key = run_key(run)
        for r in run["results"]:
            slot = best.setdefault((key, r["workload"]), {})
            if r.get("max_rel_err", 0.0) > SPOT_CHECK_LIMIT:
                slot["failed"] = True
            for name, read in PCT_FIGURES:
                slot[name] = max(slot.get(name, float("-inf")), read(r))
            if key[3]:
                for name, read in RATIO_FIGURES:
                    slot[name] = min(slot.get(name, float("inf")), read(r))
    return best, gpus


def other_gpu_row(name, setup, record, gpus):
    """The row of a record made on a GPU none of the runs had, or None."""
    if any(record["gpu"] in g for g in gpus):
        return None
    return (name, setup, "-", None, None, f"recorded on {record['gpu']}: not this GPU")


def verdict(recorded, now, higher_is_better, tolerance):
    worse = recorded - now if higher_is_better else now - recorded
    if worse > tolerance:
        return "REGRESSION"
    return "better: raise the record" if -worse > tolerance else "ok"


def compare_dense(records, dense_runs, tolerance):
    """Rows for the dense-forward records: blockattn / cuDNN per run, the best run's."""
    best, correct, gpus, modes = {}, {}, set(), set()
    for run in dense_runs:
        gpus.add(run["device"])
        by_case = {}
        for r in run["rows"]:
            modes.add((r["dtype"], bool(r["causal"])))
            by_case.setdefault((r["config"], r["dtype"], bool(r["causal"])), {})[r["impl"]] = r
        for case, impls in by_case.items():
            if "blockattn" not in impls:
                continue
            correct[case] = correct.get(case, True) and bool(impls["blockattn"].get("correct"))
            cudnn = impls.get("sdpa_cudnn", {}).get("tflops") or 0
            if cudnn > 0:
                best[case] = max(best.get(case, 0.0), impls["blockattn"]["tflops"] / cudnn)
    rows, regressions = [], 0
    for rec in records:
        case = (rec["config"], rec.get("dtype", "fp16"), bool(rec["causal"]))
        setup = f"dense {case[1]} {'causal' if case[2] else 'full'}"
        skipped = other_gpu_row(rec["config"], setup, rec, gpus)
        if skipped:
            rows.append(skipped)
            continue
        if case[1:] not in modes:  # bench/dense_bench.py ran without this dtype or mask (--dtypes, --modes)
            rows.append((rec["config"], setup, "-", None, None, "not in the run's modes"))
            continue
        if case not in best:
            rows.append((rec["config"], setup, "vs_cudnn", rec["vs_cudnn"], None, "NOT MEASURED"))
            regressions += 1
            continue
        v = verdict(rec["vs_cudnn"], best[case], True, tolerance)
        if not correct[case]:
            v = "REGRESSION: not correct"
        regressions += v.startswith("REGRESSION")
        rows.append((rec["config"], setup, "vs_cudnn", rec["vs_cudnn"], best[case], v))
    return rows, regressions


def compare(records, runs, tolerance, ratio_tolerance):
    """Rows (workload, setup, figure, recorded, now, verdict) and the number of regressions."""
    for run in runs:  # bench_blockattn --layout head-major: not what any record timed
        if run.get("layout", "token-major") != "token-major":
            raise ValueError(f"a run timed {run['layout']} tensors; the records are of packed [T, H, D] ones")
    best, gpus = best_results(runs)
    rows, regressions = [], 0
    for rec in records:
        key = group_key(rec)
        setup = f"{key[0]} B={key[1]} {key[2]}" + (" rotary" if key[3] else "")
        skipped = other_gpu_row(rec["workload"], setup, rec, gpus)
        if skipped:
            rows.append(skipped)
            continue
        now = best.get((key, rec["workload"]))
        for name, higher_is_better, tol in ([(n, True, tolerance) for n, _ in PCT_FIGURES] +
                                            [(n, False, ratio_tolerance) for n, _ in RATIO_FIGURES]):
            if name not in rec:
                continue
            if now is None or name not in now:
                rows.append((rec["workload"], setup, name, rec[name], None, "NOT MEASURED"))
                regressions += 1
                continue
            v = "REGRESSION: spot check failed" if now.get("failed") else verdict(rec[name], now[name],
                                                                                   higher_is_better, tol)
            regressions += v.startswith("REGRESSION")
            rows.append((rec["workload"], setup, name, rec[name], now[name], v))
    return rows, regressions


def print_table(rows):
    print(f"{'workload':22s} {'setup':22s} {'figure':18s} {'recorded':>9s} {'now':>9s}  verdict")
    for workload, setup, name, recorded, now, verdict in rows:
        fmt = (lambda v: "-" if v is None else f"{v:9.3f}" if "ratio" in name or "vs_" in name else f"{v:9.1f}")
        print(f"{workload:22s} {setup:22s} {name:18s} {fmt(recorded):>9s} {fmt(now):>9s}  {verdict}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recorded", type=Path, default=RECORDED, help="the recorded figures (JSON)")
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--bench", type=Path, help="bench_blockattn to run")
    source.add_argument("--results", nargs="+", type=Path, help="existing bench_blockattn --json files")
    ap.add_argument("--dense-results", nargs="+", type=Path, default=[],
                    help="bench/dense_bench.py --json files: compare the dense records too")
    ap.add_argument("--out", type=Path, default=Path("gpu_out"), help="where --bench writes its JSON and logs")
    ap.add_argument("--rounds", type=int, default=2, help="benchmark runs per group; the best counts")
    ap.add_argument("--tolerance", type=float, default=2.0, help="points of %% of copy")
    ap.add_argument("--ratio-tolerance", type=float, default=0.03, help="rotary/plain time ratio")
    ap.add_argument("--dense-tolerance", type=float, default=0.05, help="blockattn/cuDNN TFLOP/s ratio")
    ap.add_argument("--dry-run", action="store_true", help="print the benchmark commands only")
    args = ap.parse_args()

    all_records = json.loads(args.recorded.read_text())["records"]
    records = [r for r in all_records if not is_dense(r)]
    dense_records = [r for r in all_records if is_dense(r)]
    if args.bench:
        gpu = gpu_name()  # run only the groups with a record for this GPU (device time is scarce)
        groups = {}
        for rec in records:
            if gpu is not None and rec["gpu"] not in gpu:
                continue
            names = groups.setdefault(group_key(rec), [])
            if rec["workload"] not in names:
                names.append(rec["workload"])
        args.out.mkdir(parents=True, exist_ok=True)
        paths = []
        for i, (key, workloads) in enumerate(groups.items()):
            for round_ in range(args.rounds):
                path = args.out / f"regress_{i}_r{round_}.json"
                cmd = bench_command(args.bench, key, workloads, path)
                print(" ".join(cmd), flush=True)
                if args.dry_run:
                    continue
                log = path.with_suffix(".log")
                with log.open("w") as f:
                    rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode
                if rc != 0:
                    print(f"  rc={rc}: {log}", flush=True)
                if path.exists():
                    paths.append(path)
        if args.dry_run:
            return 0
    else:
        paths = args.results
    runs = [json.loads(p.read_text()) for p in paths]
    if not runs:
        print("regression_check: no benchmark results to compare")
        return 1
    try:
        rows, regressions = compare(records, runs, args.tolerance, args.ratio_tolerance)
    except ValueError as e:
        print(f"regression_check: {e}")
        return 2
    if args.dense_results:
        dense_rows, dense_regressions = compare_dense(
            dense_records, [json.loads(p.read_text()) for p in args.dense_results], args.dense_tolerance)
        rows, regressions = rows + dense_rows, regressions + dense_regressions
    elif dense_records:
        print(f"({len(dense_records)} dense-forward records not compared: no --dense-results)")
    print_table(rows)
    print(f"{regressions} regression(s) against {args.recorded.name} "
          f"(tolerance {args.tolerance} points, ratios {args.ratio_tolerance})")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
