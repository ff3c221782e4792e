"""Dense flash-attention forward benchmark (issue 9, ../shared/workloads.md
"Dense causal forward"): blockattn.attention against what PyTorch users run
today, on the same inputs in the same run.

    python bench/dense_bench.py                       # fp16, causal, the three configs
    python bench/dense_bench.py --modes causal,full --dtypes fp16,bf16 --json out.json --chart out.svg

Per config and implementation: tflops, latency_ms (median of
triton.testing.do_bench), max_diff against PyTorch SDPA's output and correct
(max_diff < 1e-2). FLOPs = 4 B S^2 H D, halved under the causal mask. The
same-run fp16 8192^3 GEMM rate is printed for reference.

--rounds N (default 3) times the implementations in turn N times and
reports each one's median round, with the spread of its rounds
((max - min) / median). An H100 under tensor load lowers its clock by power,
so one kernel's time moves by up to 10% within a process (docs/perf.md,
"Session 42"); timed one after the other once each, two implementations can
differ by that drift alone.

Implementations: blockattn (custom_attention_forward below), SDPA's
FlashAttention-2 and cuDNN backends, and FlexAttention (torch.compile'd, with a
causal block mask). One that cannot run here is reported as unavailable.
"""

import argparse
import json
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import blockattn  # noqa: E402
from compare import bench_ms  # noqa: E402  (median of do_bench over >= 20 runs, L2 flushed)

CONFIGS = {  # name: (B, S, H, D); 16384 tokens each
    "hdim64_seq4k": (4, 4096, 32, 64),
    "hdim128_seq8k": (2, 8192, 16, 128),
    "hdim256_seq16k": (1, 16384, 8, 256),
}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
CORRECT_TOLERANCE = 1e-2


def custom_attention_forward(q, k, v, causal=True, sm_scale=None):
    """The harness's entry point: (B, H, S, D) q, k, v -> out."""
    return blockattn.attention(q, k, v, causal=causal, scale=sm_scale)


def gemm_tflops(dtype) -> float:
    n = 8192
    a = torch.randn(n, n, dtype=dtype, device="cuda")
    b = torch.randn(n, n, dtype=dtype, device="cuda")
    return 2 * n**3 / (bench_ms(lambda: a @ b) * 1e-3) / 1e12


def sdpa_with(backend):
    def run(q, k, v, causal):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def flex_attention_impl():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    # One static compile per shape: 3 configs x 2 masks x 2 dtypes pass dynamo's
    # default recompile limit of 8, past which it would silently run eager flex.
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    compiled = torch.compile(flex_attention, dynamic=False)
    masks = {}

    def run(q, k, v, causal):
        if not causal:
            return compiled(q, k, v)
        key = (q.shape[0], q.shape[1], q.shape[2])
        if key not in masks:
            masks[key] = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, q.shape[2], q.shape[2])
        return compiled(q, k, v, block_mask=masks[key])

    return run


IMPLEMENTATIONS = {
    "blockattn": lambda q, k, v, causal: custom_attention_forward(q, k, v, causal=causal),
    "sdpa_flash2": sdpa_with(SDPBackend.FLASH_ATTENTION),
    "sdpa_cudnn": sdpa_with(SDPBackend.CUDNN_ATTENTION),
}


