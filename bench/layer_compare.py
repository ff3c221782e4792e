#!/usr/bin/env python3
"""Rotary and projection-layer workloads (issue 8): blockattn's fused
pipelines against the unfused PyTorch ones users run today, in one run on the
same inputs.

    python bench/layer_compare.py                       # headline-d128 and headline-d64
    python bench/layer_compare.py --workloads headline-d128 --json out.json

Per workload (bf16, q, k and v rotated, half-split rotary over the whole head,
a FlashAttention-style [max_len, D/2] fp32 table by position in sequence;
`--tables input` rounds the table to the inputs' dtype for blockattn too, as
the baselines' rotary already does, so that both use the same angles):

  attention + rotary
    blockattn plain         block_attention, no rotary (the ratio's base)
    blockattn rotary        block_attention(..., rotary=): rotation fused both ways
    FA2 + compiled rotary   torch.compile'd rotary of q, k, v, then FA2 varlen
                            (one cu_seqlens entry per 64-token block)
    FA2 + eager rotary      the same with the rotary in eager PyTorch
  layer (x [T, C], C = Hq D, weight [(Hq + 2 Hkv) D, C], bias)
    blockattn layer         blockattn.jagged_self_attention (projection, rotary, attention)
    GEMMs + plain blockattn the projection's GEMMs alone (F.linear forward and
                            backward) plus plain blockattn forward+backward: the
                            layer's floor
    unfused layer           F.linear, split, contiguous copies, compiled rotary,
                            FA2 varlen, with autograd (cat of the gradients)

The per-token cos/sin rows of the baselines are gathered once, outside the
timing (as a model shares them across layers). Times are medians of
triton.testing.do_bench, as in bench/compare.py; peak memory is
torch.cuda.max_memory_allocated over one forward+backward above what the
inputs already hold.
"""

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (bench_ms, copy_bandwidth, make_case, Case, BLOCK)
from latency import FA2Varlen  # noqa: E402  (FA2 varlen as flash_attn_varlen_func wraps it)

import blockattn  # noqa: E402
from blockattn import workloads as wl  # noqa: E402



# --------------------------------------------------------------------------- #
# Rotary inputs
# --------------------------------------------------------------------------- #


def rotary_tables(max_len: int, rotary_dim: int, device="cuda"):
    """FlashAttention-style [max_len, r/2] fp32 cos and sin (base 10000)."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, rotary_dim, 2, device=device, dtype=torch.float32) / rotary_dim))
    angles = torch.outer(torch.arange(max_len, device=device, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def positions_in_sequence(offsets: torch.Tensor, total: int) -> torch.Tensor:
    lengths = offsets.diff().long()
    starts = torch.repeat_interleave(offsets[:-1].long(), lengths)
    return torch.arange(total, device=offsets.device) - starts


def rotate_half_split(x, cos_t, sin_t):
    """x [T, H, D] rotated by per-token [T, D/2] angles, NeoX pairs, in x's dtype."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    c, s = cos_t[:, None, :].to(x.dtype), sin_t[:, None, :].to(x.dtype)
    return torch.cat([a * c - b * s, b * c + a * s], dim=-1)


def rotate_qkv(q, k, v, cos_t, sin_t):
    return rotate_half_split(q, cos_t, sin_t), rotate_half_split(k, cos_t, sin_t), rotate_half_split(v, cos_t, sin_t)


compiled_rotate_qkv = torch.compile(rotate_qkv)
# The bwd timing replays one retained graph; compiled backwards that donate
# their saved buffers refuse retain_graph.
torch._functorch.config.donated_buffer = False


# --------------------------------------------------------------------------- #
# Pipelines
# --------------------------------------------------------------------------- #


def timed_pipeline(forward, inputs, dout) -> dict:
    """fwd, bwd (one retained graph) and fwd+bwd milliseconds of a differentiable forward()."""
    out = forward()
    fwd = compare.bench_ms(forward)
    bwd = compare.bench_ms(lambda: torch.autograd.grad(out, inputs, dout, retain_graph=True))
    del out
    fwd_bwd = compare.bench_ms(lambda: torch.autograd.grad(forward(), inputs, dout))
    return {"fwd_ms": fwd, "bwd_ms": bwd, "fwd+bwd_ms": fwd_bwd}


