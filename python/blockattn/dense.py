"""Dense flash-attention forward over (B, H, S, D) tensors: the custom op
`blockattn::dense_attention_fwd` over the library's dense kernels
(include/blockattn/dense.h), with a fake implementation so that torch.compile
(fullgraph) and CUDA graphs see one opaque node. Forward only: there is no
backward yet, and differentiating through it raises.

This module must not use `from __future__ import annotations`: custom_op infers
the op schema from the real annotation objects.
"""

import ctypes
import math
import threading

import torch
from torch import Tensor
from torch.utils.flop_counter import register_flop_formula

from blockattn import _lib
from blockattn.ops import _plain_eager

_DTYPE_CODES = {torch.bfloat16: _lib.DTYPE_BF16, torch.float16: _lib.DTYPE_FP16}
# Read from the library's dense kernel table, never repeated here.
DENSE_HEAD_DIMS = tuple(sorted({c.head_dim for c in _lib.DENSE_CONFIGS}))
_ALIGN_BYTES = _lib.TENSOR_ALIGNMENT_BYTES
_FLOAT32_TINY = 1.1754943508222875e-38
_FLOAT32_MAX = 3.4028234663852886e38
_per_thread = threading.local()


def attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, scale: float | None = None,
              return_lse: bool = False):  # fmt: skip
    """Flash attention forward: softmax(scale q K^T + mask) V per (batch, head).

    Args:
        q: (B, H, S, D) float16 or bfloat16 CUDA tensor, any strides with a
            contiguous last dim (e.g. a transposed (B, S, H, D) tensor); D one
            of DENSE_HEAD_DIMS (64, 128 and 256 in the default build).
        k, v: (B, Hkv, S, D), q's dtype and device, Hkv dividing H (query head
            h reads kv head h // (H // Hkv)).
        causal: mask keys after the query (key j attends to query i iff j <= i).
        scale: softmax scale, default 1/sqrt(D); finite and positive.
        return_lse: also return the row logsumexp (B, H, S) float32 (natural
            log), what split-KV and ring attention combine partial results with.

    Returns:
        out (q's shape, dtype and memory layout), or (out, lse) with return_lse.
    """
    _check(q, k, v, causal, return_lse)
    scale = _resolve_scale(scale, q.shape[3])
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        raise NotImplementedError(
            "blockattn.attention: no backward yet (forward only); call it under torch.no_grad() or on tensors "
            "that do not require grad"
        )
    if _plain_eager():
        # Nothing but eager execution sees this call: the same implementation
        # as the registered op, without the custom-op dispatcher's host time
        # (ops.py's _plain_eager): 66 -> 31 us a small call on the H100's host
        # (docs/perf.md, "Session 43").
        out, lse = _run(q, k, v, causal, scale, return_lse)
    else:
        out, lse = torch.ops.blockattn.dense_attention_fwd(q, k, v, causal, scale, return_lse)
    return (out, lse) if return_lse else out


