#!/usr/bin/env python3
"""blockattn against PyTorch's block-diagonal attention options, on the workloads of
docs/workloads.md, in one run on the same inputs.

    python bench/compare.py                     # full grid (24 workloads, < 5 min on an H100)
    python bench/compare.py --quick             # headline-d128 and headline-d64 only
    python bench/compare.py --workloads headline-d128,sweep-d64-L512-f0.5 --with-flex
    python bench/compare.py --json out.json --png out.png

Implementations, all on identical bf16 inputs:
  blockattn            the custom ops (forward; backward from q, k, v, dout only)
  FA2 varlen           torch.ops.aten._flash_attention_forward/_backward, one cu_seqlens
                       entry per 64-token block, max_seqlen 64
  cuDNN padded         SDPA (cuDNN backend) on [blocks, H, 64, D] tensors padded beforehand;
                       padding keys are NOT masked (timing only, as in the workloads.md anchor)
  cuDNN padded+copies  the same including the jagged->padded gathers and the scatter back
  varlen_attn          torch.nn.attention.varlen_attn, when this torch has it
  eager reference      blockattn.reference in bf16; headline workloads only (slow, memory-hungry)
  FlexAttention        --with-flex: compiled flex_attention with a 64-token block-diagonal
                       document mask (mask build and compile times reported apart)

Times are medians of triton.testing.do_bench (L2 flushed between runs, >= 20 runs).
"% of copy bandwidth" = (bytes that must move) / (device-to-device copy bandwidth measured
in this run) / (measured time); bytes are 4 [T, H, D] tensors forward and 7 backward
(k, v, dk, dv counted with the kv heads). "xFA2" is FA2 time / implementation time.
"""

import argparse
import functools
import gc
import importlib.util
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
import triton
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

if importlib.util.find_spec("blockattn") is None:  # running from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import blockattn  # noqa: E402
from blockattn import workloads as wl  # noqa: E402
from blockattn.reference import block_attention_reference  # noqa: E402

BLOCK = wl.BLOCK_SIZE
MODES = ("fwd", "bwd", "fwd+bwd")
MIN_RUNS = 20
COPY_BYTES = 1 << 30
FLEX_TILE = 128  # flex_attention's default sparse block size
# blockattn vs another exact implementation, both bf16: out max|diff| and grads relative L2.
OUT_TOLERANCE = 5e-2
GRAD_TOLERANCE = 2e-2


class Unavailable(Exception):
    """This implementation cannot run in this environment."""


# --------------------------------------------------------------------------- #
# Timing
# --------------------------------------------------------------------------- #


def bench_ms(fn: Callable[[], object]) -> float:
    """Median milliseconds of fn over at least MIN_RUNS runs."""
    fn()  # lazy initialisation, autotuning, compilation
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    once = start.elapsed_time(end)
    # do_bench sizes its loops from a time budget; make the budget cover MIN_RUNS runs.
    return triton.testing.do_bench(
        fn, warmup=max(25.0, 3 * once), rep=max(100.0, (MIN_RUNS + 2) * once), return_mode="median"
    )


def copy_bandwidth() -> float:
    """Bytes per second of a 1 GiB device-to-device copy, bytes read plus bytes written."""
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * COPY_BYTES / (bench_ms(lambda: dst.copy_(src)) * 1e-3)


def free_memory() -> None:
    gc.collect()
    torch.cuda.empty_cache()


# --------------------------------------------------------------------------- #
# Inputs
# --------------------------------------------------------------------------- #


@dataclass
class Case:
    """One workload's inputs, shared by every implementation."""

    workload: wl.Workload
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    dout: torch.Tensor
    offsets: torch.Tensor
    blocks: torch.Tensor  # lengths of the 64-token blocks, in token order
    cu_blocks: torch.Tensor  # int32 cu_seqlens with one entry per block
    scale: float
    block_size: int = BLOCK

    @property
    def total(self) -> int:
        return self.q.shape[0]


