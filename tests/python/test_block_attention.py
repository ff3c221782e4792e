"""Tests of the blockattn PyTorch front end. Needs a CUDA GPU and libblockattn.so.

Accuracy is judged against a float64 reference: for out, dq, dk and dv the
relative L2 error of blockattn must be at most ERROR_RATIO times the error of
the same computation written in eager PyTorch at the input precision.
Run with `-s` to see both errors of every comparison.
"""

import math
import os
import re

import pytest

torch = pytest.importorskip("torch")

if not torch.cuda.is_available():
    pytest.skip("blockattn needs a CUDA device; torch.cuda.is_available() is False", allow_module_level=True)
try:
    import blockattn  # noqa: F401  (loads libblockattn.so)
except ImportError as exc:
    pytest.skip(f"blockattn could not be imported: {exc}", allow_module_level=True)

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from blockattn import block_attention, ops, workloads  # noqa: E402
from blockattn.reference import block_attention_reference  # noqa: E402

# Every edge of the 64-token blocking: empty sequences, one token, one short of,
# exactly and one past a block, two blocks, and a 32-block sequence.
EDGE_LENGTHS = [0, 1, 63, 64, 65, 0, 127, 128, 2048, 5]
# (Hq, Hkv, D): four head layouts (GQA, MQA, plain) at every head dim the library was built with.
HEAD_CONFIGS = [(hq, hkv, d) for d in ops.SUPPORTED_HEAD_DIMS for hq, hkv in ((8, 2), (4, 1), (4, 4), (2, 2))]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
ERROR_RATIO = 1.5
RESULT_NAMES = ("out", "dq", "dk", "dv")
# ~50 ms of GPU time on any current part: long enough that work wrongly put on
# another stream would overtake the work queued behind the sleep.
SLEEP_CYCLES = 100_000_000


def make_batch(lengths, hq=4, hkv=2, d=64, dtype=torch.bfloat16, device="cuda"):
    return workloads.random_batch(lengths, hq, hkv, d, dtype=dtype, device=device)


