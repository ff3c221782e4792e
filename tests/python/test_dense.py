"""Tests of blockattn.attention (the dense flash-attention forward). Needs a
CUDA GPU and libblockattn.so.

Accuracy: the relative L2 error of blockattn against a float64 reference must
be at most ERROR_RATIO times that of eager PyTorch attention at the input
precision (plus a floor of a few ulps for tiny problems); the logsumexp is
compared in float32 terms. Every built head dim, causal and not, S = 1 and
lengths that are no multiple of a tile, GQA/MQA, strided and transposed
layouts, both paths on Hopper.
"""

import math

import pytest

torch = pytest.importorskip("torch")

if not torch.cuda.is_available():
    pytest.skip("blockattn needs a CUDA device; torch.cuda.is_available() is False", allow_module_level=True)
try:
    import blockattn
except ImportError as exc:
    pytest.skip(f"blockattn could not be imported: {exc}", allow_module_level=True)

from blockattn import dense  # noqa: E402

ERROR_RATIO = 1.5
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
HOPPER = torch.cuda.get_device_capability() == (9, 0)


def reference(q, k, v, causal, scale, dtype=torch.float64):
    """(out, lse) of attention computed in `dtype` (eager PyTorch)."""
    q, k, v = (t.to(dtype) for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    logits = (q @ k.transpose(-1, -2)) * scale
    if causal:
        S = q.shape[2]
        logits = logits.masked_fill(torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    lse = torch.logsumexp(logits.float() if dtype != torch.float64 else logits, dim=-1)
    return torch.softmax(logits, dim=-1) @ v, lse


def rel_l2(x, ref) -> float:
    return ((x.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()


def make(B, H, Hkv, S, D, dtype, layout="bhsd"):
    """q, k, v of fresh normal values in one of three layouts: contiguous
    (B, H, S, D), transposed (B, S, H, D) memory, or rows padded by 8 elements."""

    def one(h):
        if layout == "bshd":
            return torch.randn(B, S, h, D, dtype=dtype, device="cuda").transpose(1, 2)
        if layout == "padded":
            return torch.randn(B, h, S, D + 8, dtype=dtype, device="cuda")[..., :D]
        return torch.randn(B, h, S, D, dtype=dtype, device="cuda")

    return one(H), one(Hkv), one(Hkv)


def backends():
    return ["auto", "portable"] if HOPPER else ["auto"]


def run(q, k, v, causal, backend, **kwargs):
    if backend == "portable":
        import os

        os.environ["BLOCKATTN_FORCE_PORTABLE"] = "1"
        try:
            return blockattn.attention(q, k, v, causal=causal, **kwargs)
        finally:
            del os.environ["BLOCKATTN_FORCE_PORTABLE"]
    return blockattn.attention(q, k, v, causal=causal, **kwargs)


def check(q, k, v, causal, backend, scale=None):
    s = scale if scale is not None else 1 / math.sqrt(q.shape[3])
    out, lse = run(q, k, v, causal, backend, scale=scale, return_lse=True)
    ref, ref_lse = reference(q, k, v, causal, s)
    eager, _ = reference(q, k, v, causal, s, dtype=q.dtype)
    ours_err, eager_err = rel_l2(out, ref), rel_l2(eager, ref)
    print(f"  blockattn {ours_err:.2e}  eager {eager_err:.2e}")
    assert out.shape == q.shape and out.dtype == q.dtype
    assert torch.isfinite(out).all()
    assert ours_err <= ERROR_RATIO * eager_err + 1e-3
    assert lse.shape == q.shape[:3] and lse.dtype == torch.float32
    assert ((lse.double() - ref_lse).abs() / ref_lse.abs().clamp_min(1.0)).max().item() < 1e-4


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", dense.DENSE_HEAD_DIMS)
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_matches_fp64_reference(dtype, d, causal, backend):
    torch.manual_seed(d + causal)
    for B, H, Hkv, S, layout in ((1, 1, 1, 1, "bhsd"), (2, 4, 2, 37, "bshd"), (1, 2, 1, 200, "padded"),
                                 (1, 3, 3, 129, "bhsd"), (2, 4, 1, 333, "bshd")):  # fmt: skip
        check(*make(B, H, Hkv, S, d, dtype, layout), causal, backend)


def test_scale_and_output_layout():
    q, k, v = make(2, 4, 2, 150, 128, torch.bfloat16, "bshd")
    check(q, k, v, True, "auto", scale=0.3)
    out = blockattn.attention(q, k, v)
    assert out.stride() == q.stride()  # (B, S, H, D) memory in, the same out: a free reshape to (B, S, H*D)


def test_lse_only_when_asked():
    q, k, v = make(1, 2, 2, 64, 64, torch.float16)
    out = blockattn.attention(q, k, v, causal=True)
    assert isinstance(out, torch.Tensor)


def test_compile_fullgraph_and_cuda_graph():
    q, k, v = make(2, 4, 4, 256, 64, torch.float16)
    want = blockattn.attention(q, k, v, causal=True)
    compiled = torch.compile(lambda q, k, v: blockattn.attention(q, k, v, causal=True) * 2, fullgraph=True)
    torch.testing.assert_close(compiled(q, k, v), want * 2)
    graph = torch.cuda.CUDAGraph()
    static_out = None
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        blockattn.attention(q, k, v, causal=True)  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph):
        static_out = blockattn.attention(q, k, v, causal=True)
    q.copy_(torch.randn_like(q))
    graph.replay()
    torch.testing.assert_close(static_out, blockattn.attention(q, k, v, causal=True), rtol=0, atol=0)


def test_eager_calls_skip_the_dispatcher(monkeypatch):
    """An eager call runs dense._run directly, with the same bits as the
    registered op, which traced and mode-wrapped calls still go through."""
    q, k, v = make(2, 4, 2, 300, 64, torch.bfloat16)
    through_op = []
    op = torch.ops.blockattn.dense_attention_fwd
    monkeypatch.setattr(
        dense.torch.ops.blockattn, "dense_attention_fwd", lambda *a: (through_op.append(a), op(*a))[1], raising=False
    )
    eager, eager_lse = blockattn.attention(q, k, v, causal=True, return_lse=True)
    assert through_op == [], "an eager call went through the custom-op dispatcher"
    monkeypatch.undo()
    want, want_lse = torch.ops.blockattn.dense_attention_fwd(q, k, v, True, 1 / math.sqrt(64), True)
    assert torch.equal(eager, want) and torch.equal(eager_lse, want_lse)
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:  # a dispatch mode: the registered op, and its FLOP formula
        blockattn.attention(q, k, v, causal=True)
    assert counter.get_total_flops() == 4 * 2 * 4 * 300 * 300 * 64 // 2


def test_bad_arguments_are_named():
    q, k, v = make(1, 2, 2, 16, 64, torch.float16)
    with pytest.raises(TypeError, match="q must be float16 or bfloat16"):
        blockattn.attention(q.float(), k, v)
    with pytest.raises(TypeError, match="k must have q's dtype"):
        blockattn.attention(q, k.bfloat16(), v)
    with pytest.raises(ValueError, match="must be 4-D"):
        blockattn.attention(q[0], k, v)
    with pytest.raises(ValueError, match="head_dim must be one of"):
        blockattn.attention(q[..., :48], k[..., :48], v[..., :48])
    with pytest.raises(ValueError, match="q heads"):
        blockattn.attention(q[:, :1].expand(1, 3, 16, 64), k, v)
    with pytest.raises(ValueError, match="v must have k's shape"):
        blockattn.attention(q, k, v[:, :, :8])
    with pytest.raises(ValueError, match="scale must be finite, positive"):
        blockattn.attention(q, k, v, scale=-1.0)
    with pytest.raises(TypeError, match="causal must be a bool"):
        blockattn.attention(q, k, v, causal=1)
    with pytest.raises(ValueError, match="CUDA tensor"):
        blockattn.attention(q.cpu(), k.cpu(), v.cpu())
    with pytest.raises(NotImplementedError, match="no backward"):
        blockattn.attention(q.requires_grad_(), k, v)


def test_backend_choice():
    q, k, v = make(1, 2, 2, 16, 128, torch.bfloat16)
    assert blockattn.dense_backend(q, k, v) == ("hopper" if HOPPER else "portable")
