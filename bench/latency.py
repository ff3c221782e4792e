#!/usr/bin/env python3
"""Wall time per call for small problems: where host overhead, not the GPU,
decides what a user waits for.

    python bench/latency.py [--iters N] [--profile]

For batches of 1 to 64 short sequences it times, per call (a loop of N calls,
one synchronize at the end, so the host path is what is measured whenever it
is slower than the GPU work):
  blockattn fwd            blockattn.block_attention (custom op, autograd off)
  blockattn fwd+bwd        forward and backward through autograd
  FA2 varlen fwd / fwd+bwd torch.ops.aten._flash_attention_forward/_backward in an
                           autograd.Function, one cu_seqlens entry per block (as
                           flash_attn_varlen_func is used)
  blockattn graph fwd+bwd  the same forward+backward captured once in a CUDA graph
                           and replayed (the GPU-side floor of the call)
--profile adds a breakdown of one blockattn forward call's host work.
"""

import argparse
import ctypes
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import blockattn  # noqa: E402
from blockattn import _lib, ops  # noqa: E402
from blockattn import workloads as wl  # noqa: E402

BATCHES = (1, 4, 16, 64)
SHAPES = ((128, 4), (64, 8))  # (D, heads): the headline model shapes


class FA2Varlen(torch.autograd.Function):
    """FlashAttention-2 varlen as a user calls it: an autograd.Function over the aten ops."""

    @staticmethod
    def forward(ctx, q, k, v, cu, scale):
        out, lse, rng, unused, _ = torch.ops.aten._flash_attention_forward(
            q, k, v, cu, cu, wl.BLOCK_SIZE, wl.BLOCK_SIZE, 0.0, False, False, scale=scale
        )
        ctx.save_for_backward(q, k, v, out, lse, cu, rng, unused)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse, cu, rng, unused = ctx.saved_tensors
        dq, dk, dv = torch.ops.aten._flash_attention_backward(
            dout.contiguous(), q, k, v, out, lse, cu, cu, wl.BLOCK_SIZE, wl.BLOCK_SIZE, 0.0, False, rng, unused,
            scale=ctx.scale,
        )  # fmt: skip
        return dq, dk, dv, None, None


ROUNDS = 5