def make_case(w: wl.Workload, seed: int, block_size: int = BLOCK) -> Case:
    lengths = w.lengths(seed)
    generator = torch.Generator("cuda").manual_seed(seed)
    q, k, v, offsets = wl.random_batch(
        lengths, w.num_q_heads, w.num_kv_heads, w.head_dim, dtype=w.dtype, device="cuda", generator=generator
    )
    dout = torch.randn(q.shape, dtype=q.dtype, device="cuda", generator=generator)
    blocks = wl.block_lengths(lengths, block_size).cuda()
    cu_blocks = wl.block_offsets(offsets, block_size)
    return Case(w, q, k, v, dout, offsets, blocks, cu_blocks, 1.0 / math.sqrt(w.head_dim), block_size)


def leaves(*tensors):
    return tuple(t.detach().requires_grad_() for t in tensors)


# --------------------------------------------------------------------------- #
# Implementations
# --------------------------------------------------------------------------- #


@dataclass
class Impl:
    fwd: Callable[[], object]
    bwd: Callable[[], object]
    fwd_bwd: Callable[[], object]
    # (out, dq, dk, dv) as [T, H, D] tensors, for implementations with exact semantics.
    results: Callable[[], tuple] | None = None
    notes: dict | None = None

    def timers(self) -> dict[str, Callable[[], object]]:
        # bwd last: for autograd baselines it builds a retained graph on first use.
        return {"fwd": self.fwd, "fwd+bwd": self.fwd_bwd, "bwd": self.bwd}


def autograd_impl(forward, inputs, dout, to_tokens=None, exact=True) -> Impl:
    """Impl of a differentiable forward() of `inputs`.

    bwd replays one retained forward graph, built on first use so that it does
    not occupy memory while fwd and fwd+bwd are timed (the eager reference's
    graph is tens of GB at the headline sizes).
    """
    retained = functools.cache(forward)

    def bwd():
        return torch.autograd.grad(retained(), inputs, dout, retain_graph=True)

    def results():
        return tuple(map(to_tokens or (lambda t: t), (retained().detach(), *bwd())))

    return Impl(
        fwd=forward,
        bwd=bwd,
        fwd_bwd=lambda: torch.autograd.grad(forward(), inputs, dout),
        results=results if exact else None,
    )


def make_blockattn(c: Case) -> Impl:
    fwd_op, bwd_op = torch.ops.blockattn.block_attention_fwd, torch.ops.blockattn.block_attention_bwd

    def fwd():
        return fwd_op(c.q, c.k, c.v, c.offsets, c.scale, block_size=c.block_size)

    def bwd():
        return bwd_op(c.dout, c.q, c.k, c.v, c.offsets, c.scale, block_size=c.block_size)

    def fwd_bwd():
        fwd()
        return bwd()

    return Impl(fwd, bwd, fwd_bwd, results=lambda: (fwd(), *bwd()))


def make_fa2(c: Case) -> Impl:
    aten = torch.ops.aten

    def fwd():
        return aten._flash_attention_forward(
            c.q, c.k, c.v, c.cu_blocks, c.cu_blocks, c.block_size, c.block_size, 0.0, False, False, scale=c.scale
        )

    def bwd_of(saved):
        out, lse, rng_state, unused, _ = saved
        return aten._flash_attention_backward(
            c.dout, c.q, c.k, c.v, out, lse, c.cu_blocks, c.cu_blocks, c.block_size, c.block_size,
            0.0, False, rng_state, unused, scale=c.scale,
        )  # fmt: skip

    saved = fwd()
    return Impl(fwd, lambda: bwd_of(saved), lambda: bwd_of(fwd()), results=lambda: (saved[0], *bwd_of(saved)))