def forward_backward(fn, q, k, v, offsets, dout, **kwargs):
    """(out, dq, dk, dv) of fn at (q, k, v); the inputs keep their strides."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v, offsets, **kwargs)
    return (out.detach(), *torch.autograd.grad(out, (q, k, v), dout))


def rel_l2(x, ref) -> float:
    ref = ref.double()
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def assert_accurate(q, k, v, offsets, scale=None):
    dout = torch.randn(q.shape, dtype=q.dtype, device=q.device)
    ours = forward_backward(block_attention, q, k, v, offsets, dout, scale=scale)
    eager = forward_backward(block_attention_reference, q, k, v, offsets, dout, scale=scale)
    exact = forward_backward(
        block_attention_reference, q.double(), k.double(), v.double(), offsets, dout.double(), scale=scale
    )
    for name, got, same_precision, want, like in zip(RESULT_NAMES, ours, eager, exact, (q, q, k, v)):
        assert (got.shape, got.dtype, got.device) == (like.shape, like.dtype, like.device), name
        assert got.is_contiguous(), name
        err, eager_err = rel_l2(got, want), rel_l2(same_precision, want)
        print(f"{name}: rel-L2 vs fp64: blockattn {err:.3e}, eager {q.dtype} {eager_err:.3e}")
        assert math.isfinite(err) and err <= ERROR_RATIO * eager_err, (
            f"{name}: blockattn error {err:.3e} exceeds {ERROR_RATIO} x eager error {eager_err:.3e}"
        )


def assert_all_equal(got, want):
    for name, a, b in zip(RESULT_NAMES, got, want, strict=True):
        assert torch.equal(a, b), f"{name} differs"


# --------------------------------------------------------------------------- #
# Numerics
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("hq,hkv,d", HEAD_CONFIGS, ids=[f"hq{a}-hkv{b}-d{c}" for a, b, c in HEAD_CONFIGS])
def test_matches_fp64_reference(hq, hkv, d, dtype):
    assert_accurate(*make_batch(EDGE_LENGTHS, hq, hkv, d, dtype))


@pytest.mark.parametrize("d", [64, 128])
def test_portable_forward_path(d, monkeypatch):
    # On an H100/H200 the forward defaults to the sm_90 path; the environment
    # variable selects the portable kernel, which must be just as accurate.
    monkeypatch.setenv("BLOCKATTN_FORCE_PORTABLE", "1")
    assert_accurate(*make_batch(EDGE_LENGTHS, 4, 2, d))


def test_custom_scale():
    assert_accurate(*make_batch(EDGE_LENGTHS, 4, 2, 128), scale=0.3)


def test_many_random_lengths():
    lengths = torch.randint(0, 300, (257,)).tolist()
    assert_accurate(*make_batch(lengths, 8, 2, 64))


def test_no_tokens():
    q, k, v, offsets = make_batch([0, 0, 0], 4, 2, 64)
    out, dq, dk, dv = forward_backward(block_attention, q, k, v, offsets, torch.empty_like(q))
    assert (out.shape, dq.shape, dk.shape, dv.shape) == (q.shape, q.shape, k.shape, v.shape)


def test_backward_is_deterministic():
    q, k, v, offsets = make_batch(EDGE_LENGTHS, 8, 2, 128)
    dout = torch.randn_like(q)
    first = forward_backward(block_attention, q, k, v, offsets, dout)
    second = forward_backward(block_attention, q, k, v, offsets, dout)
    assert_all_equal(first, second)


# --------------------------------------------------------------------------- #
# Layouts
# --------------------------------------------------------------------------- #


def _strided_inputs(layout: str, hq: int, hkv: int, d: int):
    """q, k, v views of one buffer, the way models produce them."""
    total = sum(EDGE_LENGTHS)
    randn = lambda *shape: torch.randn(*shape, dtype=torch.bfloat16, device="cuda")  # noqa: E731
    if layout == "packed-qkv":  # [T, 3, H, D] from a fused projection
        return randn(total, 3, hq, d).unbind(1)
    if layout == "packed-gqa":  # [T, Hq + 2 Hkv, D] from a fused GQA projection
        return randn(total, hq + 2 * hkv, d).split([hq, hkv, hkv], dim=1)
    if layout == "head-major":  # [3, H, T, D] storage seen as [T, H, D]
        return randn(3, hq, total, d).transpose(1, 2).unbind(0)
    if layout == "dim-major":  # [T, D, H] storage: the last dim is not unit-stride
        return randn(3, total, d, hq).transpose(-1, -2).unbind(0)
    if layout == "misaligned":  # contiguous, but 2 bytes past a 16-byte boundary
        return randn(3 * total * hq * d + 1)[1:].view(3, total, hq, d).unbind(0)
    raise AssertionError(layout)


@pytest.mark.parametrize("layout", ["packed-qkv", "packed-gqa", "head-major"])
def test_strided_layouts_are_read_in_place(layout):
    hkv = 2 if layout == "packed-gqa" else 4
    q, k, v = _strided_inputs(layout, 4, hkv, 128)
    for t in (q, k, v):
        assert not t.is_contiguous() and ops._kernel_operand(t) is t
    assert_accurate(q, k, v, workloads.offsets_from_lengths(EDGE_LENGTHS, "cuda"))


@pytest.mark.parametrize("layout", ["dim-major", "misaligned"])
def test_unreadable_layouts_are_copied(layout):
    q, k, v = _strided_inputs(layout, 4, 4, 64)
    for t in (q, k, v):
        operand = ops._kernel_operand(t)
        assert operand is not t and operand.is_contiguous() and operand.data_ptr() % 16 == 0
    assert_accurate(q, k, v, workloads.offsets_from_lengths(EDGE_LENGTHS, "cuda"))


# --------------------------------------------------------------------------- #
# PyTorch integration
# --------------------------------------------------------------------------- #


def test_opcheck():
    q, k, v, offsets = make_batch([5, 64, 70, 0, 130], 4, 2, 64)
    dout = torch.randn_like(q)
    torch.library.opcheck(torch.ops.blockattn.block_attention_bwd.default, (dout, q, k, v, offsets, 0.125))
    for t in (q, k, v):
        t.requires_grad_()
    torch.library.opcheck(torch.ops.blockattn.block_attention_fwd.default, (q, k, v, offsets, 0.125))


class _Attention(torch.nn.Module):
    def forward(self, q, k, v, offsets):
        return block_attention(q, k, v, offsets)


def test_torch_export():
    args = make_batch(EDGE_LENGTHS, 4, 2, 64)
    program = torch.export.export(_Attention(), args)
    targets = {node.target for node in program.graph.nodes}
    assert torch.ops.blockattn.block_attention_fwd.default in targets
    assert torch.equal(program.module()(*args), block_attention(*args))


def test_torch_compile_fullgraph_forward_backward():
    torch._dynamo.reset()
    q, k, v, offsets = make_batch(EDGE_LENGTHS, 8, 2, 128)
    dout = torch.randn_like(q)
    # fullgraph=True turns any graph break into an error.
    compiled = torch.compile(block_attention, fullgraph=True)
    got = forward_backward(compiled, q, k, v, offsets, dout)
    assert_all_equal(got, forward_backward(block_attention, q, k, v, offsets, dout))


def test_cuda_graph_capture_and_replay():
    hq, hkv, d = 8, 2, 64
    q, k, v, offsets = make_batch(EDGE_LENGTHS, hq, hkv, d)
    static_inputs = [t.clone().requires_grad_() for t in (q, k, v)]
    static_offsets = offsets.clone()
    static_dout = torch.randn_like(q)

    def step():
        out = block_attention(*static_inputs, static_offsets)
        return (out.detach(), *torch.autograd.grad(out, static_inputs, static_dout))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm up outside the capture, as torch.cuda.graph requires
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_results = step()

    # New values everywhere, offsets included (same B and T): the library
    # builds its block schedule on the device, so the replay must follow them.
    new_inputs = make_batch(EDGE_LENGTHS[::-1], hq, hkv, d)
    new_dout = torch.randn_like(q)
    with torch.no_grad():
        for static, new in zip((*static_inputs, static_offsets, static_dout), (*new_inputs, new_dout)):
            static.copy_(new)
    graph.replay()
    torch.cuda.synchronize()
    assert_all_equal(static_results, forward_backward(block_attention, *new_inputs, new_dout))


def test_runs_on_the_current_stream():
    q, k, v, offsets = make_batch(EDGE_LENGTHS, 4, 2, 128)
    new_q, new_dout = torch.randn_like(q), torch.randn_like(q)
    want = forward_backward(block_attention, new_q, k, v, offsets, new_dout)
    dout = torch.zeros_like(q)
    torch.cuda.synchronize()

    # Each pass is queued behind a sleep and a copy of its real input on a side
    # stream; an op that launched anywhere else would read the stale input.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP_CYCLES)
        q.copy_(new_q)
        q.requires_grad_()
        k.requires_grad_()
        v.requires_grad_()
        out = block_attention(q, k, v, offsets)
        torch.cuda._sleep(SLEEP_CYCLES)
        dout.copy_(new_dout)
        grads = torch.autograd.grad(out, (q, k, v), dout)
    torch.cuda.current_stream().wait_stream(side)
    assert_all_equal((out.detach(), *grads), want)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs at least 2 CUDA devices")
def test_second_device():
    torch.cuda.set_device(0)
    q, k, v, offsets = make_batch(EDGE_LENGTHS, 8, 2, 64, device="cuda:1")
    assert_accurate(q, k, v, offsets)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs at least 2 CUDA devices")
def test_two_devices_concurrently():
    # One thread per GPU, each with its own batch, forward and backward at once;
    # each result must equal the same call made alone.
    import threading

    batches = [make_batch(EDGE_LENGTHS, 8, 2, d, device=f"cuda:{i}") for i, d in enumerate((64, 128))]
    douts = [torch.randn(b[0].shape, dtype=b[0].dtype, device=b[0].device) for b in batches]
    alone = [forward_backward(block_attention, *b, g) for b, g in zip(batches, douts)]
    together = [None, None]

    def run(i):
        with torch.cuda.device(i):
            together[i] = forward_backward(block_attention, *batches[i], douts[i])
            torch.cuda.synchronize(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        assert_all_equal(together[i], alone[i])


def test_backend_queries(monkeypatch):
    # A head dim whose sm_90 forward kAuto may choose (the table says which).
    auto_hopper = [
        c["head_dim"]
        for c in blockattn.supported_configs()
        if (c["backend"], c["operation"], c["automatic"], c["rotary"]) == ("hopper", "forward", True, False)
    ]
    q, k, v, offsets = make_batch([3, 70], 4, 4, max(auto_hopper))
    major = torch.cuda.get_device_capability()[0]
    fwd = blockattn.forward_backend(q, k, v, offsets)
    bwd = blockattn.backward_backend(q, k, v, offsets)
    assert fwd == ("hopper" if major == 9 else "portable")
    assert bwd in ("hopper", "portable")
    gqa_dim = max(ops.SUPPORTED_HEAD_DIMS)
    gqa = make_batch([3, 70], 8, 2, gqa_dim)
    # The sm_90 grouped-query backward is built at head dims 64 and 128 (64-token blocks).
    assert blockattn.backward_backend(*gqa) == ("hopper" if major == 9 and gqa_dim in (64, 128) else "portable")
    monkeypatch.setenv("BLOCKATTN_FORCE_PORTABLE", "1")
    assert blockattn.forward_backend(q, k, v, offsets) == "portable"
    assert blockattn.backward_backend(q, k, v, offsets) == "portable"
    with pytest.raises(ValueError, match=r"\bq\b"):
        blockattn.forward_backend(q[..., :40], k[..., :40], v[..., :40], offsets)


def test_args_packing_matches_the_c_layout():
    # _lib.pack_args writes blockattn_args with struct; it must produce the
    # bytes ctypes lays out for the same values.
    import ctypes

    from blockattn import _lib

    q, k, v, offsets = make_batch([3, 70], 4, 2, 64)
    out = torch.empty_like(q)
    tv = lambda t: _lib.TensorView(t.data_ptr(), t.stride(0), t.stride(1))  # noqa: E731
    want = _lib.Args(
        num_seqs=2, total_tokens=73, num_q_heads=4, num_kv_heads=2, head_dim=64, dtype=1, block_size=64,
        softmax_scale=0.3, backend=2, offsets=offsets.data_ptr(), q=tv(q), k=tv(k), v=tv(v), out=tv(out),
        workspace=12345, workspace_bytes=678, stream=91011,
    )  # fmt: skip
    _lib.pack_args(2, 73, 4, 2, 64, 1, 64, 0.3, 2, offsets.data_ptr(), (q, k, v, out, None, None, None, None),
                   12345, 678, 91011)  # fmt: skip
    assert bytes(_lib._per_thread.view) == bytes(memoryview(want).cast("B"))
    assert ctypes.sizeof(want) == len(_lib._per_thread.view)


def test_plain_eager_path_matches_the_op(monkeypatch):
    # block_attention skips the dispatcher in plain eager mode; both routes
    # must give the same bits, forward and backward.
    q, k, v, offsets = make_batch(EDGE_LENGTHS, 8, 2, 64)
    dout = torch.randn_like(q)
    fast = forward_backward(block_attention, q, k, v, offsets, dout)
    with torch.no_grad():
        inference = block_attention(q, k, v, offsets)
    assert inference.grad_fn is None
    monkeypatch.setattr(ops, "_plain_eager", lambda: False)
    dispatched = forward_backward(block_attention, q, k, v, offsets, dout)
    assert_all_equal(fast, dispatched)
    assert torch.equal(inference, dispatched[0]), "no-grad forward differs"


# --------------------------------------------------------------------------- #
# The compiled eager route (blockattn._ext, python/csrc/fast_path.cpp)
# --------------------------------------------------------------------------- #


def require_fast_path():
    """Skips where the build made no _ext module, unless the run says it must exist."""
    from blockattn import _fast

    if _fast.MODULE is None:
        if os.environ.get("BLOCKATTN_EXPECT_EXTENSION") == "1":
            pytest.fail(f"BLOCKATTN_EXPECT_EXTENSION=1 but the fast path is not loaded: {_fast.WHY_NOT}")
        pytest.skip(f"no compiled fast path: {_fast.WHY_NOT}")
    return _fast


def without_fast_path(monkeypatch):
    from blockattn import _fast

    monkeypatch.setattr(_fast, "MODULE", None)


def python_route_spy(monkeypatch):
    """A list that records every call into the Python route's checks."""
    calls = []
    checks = ops._check_inputs
    monkeypatch.setattr(ops, "_check_inputs", lambda *a: (calls.append(a), checks(*a))[1])
    return calls


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("hq,hkv", [(4, 4), (8, 2)])
def test_fast_path_matches_the_ctypes_route(hq, hkv, dtype, monkeypatch):
    require_fast_path()
    for d in ops.SUPPORTED_HEAD_DIMS:
        for block_size, scale in ((ops.BLOCK_SIZE, None), (min(ops._BLOCK_SIZES[(ops._DTYPE_CODES[dtype], d)]), 0.3)):
            q, k, v, offsets = make_batch(EDGE_LENGTHS, hq, hkv, d, dtype)
            dout = torch.randn_like(q)
            spy = python_route_spy(monkeypatch)
            compiled = forward_backward(block_attention, q, k, v, offsets, dout, scale=scale, block_size=block_size)
            with torch.no_grad():
                inference = block_attention(q, k, v, offsets, scale=scale, block_size=block_size)
            assert spy == [], "the common call went through the Python route"
            assert inference.grad_fn is None and inference.is_contiguous()
            with monkeypatch.context() as m:
                without_fast_path(m)
                python = forward_backward(block_attention, q, k, v, offsets, dout, scale=scale, block_size=block_size)
            assert len(spy) == 1
            assert_all_equal(compiled, python)
            assert torch.equal(inference, python[0]), "no-grad forward differs"


