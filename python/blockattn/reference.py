"""Eager PyTorch reference of block_attention, written for clarity.

It gathers the jagged tokens into padded [blocks, heads, 64, D] tiles, runs
ordinary masked attention per tile and scatters the valid rows back, so it is
differentiable by autograd and fast enough for the benchmark's headline sizes.
It reads offsets on the host and validates them.

Precision:
* float64 inputs give the exact reference the tests compare against.
* bf16/fp16 inputs with compute_dtype=None behave like a user's eager code:
  matmuls in the input dtype (fp32 accumulation inside), softmax in fp32,
  probabilities cast back to the input dtype before P @ V.
* compute_dtype=torch.float32/float64 upcasts the inputs and runs everything
  in that dtype; the output is float64 for float64, else q's dtype.
"""

import math

import torch
from torch import Tensor

from blockattn.workloads import BLOCK_SIZE, block_lengths


def block_attention_reference(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    offsets: Tensor,
    scale: float | None = None,
    *,
    compute_dtype: torch.dtype | None = None,
    block_size: int = BLOCK_SIZE,
) -> Tensor:
    """block_attention in eager PyTorch: same arguments and result shape (see the module docstring)."""
    total, num_q_heads, head_dim = q.shape
    group = num_q_heads // k.shape[1]
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    matmul_dtype = compute_dtype or q.dtype
    softmax_dtype = torch.promote_types(matmul_dtype, torch.float32)
    out_dtype = torch.float64 if compute_dtype == torch.float64 else q.dtype

    rows, valid = _block_rows(offsets, total, q.device, block_size)
    if rows.shape[0] == 0:  # no tokens at all: keep the result attached to the graph
        return (q * 0).to(out_dtype)

    qb = _gather_blocks(q, rows, matmul_dtype)  # [blocks, Hq, 64, D]
    kb = _gather_blocks(k, rows, matmul_dtype).repeat_interleave(group, dim=1)
    vb = _gather_blocks(v, rows, matmul_dtype).repeat_interleave(group, dim=1)

    scores = (qb @ kb.transpose(-1, -2)).to(softmax_dtype) * scale
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))  # padding keys
    probs = torch.softmax(scores, dim=-1).to(matmul_dtype)
    out_blocks = probs @ vb  # [blocks, Hq, 64, D]

    # Valid (block, row) pairs in row-major order are exactly the tokens in order.
    return out_blocks.transpose(1, 2)[valid].to(out_dtype)


def _block_rows(offsets: Tensor, total: int, device, block_size: int) -> tuple[Tensor, Tensor]:
    """Token index of every (block, row) slot, and which slots hold a token.

    Padding slots point at token 0; their keys are masked and their query rows
    are dropped, so they only contribute exact zeros to the gradients.
    """
    lengths = _checked_lengths(offsets, total)
    blocks = block_lengths(lengths, block_size).to(device)
    starts = torch.cumsum(blocks, 0) - blocks
    slot = torch.arange(block_size, device=device)
    valid = slot < blocks[:, None]
    rows = torch.where(valid, starts[:, None] + slot, 0)
    return rows, valid


def _gather_blocks(x: Tensor, rows: Tensor, dtype: torch.dtype) -> Tensor:
    """[T, H, D] -> [blocks, H, block_size, D]."""
    return x.to(dtype)[rows].transpose(1, 2)


def _checked_lengths(offsets: Tensor, total: int) -> Tensor:
    host = offsets.detach().to("cpu", torch.int64)
    ok = host.dim() == 1 and host.numel() > 0 and host[0] == 0 and host[-1] == total
    if not ok or bool((host.diff() < 0).any()):
        raise ValueError(
            f"offsets must be a 1-D non-decreasing sequence from 0 to the token count {total}, "
            f"got {host.tolist()}"
        )
    return host.diff()


def rotary_reference(x: Tensor, offsets: Tensor, rotary, *, compute_dtype: torch.dtype | None = None) -> Tensor:
    """x [T, H, D] rotated as block_attention(..., rotary=rotary) rotates it
    (blockattn.Rotary's semantics), in eager PyTorch and differentiable (its
    autograd is the transpose rotation). Reads offsets on the host. With
    compute_dtype the math runs in that dtype, else in x's (a user's eager
    rotary); the result has x's dtype, or float64 for float64."""
    dtype = compute_dtype or x.dtype
    total, _, _ = x.shape
    lengths = _checked_lengths(offsets, total).tolist()
    if rotary.positions == "token":
        pos = torch.arange(total, dtype=torch.int64)
    else:
        starts = rotary.seq_start.cpu().long().tolist() if rotary.seq_start is not None else [0] * len(lengths)
        pos = torch.cat([torch.arange(n, dtype=torch.int64) + s for n, s in zip(lengths, starts)] or
                        [torch.zeros(0, dtype=torch.int64)])  # fmt: skip
    pos = pos.to(x.device)
    inside = (pos >= 0) & (pos < rotary.cos.shape[0])
    row = torch.where(inside, pos, 0)
    cos = torch.where(inside[:, None], rotary.cos[row].to(dtype), 1.0)[:, None, :]  # [T, 1, r/2]
    sin = torch.where(inside[:, None], rotary.sin[row].to(dtype), 0.0)[:, None, :]
    half = rotary.cos.shape[1]
    xr = x.to(dtype)
    if rotary.interleaved:
        a, b, rest = xr[..., 0 : 2 * half : 2], xr[..., 1 : 2 * half : 2], xr[..., 2 * half :]
        ya, yb = a * cos - b * sin, b * cos + a * sin
        out = torch.cat([torch.stack([ya, yb], dim=-1).flatten(-2), rest], dim=-1)
    else:
        a, b, rest = xr[..., :half], xr[..., half : 2 * half], xr[..., 2 * half :]
        out = torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)
    return out if dtype == torch.float64 else out.to(x.dtype)


def jagged_self_attention_reference(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    offsets: Tensor,
    *,
    num_q_heads: int,
    num_kv_heads: int | None = None,
    scale: float | None = None,
    rotary=None,
    compute_dtype: torch.dtype | None = None,
    block_size: int = BLOCK_SIZE,
) -> Tensor:
    """blockattn.jagged_self_attention as unfused eager PyTorch: project,
    split, rotate, attend. [T, Hq D]; float64 inputs give the exact reference."""
    num_kv_heads = num_q_heads if num_kv_heads is None else num_kv_heads
    z = torch.nn.functional.linear(x, weight, bias)
    head_dim = z.shape[1] // (num_q_heads + 2 * num_kv_heads)
    q, k, v = z.split((num_q_heads * head_dim, num_kv_heads * head_dim, num_kv_heads * head_dim), dim=1)
    q, k, v = (t.unflatten(1, (-1, head_dim)) for t in (q, k, v))
    if rotary is not None:
        q = rotary_reference(q, offsets, rotary, compute_dtype=compute_dtype)
        k = rotary_reference(k, offsets, rotary, compute_dtype=compute_dtype)
        if rotary.rotate_v:
            v = rotary_reference(v, offsets, rotary, compute_dtype=compute_dtype)
    out = block_attention_reference(q, k, v, offsets, scale, compute_dtype=compute_dtype, block_size=block_size)
    return out.flatten(1)
