"""The workloads of docs/workloads.md as torch batches, and helpers to build jagged batches.

Shared by the tests and bench/compare.py. The definitions and the length
generator live in workload_defs.py (torch-free), the same ones the C++
benchmark uses (support/workloads.cpp): one seed gives one batch in both.
"""

from dataclasses import dataclass

import torch

from blockattn import _lib, workload_defs
from blockattn.workload_defs import BATCH, length_bounds  # noqa: F401  (re-exported)

# The library's default block size (read from it, not repeated).
BLOCK_SIZE = _lib.DEFAULT_BLOCK_SIZE


@dataclass(frozen=True)
class Workload:
    name: str
    batch: int
    num_q_heads: int
    num_kv_heads: int
    head_dim: int
    max_len: int
    fill: float
    dtype: torch.dtype = torch.bfloat16

    def lengths(self, seed: int = 0) -> torch.Tensor:
        return sequence_lengths(self.batch, self.max_len, self.fill, seed=seed)


def all_workloads() -> list[Workload]:
    """The headline workloads, then the sweep grid (docs/workloads.md)."""
    return [Workload(**params) for params in workload_defs.workload_params()]


def headline_workloads() -> list[Workload]:
    return [w for w in all_workloads() if w.name.startswith("headline-")]


def extra_workloads() -> list[Workload]:
    """Grouped-query, multi-query and tail-heavy batches (docs/workloads.md)."""
    return [Workload(**params) for params in workload_defs.extra_params()]


def workload(name: str) -> Workload:
    for w in all_workloads() + extra_workloads():
        if w.name == name:
            return w
    known = ", ".join(w.name for w in all_workloads() + extra_workloads())
    raise KeyError(f"unknown workload {name!r}; known: {known}")


# --------------------------------------------------------------------------- #
# Lengths and offsets
# --------------------------------------------------------------------------- #


def sequence_lengths(batch: int, max_len: int, fill: float, *, seed: int = 0) -> torch.Tensor:
    """int64 CPU tensor of `batch` lengths from the shared generator (workload_defs.py)."""
    return torch.tensor(workload_defs.sequence_lengths_list(batch, max_len, fill, seed), dtype=torch.int64)


def offsets_from_lengths(lengths, device=None) -> torch.Tensor:
    """int32 [B + 1] exclusive prefix sum of `lengths` (a sequence of ints or a tensor)."""
    lengths = torch.as_tensor(lengths, dtype=torch.int64)
    offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)])
    return offsets.to(device=device, dtype=torch.int32)


def lengths_from_offsets(offsets: torch.Tensor) -> torch.Tensor:
    """int64 CPU lengths; synchronizes when offsets live on a device."""
    return offsets.detach().to("cpu", torch.int64).diff()


def block_lengths(lengths: torch.Tensor, block_size: int = BLOCK_SIZE) -> torch.Tensor:
    """Lengths of all block_size-token attention blocks, in token order (int64, lengths' device).

    A sequence of length L contributes ceil(L / S) blocks (S = block_size): S, ..., S, and a
    last one of L - S * (ceil(L / S) - 1) tokens. Empty sequences contribute none.
    """
    lengths = lengths.long()
    counts = (lengths + block_size - 1) // block_size
    first_block = torch.cumsum(counts, 0) - counts
    total = int(counts.sum())
    index_in_seq = torch.arange(total, device=lengths.device) - first_block.repeat_interleave(counts)
    remaining = lengths.repeat_interleave(counts) - block_size * index_in_seq
    return remaining.clamp(max=block_size)


def block_offsets(offsets: torch.Tensor, block_size: int = BLOCK_SIZE) -> torch.Tensor:
    """int32 cu_seqlens with one entry per attention block, on offsets' device (offsets[0] == 0).

    This turns block-diagonal attention into ordinary varlen attention with
    max_seqlen block_size, which is how FlashAttention-2 varlen and the cuDNN/varlen
    baselines express it.
    """
    blocks = block_lengths(lengths_from_offsets(offsets), block_size)
    return offsets_from_lengths(blocks, device=offsets.device)


# --------------------------------------------------------------------------- #
# Random batches
# --------------------------------------------------------------------------- #


def random_batch(
    lengths,
    num_q_heads: int,
    num_kv_heads: int,
    head_dim: int,
    *,
    dtype: torch.dtype = torch.bfloat16,
    device="cuda",
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(q, k, v, offsets) with standard-normal q, k, v; contiguous [T, H, D] tensors."""
    offsets = offsets_from_lengths(lengths, device=device)
    total = int(torch.as_tensor(lengths).sum())

    def randn(heads: int) -> torch.Tensor:
        return torch.randn(total, heads, head_dim, dtype=dtype, device=device, generator=generator)

    return randn(num_q_heads), randn(num_kv_heads), randn(num_kv_heads), offsets


# --------------------------------------------------------------------------- #
# Roofline
# --------------------------------------------------------------------------- #


def min_bytes_forward(
    total_tokens: int, num_q_heads: int, num_kv_heads: int, head_dim: int, elem_bytes: int = 2
) -> int:
    """Bytes that must move at least once: read q, k, v and write out."""
    return (2 * num_q_heads + 2 * num_kv_heads) * total_tokens * head_dim * elem_bytes


def min_bytes_backward(
    total_tokens: int, num_q_heads: int, num_kv_heads: int, head_dim: int, elem_bytes: int = 2
) -> int:
    """Read q, k, v, dout and write dq, dk, dv (dk and dv have the kv heads)."""
    return (3 * num_q_heads + 4 * num_kv_heads) * total_tokens * head_dim * elem_bytes