class Padding:
    """Gathers jagged [T, H, D] into [blocks, H, 64, D] and scatters back."""

    def __init__(self, blocks: torch.Tensor):
        starts = torch.cumsum(blocks, 0) - blocks
        slot = torch.arange(BLOCK, device=blocks.device)
        valid = slot < blocks[:, None]
        # Padding slots repeat the block's first token; nothing masks them (timing only).
        self.gather_index = torch.where(valid, starts[:, None] + slot, starts[:, None]).flatten()
        self.scatter_index = valid.flatten().nonzero().squeeze(1)
        self.num_blocks = blocks.numel()

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        padded = x.index_select(0, self.gather_index).view(self.num_blocks, BLOCK, x.shape[1], x.shape[2])
        return padded.transpose(1, 2)

    def unpad(self, y: torch.Tensor) -> torch.Tensor:
        return y.transpose(1, 2).reshape(-1, y.shape[1], y.shape[3]).index_select(0, self.scatter_index)


def cudnn_sdpa(q, k, v, scale):
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=q.shape[1] != k.shape[1])


def make_cudnn_padded(c: Case) -> Impl:
    padding = Padding(c.blocks)
    q, k, v = leaves(*(padding.pad(t) for t in (c.q, c.k, c.v)))
    dout = padding.pad(c.dout)
    return autograd_impl(lambda: cudnn_sdpa(q, k, v, c.scale), (q, k, v), dout, exact=False)


def make_cudnn_with_copies(c: Case) -> Impl:
    padding = Padding(c.blocks)
    q, k, v = leaves(c.q, c.k, c.v)

    def forward():
        return padding.unpad(cudnn_sdpa(padding.pad(q), padding.pad(k), padding.pad(v), c.scale))

    return autograd_impl(forward, (q, k, v), c.dout, exact=False)


def find_varlen_attn():
    varlen_attn = getattr(torch.nn.attention, "varlen_attn", None)
    if varlen_attn is None:
        try:
            from torch.nn.attention.varlen import varlen_attn
        except ImportError:
            return None
    return varlen_attn


def make_varlen_attn(c: Case) -> Impl:
    varlen_attn = find_varlen_attn()
    if varlen_attn is None:
        raise Unavailable(f"torch {torch.__version__} has no torch.nn.attention varlen_attn")
    q, k, v = leaves(c.q, c.k, c.v)
    # Default scale is 1/sqrt(D), the same as c.scale.
    return autograd_impl(lambda: varlen_attn(q, k, v, c.cu_blocks, c.cu_blocks, BLOCK, BLOCK), (q, k, v), c.dout)


def make_eager(c: Case) -> Impl:
    q, k, v = leaves(c.q, c.k, c.v)
    return autograd_impl(lambda: block_attention_reference(q, k, v, c.offsets, c.scale), (q, k, v), c.dout)