def test_fast_path_leaves_other_calls_to_the_python_route(monkeypatch):
    require_fast_path()
    q, k, v, offsets = make_batch([5, 70, 130], 4, 2, ops.SUPPORTED_HEAD_DIMS[0])
    spy = python_route_spy(monkeypatch)
    expected = block_attention(q, k, v, offsets, scale=0.25)
    assert spy == []
    # Left to the Python route (and still right): an int scale, views the
    # kernels cannot read in place, an empty batch, rotary.
    assert torch.equal(block_attention(q, k, v, offsets, scale=1), block_attention(q, k, v, offsets, scale=1.0))
    misaligned = torch.empty(q.numel() + 1, dtype=q.dtype, device=q.device)[1:].view(q.shape).copy_(q)
    assert torch.equal(block_attention(misaligned, k, v, offsets, scale=0.25), expected)
    empty = block_attention(q[:0], k[:0], v[:0], torch.zeros(1, dtype=torch.int32, device=q.device))
    assert empty.shape == (0, *q.shape[1:])
    assert len(spy) == 3
    # Its errors are the Python route's: the caller's scale 0 is refused, not read as "default".
    with pytest.raises(ValueError, match=r"\bscale\b"):
        block_attention(q, k, v, offsets, scale=0.0)
    with pytest.raises(TypeError, match=r"\boffsets\b"):
        block_attention(q, k, v, offsets.tolist())
    with pytest.raises(ValueError, match=r"\bblock_size\b"):
        block_attention(q, k, v, offsets, block_size=48)


