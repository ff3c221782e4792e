"""Tests of blockattn.jagged_self_attention and blockattn.nn.JaggedSelfAttention
(projection + rotary + block attention). Needs a CUDA GPU and libblockattn.so.

Accuracy: out and the gradients of x, weight and bias against an fp64
reference of the unfused pipeline, at most ERROR_RATIO times the error of the
same pipeline in eager PyTorch at the input precision.
"""

import math
import re

import pytest

torch = pytest.importorskip("torch")

# Importing test_block_attention skips this module too, with its reason, where
# there is no CUDA device or no library.
from test_block_attention import EDGE_LENGTHS, ERROR_RATIO, make_rotary, rel_l2  # noqa: E402

import blockattn  # noqa: E402
from blockattn import jagged_self_attention, workloads  # noqa: E402
from blockattn.reference import jagged_self_attention_reference  # noqa: E402

GRAD_NAMES = ("out", "dx", "dweight", "dbias")


def make_layer_inputs(lengths, in_features, hq, hkv, d, bias=True, dtype=torch.bfloat16):
    offsets = workloads.offsets_from_lengths(lengths, device="cuda")
    total = int(offsets[-1])
    x = torch.randn(total, in_features, device="cuda").to(dtype)
    weight = (torch.randn((hq + 2 * hkv) * d, in_features, device="cuda") / math.sqrt(in_features)).to(dtype)
    b = torch.randn((hq + 2 * hkv) * d, device="cuda").mul(0.1).to(dtype) if bias else None
    return x, weight, b, offsets


def layer_results(fn, x, weight, bias, offsets, dout, **kwargs):
    """(out, dx, dweight, dbias) of fn; dbias is absent without a bias."""
    leaves = [t.detach().requires_grad_() for t in (x, weight) + ((bias,) if bias is not None else ())]
    out = fn(leaves[0], leaves[1], leaves[2] if bias is not None else None, offsets, **kwargs)
    return (out.detach(), *torch.autograd.grad(out, leaves, dout))


def assert_layer_accurate(x, weight, bias, offsets, label, **kwargs):
    hq = kwargs["num_q_heads"]
    d = weight.shape[0] // (hq + 2 * kwargs.get("num_kv_heads", hq))
    dout = torch.randn(x.shape[0], hq * d, dtype=x.dtype, device="cuda")
    ours = layer_results(jagged_self_attention, x, weight, bias, offsets, dout, **kwargs)
    eager = layer_results(jagged_self_attention_reference, x, weight, bias, offsets, dout, **kwargs)
    to64 = lambda t: None if t is None else t.double()  # noqa: E731
    exact = layer_results(jagged_self_attention_reference, to64(x), to64(weight), to64(bias), offsets, dout.double(),
                          compute_dtype=torch.float64, **kwargs)  # fmt: skip
    assert ours[0].shape == (x.shape[0], hq * d) and ours[0].dtype == x.dtype
    for name, got, same_precision, want in zip(GRAD_NAMES[: len(ours)], ours, eager, exact, strict=True):
        err, eager_err = rel_l2(got, want), rel_l2(same_precision, want)
        print(f"{label} {name}: rel-L2 vs fp64: blockattn {err:.3e}, eager {x.dtype} {eager_err:.3e}")
        assert math.isfinite(err) and err <= ERROR_RATIO * eager_err, (name, err, eager_err)


LAYER_CASES = {
    "plain": dict(),
    "rotary-half-seq-qk": dict(rotary=dict(rotary_dim=None, positions="sequence")),
    "rotary-interleaved-token-qkv-strided": dict(
        rotary=dict(rotary_dim=None, positions="token", interleaved=True, rotate_v=True, strided=True)
    ),
    "rotary-partial-starts-no-bias": dict(rotary=dict(rotary_dim=-32, positions="sequence", seq_starts=True),
                                          bias=False),  # fmt: skip
}


@pytest.mark.parametrize("portable", [False, True], ids=["auto", "portable"])
@pytest.mark.parametrize("case", list(LAYER_CASES), ids=list(LAYER_CASES))
@pytest.mark.parametrize("hq,hkv,d,c", [(4, 4, 128, 256), (8, 2, 64, 192)], ids=["mha-d128", "gqa-d64"])
def test_layer_matches_fp64_reference(hq, hkv, d, c, case, portable, monkeypatch):
    if portable:
        monkeypatch.setenv("BLOCKATTN_FORCE_PORTABLE", "1")
    spec = dict(LAYER_CASES[case])
    x, weight, bias, offsets = make_layer_inputs(EDGE_LENGTHS, c, hq, hkv, d, bias=spec.pop("bias", True))
    kwargs = dict(num_q_heads=hq, num_kv_heads=hkv)
    if "rotary" in spec:
        r = dict(spec["rotary"])
        rotary_dim = d + (r.pop("rotary_dim") or 0)
        if r.pop("seq_starts", False):
            r["seq_start"] = torch.randint(-20, 300, (offsets.shape[0] - 1,), dtype=torch.int32, device="cuda")
        kwargs["rotary"] = make_rotary(rotary_dim, **r)
    assert_layer_accurate(x, weight, bias, offsets, case, **kwargs)