def per_call_us(fn, iters: int) -> float:
    """Best of ROUNDS rounds of `iters` calls (each round ends with one
    synchronize): the host is shared, and its noise only ever adds time."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    best = math.inf
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) / iters * 1e6)
    return best


def case(batch: int, d: int, heads: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 300, (batch,), generator=g)
    q, k, v, offsets = wl.random_batch(lengths, heads, heads, d)
    return q, k, v, offsets, wl.block_offsets(offsets)


def measure(batch, d, heads, iters):
    q, k, v, offsets, cu = case(batch, d, heads, seed=batch * d)
    scale = 1.0 / math.sqrt(d)
    dout = torch.randn_like(q)
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))

    def ba_fwd():
        return blockattn.block_attention(q, k, v, offsets)

    def ba_fwd_bwd():
        blockattn.block_attention(qg, kg, vg, offsets).backward(dout)

    def fa_fwd():
        return FA2Varlen.apply(q, k, v, cu, scale)

    def fa_fwd_bwd():
        FA2Varlen.apply(qg, kg, vg, cu, scale).backward(dout)

    # CUDA graph of the blockattn forward+backward (static inputs).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            ba_fwd_bwd()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ba_fwd_bwd()

    return {
        "tokens": q.shape[0],
        "blockattn fwd": per_call_us(ba_fwd, iters),
        "FA2 varlen fwd": per_call_us(fa_fwd, iters),
        "blockattn fwd+bwd": per_call_us(ba_fwd_bwd, iters),
        "FA2 varlen fwd+bwd": per_call_us(fa_fwd_bwd, iters),
        "blockattn graph fwd+bwd": per_call_us(graph.replay, iters),
    }


def profile(iters: int) -> None:
    """Host cost of the pieces of one blockattn forward call (B = 4, D = 128)."""
    q, k, v, offsets, _ = case(4, 128, 4, seed=0)
    scale = 1.0 / math.sqrt(128)
    out = torch.empty_like(q)
    tensors = (q, k, v, out, None, None, None, None)

    def timed(name, fn):
        print(f"  {name:52s} {per_call_us(fn, iters):7.1f} us")

    print("host cost of one blockattn forward (B=4, D=128, H=4):")
    timed("block_attention(q, k, v, offsets) (all)", lambda: blockattn.block_attention(q, k, v, offsets))
    timed("  torch.ops.blockattn.block_attention_fwd", lambda: torch.ops.blockattn.block_attention_fwd(q, k, v, offsets, scale))
    timed("  ops._run_forward (the implementation)", lambda: ops._run_forward(q, k, v, offsets, scale))
    timed("    _check_inputs", lambda: ops._check_inputs(q, k, v, offsets))
    timed("    _kernel_operand x3", lambda: [ops._kernel_operand(t) for t in (q, k, v)])
    timed("    q.new_empty (output)", lambda: q.new_empty(q.shape))
    timed("    torch.empty (workspace)", lambda: torch.empty(1024, dtype=torch.uint8, device=q.device))
    timed("    _lib.pack_args", lambda: _lib.pack_args(4, q.shape[0], 4, 4, 128, 0, 64, scale, 0, offsets.data_ptr(), tensors, 0, 0, 0))
    timed("    current raw stream", lambda: torch._C._cuda_getCurrentRawStream(0))
    ws = torch.empty(_lib.workspace_size(4, q.shape[0]), dtype=torch.uint8, device=q.device)
    stream = torch._C._cuda_getCurrentRawStream(0)

    def c_args(call_tensors, workspace, reuse=0):
        return _lib.pack_args(4, q.shape[0], 4, 4, 128, 0, 64, scale, 0, offsets.data_ptr(), call_tensors,
                              workspace.data_ptr(), workspace.numel(), stream, reuse)  # fmt: skip

    timed("    blockattn_forward via ctypes (C++ + launches)", lambda: _lib.forward(c_args(tensors, ws)))
    timed("    the same, schedule reused (one launch)", lambda: _lib.forward(c_args(tensors, ws, reuse=1)))
    chosen = ctypes.c_int32(0)
    timed("    blockattn_forward_backend (validation + choice)",
          lambda: _lib.forward_backend(c_args(tensors, ws), ctypes.byref(chosen)))
    cu = wl.block_offsets(offsets)

    def fa2_forward():
        return torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, wl.BLOCK_SIZE, wl.BLOCK_SIZE, 0.0, False,
                                                       False, scale=scale)  # fmt: skip

    timed("FA2: aten._flash_attention_forward", fa2_forward)
    timed("FA2: FA2Varlen.apply (autograd off)", lambda: FA2Varlen.apply(q, k, v, cu, scale))
    timed("torch.empty_like(q) (one allocation)", lambda: torch.empty_like(q))

    print("host cost of one backward (same problem):")
    dout = torch.randn_like(q)
    out, schedule = ops._run_forward(q, k, v, offsets, scale, keep_schedule=True)
    timed("ops._run_backward, schedule reused", lambda: ops._run_backward(dout, q, k, v, offsets, scale,
                                                                          schedule=schedule))
    grads = (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v))
    timed("  the same into given gradients", lambda: ops._run_backward(dout, q, k, v, offsets, scale,
                                                                        schedule=schedule, grads=grads))
    btensors = (q, k, v, None, dout, *grads)

    timed("  blockattn_backward via ctypes (one launch)", lambda: _lib.backward(c_args(btensors, schedule, reuse=1)))
    fa_out, lse, rng, unused, _ = fa2_forward()
    timed("FA2: aten._flash_attention_backward", lambda: torch.ops.aten._flash_attention_backward(
        dout, q, k, v, fa_out, lse, cu, cu, wl.BLOCK_SIZE, wl.BLOCK_SIZE, 0.0, False, rng, unused, scale=scale))
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    timed("blockattn fwd+bwd through autograd", lambda: blockattn.block_attention(qg, kg, vg, offsets).backward(dout))
    timed("FA2 fwd+bwd through autograd", lambda: FA2Varlen.apply(qg, kg, vg, cu, scale).backward(dout))
    timed("autograd floor: (qg * 1).backward(dout)", lambda: (qg * 1).backward(dout))
    timed("blockattn fwd (grad on, no backward)", lambda: blockattn.block_attention(qg, kg, vg, offsets))
    timed("FA2 fwd (grad on, no backward)", lambda: FA2Varlen.apply(qg, kg, vg, cu, scale))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--profile", action="store_true")
    a = parser.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, blockattn {blockattn.__version__}")
    if a.profile:
        profile(a.iters)
    names = None
    for d, heads in SHAPES:
        for batch in BATCHES:
            r = measure(batch, d, heads, a.iters)
            if names is None:
                names = [n for n in r if n != "tokens"]
                print(f"\n{'B':>3} {'D':>4} {'tokens':>7} " + " ".join(f"{n:>24s}" for n in names) + "   (us per call)")
            print(f"{batch:3d} {d:4d} {r['tokens']:7d} " + " ".join(f"{r[n]:24.1f}" for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