def test_fast_path_gradients_flow_through_views_and_graphs():
    # The compiled node takes part in a larger graph like any other: q, k, v
    # are strided views made by differentiable ops (a projection), and the
    # output is used twice. Gradients of x and W against fp64, as everywhere.
    require_fast_path()
    d = ops.SUPPORTED_HEAD_DIMS[-1]
    x = torch.randn(300, 64, device="cuda", dtype=torch.float64)
    w = torch.randn(3 * 4 * d, 64, device="cuda", dtype=torch.float64) / 8
    offsets = workloads.offsets_from_lengths([100, 200], "cuda")
    grads = []
    for fn, dtype in ((block_attention, torch.bfloat16), (block_attention_reference, torch.bfloat16),
                      (block_attention_reference, torch.float64)):  # fmt: skip
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        q, k, v = (xg @ wg.T).to(dtype).view(300, 3, 4, d).unbind(1)
        out = fn(q, k, v, offsets).double()
        (out.square().sum() + out.sum()).backward()
        grads.append((xg.grad, wg.grad))
    for name, ours, eager, exact in zip(("x", "W"), *grads):
        err, eager_err = rel_l2(ours, exact), rel_l2(eager, exact)
        print(f"d{name}: rel-L2 vs fp64: blockattn {err:.3e}, eager bf16 {eager_err:.3e}")
        assert math.isfinite(err) and err <= ERROR_RATIO * eager_err, name