def test_layer_reference_system_shape():
    # The reference system's test: B=64, lengths 1-256, H=3, D=64, C=192, [T, D]
    # table [sin | cos] of random values by token row, q, k, v rotated.
    gen = torch.Generator().manual_seed(1)
    lengths = torch.randint(1, 257, (64,), generator=gen).tolist()
    x, weight, bias, offsets = make_layer_inputs(lengths, 192, 3, 3, 64)
    rotary = make_rotary(64, "token", strided=True, interleaved=True, rotate_v=True)
    assert_layer_accurate(x, weight, bias, offsets, "reference-system shape", num_q_heads=3, rotary=rotary)


def test_module_compiles_and_captures():
    layer = blockattn.nn.JaggedSelfAttention(256, num_q_heads=4, head_dim=64, num_kv_heads=2, device="cuda",
                                             dtype=torch.bfloat16)  # fmt: skip
    x, _, _, offsets = make_layer_inputs(EDGE_LENGTHS, 256, 4, 2, 64)
    rotary = make_rotary(64, "sequence", rotate_v=True)

    def step(forward, x):
        out = forward(x, offsets, rotary)
        return out, torch.autograd.grad(out.float().square().sum(), (x, layer.weight, layer.bias))

    eager = step(layer, x.detach().requires_grad_())
    compiled = step(torch.compile(layer, fullgraph=True), x.detach().requires_grad_())
    # The GEMMs may pick other cuBLAS kernels under compile: close, not equal.
    for a, b in zip((eager[0], *eager[1]), (compiled[0], *compiled[1]), strict=True):
        torch.testing.assert_close(a, b)

    # CUDA graph: capture forward + backward, replay on new inputs. The
    # graphs above must be gone first: while one lives, the parameters'
    # gradient accumulators stay bound to the default stream, which a
    # capture may not wait on.
    del eager, compiled
    static_x = x.detach().clone().requires_grad_()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            step(layer, static_x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out, static_grads = step(layer, static_x)
    fresh = torch.randn_like(x)
    with torch.no_grad():
        static_x.copy_(fresh)
    graph.replay()
    want_out, want_grads = step(layer, fresh.detach().requires_grad_())
    assert torch.equal(static_out, want_out)
    for a, b in zip(static_grads, want_grads, strict=True):
        assert torch.equal(a, b)


def test_layer_saves_only_the_projection():
    # The attention keeps z for its backward and nothing rotated: the
    # autograd graph's saved tensors are x, weight (for the GEMM) and z.
    x, weight, bias, offsets = make_layer_inputs([100, 64, 3], 128, 2, 2, 64)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        jagged_self_attention(x.requires_grad_(), weight.requires_grad_(), bias, offsets, num_q_heads=2,
                              rotary=make_rotary(64, "sequence", rotate_v=True))  # fmt: skip
    big = [t for t in saved if t.dim() == 2 and t.shape[0] == x.shape[0]]
    assert len(big) == 2, [tuple(t.shape) for t in saved]  # x and z


@pytest.mark.parametrize(
    "mutate,error,argument",
    [
        (lambda a: dict(a, x=a["x"][:, None]), ValueError, "x must be 2-D"),
        (lambda a: dict(a, weight=a["weight"][:, :-8]), ValueError, "weight must be [N, C]"),
        (lambda a: dict(a, weight=a["weight"][:-64]), ValueError, "weight.shape[0]"),
        (lambda a: dict(a, weight=a["weight"].half()), TypeError, "weight must have x's dtype"),
        (lambda a: dict(a, bias=a["bias"][:-1]), ValueError, "bias must be None or"),
        (lambda a: dict(a, num_q_heads=0), ValueError, "num_q_heads"),
        (lambda a: dict(a, num_q_heads=3, num_kv_heads=2, weight=a["weight"].new_zeros(7 * 64, 64), bias=None),
         ValueError,
         "multiple of k heads"),  # fmt: skip
        (lambda a: dict(a, offsets=a["offsets"].long()), TypeError, "offsets must be int32"),
    ],
)
def test_layer_invalid_arguments(mutate, error, argument):
    x, weight, bias, offsets = make_layer_inputs([5, 70], 64, 2, 2, 64)
    args = mutate(dict(x=x, weight=weight, bias=bias, offsets=offsets, num_q_heads=2, num_kv_heads=2))
    with pytest.raises(error, match=re.escape(argument)):
        jagged_self_attention(args.pop("x"), args.pop("weight"), args.pop("bias"), args.pop("offsets"), **args)