def _check(q, k, v, causal, return_lse) -> None:
    """TypeError/ValueError naming the argument; reads metadata only."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise TypeError(f"attention: {name} must be a torch.Tensor, got {type(t).__name__}")
    if q.dtype not in _DTYPE_CODES:
        raise TypeError(f"attention: q must be float16 or bfloat16, got {q.dtype}")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise TypeError(f"attention: {name} must have q's dtype {q.dtype}, got {t.dtype}")
    for name, flag in (("causal", causal), ("return_lse", return_lse)):
        if not isinstance(flag, bool):
            raise TypeError(f"attention: {name} must be a bool, got {type(flag).__name__}")
    if q.device.type != "cuda":
        raise ValueError(f"attention: q must be a CUDA tensor, got device {q.device}")
    for name, t in (("k", k), ("v", v)):
        if t.device != q.device:
            raise ValueError(f"attention: {name} must be on q's device {q.device}, got {t.device}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"attention: {name} must be 4-D (batch, heads, seq_len, head_dim), got {tuple(t.shape)}")
    if v.shape != k.shape:
        raise ValueError(f"attention: v must have k's shape {tuple(k.shape)}, got {tuple(v.shape)}")
    if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2] or k.shape[3] != q.shape[3]:
        raise ValueError(
            f"attention: k {tuple(k.shape)} must match q {tuple(q.shape)} in batch, seq_len and head_dim"
        )
    if q.shape[3] not in DENSE_HEAD_DIMS:
        dims = ", ".join(map(str, DENSE_HEAD_DIMS))
        raise ValueError(f"attention: head_dim must be one of the built dense head dims ({dims}), got {q.shape[3]}")
    if k.shape[1] == 0 or q.shape[1] == 0 or q.shape[1] % k.shape[1] != 0:
        raise ValueError(f"attention: q heads ({q.shape[1]}) must be a positive multiple of k heads ({k.shape[1]})")


def _resolve_scale(scale, head_dim: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"attention: scale must be a float or None, got {type(scale).__name__}")
    if not (math.isfinite(scale) and _FLOAT32_TINY <= scale <= _FLOAT32_MAX):
        raise ValueError(f"attention: scale must be finite, positive and fit in float32, got {scale}")
    return float(scale)


def _operand(t: Tensor) -> Tensor:
    """`t` when the library reads it in place (unit-stride last dim, strides
    and data pointer aligned to the library's rule), else a contiguous copy."""
    multiple = _ALIGN_BYTES // t.element_size()
    in_place = (
        t.stride(3) == 1
        and all(s % multiple == 0 for s in t.stride()[:3])
        and t.data_ptr() % _ALIGN_BYTES == 0
    )
    return t if in_place else t.clone(memory_format=torch.contiguous_format)


def _new_out(q: Tensor) -> Tensor:
    """q's shape in q's memory layout when the library can write that
    (e.g. (B, S, H, D) memory stays so), else contiguous."""
    out = torch.empty_like(q)
    multiple = _ALIGN_BYTES // q.element_size()
    if out.stride(3) != 1 or any(s % multiple for s in out.stride()[:3]):
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    return out


def _view(t: Tensor | None) -> tuple:
    if t is None:
        return (0, 0, 0, 0)
    return (t.data_ptr(), t.stride(0), t.stride(1), t.stride(2))


def _args(q, k, v, out, lse, causal, scale, stream) -> ctypes.Structure:
    """This thread's blockattn_dense_args, filled for one call."""
    args = getattr(_per_thread, "args", None)
    if args is None:
        args = _per_thread.args = _lib.DenseArgs()
    B, H, S, D = q.shape
    args.batch, args.seq_len, args.num_q_heads, args.num_kv_heads, args.head_dim = B, S, H, k.shape[1], D
    args.dtype, args.causal, args.softmax_scale, args.backend = _DTYPE_CODES[q.dtype], int(causal), scale, 0
    for name, t in (("q", q), ("k", k), ("v", v), ("out", out)):
        setattr(args, name, _lib.DenseTensorView(*_view(t)))
    args.lse = lse.data_ptr() if lse is not None else None
    args.stream = stream
    return args


def _run(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float, return_lse: bool):
    device = q.get_device()
    if device != torch._C._cuda_getDevice():  # the library runs on the current device
        with torch.cuda.device(device):
            return _run(q, k, v, causal, scale, return_lse)
    out = _new_out(q)
    lse = q.new_empty((q.shape[0], q.shape[1], q.shape[2]) if return_lse else (0,), dtype=torch.float32)
    if q.numel() == 0:
        return out, lse
    q, k, v = _operand(q), _operand(k), _operand(v)
    args = _args(q, k, v, out, lse if return_lse else None, causal, scale, torch._C._cuda_getCurrentRawStream(device))
    status = _lib.dense_forward(ctypes.byref(args))
    if status != _lib.OK:
        name = _lib.STATUS_NAMES.get(status, str(status))
        raise RuntimeError(f"blockattn dense forward failed ({name}): {_lib.last_error()}")
    return out, lse


@torch.library.custom_op("blockattn::dense_attention_fwd", mutates_args=(), device_types="cuda")
def dense_attention_fwd(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float,
                        return_lse: bool) -> tuple[Tensor, Tensor]:  # fmt: skip
    return _run(q, k, v, causal, scale, return_lse)


@dense_attention_fwd.register_fake
def _dense_attention_fwd_fake(q, k, v, causal, scale, return_lse):
    lse_shape = (q.shape[0], q.shape[1], q.shape[2]) if return_lse else (0,)
    return _new_out(q), q.new_empty(lse_shape, dtype=torch.float32)


def dense_backend(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False) -> str:
    """Which implementation attention() would run on q's device: "hopper" or
    "portable". Launches nothing."""
    _check(q, k, v, causal, False)
    q, k, v = _operand(q), _operand(k), _operand(v)
    out = _new_out(q)
    chosen = ctypes.c_int32(0)
    with torch.cuda.device(q.device):
        args = _args(q, k, v, out, None, causal, 1.0 / math.sqrt(q.shape[3]), 0)
        status = _lib.dense_forward_backend(ctypes.byref(args), ctypes.byref(chosen))
    if status != _lib.OK:
        raise RuntimeError(f"blockattn dense backend query failed: {_lib.last_error()}")
    return _lib.BACKEND_NAMES[chosen.value]


@register_flop_formula(torch.ops.blockattn.dense_attention_fwd, get_raw=True)
def _dense_flops(q, k, v, causal, scale, return_lse, **kwargs) -> int:
    # Q K^T and P V: 4 B H S^2 D, half of it under a causal mask.
    B, H, S, D = q.shape
    flops = 4 * B * H * S * S * D
    return flops // 2 if causal else flops