def test_first_backward_of_a_fresh_process():
    # In a new process the backward runs in PyTorch's autograd thread, where no
    # CUDA call of this library came before: reusing the forward's schedule,
    # its first call is the sm90 tensor-map encoding, which needs the device's
    # context made current (it once failed there). Every head dim, 2 tokens.
    import subprocess
    import sys

    for d in ops.SUPPORTED_HEAD_DIMS:  # one fresh process per head dim: each is the process's first backward
        code = (
            "import torch, blockattn\n"
            "from blockattn import workloads as wl\n"
            f"q, k, v, o = wl.random_batch([2], 4, 4, {d})\n"
            "q, k, v = (t.requires_grad_() for t in (q, k, v))\n"
            "blockattn.block_attention(q, k, v, o).backward(torch.randn_like(q))\n"
            "torch.cuda.synchronize()\n"
            "print('ok')\n"
        )
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
        assert result.returncode == 0 and "ok" in result.stdout, f"head dim {d}: {result.stderr[-2000:]}"


def test_environment_report():
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "blockattn"], capture_output=True, text=True, env=dict(os.environ), timeout=300
    )
    assert result.returncode == 0, result.stderr
    for expected in (f"blockattn {blockattn.__version__}", "kernel table", "compute capability", "forward"):
        assert expected in result.stdout, result.stdout