def run_config(name, dtype_name, causal, flex, rounds=1) -> list[dict]:
    B, S, H, D = CONFIGS[name]
    dtype = DTYPES[dtype_name]
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, S, D, dtype=dtype, device="cuda", generator=gen) for _ in range(3))
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    flops = 4 * B * S * S * H * D // (2 if causal else 1)
    impls = dict(IMPLEMENTATIONS)
    if flex is not None:
        impls["flex_attention"] = flex
    rows, times = [], {}  # times: each available implementation's rounds
    for impl, fn in impls.items():
        row = {"config": name, "dtype": dtype_name, "causal": causal, "impl": impl}
        rows.append(row)
        try:
            out = fn(q, k, v, causal)
            torch.cuda.synchronize()
        except Exception as exc:  # an implementation this environment lacks
            row.update(unavailable=f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
            continue
        max_diff = (out.float() - reference.float()).abs().max().item()
        row.update(max_diff=max_diff, correct=int(max_diff < CORRECT_TOLERANCE and math.isfinite(max_diff)))
        times[impl] = []
        del out
    # The implementations in turn, so that a drift of the clock reaches all alike.
    for _ in range(rounds):
        for impl, rounds_ms in times.items():
            rounds_ms.append(bench_ms(lambda: impls[impl](q, k, v, causal)))
    for row in rows:
        if row["impl"] in times:
            ms_sorted = sorted(times[row["impl"]])
            ms = ms_sorted[len(ms_sorted) // 2]
            row.update(tflops=flops / (ms * 1e-3) / 1e12, latency_ms=ms, spread=(ms_sorted[-1] - ms_sorted[0]) / ms)
    return rows


def write_chart(rows: list[dict], path: Path) -> None:
    """An SVG bar chart of TFLOP/s per config (one group per config and mask)."""
    groups = {}
    for r in rows:
        if "tflops" in r:
            groups.setdefault(f"{r['config']} {r['dtype']} {'causal' if r['causal'] else 'full'}", {})[r["impl"]] = r[
                "tflops"
            ]
    impls = sorted({i for g in groups.values() for i in g})
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]
    peak = max((t for g in groups.values() for t in g.values()), default=1.0)
    bar, gap, height = 18, 30, 260
    width = 80 + len(groups) * (len(impls) * bar + gap)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 120}" font-family="sans-serif">']
    svg.append(f'<text x="10" y="20" font-size="14">TFLOP/s, same run ({torch.cuda.get_device_name()})</text>')
    x = 60
    for label, values in groups.items():
        for i, impl in enumerate(impls):
            if impl in values:
                h = height * values[impl] / peak
                svg.append(
                    f'<rect x="{x + i * bar}" y="{40 + height - h:.1f}" width="{bar - 2}" height="{h:.1f}" '
                    f'fill="{colors[i % len(colors)]}"><title>{impl}: {values[impl]:.0f}</title></rect>'
                )
                svg.append(
                    f'<text x="{x + i * bar + bar / 2 - 1}" y="{36 + height - h:.1f}" font-size="8" '
                    f'text-anchor="middle">{values[impl]:.0f}</text>'
                )
        svg.append(f'<text x="{x}" y="{height + 56}" font-size="10">{label}</text>')
        x += len(impls) * bar + gap
    for i, impl in enumerate(impls):
        svg.append(f'<rect x="{60 + 150 * i}" y="{height + 80}" width="12" height="12" fill="{colors[i % len(colors)]}"/>')
        svg.append(f'<text x="{76 + 150 * i}" y="{height + 91}" font-size="11">{impl}</text>')
    svg.append("</svg>")
    path.write_text("\n".join(svg))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated config names")
    parser.add_argument("--modes", default="causal", help="causal, full, or both comma-separated")
    parser.add_argument("--dtypes", default="fp16", help="fp16, bf16, or both comma-separated")
    parser.add_argument("--no-flex", action="store_true", help="skip FlexAttention (its compile takes a while)")
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    parser.add_argument("--chart", type=Path, help="write an SVG bar chart here")
    parser.add_argument("--rounds", type=int, default=3, help="time the implementations in turn this many times")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    device = torch.cuda.get_device_name()
    gemm = {name: gemm_tflops(DTYPES[name]) for name in args.dtypes.split(",")}
    print(f"# {device}, torch {torch.__version__}, blockattn {blockattn.__version__}")
    print("# same-run 8192^3 GEMM: " + ", ".join(f"{n} {t:.0f} TFLOP/s" for n, t in gemm.items()))
    flex = None
    if not args.no_flex:
        try:
            flex = flex_attention_impl()
        except Exception as exc:
            print(f"# flex_attention unavailable: {exc}")
    rows = []
    spread = args.rounds > 1
    print(
        f"{'config':<16} {'dtype':<5} {'mask':<6} {'impl':<15} {'tflops':>7} {'latency_ms':>10} {'max_diff':>9} correct"
        + (f" {'spread':>6}" if spread else "")
    )
    for dtype_name in args.dtypes.split(","):
        for mode in args.modes.split(","):
            for name in args.configs.split(","):
                for r in run_config(name, dtype_name, mode == "causal", flex, args.rounds):
                    rows.append(r)
                    mask = "causal" if r["causal"] else "full"
                    if "unavailable" in r:
                        print(f"{name:<16} {dtype_name:<5} {mask:<6} {r['impl']:<15} unavailable: {r['unavailable']}")
                    else:
                        print(
                            f"{name:<16} {dtype_name:<5} {mask:<6} {r['impl']:<15} {r['tflops']:7.1f} "
                            f"{r['latency_ms']:10.3f} {r['max_diff']:9.2e} {r['correct']}"
                            + (f" {100 * r['spread']:11.1f}%" if spread else "")
                        )
                torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(
            json.dumps({"device": device, "gemm_tflops": gemm, "rounds": args.rounds, "rows": rows}, indent=1)
        )
    if args.chart:
        write_chart(rows, args.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