def document_block_mask(blocks: torch.Tensor, total: int):
    """FlexAttention BlockMask of the 64-token block-diagonal mask.

    create_block_mask would evaluate the mask on all T^2 (query, key) pairs
    (T is ~2M here); the block table gives each query tile's key tiles directly.
    No tile is "full": 128-token tiles always straddle several 64-token blocks.
    """
    from torch.nn.attention.flex_attention import BlockMask

    device = blocks.device
    token_block = torch.repeat_interleave(torch.arange(blocks.numel(), device=device), blocks)
    block_end = torch.cumsum(blocks, 0)
    block_start = block_end - blocks
    num_tiles = -(-total // FLEX_TILE)
    tile_first = torch.arange(num_tiles, device=device) * FLEX_TILE
    tile_last = (tile_first + FLEX_TILE - 1).clamp(max=total - 1)
    # A query tile's keys run from the start of its first query's block to the end of its last one's.
    kv_first = (block_start[token_block[tile_first]] // FLEX_TILE).to(torch.int32)
    kv_last = ((block_end[token_block[tile_last]] - 1) // FLEX_TILE).to(torch.int32)
    kv_num_blocks = kv_last - kv_first + 1
    # Full-width rows, as BlockMask expects; entries past kv_num_blocks are ignored.
    tiles = torch.arange(num_tiles, device=device, dtype=torch.int32)
    kv_indices = (kv_first[:, None] + tiles).clamp_(max=num_tiles - 1)

    def same_block(b, h, q_idx, kv_idx):
        return token_block[q_idx] == token_block[kv_idx]

    return BlockMask.from_kv_blocks(
        kv_num_blocks[None, None], kv_indices[None, None], BLOCK_SIZE=FLEX_TILE, mask_mod=same_block,
        seq_lengths=(total, total),
    )  # fmt: skip


def make_flex(c: Case) -> Impl:
    from torch.nn.attention.flex_attention import flex_attention

    torch.cuda.synchronize()
    started = time.perf_counter()
    block_mask = document_block_mask(c.blocks, c.total)
    torch.cuda.synchronize()
    mask_ms = (time.perf_counter() - started) * 1e3

    # Each workload has its own mask_mod closure; a fresh compile keeps Dynamo's
    # recompile limit from silently sending later workloads to eager flex_attention.
    torch._dynamo.reset()
    flex = torch.compile(flex_attention)
    as_bhsd = lambda t: t.transpose(0, 1).unsqueeze(0)  # noqa: E731  [T, H, D] -> [1, H, T, D]
    q, k, v = leaves(*(as_bhsd(t) for t in (c.q, c.k, c.v)))
    gqa = c.q.shape[1] != c.k.shape[1]

    started = time.perf_counter()
    impl = autograd_impl(
        lambda: flex(q, k, v, block_mask=block_mask, scale=c.scale, enable_gqa=gqa),
        (q, k, v),
        as_bhsd(c.dout),
        to_tokens=lambda t: t[0].transpose(0, 1),
    )
    impl.bwd()  # compiles the backward
    torch.cuda.synchronize()
    impl.notes = {"mask_build_ms": mask_ms, "compile_s": time.perf_counter() - started}
    return impl


IMPLEMENTATIONS = {
    "blockattn": make_blockattn,
    "FA2 varlen": make_fa2,
    "cuDNN padded": make_cudnn_padded,
    "cuDNN padded+copies": make_cudnn_with_copies,
    "varlen_attn": make_varlen_attn,
    "eager reference": make_eager,
    "FlexAttention": make_flex,
}


def selected_implementations(w: wl.Workload, with_flex: bool, block_size: int = BLOCK) -> list[str]:
    if block_size != BLOCK:  # the padded, eager and flex baselines are written for 64-token blocks
        return ["blockattn", "FA2 varlen"]
    names = ["blockattn", "FA2 varlen", "cuDNN padded", "cuDNN padded+copies", "varlen_attn"]
    if w.name.startswith("headline-"):
        names.append("eager reference")
    if with_flex:
        names.append("FlexAttention")
    return names


# --------------------------------------------------------------------------- #
# Measuring one workload
# --------------------------------------------------------------------------- #


def compare_results(got: tuple, want: tuple) -> dict:
    """Differences of another implementation's (out, dq, dk, dv) from blockattn's."""
    out, want_out = got[0].float(), want[0].float()
    check = {"out_max_abs_diff": (out - want_out).abs().max().item()}
    for name, a, b in zip(("dq", "dk", "dv"), got[1:], want[1:]):
        b = b.double()
        check[f"{name}_rel_l2"] = ((a.double() - b).norm() / b.norm()).item()
    grads_ok = all(check[f"{n}_rel_l2"] <= GRAD_TOLERANCE for n in ("dq", "dk", "dv"))
    check["ok"] = check["out_max_abs_diff"] <= OUT_TOLERANCE and grads_ok
    return check


def measure(name: str, c: Case, reference: tuple | None) -> dict:
    impl = IMPLEMENTATIONS[name](c)
    record = {f"{mode}_ms": bench_ms(fn) for mode, fn in impl.timers().items()}
    if impl.results is not None and reference is not None:
        record["check_vs_blockattn"] = compare_results(impl.results(), reference)
    record.update(impl.notes or {})
    return record


def floors_ms(c: Case, bandwidth: float) -> dict[str, float]:
    w = c.workload
    shape = (c.total, w.num_q_heads, w.num_kv_heads, w.head_dim)
    fwd = wl.min_bytes_forward(*shape) / bandwidth * 1e3
    bwd = wl.min_bytes_backward(*shape) / bandwidth * 1e3
    return {"fwd": fwd, "bwd": bwd, "fwd+bwd": fwd + bwd}


def run_workload(w: wl.Workload, args, bandwidth: float) -> dict:
    c = make_case(w, args.seed, args.block_size)
    floors = floors_ms(c, bandwidth)
    print(
        f"\n== {w.name}: B={w.batch} T={c.total:,} blocks={c.blocks.numel():,} Hq={w.num_q_heads} "
        f"Hkv={w.num_kv_heads} D={w.head_dim} max_len={w.max_len} fill={w.fill} block={c.block_size}  "
        f"floor fwd {floors['fwd']:.3f} ms, bwd {floors['bwd']:.3f} ms"
    )
    reference = make_blockattn(c).results()
    results = {}
    for name in selected_implementations(w, args.with_flex, args.block_size):
        try:
            results[name] = measure(name, c, None if name == "blockattn" else reference)
        except Exception as exc:  # a failing baseline (OOM, missing backend) must not lose the others
            results[name] = {"error": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"}
        free_memory()
    add_derived_columns(results, floors)
    print_workload(results)
    record = {
        "name": w.name,
        "batch": w.batch,
        "num_q_heads": w.num_q_heads,
        "num_kv_heads": w.num_kv_heads,
        "head_dim": w.head_dim,
        "max_len": w.max_len,
        "fill": w.fill,
        "block_size": c.block_size,
        "tokens": c.total,
        "blocks": c.blocks.numel(),
        "floor_ms": floors,
        "results": results,
    }
    del c, reference
    free_memory()
    return record


def add_derived_columns(results: dict, floors: dict) -> None:
    fa2 = results.get("FA2 varlen", {})
    for record in results.values():
        for mode in MODES:
            ms = record.get(f"{mode}_ms")
            if ms is None:
                continue
            record[f"{mode}_pct_copy_bw"] = 100 * floors[mode] / ms
            if f"{mode}_ms" in fa2:
                record[f"{mode}_speedup_vs_fa2"] = fa2[f"{mode}_ms"] / ms


# --------------------------------------------------------------------------- #
# Output
# --------------------------------------------------------------------------- #


def print_workload(results: dict) -> None:
    header = f"  {'implementation':<21}" + "".join(f"{m + ' ms':>11} {'%bw':>5} {'xFA2':>6}" for m in MODES)
    print(header)
    for name, record in results.items():
        if "error" in record:
            print(f"  {name:<21}  skipped: {record['error']}")
            continue
        row = f"  {name:<21}"
        for mode in MODES:
            speedup = record.get(f"{mode}_speedup_vs_fa2")
            row += f"{record[f'{mode}_ms']:11.3f} {record[f'{mode}_pct_copy_bw']:4.0f}% "
            row += f"{speedup:5.2f}x" if speedup is not None else f"{'-':>6}"
        print(row)
    for name, record in results.items():
        check = record.get("check_vs_blockattn")
        if check:
            verdict = "ok" if check["ok"] else "MISMATCH"
            print(
                f"  check blockattn vs {name}: out max|diff| {check['out_max_abs_diff']:.2e}, rel-L2 "
                f"dq {check['dq_rel_l2']:.2e} dk {check['dk_rel_l2']:.2e} dv {check['dv_rel_l2']:.2e}  {verdict}"
            )
        if "mask_build_ms" in record:
            print(f"  {name}: mask build {record['mask_build_ms']:.1f} ms, compile {record['compile_s']:.1f} s")


def print_summary(records: list[dict]) -> None:
    print("\n== blockattn summary (% of copy bandwidth; speedup over FA2 varlen)")
    print(f"  {'workload':<24}{'tokens':>11}" + "".join(f"{m + ' ms':>12}{'%bw':>6}{'xFA2':>7}" for m in MODES))
    for r in records:
        ours = r["results"].get("blockattn", {})
        if "error" in ours:
            print(f"  {r['name']:<24}{r['tokens']:>11,}  blockattn failed: {ours['error']}")
            continue
        row = f"  {r['name']:<24}{r['tokens']:>11,}"
        for mode in MODES:
            speedup = ours.get(f"{mode}_speedup_vs_fa2", float("nan"))
            row += f"{ours[f'{mode}_ms']:12.3f}{ours[f'{mode}_pct_copy_bw']:5.0f}%{speedup:6.2f}x"
        print(row)


def draw_chart(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["name"] for r in records]
    impls = [i for i in IMPLEMENTATIONS if any("fwd_ms" in r["results"].get(i, {}) for r in records)]
    width = 0.8 / len(impls)
    fig, axes = plt.subplots(2, 1, figsize=(max(10, 0.8 * len(names) + 4), 9), sharex=True)
    for ax, mode in zip(axes, ("fwd", "bwd")):
        for j, impl in enumerate(impls):
            values = [r["results"].get(impl, {}).get(f"{mode}_pct_copy_bw", 0.0) for r in records]
            ax.bar([i + (j - (len(impls) - 1) / 2) * width for i in range(len(names))], values, width, label=impl)
        ax.axhline(100, color="black", linewidth=0.8, linestyle="--")
        ax.set_ylabel(f"{mode}: % of copy bandwidth")
    axes[0].set_title(f"Block-diagonal attention on {torch.cuda.get_device_name()} (higher is better)")
    axes[0].set_ylim(0, 118)  # room above the 100% line for the legend
    axes[1].set_ylim(0, 118)
    axes[0].legend(ncol=len(impls), fontsize="small", loc="upper center")
    axes[-1].set_xticks(range(len(names)), names, rotation=60, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


# --------------------------------------------------------------------------- #
# Main
# --------------------------------------------------------------------------- #


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="headline workloads only")
    parser.add_argument("--workloads", help="comma-separated workload names (see docs/workloads.md)")
    parser.add_argument("--with-flex", action="store_true", help="add FlexAttention (slow: compiles per workload)")
    parser.add_argument("--seed", type=int, default=0, help="length and value seed (default 0)")
    parser.add_argument("--block-size", type=int, default=BLOCK,
                        help="tokens per block (default 64; others compare with FA2 varlen only)")  # fmt: skip
    parser.add_argument("--json", help="write the results as JSON to this path")
    parser.add_argument("--png", help="draw a chart to this path")
    return parser.parse_args(argv)


def chosen_workloads(args) -> list[wl.Workload]:
    if args.workloads:
        try:
            return [wl.workload(name.strip()) for name in args.workloads.split(",") if name.strip()]
        except KeyError as exc:
            raise SystemExit(exc.args[0]) from None
    return wl.headline_workloads() if args.quick else wl.all_workloads()


def main(argv=None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("compare.py needs a CUDA device")
    chosen = chosen_workloads(args)
    started = time.perf_counter()
    bandwidth = copy_bandwidth()
    free_memory()
    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
        f"blockattn {blockattn.__version__} ({blockattn.library_path})"
    )
    print(f"device-to-device copy: {bandwidth / 1e12:.2f} TB/s (read + write)")
    if find_varlen_attn() is None:
        print(f"torch.nn.attention.varlen_attn: not in torch {torch.__version__}, skipped")
    print("eager reference: timed on headline workloads only")

    records = [run_workload(w, args, bandwidth) for w in chosen]
    print_summary(records)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")

    if args.json:
        report = {
            "device": torch.cuda.get_device_name(),
            "torch": torch.__version__,
            "triton": triton.__version__,
            "copy_bandwidth_bytes_per_s": bandwidth,
            "seed": args.seed,
            "workloads": records,
        }
        Path(args.json).write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")
    if args.png:
        draw_chart(records, args.png)

    mismatches = [
        f"{r['name']}: {name}"
        for r in records
        for name, record in r["results"].items()
        if not record.get("check_vs_blockattn", {}).get("ok", True)
    ]
    if mismatches:
        print("MISMATCH against blockattn: " + "; ".join(mismatches))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