def test_flop_counter():
    lengths, hq, hkv, d = [0, 1, 63, 64, 65, 130], 4, 2, 64
    q, k, v, offsets = make_batch(lengths, hq, hkv, d)
    pairs = sum((n // 64) * 64 * 64 + (n % 64) ** 2 for n in lengths)  # (query, key) pairs
    for t in (q, k, v):
        t.requires_grad_()
    with FlopCounterMode(display=False) as counter:
        out = block_attention(q, k, v, offsets)
    assert counter.get_total_flops() == 4 * hq * d * pairs
    with FlopCounterMode(display=False) as counter:
        out.backward(torch.randn_like(out))
    assert counter.get_total_flops() == 10 * hq * d * pairs  # 2.5x the forward


# --------------------------------------------------------------------------- #
# Errors
# --------------------------------------------------------------------------- #


def _with(**changes):
    """Replaces arguments; each value is a function of the valid arguments."""
    return lambda args: {**args, **{name: make(args) for name, make in changes.items()}}


INVALID_ARGUMENTS = [
    # (case, mutation, exception, argument the message must name)
    ("q-not-a-tensor", _with(q=lambda a: [1.0]), TypeError, "q"),
    ("q-float32", _with(q=lambda a: a["q"].float()), TypeError, "q"),
    ("k-dtype", _with(k=lambda a: a["k"].half()), TypeError, "k"),
    ("v-dtype", _with(v=lambda a: a["v"].half()), TypeError, "v"),
    ("offsets-not-a-tensor", _with(offsets=lambda a: [0, 3, 73]), TypeError, "offsets"),
    ("offsets-int64", _with(offsets=lambda a: a["offsets"].long()), TypeError, "offsets"),
    ("q-cpu", _with(q=lambda a: a["q"].cpu()), ValueError, "q"),
    ("k-cpu", _with(k=lambda a: a["k"].cpu()), ValueError, "k"),
    ("offsets-cpu", _with(offsets=lambda a: a["offsets"].cpu()), ValueError, "offsets"),
    ("q-rank", _with(q=lambda a: a["q"][None]), ValueError, "q"),
    ("k-rank", _with(k=lambda a: a["k"][0], v=lambda a: a["v"][0]), ValueError, "k"),
    ("v-shape", _with(v=lambda a: a["v"][:, :1]), ValueError, "v"),
    ("k-tokens", _with(k=lambda a: a["k"][1:], v=lambda a: a["v"][1:]), ValueError, "k"),
    ("k-head-dim", _with(k=lambda a: a["k"][..., :64], v=lambda a: a["v"][..., :64]), ValueError, "k"),
    ("q-head-dim-80", _with(**{n: (lambda a, n=n: a[n][..., :80]) for n in "qkv"}), ValueError, "q"),
    ("q-heads-not-multiple", _with(q=lambda a: a["q"][:, :3]), ValueError, "q"),
    ("offsets-2d", _with(offsets=lambda a: a["offsets"][None]), ValueError, "offsets"),
    ("offsets-empty", _with(offsets=lambda a: a["offsets"][:0]), ValueError, "offsets"),
    ("scale-nan", _with(scale=lambda a: float("nan")), ValueError, "scale"),
    ("scale-inf", _with(scale=lambda a: float("inf")), ValueError, "scale"),
    ("scale-zero", _with(scale=lambda a: 0.0), ValueError, "scale"),
    ("scale-negative", _with(scale=lambda a: -0.1), ValueError, "scale"),
    ("scale-over-float32", _with(scale=lambda a: 1e39), ValueError, "scale"),
    ("scale-str", _with(scale=lambda a: "0.1"), TypeError, "scale"),
    ("scale-bool", _with(scale=lambda a: True), TypeError, "scale"),
    ("scale-tensor", _with(scale=lambda a: a["q"].new_tensor(0.1)), TypeError, "scale"),
]


@pytest.mark.parametrize(
    "mutate,error,argument", [case[1:] for case in INVALID_ARGUMENTS], ids=[case[0] for case in INVALID_ARGUMENTS]
)
def test_invalid_arguments(mutate, error, argument):
    q, k, v, offsets = make_batch([3, 70], 4, 2, 128)
    args = mutate({"q": q, "k": k, "v": v, "offsets": offsets})
    with pytest.raises(error) as excinfo:
        block_attention(**args)
    assert re.search(rf"\b{argument}\b", str(excinfo.value)), str(excinfo.value)


def test_constants_come_from_the_library():
    configs = blockattn.supported_configs()
    assert configs, "the library lists no kernels"
    assert {c["operation"] for c in configs} == {"forward", "backward"}
    assert set(ops.SUPPORTED_HEAD_DIMS) == {c["head_dim"] for c in configs if c["block_size"] == ops.BLOCK_SIZE}
    assert ops.BLOCK_SIZE == blockattn._lib.DEFAULT_BLOCK_SIZE == workloads.BLOCK_SIZE
    assert ops._ALIGN_BYTES == blockattn._lib.TENSOR_ALIGNMENT_BYTES > 0
    # Every kernel the table lists for the default block size runs and is accurate.
    for d in ops.SUPPORTED_HEAD_DIMS:
        assert_accurate(*make_batch([1, 64, 100], 2, 2, d))


def test_library_errors_raise_runtime_error():
    # Bypasses the Python checks: the C library's own validation must surface.
    q, k, v = (torch.randn(70, 4, 80, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    offsets = workloads.offsets_from_lengths([70], "cuda")
    with pytest.raises(RuntimeError, match=r"blockattn forward failed \(\w+\): \S"):
        torch.ops.blockattn.block_attention_fwd(q, k, v, offsets, 0.1)


# --------------------------------------------------------------------------- #
# Rotary
# --------------------------------------------------------------------------- #


def rotated_attention_reference(q, k, v, offsets, rotary, compute_dtype=None):
    """block_attention(..., rotary) as eager PyTorch: rotate, attend."""
    from blockattn.reference import rotary_reference

    qr = rotary_reference(q, offsets, rotary, compute_dtype=compute_dtype)
    kr = rotary_reference(k, offsets, rotary, compute_dtype=compute_dtype)
    vr = rotary_reference(v, offsets, rotary, compute_dtype=compute_dtype) if rotary.rotate_v else v
    return block_attention_reference(qr, kr, vr, offsets, compute_dtype=compute_dtype)


def make_rotary(rotary_dim, positions, table_dtype=torch.float32, strided=False, **kw):
    """Tables of random values, shorter than the longest sequence (so some
    positions fall outside: identity)."""
    num_pos = 1500
    half = rotary_dim // 2
    if strided:  # the reference system's single [P, r] table [sin | cos]: two strided views
        table = torch.rand(num_pos, 2 * half, device="cuda", dtype=torch.float32).mul(2).sub(1).to(table_dtype)
        sin, cos = table[:, :half], table[:, half:]
    else:
        cos = torch.rand(num_pos, half, device="cuda").mul(2).sub(1).to(table_dtype)
        sin = torch.rand(num_pos, half, device="cuda").mul(2).sub(1).to(table_dtype)
    return blockattn.Rotary(cos, sin, positions=positions, **kw)


def assert_rotary_accurate(q, k, v, offsets, rotary, label):
    """block_attention(..., rotary) forward and gradients within ERROR_RATIO of
    eager PyTorch's error at the same precision, both against fp64."""
    dout = torch.randn(q.shape, dtype=q.dtype, device="cuda")
    ours = forward_backward(block_attention, q, k, v, offsets, dout, rotary=rotary)
    eager = forward_backward(lambda *a: rotated_attention_reference(*a, rotary), q, k, v, offsets, dout)
    exact = forward_backward(lambda *a: rotated_attention_reference(*a, rotary, torch.float64), q, k, v, offsets,
                             dout.double())  # fmt: skip
    for name, got, same_precision, want in zip(RESULT_NAMES, ours, eager, exact):
        err, eager_err = rel_l2(got, want), rel_l2(same_precision, want)
        print(f"{label} {name}: rel-L2 vs fp64: blockattn {err:.3e}, eager {q.dtype} {eager_err:.3e}")
        assert math.isfinite(err) and err <= ERROR_RATIO * eager_err, (name, err, eager_err)


ROTARY_CASES = {
    "half-seq-qk": dict(positions="sequence"),
    "interleaved-seq-qkv": dict(positions="sequence", interleaved=True, rotate_v=True),
    "half-token-qkv-strided": dict(positions="token", rotate_v=True, strided=True),
    "interleaved-token-bf16-table": dict(positions="token", interleaved=True, table_dtype=torch.bfloat16),
    "half-seq-starts-partial": dict(positions="sequence", seq_starts=True, partial=True),
}


@pytest.mark.parametrize("portable", [False, True], ids=["auto", "portable"])
@pytest.mark.parametrize("case", list(ROTARY_CASES), ids=list(ROTARY_CASES))
@pytest.mark.parametrize("hq,hkv,d", [(4, 4, 128), (8, 2, 64)], ids=["mha-d128", "gqa-d64"])
def test_rotary_matches_fp64_reference(hq, hkv, d, case, portable, monkeypatch):
    if portable:
        monkeypatch.setenv("BLOCKATTN_FORCE_PORTABLE", "1")
    spec = dict(ROTARY_CASES[case])
    seq_starts, partial = spec.pop("seq_starts", False), spec.pop("partial", False)
    q, k, v, offsets = make_batch(EDGE_LENGTHS, hq, hkv, d, torch.bfloat16)
    rotary_dim = d - 32 if partial else d
    if seq_starts:
        spec["seq_start"] = torch.randint(-20, 300, (offsets.shape[0] - 1,), dtype=torch.int32, device="cuda")
    assert_rotary_accurate(q, k, v, offsets, make_rotary(rotary_dim, **spec), case)


def test_rotary_reference_system_shape():
    # The reference system's own test: B=64, lengths 1-256, H=3, D=64, tables
    # of random values ([T, D] table [sin | cos] by token row, q, k, v rotated).
    # (Its C=192 projection is the layer's; the attention part is checked here.)
    gen = torch.Generator().manual_seed(1)
    lengths = torch.randint(1, 257, (64,), generator=gen).tolist()
    q, k, v, offsets = make_batch(lengths, 3, 3, 64, torch.bfloat16)
    rotary = make_rotary(64, "token", strided=True, interleaved=True, rotate_v=True)
    assert_rotary_accurate(q, k, v, offsets, rotary, "reference-system shape")


def test_rotary_without_backward_kernel_is_refused_up_front():
    # Where the build has a rotary forward but no rotary backward (since
    # 2026-11-26 the default table has one at every head dim on Hopper; a
    # build without the sm_90 rows lacks it past D = 128), asking for
    # gradients must fail at the call, naming rotary, not in the backward;
    # the forward alone runs and is accurate.
    code = ops._DTYPE_CODES[torch.bfloat16]
    dims = [d for d in ops.SUPPORTED_HEAD_DIMS if (code, d, ops.BLOCK_SIZE) not in ops._ROTARY_BACKWARD]
    if not dims:
        pytest.skip("every built head dim has a rotary backward")
    d = dims[-1]
    q, k, v, offsets = make_batch([70, 130], 2, 2, d, torch.bfloat16)
    rotary = make_rotary(d, "sequence", rotate_v=True)
    with pytest.raises(ValueError, match=rf"rotary has no backward kernel at head_dim {d}"):
        block_attention(q.requires_grad_(), k, v, offsets, rotary=rotary)
    with torch.no_grad():
        got = block_attention(q, k, v, offsets, rotary=rotary)
        eager = rotated_attention_reference(q, k, v, offsets, rotary)
        exact = rotated_attention_reference(q.double(), k.double(), v.double(), offsets, rotary, torch.float64)
    err, eager_err = rel_l2(got, exact), rel_l2(eager, exact)
    assert math.isfinite(err) and err <= ERROR_RATIO * eager_err, (err, eager_err)


def test_rotary_compiles_and_captures():
    q, k, v, offsets = make_batch(EDGE_LENGTHS, 4, 4, 128)
    rotary = make_rotary(128, "sequence", rotate_v=True)
    q, k, v = (t.requires_grad_() for t in (q, k, v))

    def step(q, k, v):
        return block_attention(q, k, v, offsets, rotary=rotary)

    eager = step(q, k, v)
    compiled = torch.compile(step, fullgraph=True)(q, k, v)
    assert torch.equal(eager, compiled)
    (g_eager,) = torch.autograd.grad(eager.float().square().sum(), q)
    (g_comp,) = torch.autograd.grad(compiled.float().square().sum(), q)
    assert torch.equal(g_eager, g_comp)


@pytest.mark.parametrize(
    "mutate,error,argument",
    [
        (lambda r: dict(r, cos=r["cos"].double()), TypeError, "rotary.cos"),
        (lambda r: dict(r, sin=r["sin"][:, :8]), ValueError, "rotary.sin"),
        (lambda r: dict(r, cos=r["cos"][:, :36], sin=r["sin"][:, :36]), ValueError, "multiple of 16"),
        (lambda r: dict(r, positions="absolute"), ValueError, "rotary.positions"),
        (lambda r: dict(r, positions="token", seq_start=torch.zeros(9, dtype=torch.int32, device="cuda")),
         ValueError, "seq_start"),  # fmt: skip
        (lambda r: dict(r, cos=r["cos"].cpu()), ValueError, "rotary.cos"),
    ],
)
def test_rotary_invalid_arguments(mutate, error, argument):
    q, k, v, offsets = make_batch([5, 70], 2, 2, 128)
    base = dict(cos=torch.rand(100, 64, device="cuda"), sin=torch.rand(100, 64, device="cuda"))
    with pytest.raises(error, match=re.escape(argument)):
        block_attention(q, k, v, offsets, rotary=blockattn.Rotary(**mutate(base)))


# --------------------------------------------------------------------------- #
# Block sizes
# --------------------------------------------------------------------------- #

OTHER_BLOCK_SIZES = sorted({c["block_size"] for c in blockattn.supported_configs()} - {ops.BLOCK_SIZE})


@pytest.mark.skipif(not OTHER_BLOCK_SIZES, reason="this build has only the default block size")
@pytest.mark.parametrize("block_size", OTHER_BLOCK_SIZES)
@pytest.mark.parametrize("hq,hkv,d", [(4, 4, 128), (8, 2, 64)], ids=["mha-d128", "gqa-d64"])
def test_other_block_sizes_match_fp64_reference(hq, hkv, d, block_size):
    q, k, v, offsets = make_batch(EDGE_LENGTHS + [31, 32, 33, 129, 255], hq, hkv, d, torch.bfloat16)
    dout = torch.randn(q.shape, dtype=q.dtype, device="cuda")
    ours = forward_backward(block_attention, q, k, v, offsets, dout, block_size=block_size)
    eager = forward_backward(block_attention_reference, q, k, v, offsets, dout, block_size=block_size)
    exact = forward_backward(block_attention_reference, q.double(), k.double(), v.double(), offsets, dout.double(),
                             block_size=block_size)  # fmt: skip
    default = forward_backward(block_attention, q, k, v, offsets, dout)
    assert not torch.equal(ours[0], default[0])  # the blocking really changed
    for name, got, same_precision, want in zip(RESULT_NAMES, ours, eager, exact):
        err, eager_err = rel_l2(got, want), rel_l2(same_precision, want)
        print(f"block {block_size} {name}: rel-L2 vs fp64: blockattn {err:.3e}, eager {eager_err:.3e}")
        assert math.isfinite(err) and err <= ERROR_RATIO * eager_err, (name, err, eager_err)
    # The custom ops (torch.compile's route) agree with the eager route.
    compiled = torch.compile(lambda q, k, v: block_attention(q, k, v, offsets, block_size=block_size), fullgraph=True)
    assert torch.equal(compiled(q, k, v), ours[0])


@pytest.mark.parametrize("block_size", [48, 0, "64", True])
def test_unbuilt_block_size_is_refused(block_size):
    q, k, v, offsets = make_batch([5, 70], 2, 2, 64)
    with pytest.raises(ValueError, match="block_size must be one of the built sizes"):
        block_attention(q, k, v, offsets, block_size=block_size)


@pytest.mark.skipif(128 not in OTHER_BLOCK_SIZES, reason="this build has no 128-token blocks")
def test_rotary_at_block_size_128():
    # At D = 128 the only rotary backward for 128-token blocks is the sm_90
    # kernel: with as many KV heads as query heads it matches fp64; with
    # grouped-query heads the call is refused up front, naming why.
    key = (ops._DTYPE_CODES[torch.bfloat16], 128, 128)
    if key not in ops._ROTARY_BACKWARD:
        pytest.skip("no rotary backward at D = 128, block size 128 in this build")
    from blockattn.reference import rotary_reference

    rotary = make_rotary(128, "sequence", rotate_v=True)

    def reference(q, k, v, offsets, dtype=None):
        qr, kr, vr = (rotary_reference(x, offsets, rotary, compute_dtype=dtype) for x in (q, k, v))
        return block_attention_reference(qr, kr, vr, offsets, compute_dtype=dtype, block_size=128)

    q, k, v, offsets = make_batch(EDGE_LENGTHS + [129, 255], 4, 4, 128)
    dout = torch.randn(q.shape, dtype=q.dtype, device="cuda")
    ours = forward_backward(block_attention, q, k, v, offsets, dout, rotary=rotary, block_size=128)
    eager = forward_backward(reference, q, k, v, offsets, dout)
    exact = forward_backward(lambda *a: reference(*a, torch.float64), q.double(), k.double(), v.double(), offsets,
                             dout.double())  # fmt: skip
    for name, got, same_precision, want in zip(RESULT_NAMES, ours, eager, exact):
        err, eager_err = rel_l2(got, want), rel_l2(same_precision, want)
        print(f"rotary block 128 {name}: rel-L2 vs fp64: blockattn {err:.3e}, eager {eager_err:.3e}")
        assert math.isfinite(err) and err <= ERROR_RATIO * eager_err, (name, err, eager_err)
    if ops._ROTARY_BACKWARD[key]:
        return  # a kernel here takes grouped-query heads too
    q, k, v, offsets = make_batch([70, 130], 4, 2, 128)
    with pytest.raises(ValueError, match="needs as many KV heads as query heads"):
        block_attention(q.requires_grad_(), k, v, offsets, rotary=rotary, block_size=128)