def peak_bytes(forward, inputs, dout) -> int:
    """Peak allocation of one forward+backward above what is allocated before it."""
    compare.free_memory()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    torch.autograd.grad(forward(), inputs, dout)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def attention_rotary(c: compare.Case, rotary: blockattn.Rotary, cos_t, sin_t) -> dict:
    q, k, v = (t.detach().requires_grad_() for t in (c.q, c.k, c.v))
    inputs = (q, k, v)
    results = {
        "blockattn plain": timed_pipeline(lambda: blockattn.block_attention(q, k, v, c.offsets), inputs, c.dout),
        "blockattn rotary": timed_pipeline(
            lambda: blockattn.block_attention(q, k, v, c.offsets, rotary=rotary), inputs, c.dout
        ),
    }
    for name, rotate in (("FA2 + compiled rotary", compiled_rotate_qkv), ("FA2 + eager rotary", rotate_qkv)):
        results[name] = timed_pipeline(
            lambda rotate=rotate: FA2Varlen.apply(*rotate(q, k, v, cos_t, sin_t), c.cu_blocks, c.scale), inputs,
            c.dout,
        )  # fmt: skip
    # Same answer, within bf16 rounding, as the unfused pipeline.
    ours = blockattn.block_attention(q, k, v, c.offsets, rotary=rotary).float()
    theirs = FA2Varlen.apply(*rotate_qkv(q, k, v, cos_t, sin_t), c.cu_blocks, c.scale).float()
    results["check_out_max_abs_diff"] = (ours - theirs).abs().max().item()
    return results


def layer(c: compare.Case, rotary: blockattn.Rotary, cos_t, sin_t) -> dict:
    w = c.workload
    hq, hkv, d = w.num_q_heads, w.num_kv_heads, w.head_dim
    channels, width = hq * d, (hq + 2 * hkv) * d
    gen = torch.Generator("cuda").manual_seed(1)
    x = torch.randn(c.total, channels, device="cuda", dtype=c.q.dtype, generator=gen).requires_grad_()
    weight = (torch.randn(width, channels, device="cuda", generator=gen) / channels**0.5).to(c.q.dtype)
    weight.requires_grad_()
    bias = torch.zeros(width, device="cuda", dtype=c.q.dtype).requires_grad_()
    params = (x, weight, bias)
    dout = torch.randn(c.total, hq * d, device="cuda", dtype=c.q.dtype, generator=gen)

    def fused():
        return blockattn.jagged_self_attention(x, weight, bias, c.offsets, num_q_heads=hq, num_kv_heads=hkv,
                                               rotary=rotary)  # fmt: skip

    def unfused():
        z = F.linear(x, weight, bias)
        q, k, v = z.split((hq * d, hkv * d, hkv * d), dim=1)
        q, k, v = (t.unflatten(1, (-1, d)) for t in (q, k, v))  # the compiled rotary reads the views
        q, k, v = compiled_rotate_qkv(q, k, v, cos_t, sin_t)
        return FA2Varlen.apply(q, k, v, c.cu_blocks, c.scale).flatten(1)

    dz = torch.randn(c.total, width, device="cuda", dtype=c.q.dtype, generator=gen)
    qkv = [t.detach().requires_grad_() for t in (c.q, c.k, c.v)]
    results = {
        "blockattn layer": timed_pipeline(fused, params, dout),
        "GEMMs alone": timed_pipeline(lambda: F.linear(x, weight, bias), params, dz),
        "plain blockattn": timed_pipeline(lambda: blockattn.block_attention(*qkv, c.offsets), qkv, c.dout),
        "unfused layer": timed_pipeline(unfused, params, dout),
    }
    results["GEMMs + plain blockattn"] = {
        key: results["GEMMs alone"][key] + results["plain blockattn"][key] for key in results["GEMMs alone"]
    }
    results["peak_bytes"] = {"blockattn layer": peak_bytes(fused, params, dout),
                             "unfused layer": peak_bytes(unfused, params, dout)}  # fmt: skip
    diff = (fused().float() - unfused().float()).abs().max().item()
    results["check_out_max_abs_diff"] = diff
    return results


