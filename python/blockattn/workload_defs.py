"""The workloads of docs/workloads.md and their length generator, without torch.

The C++ benchmark and tests define the same (support/workloads.cpp);
`tests/check_workload_lengths.py` checks that both name the same workloads
with the same parameters and draw the same lengths.
"""

BATCH = 1152
MAX_LENS = (256, 512, 1024, 2048)
FILLS = (0.5, 0.7, 1.0)
# (head_dim, heads): the two model shapes, H x D = 512, Hq == Hkv.
HEAD_SHAPES = ((128, 4), (64, 8))
HEADLINE_MAX_LEN = 2048
HEADLINE_FILL = 0.7

_MASK64 = (1 << 64) - 1


def length_bounds(max_len: int, fill: float) -> tuple[int, int]:
    """Inclusive [low, high]; the mean length is fill * max_len."""
    if fill >= 0.5:
        low, high = max(1, int((2 * fill - 1) * max_len)), max_len
    else:
        low, high = 1, int(2 * fill * max_len)
    if high < low:
        raise ValueError(f"fill={fill} with max_len={max_len} leaves no valid length")
    return low, high


def splitmix64(seed: int):
    """The generator's stream of 64-bit values (SplitMix64)."""
    state = seed & _MASK64
    while True:
        state = (state + 0x9E3779B97F4A7C15) & _MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        yield z ^ (z >> 31)


def sequence_lengths_list(batch: int, max_len: int, fill: float, seed: int = 0) -> list[int]:
    """`batch` lengths: low + next() % (high - low + 1), in order."""
    low, high = length_bounds(max_len, fill)
    stream = splitmix64(seed)
    return [low + next(stream) % (high - low + 1) for _ in range(batch)]


def workload_name(head_dim: int, max_len: int, fill: float) -> str:
    if (max_len, fill) == (HEADLINE_MAX_LEN, HEADLINE_FILL):
        return f"headline-d{head_dim}"
    return f"sweep-d{head_dim}-L{max_len}-f{fill}"


# Grouped-query, multi-query and tail-heavy batches (issue 10's workloads) and
# the other head dims (issue 11),
# outside the headline/sweep grid: (name, batch, Hq, Hkv, D, max_len, fill).
EXTRA = (
    ("gqa-d128-h8x2", BATCH, 8, 2, 128, 2048, 0.7),
    ("mqa-d64-h8x1", BATCH, 8, 1, 64, 2048, 0.7),
    ("tail-d128", 20000, 4, 4, 128, 63, 0.5),
    ("tail-d64", 20000, 8, 8, 64, 63, 0.5),
    # The headline batch at the other head dims (issue 11), H = round(512 / D).
    ("headdim-d32-h16", BATCH, 16, 16, 32, 2048, 0.7),
    ("headdim-d96-h5", BATCH, 5, 5, 96, 2048, 0.7),
    ("headdim-d160-h3", BATCH, 3, 3, 160, 2048, 0.7),
    ("headdim-d192-h3", BATCH, 3, 3, 192, 2048, 0.7),
    ("headdim-d224-h2", BATCH, 2, 2, 224, 2048, 0.7),
    ("headdim-d256-h2", BATCH, 2, 2, 256, 2048, 0.7),
)


def extra_params() -> list[dict]:
    keys = ("name", "batch", "num_q_heads", "num_kv_heads", "head_dim", "max_len", "fill")
    return [dict(zip(keys, row)) for row in EXTRA]


def workload_params() -> list[dict]:
    """Every workload as a dict (name, batch, num_q_heads, num_kv_heads,
    head_dim, max_len, fill): the two headlines first, then the sweep."""
    rows = [
        dict(name=workload_name(d, L, f), batch=BATCH, num_q_heads=h, num_kv_heads=h, head_dim=d, max_len=L, fill=f)
        for d, h in HEAD_SHAPES
        for L in MAX_LENS
        for f in FILLS
    ]
    return sorted(rows, key=lambda r: not r["name"].startswith("headline-"))
