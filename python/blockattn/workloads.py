"""The workloads of shared/workloads.md (the project's workload definitions) and helpers to build jagged batches.

Shared by the tests and bench/compare.py so both use one length generator and
one naming scheme (`headline-d128`, `headline-d64`, `sweep-d{D}-L{max_len}-f{fill}`).
"""

from dataclasses import dataclass

import torch

BLOCK_SIZE = 64
BATCH = 1152
MAX_LENS = (256, 512, 1024, 2048)
FILLS = (0.5, 0.7, 1.0)
# (head_dim, heads): the two model shapes of the sweep, Hq == Hkv.
HEAD_SHAPES = ((128, 4), (64, 8))
HEADLINE_MAX_LEN = 2048
HEADLINE_FILL = 0.7


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


def _workload(head_dim: int, heads: int, max_len: int, fill: float) -> Workload:
    if (max_len, fill) == (HEADLINE_MAX_LEN, HEADLINE_FILL):
        name = f"headline-d{head_dim}"
    else:
        name = f"sweep-d{head_dim}-L{max_len}-f{fill}"
    return Workload(name, BATCH, heads, heads, head_dim, max_len, fill)


def all_workloads() -> list[Workload]:
    """The full sweep grid (it contains the two headline workloads)."""
    return [
        _workload(head_dim, heads, max_len, fill)
        for head_dim, heads in HEAD_SHAPES
        for max_len in MAX_LENS
        for fill in FILLS
    ]


def headline_workloads() -> list[Workload]:
    return [w for w in all_workloads() if w.name.startswith("headline-")]


def workload(name: str) -> Workload:
    for w in all_workloads():
        if w.name == name:
            return w
    known = ", ".join(w.name for w in all_workloads())
    raise KeyError(f"unknown workload {name!r}; known: {known}")


# --------------------------------------------------------------------------- #
# Lengths and offsets
# --------------------------------------------------------------------------- #


def length_bounds(max_len: int, fill: float) -> tuple[int, int]:
    """Inclusive [low, high] of the workloads.md generator; the mean length is fill * max_len."""
    if fill >= 0.5:
        low, high = max(1, int((2 * fill - 1) * max_len)), max_len
    else:
        low, high = 1, int(2 * fill * max_len)
    if high < low:
        raise ValueError(f"fill={fill} with max_len={max_len} leaves no valid length")
    return low, high


def sequence_lengths(batch: int, max_len: int, fill: float, *, seed: int = 0) -> torch.Tensor:
    """int64 CPU tensor of `batch` lengths, uniform on length_bounds(), from a seeded CPU generator."""
    low, high = length_bounds(max_len, fill)
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(low, high + 1, (batch,), generator=generator)


def offsets_from_lengths(lengths, device=None) -> torch.Tensor:
    """int32 [B + 1] exclusive prefix sum of `lengths` (a sequence of ints or a tensor)."""
    lengths = torch.as_tensor(lengths, dtype=torch.int64)
    offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)])
    return offsets.to(device=device, dtype=torch.int32)


def lengths_from_offsets(offsets: torch.Tensor) -> torch.Tensor:
    """int64 CPU lengths; synchronizes when offsets live on a device."""
    return offsets.detach().to("cpu", torch.int64).diff()


def block_lengths(lengths: torch.Tensor) -> torch.Tensor:
    """Lengths of all 64-token attention blocks, in token order (int64, lengths' device).

    A sequence of length L contributes ceil(L / 64) blocks: 64, ..., 64, and a
    last one of L - 64 * (ceil(L / 64) - 1) tokens. Empty sequences contribute none.
    """
    lengths = lengths.long()
    counts = (lengths + BLOCK_SIZE - 1) // BLOCK_SIZE
    first_block = torch.cumsum(counts, 0) - counts
    total = int(counts.sum())
    index_in_seq = torch.arange(total, device=lengths.device) - first_block.repeat_interleave(counts)
    remaining = lengths.repeat_interleave(counts) - BLOCK_SIZE * index_in_seq
    return remaining.clamp(max=BLOCK_SIZE)


def block_offsets(offsets: torch.Tensor) -> torch.Tensor:
    """int32 cu_seqlens with one entry per 64-token block, on offsets' device (offsets[0] == 0).

    This turns block-diagonal attention into ordinary varlen attention with
    max_seqlen 64, which is how FlashAttention-2 varlen and the cuDNN/varlen
    baselines express it.
    """
    blocks = block_lengths(lengths_from_offsets(offsets))
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
