"""CPU check of the regression sweep (tools/regression_check.py) and of the
figures it guards (docs/results/recorded.json):

- every record names a workload the benchmark defines (the first column of
  tests/print_workload_lengths), a known setup, at least one figure, and no
  record repeats another's workload, setup and GPU; every dense-forward
  record a config of bench/dense_bench.py (read from its source: no torch
  here), a dtype, a mask and its cuDNN ratio;
- the comparison flags a figure worse than its record by more than the
  tolerance, and only that one; marks one as much better; reports a record
  the runs did not measure; skips records of another GPU; and keeps the best
  of several rounds; and for the dense records flags a ratio under its
  record, a row that is not correct, and a case the run lacks.

    python3 tests/check_regression_records.py <print_workload_lengths binary>
"""

import ast
import copy
import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_tool():
    spec = importlib.util.spec_from_file_location("regression_check", ROOT / "tools" / "regression_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dense_configs():
    """The CONFIGS dict's keys in bench/dense_bench.py, read without importing it (it needs torch)."""
    tree = ast.parse((ROOT / "bench" / "dense_bench.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "CONFIGS" for t in node.targets):
            return {k.value for k in node.value.keys}
    raise SystemExit("bench/dense_bench.py has no CONFIGS")


def check_dense_records(records):
    problems, seen, configs = [], set(), dense_configs()
    for rec in records:
        where = f"dense record {rec.get('config')}"
        if rec.get("config") not in configs:
            problems.append(f"{where}: no such config in bench/dense_bench.py")
        if rec.get("dtype") not in ("fp16", "bf16") or not isinstance(rec.get("causal"), bool):
            problems.append(f"{where}: needs dtype fp16/bf16 and causal true/false")
        if not isinstance(rec.get("vs_cudnn"), float) or rec.get("gpu") not in ("H100", "H200"):
            problems.append(f"{where}: needs vs_cudnn and gpu")
        key = (rec.get("config"), rec.get("dtype"), rec.get("causal"), rec.get("gpu"))
        if key in seen:
            problems.append(f"{where}: repeated")
        seen.add(key)
    return problems


def check_dense_comparison(tool, records, rng):
    problems = []
    gpu = "NVIDIA H100 80GB HBM3"
    mine = [r for r in records if r["gpu"] in gpu]
    rows = []
    for rec in mine:  # one run that reproduces every record
        cudnn = rng.uniform(300, 700)
        for impl, tflops in (("blockattn", cudnn * rec["vs_cudnn"]), ("sdpa_cudnn", cudnn), ("sdpa_flash2", 280.0)):
            rows.append({"config": rec["config"], "dtype": rec["dtype"], "causal": rec["causal"], "impl": impl,
                         "tflops": tflops, "correct": 1})
    run = {"device": gpu, "rows": rows}
    if tool.compare_dense(records, [run], 0.05)[1] != 0:
        problems.append("a dense run equal to the records gave regressions")
    victim = rng.choice(mine)

    def blockattn_row(r):
        return next(x for x in r["rows"] if x["impl"] == "blockattn" and x["config"] == victim["config"]
                    and x["causal"] == victim["causal"] and x["dtype"] == victim["dtype"])

    slower = copy.deepcopy(run)
    blockattn_row(slower)["tflops"] *= 1 - rng.uniform(0.06, 0.2)
    if tool.compare_dense(records, [slower], 0.05)[1] != 1:
        problems.append(f"a dense {victim['config']} 6-20% slower against cuDNN was not one regression")
    if tool.compare_dense(records, [slower, run], 0.05)[1] != 0:
        problems.append("the best of two dense runs still gave a regression")
    wrong = copy.deepcopy(run)
    blockattn_row(wrong)["correct"] = 0
    if tool.compare_dense(records, [wrong], 0.05)[1] != 1:
        problems.append("a dense row that is not correct was not one regression")
    missing = copy.deepcopy(run)
    missing["rows"] = [x for x in missing["rows"] if x is not blockattn_row(missing)]
    if tool.compare_dense(records, [missing], 0.05)[1] != 1:
        problems.append("a dense case missing from the run was not reported")
    # A mask the run did not time at all (dense_bench.py --modes causal) is not a regression.
    one_mask = copy.deepcopy(run)
    one_mask["rows"] = [x for x in one_mask["rows"] if x["causal"]]
    rows, n = tool.compare_dense(records, [one_mask], 0.05)
    skipped = sum(v == "not in the run's modes" for *_, v in rows)
    if n != 0 or skipped != sum(not r["causal"] for r in mine):
        problems.append(f"a causal-only run gave {n} regressions and skipped {skipped} full records")
    return problems


def check_records(tool, records, workload_names):
    problems, seen = [], set()
    for i, rec in enumerate(records):
        where = f"record {i} ({rec.get('workload')})"
        if rec.get("workload") not in workload_names:
            problems.append(f"{where}: no such workload in the benchmark")
        if rec.get("gpu") not in ("H100", "H200"):
            problems.append(f"{where}: gpu must be H100 or H200")
        backend, block_size, dtype, _ = tool.group_key(rec)
        if backend not in ("auto", "portable", "hopper") or block_size not in (32, 64, 128) or \
                dtype not in ("bf16", "fp16"):
            problems.append(f"{where}: unknown setup {tool.group_key(rec)}")
        figures = [n for n, _ in tool.PCT_FIGURES + tool.RATIO_FIGURES if n in rec]
        if not figures:
            problems.append(f"{where}: carries no figure")
        if any(n in rec for n, _ in tool.RATIO_FIGURES) and not rec.get("rotary"):
            problems.append(f"{where}: a rotary ratio needs \"rotary\": true")
        if not rec.get("date") or not rec.get("source"):
            problems.append(f"{where}: needs the date and the source of its figures")
        key = (tool.group_key(rec), rec.get("workload"), rec.get("gpu"))
        if key in seen:
            problems.append(f"{where}: repeats another record's workload, setup and GPU")
        seen.add(key)
    return problems


def synthetic_runs(tool, records, gpu, rng):
    """Benchmark --json documents that reproduce every record of `gpu` exactly."""
    runs = {}
    for rec in records:
        if rec["gpu"] not in gpu:
            continue
        key = tool.group_key(rec)
        backend, block_size, dtype, rotary = key
        run = runs.setdefault(key, {"gpu": gpu, "dtype": dtype, "backend": backend, "block_size": block_size,
                                    "copy_tb_per_s": 3.0, "results": []})
        fwd_ms, bwd_ms = rng.uniform(0.2, 3.0), rng.uniform(0.4, 6.0)
        run["results"].append({
            "workload": rec["workload"], "fwd_ms": fwd_ms, "bwd_ms": bwd_ms, "max_rel_err": rng.uniform(1e-4, 5e-3),
            "fwd_pct_copy": rec.get("fwd_pct_copy", rng.uniform(60, 100)),
            "bwd_pct_copy": rec.get("bwd_pct_copy", rng.uniform(60, 100)),
            "rotary_fwd_ms": fwd_ms * rec.get("rotary_fwd_ratio", 1.1) if rotary else 0.0,
            "rotary_bwd_ms": bwd_ms * rec.get("rotary_bwd_ratio", 1.1) if rotary else 0.0,
            "rotary_bf16_fwd_ms": fwd_ms * rec.get("rotary_t16_fwd_ratio", 1.1) if rotary else 0.0,
            "rotary_bf16_bwd_ms": bwd_ms * rec.get("rotary_t16_bwd_ratio", 1.1) if rotary else 0.0,
        })
    return list(runs.values())


def find(tool, runs, key, workload):
    """The result of `workload` in the run made with command line `key`."""
    for run in runs:
        if tool.run_key(run) == key:
            for r in run["results"]:
                if r["workload"] == workload:
                    return r
    raise KeyError(workload)


def check_comparison(tool, records):
    rng = random.Random()  # fresh every run: which record is disturbed, and how much, varies
    gpu = "NVIDIA H100 80GB HBM3"
    mine = [r for r in records if r["gpu"] in gpu]
    runs = synthetic_runs(tool, records, gpu, rng)
    problems = []

    def regressions_of(rows):
        return [(w, s, f) for w, s, f, _, _, v in rows if v in ("REGRESSION", "NOT MEASURED")]

    rows, n = tool.compare(records, runs, 2.0, 0.03)
    if n != 0 or regressions_of(rows):
        problems.append(f"runs equal to the records gave {n} regressions: {regressions_of(rows)}")
    others = [r for r in records if r["gpu"] not in gpu]
    skipped = [row for row in rows if row[5].startswith("recorded on")]
    if len(skipped) != len(others):
        problems.append(f"{len(others)} records of another GPU, {len(skipped)} rows skipped")

    # One percentage figure a little past the tolerance: exactly that one is a regression.
    pct_records = [r for r in mine if "bwd_pct_copy" in r]
    victim = rng.choice(pct_records)
    worse = copy.deepcopy(runs)
    find(tool, worse, tool.group_key(victim), victim["workload"])["bwd_pct_copy"] -= rng.uniform(2.1, 10)
    rows, n = tool.compare(records, worse, 2.0, 0.03)
    got = [(w, s) for w, s, f, _, _, v in rows if v == "REGRESSION"]
    if n != 1 or len(got) != 1 or got[0][0] != victim["workload"]:
        problems.append(f"lowering {victim['workload']}'s backward gave {n} regressions: {got}")

    # Fast but wrong: a failed spot check is a regression whatever the figures say.
    wrong = copy.deepcopy(runs)
    find(tool, wrong, tool.group_key(victim), victim["workload"])["max_rel_err"] = rng.uniform(0.011, 1.0)
    figures = sum(n in victim for n, _ in tool.PCT_FIGURES + tool.RATIO_FIGURES)
    if tool.compare(records, wrong, 2.0, 0.03)[1] != figures:
        problems.append("a failed spot check did not make each of the workload's figures a regression")

    # Within the tolerance: no alarm. Far better: marked, not counted.
    near = copy.deepcopy(runs)
    find(tool, near, tool.group_key(victim), victim["workload"])["bwd_pct_copy"] -= 1.9
    if tool.compare(records, near, 2.0, 0.03)[1] != 0:
        problems.append("a figure 1.9 points under its record counted as a regression")
    better = copy.deepcopy(runs)
    find(tool, better, tool.group_key(victim), victim["workload"])["bwd_pct_copy"] += 5
    rows, n = tool.compare(records, better, 2.0, 0.03)
    if n != 0 or not any(v.startswith("better") for *_, v in rows):
        problems.append("a figure 5 points over its record was not marked better (or counted)")

    # A second round that is worse does not hide the first round's figure: the best counts.
    rows, n = tool.compare(records, runs + worse, 2.0, 0.03)
    if n != 0:
        problems.append(f"the best of two rounds still gave {n} regressions")

    # Rotary ratios: higher is worse.
    rotary = [r for r in mine if "rotary_bwd_ratio" in r]
    if rotary:
        victim = rng.choice(rotary)
        slower = copy.deepcopy(runs)
        row = find(tool, slower, tool.group_key(victim), victim["workload"])
        row["rotary_bwd_ms"] = row["bwd_ms"] * (victim["rotary_bwd_ratio"] + 0.05)
        if tool.compare(records, slower, 2.0, 0.03)[1] != 1:
            problems.append("a rotary backward 0.05x slower than its record was not one regression")

    # A run of other tensors' layout (bench_blockattn --layout head-major) is refused, not compared.
    strided = copy.deepcopy(runs)
    rng.choice(strided)["layout"] = "head-major"
    try:
        tool.compare(records, strided, 2.0, 0.03)
        problems.append("a head-major run was compared against the packed-tensor records")
    except ValueError:
        pass

    # A workload missing from the runs is reported, not passed over.
    missing = copy.deepcopy(runs)
    victim = rng.choice(mine)
    for run in missing:
        run["results"] = [r for r in run["results"] if r["workload"] != victim["workload"]]
    rows, n = tool.compare(records, missing, 2.0, 0.03)
    if not any(v == "NOT MEASURED" and w == victim["workload"] for w, _, _, _, _, v in rows) or n == 0:
        problems.append(f"{victim['workload']} missing from the runs was not reported")
    return problems


def main():
    tool = load_tool()
    all_records = json.loads((ROOT / "docs" / "results" / "recorded.json").read_text())["records"]
    records = [r for r in all_records if not tool.is_dense(r)]
    dense = [r for r in all_records if tool.is_dense(r)]
    out = subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout
    names = {line.split()[0] for line in out.splitlines() if line.strip()}
    problems = check_records(tool, records, names) + check_comparison(tool, records)
    problems += check_dense_records(dense) + check_dense_comparison(tool, dense, random.Random())
    for p in problems:
        print(p)
    print(f"{len(records)} block-attention and {len(dense)} dense records, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