# --------------------------------------------------------------------------- #
# Main
# --------------------------------------------------------------------------- #


def print_table(title: str, rows: dict, base: str) -> None:
    print(f"  {title}")
    print(f"    {'pipeline':<26}{'fwd ms':>9}{'bwd ms':>9}{'fwd+bwd':>9}   vs {base}")
    for name, r in rows.items():
        if not isinstance(r, dict) or "fwd_ms" not in r:
            continue
        ratios = " ".join(f"{r[m] / rows[base][m]:5.2f}x" for m in ("fwd_ms", "bwd_ms", "fwd+bwd_ms"))
        print(f"    {name:<26}{r['fwd_ms']:9.3f}{r['bwd_ms']:9.3f}{r['fwd+bwd_ms']:9.3f}   {ratios}")


def run(w: wl.Workload, seed: int, tables: str = "float32") -> dict:
    c = compare.make_case(w, seed)
    max_len = w.max_len
    cos, sin = rotary_tables(max_len, w.head_dim)
    if tables == "input":  # the values the baselines rotate with (rotate_half_split casts to x's dtype)
        cos, sin = cos.to(c.q.dtype), sin.to(c.q.dtype)
    rotary = blockattn.Rotary(cos, sin, rotate_v=True)
    pos = positions_in_sequence(c.offsets, c.total)
    cos_t, sin_t = cos[pos], sin[pos]
    print(f"\n== {w.name}: T={c.total:,} Hq={w.num_q_heads} Hkv={w.num_kv_heads} D={w.head_dim}, {cos.dtype} tables")
    att = attention_rotary(c, rotary, cos_t, sin_t)
    compare.free_memory()
    print_table("attention + rotary (q, k, v rotated)", att, "blockattn plain")
    for base in ("FA2 + compiled rotary", "FA2 + eager rotary"):
        print(f"    blockattn rotary bwd is {att[base]['bwd_ms'] / att['blockattn rotary']['bwd_ms']:.2f}x faster "
              f"than {base}")  # fmt: skip
    lay = layer(c, rotary, cos_t, sin_t)
    compare.free_memory()
    print_table("layer (projection, rotary, attention)", lay, "GEMMs + plain blockattn")
    ours, floor, unfused = lay["blockattn layer"], lay["GEMMs + plain blockattn"], lay["unfused layer"]
    print(f"    blockattn layer fwd+bwd: {ours['fwd+bwd_ms'] / floor['fwd+bwd_ms']:.3f}x the GEMMs + plain "
          f"blockattn, {unfused['fwd+bwd_ms'] / ours['fwd+bwd_ms']:.2f}x faster than the unfused layer")  # fmt: skip
    peaks = lay["peak_bytes"]
    print(f"    peak memory fwd+bwd: blockattn layer {peaks['blockattn layer'] / 2**30:.2f} GiB, unfused "
          f"{peaks['unfused layer'] / 2**30:.2f} GiB")  # fmt: skip
    print(f"    out max|diff| vs unfused: attention {att['check_out_max_abs_diff']:.2e}, layer "
          f"{lay['check_out_max_abs_diff']:.2e}")  # fmt: skip
    return {"name": w.name, "tokens": c.total, "tables": str(cos.dtype), "attention_rotary": att, "layer": lay}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="headline-d128,headline-d64")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tables", choices=("float32", "input"), default="float32",
                        help="the rotary tables' dtype: fp32, or the inputs' (the baselines' angles exactly)")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    bandwidth = compare.copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, blockattn {blockattn.__version__}; "
          f"copy {bandwidth / 1e12:.2f} TB/s")  # fmt: skip
    records = [run(wl.workload(name.strip()), args.seed, args.tables) for name in args.workloads.split(",")]
    if args.json:
        Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(), "workloads": records}, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
