"""PyTorch custom ops over the blockattn C library.

Two opaque ops, `blockattn::block_attention_fwd` and `blockattn::block_attention_bwd`,
with fake (meta) implementations and an autograd formula, so that eager mode,
torch.compile, torch.export, AOTAutograd and CUDA graphs all see one node per
pass. The ops never synchronize with the host and never read `offsets` on the
host: the library builds its block schedule on the device.

This module must not use `from __future__ import annotations`: custom_op infers
the op schema from the real annotation objects.
"""

import ctypes
import math
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.utils.flop_counter import register_flop_formula

from blockattn import _fast, _lib

_DTYPE_CODES = {torch.bfloat16: _lib.DTYPE_BF16, torch.float16: _lib.DTYPE_FP16}

# Read from the library's kernel table and layout rules (blockattn._lib), never
# repeated here: a build with other head dims or block sizes needs no change.
BLOCK_SIZE = _lib.DEFAULT_BLOCK_SIZE
SUPPORTED_DTYPES = tuple(dt for dt, code in _DTYPE_CODES.items() if any(c.dtype == code for c in _lib.CONFIGS))
SUPPORTED_HEAD_DIMS = tuple(sorted({c.head_dim for c in _lib.CONFIGS if c.block_size == BLOCK_SIZE}))
# (dtype code, head dim) -> the built block sizes, as plain ints (torch.compile
# traces dict lookups, not the ctypes rows).
_BLOCK_SIZES = {
    key: tuple(sorted({c.block_size for c in _lib.CONFIGS if (c.dtype, c.head_dim) == key}))
    for key in {(c.dtype, c.head_dim) for c in _lib.CONFIGS}
}
# (dtype code, head dim, block size) with a rotary backward kernel -> whether
# one of them takes grouped-query heads (past D = 128, and at block size 128
# with D = 128, only the sm_90 backward has rotary, and it needs
# num_q_heads == num_kv_heads).
_ROTARY_BACKWARD: dict = {}
for _c in _lib.CONFIGS:
    if _lib.OPERATION_NAMES[_c.operation] == "backward" and _c.rotary:
        _key = (_c.dtype, _c.head_dim, _c.block_size)
        _ROTARY_BACKWARD[_key] = _ROTARY_BACKWARD.get(_key, False) or _lib.BACKEND_NAMES[_c.backend] != "hopper"
_INT32_MAX = 2**31 - 1
# The library takes the scale as a C float; outside this range it would round
# to 0 (which the C ABI reads as "use the default") or to infinity.
_FLOAT32_TINY = 1.1754943508222875e-38
_FLOAT32_MAX = 3.4028234663852886e38
# Data pointers and token/head strides must be multiples of this many bytes.
_ALIGN_BYTES = _lib.TENSOR_ALIGNMENT_BYTES


# --------------------------------------------------------------------------- #
# Public API
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Rotary:
    """Rotary position embeddings fused into block_attention (forward and
    backward; docs/semantics.md, "Rotary").

    cos, sin: [P, r/2] tables (float32, bfloat16 or float16, on q's device,
        rows any stride, elements contiguous) with r <= head_dim the rotary
        dim; channels >= r pass through. Two strided views of one
        [P, r] table [sin | cos] are fine (no copy). Fastest: tables in
        q's dtype with 16-byte aligned rows and r a multiple of 16, whose
        rows the Hopper forward at head_dim 128 stages in shared memory
        (a rotary forward as fast as the plain one; ~1.2x with float32).
    interleaved: pairs (2j, 2j+1) (GPT-J) instead of (j, j + r/2) (NeoX/Llama;
        then r must be a multiple of 16).
    positions: "sequence" (a token's index within its sequence, plus
        seq_start[b] when given) or "token" (its row in the jagged tensor).
        A position outside [0, P) is angle 0 (identity).
    rotate_v: rotate v too (the output then stays in the rotated frame).
    seq_start: optional int32 [B] per-sequence start ("sequence" only).
    """

    cos: Tensor
    sin: Tensor
    interleaved: bool = False
    positions: str = "sequence"
    rotate_v: bool = False
    seq_start: Tensor | None = None


def block_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    offsets: Tensor,
    *,
    scale: float | None = None,
    rotary: Rotary | None = None,
    block_size: int = BLOCK_SIZE,
) -> Tensor:
    """Block-diagonal jagged self-attention.

    Sequence b is tokens [offsets[b], offsets[b+1]). Each sequence is cut into
    blocks of block_size tokens from its first token (the last block may be shorter), and
    every query attends to exactly the keys of its own block:
    out[i] = softmax(scale * q_i . K_blk^T) . V_blk.

    Args:
        q: [T, Hq, D] bf16 or fp16 CUDA tensor; D one of SUPPORTED_HEAD_DIMS
            (the library's kernel table: 64 and 128 in the default build).
        k, v: [T, Hkv, D], q's dtype and device; Hq must be a multiple of Hkv
            (query head h reads kv head h // (Hq // Hkv)).
        offsets: int32 [B + 1] on q's device, offsets[0] == 0, non-decreasing,
            offsets[B] == T. Its contents are not checked on the host (that
            would synchronize). The library clamps malformed offsets so that
            no row outside [0, T) is touched; rows that no sequence covers
            (e.g. past offsets[B] < T) are left uninitialized in out, dq, dk, dv.
        scale: softmax scale, default 1/sqrt(D).
        rotary: a Rotary to apply to q and k (and v) inside the kernels.
        block_size: tokens per block, one of the built sizes for this head
            dim and dtype (supported_configs(); 64, the default, everywhere;
            32 on the portable kernels in the default build).

    Returns:
        out: [T, Hq, D], contiguous, q's dtype. Differentiable in q, k and v.
    """
    if (
        _fast.MODULE is not None
        and rotary is None
        and (scale is None or (type(scale) is float and scale > 0.0))
        and type(q) is Tensor and type(k) is Tensor and type(v) is Tensor
        and _plain_eager()
    ):  # fmt: skip
        # The compiled route (blockattn._fast) takes the common eager call, or
        # returns None and leaves it, and every error message, to the one below.
        try:
            out = _fast.MODULE.block_attention(q, k, v, offsets, 0.0 if scale is None else scale, block_size)
        except TypeError:  # an argument of the wrong type: the checks below name it
            out = None
        if out is not None:
            return out
    _check_inputs(q, k, v, offsets)
    _check_block_size(block_size, q)
    scale = _resolve_scale(scale, q.shape[2])
    cos, sin, seq_start, flags = _check_rotary(rotary, q, offsets)
    needs_grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    _check_rotary_backward(needs_grad and cos is not None, q, block_size, k.shape[1])
    if _plain_eager():
        if needs_grad:
            return _BlockAttention.apply(q, k, v, offsets, scale, cos, sin, seq_start, flags, block_size)
        return _run_forward(q, k, v, offsets, scale, (cos, sin, seq_start, flags), block_size=block_size)
    return torch.ops.blockattn.block_attention_fwd(q, k, v, offsets, scale, cos, sin, seq_start, flags, block_size)


def _check_rotary_backward(needed: bool, q, block_size, num_kv_heads: int) -> None:
    """ValueError at the call, not in the backward, when gradients of a
    rotary call are needed and the table has no rotary backward for it."""
    if not needed:
        return
    key = (_DTYPE_CODES[q.dtype], q.shape[2], block_size)
    if key not in _ROTARY_BACKWARD:
        raise ValueError(
            f"block_attention: rotary has no backward kernel at head_dim {q.shape[2]}, block_size {block_size} "
            f"in this build (forward only: call it without gradients, or see supported_configs())"
        )
    if q.shape[1] != num_kv_heads and not _ROTARY_BACKWARD[key]:
        raise ValueError(
            f"block_attention: the rotary backward at head_dim {q.shape[2]}, block_size {block_size} is the sm_90 "
            f"kernel, which needs as many KV heads as query heads (got {q.shape[1]} and {num_kv_heads}); call it "
            f"without gradients, or see supported_configs()"
        )


def _check_block_size(block_size, q) -> None:
    """ValueError unless the kernel table has block_size for q's head dim and dtype."""
    built = _BLOCK_SIZES.get((_DTYPE_CODES[q.dtype], q.shape[2]), ())
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size not in built:
        raise ValueError(
            f"block_attention: block_size must be one of the built sizes for head_dim {q.shape[2]} "
            f"({', '.join(map(str, built))}), got {block_size!r}"
        )


def _plain_eager() -> bool:
    """True when nothing but ordinary eager autograd will see the call: no
    torch.compile/export tracing, no dispatch or torch-function mode (fake
    tensors, FlopCounterMode, ...), no functorch transform. Then the call skips
    the custom-op dispatcher (tens of microseconds of host time per pass) and
    runs the same implementation through an autograd.Function; otherwise it
    goes through the registered ops, which those systems understand."""
    return (
        not torch.compiler.is_compiling()
        and torch._C._len_torch_dispatch_stack() == 0
        and not torch._C._is_torch_function_mode_enabled()
        and torch._C._functorch.peek_interpreter_stack() is None
    )


def supported_configs() -> list[dict]:
    """The library's kernel table: one dict per kernel (backend, operation,
    dtype, head_dim, block_size, automatic, rotary), as the C++ supported_configs()."""
    return [
        dict(
            backend=_lib.BACKEND_NAMES[c.backend],
            operation=_lib.OPERATION_NAMES[c.operation],
            dtype=_lib.DTYPE_NAMES[c.dtype],
            head_dim=c.head_dim,
            block_size=c.block_size,
            automatic=bool(c.automatic),
            rotary=bool(c.rotary),
        )
        for c in _lib.CONFIGS
    ]


def _check_inputs(q, k, v, offsets) -> None:
    """Raises TypeError/ValueError naming the argument; reads metadata only."""
    for name, t in (("q", q), ("k", k), ("v", v), ("offsets", offsets)):
        if not isinstance(t, Tensor):
            raise TypeError(f"block_attention: {name} must be a torch.Tensor, got {type(t).__name__}")
    if q.dtype not in SUPPORTED_DTYPES:
        names = " or ".join(str(dt).removeprefix("torch.") for dt in SUPPORTED_DTYPES)
        raise TypeError(f"block_attention: q must be {names}, got {q.dtype}")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise TypeError(f"block_attention: {name} must have q's dtype {q.dtype}, got {t.dtype}")
    if offsets.dtype != torch.int32:
        raise TypeError(f"block_attention: offsets must be int32, got {offsets.dtype}")

    if q.device.type != "cuda":
        raise ValueError(f"block_attention: q must be a CUDA tensor, got device {q.device}")
    for name, t in (("k", k), ("v", v), ("offsets", offsets)):
        if t.device != q.device:
            raise ValueError(f"block_attention: {name} must be on q's device {q.device}, got {t.device}")

    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 3:
            raise ValueError(
                f"block_attention: {name} must be 3-D [tokens, heads, head_dim], got shape {tuple(t.shape)}"
            )
    if v.shape != k.shape:
        raise ValueError(f"block_attention: v must have k's shape {tuple(k.shape)}, got {tuple(v.shape)}")
    if k.shape[0] != q.shape[0]:
        raise ValueError(f"block_attention: k has {k.shape[0]} tokens but q has {q.shape[0]}")
    if k.shape[2] != q.shape[2]:
        raise ValueError(f"block_attention: k has head_dim {k.shape[2]} but q has {q.shape[2]}")
    if q.shape[2] not in SUPPORTED_HEAD_DIMS:
        dims = ", ".join(map(str, SUPPORTED_HEAD_DIMS))
        raise ValueError(f"block_attention: q head_dim must be one of the built head dims ({dims}), got {q.shape[2]}")
    if k.shape[1] == 0 or q.shape[1] == 0 or q.shape[1] % k.shape[1] != 0:
        raise ValueError(
            f"block_attention: q heads ({q.shape[1]}) must be a positive multiple of k heads ({k.shape[1]})"
        )
    if q.shape[0] > _INT32_MAX:
        raise ValueError(f"block_attention: q has {q.shape[0]} tokens; int32 offsets allow at most {_INT32_MAX}")

    if offsets.dim() != 1 or offsets.shape[0] == 0:
        raise ValueError(
            f"block_attention: offsets must be a non-empty 1-D tensor [B + 1], got shape {tuple(offsets.shape)}"
        )


# Rotary flags of the custom ops (one int, so the op schema stays flat).
_ROT_INTERLEAVED, _ROT_TOKEN_POSITIONS, _ROT_ROTATE_V = 1, 2, 4
_TABLE_CODES = {torch.float32: _lib.TABLE_FLOAT32, torch.bfloat16: _lib.TABLE_BF16, torch.float16: _lib.TABLE_FP16}


def _check_rotary(rotary, q, offsets):
    """(cos, sin, seq_start, flags) for the ops, (None, None, None, 0) without
    rotary; raises TypeError/ValueError naming the field."""
    if rotary is None:
        return None, None, None, 0
    if not isinstance(rotary, Rotary):
        raise TypeError(f"block_attention: rotary must be a blockattn.Rotary or None, got {type(rotary).__name__}")
    cos, sin, seq_start = rotary.cos, rotary.sin, rotary.seq_start
    for name, t in (("cos", cos), ("sin", sin)):
        if not isinstance(t, Tensor):
            raise TypeError(f"block_attention: rotary.{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in _TABLE_CODES:
            raise TypeError(f"block_attention: rotary.{name} must be float32, bfloat16 or float16, got {t.dtype}")
        if t.device != q.device:
            raise ValueError(f"block_attention: rotary.{name} must be on q's device {q.device}, got {t.device}")
        if t.dim() != 2:
            raise ValueError(f"block_attention: rotary.{name} must be 2-D [positions, rotary_dim / 2], got {tuple(t.shape)}")
    if sin.shape != cos.shape or sin.dtype != cos.dtype:
        raise ValueError(
            f"block_attention: rotary.sin must match rotary.cos ({tuple(cos.shape)}, {cos.dtype}), "
            f"got {tuple(sin.shape)}, {sin.dtype}"
        )
    rotary_dim = 2 * cos.shape[1]
    if rotary_dim == 0 or rotary_dim > q.shape[2]:
        raise ValueError(f"block_attention: rotary dim 2 * cos.shape[1] = {rotary_dim} must be in [2, head_dim {q.shape[2]}]")
    if not rotary.interleaved and rotary_dim % 16 != 0:
        raise ValueError(f"block_attention: half-split rotary needs a rotary dim multiple of 16, got {rotary_dim}")
    if rotary.positions not in ("sequence", "token"):
        raise ValueError(f'block_attention: rotary.positions must be "sequence" or "token", got {rotary.positions!r}')
    if seq_start is not None:
        if rotary.positions != "sequence":
            raise ValueError('block_attention: rotary.seq_start needs positions="sequence"')
        if not isinstance(seq_start, Tensor) or seq_start.dtype != torch.int32:
            raise TypeError("block_attention: rotary.seq_start must be an int32 tensor")
        if seq_start.device != q.device or seq_start.shape != (offsets.shape[0] - 1,):
            raise ValueError(
                f"block_attention: rotary.seq_start must be [B] = [{offsets.shape[0] - 1}] on {q.device}, "
                f"got {tuple(seq_start.shape)} on {seq_start.device}"
            )
        seq_start = seq_start.contiguous()
    # Rows may have any stride; elements must be contiguous.
    cos = cos if cos.stride(1) == 1 or cos.shape[1] == 1 else cos.contiguous()
    sin = sin if sin.stride(1) == 1 or sin.shape[1] == 1 else sin.contiguous()
    flags = (
        (_ROT_INTERLEAVED if rotary.interleaved else 0)
        | (_ROT_TOKEN_POSITIONS if rotary.positions == "token" else 0)
        | (_ROT_ROTATE_V if rotary.rotate_v else 0)
    )
    return cos, sin, seq_start, flags


def _rotary_fields(rot):
    """blockattn_args' rotary_* values for the ops' (cos, sin, seq_start, flags), or None."""
    if rot is None or rot[0] is None:
        return None
    cos, sin, seq_start, flags = rot
    return (
        2 * cos.shape[1],
        _lib.ROTARY_INTERLEAVED if flags & _ROT_INTERLEAVED else _lib.ROTARY_HALF_SPLIT,
        _lib.ROTARY_TOKEN_ROW if flags & _ROT_TOKEN_POSITIONS else _lib.ROTARY_IN_SEQUENCE,
        1 if flags & _ROT_ROTATE_V else 0,
        _TABLE_CODES[cos.dtype],
        cos.data_ptr(),
        sin.data_ptr(),
        cos.stride(0),
        sin.stride(0),
        cos.shape[0],
        seq_start.data_ptr() if seq_start is not None else 0,
    )


def _resolve_scale(scale, head_dim: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"block_attention: scale must be a float or None, got {type(scale).__name__}")
    if not (math.isfinite(scale) and _FLOAT32_TINY <= scale <= _FLOAT32_MAX):
        raise ValueError(f"block_attention: scale must be finite, positive and fit in float32, got {scale}")
    return float(scale)


# --------------------------------------------------------------------------- #
# Custom ops
# --------------------------------------------------------------------------- #


def _run_forward(q: Tensor, k: Tensor, v: Tensor, offsets: Tensor, scale: float, rot=None, keep_schedule=False,
                 block_size: int = BLOCK_SIZE):  # fmt: skip
    """out; with keep_schedule, (out, workspace holding the block schedule) for
    a backward to reuse. `rot` is (cos, sin, seq_start, flags) or None."""
    out, workspace = q.new_empty(q.shape), None
    if q.shape[0] != 0:
        q, k, v = _kernel_operand(q), _kernel_operand(k), _kernel_operand(v)
        workspace = _launch(_lib.forward, "forward", q, k, offsets, scale, (q, k, v, out, None, None, None, None),
                            rotary=_rotary_fields(rot), block_size=block_size)  # fmt: skip
    return (out, workspace) if keep_schedule else out


def _run_backward(dout, q, k, v, offsets, scale: float, rot=None, schedule=None, grads=None, block_size=BLOCK_SIZE):
    """dq, dk, dv; `schedule` is the forward's workspace when it may be reused,
    `grads` views to write dq, dk, dv into (else they are allocated)."""
    dq, dk, dv = grads if grads is not None else (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape))
    if q.shape[0] == 0:
        return dq, dk, dv
    dout, q, k, v = _kernel_operand(dout), _kernel_operand(q), _kernel_operand(k), _kernel_operand(v)
    tensors = (q, k, v, None, dout, dq, dk, dv)
    _launch(_lib.backward, "backward", q, k, offsets, scale, tensors, workspace=schedule, rotary=_rotary_fields(rot),
            block_size=block_size)  # fmt: skip
    return dq, dk, dv


class _BlockAttention(torch.autograd.Function):
    """The plain-eager path (see _plain_eager): the ops' implementation with
    the same autograd formula, minus the dispatcher. The backward reuses the
    block schedule the forward built (its workspace is kept on the context;
    the kernels check on the device that it matches)."""

    @staticmethod
    def forward(ctx, q, k, v, offsets, scale, cos, sin, seq_start, flags, block_size):
        rot = (cos, sin, seq_start, flags)
        out, ctx.schedule = _run_forward(q, k, v, offsets, scale, rot, keep_schedule=True, block_size=block_size)
        ctx.save_for_backward(q, k, v, offsets, cos, sin, seq_start)
        ctx.scale, ctx.flags, ctx.block_size = scale, flags, block_size
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, offsets, cos, sin, seq_start = ctx.saved_tensors
        rot = (cos, sin, seq_start, ctx.flags)
        grads = _run_backward(dout, q, k, v, offsets, ctx.scale, rot, schedule=ctx.schedule, block_size=ctx.block_size)
        return (*grads, None, None, None, None, None, None, None)


# The ops' trailing (cos, sin, seq_start, rotary_flags) describe rotary
# (None, None, None, 0 without it); see _check_rotary.
@torch.library.custom_op("blockattn::block_attention_fwd", mutates_args=(), device_types="cuda")
def block_attention_fwd(
    q: Tensor, k: Tensor, v: Tensor, offsets: Tensor, scale: float,
    cos: Tensor | None = None, sin: Tensor | None = None, seq_start: Tensor | None = None, rotary_flags: int = 0,
    block_size: int = BLOCK_SIZE,
) -> Tensor:  # fmt: skip
    return _run_forward(q, k, v, offsets, scale, (cos, sin, seq_start, rotary_flags), block_size=block_size)


@block_attention_fwd.register_fake
def _block_attention_fwd_fake(q, k, v, offsets, scale, cos=None, sin=None, seq_start=None, rotary_flags=0,
                              block_size=BLOCK_SIZE):  # fmt: skip
    return q.new_empty(q.shape)


@torch.library.custom_op("blockattn::block_attention_bwd", mutates_args=(), device_types="cuda")
def block_attention_bwd(
    dout: Tensor, q: Tensor, k: Tensor, v: Tensor, offsets: Tensor, scale: float,
    cos: Tensor | None = None, sin: Tensor | None = None, seq_start: Tensor | None = None, rotary_flags: int = 0,
    block_size: int = BLOCK_SIZE,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    return _run_backward(dout, q, k, v, offsets, scale, (cos, sin, seq_start, rotary_flags), block_size=block_size)


@block_attention_bwd.register_fake
def _block_attention_bwd_fake(dout, q, k, v, offsets, scale, cos=None, sin=None, seq_start=None, rotary_flags=0,
                              block_size=BLOCK_SIZE):  # fmt: skip
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, offsets, scale, cos, sin, seq_start, flags, block_size = inputs
    # The backward recomputes the probabilities, so the output is not saved.
    ctx.save_for_backward(q, k, v, offsets, cos, sin, seq_start)
    ctx.scale, ctx.flags, ctx.block_size = scale, flags, block_size


def _op_backward(ctx, dout):
    q, k, v, offsets, cos, sin, seq_start = ctx.saved_tensors
    dq, dk, dv = torch.ops.blockattn.block_attention_bwd(dout, q, k, v, offsets, ctx.scale, cos, sin, seq_start,
                                                         ctx.flags, ctx.block_size)  # fmt: skip
    return dq, dk, dv, None, None, None, None, None, None, None


block_attention_fwd.register_autograd(_op_backward, setup_context=_setup_context)


# --------------------------------------------------------------------------- #
# Calling the library
# --------------------------------------------------------------------------- #


def _kernel_operand(t: Tensor) -> Tensor:
    """`t` itself when the library can read it in place, else a contiguous copy.

    The C ABI reads any view with a unit-stride last dim, token and head strides
    that are multiples of the library's alignment in bytes (zero included:
    inputs may overlap) and an aligned data pointer.
    """
    token_stride, head_stride, dim_stride = t.stride()
    stride_multiple = _ALIGN_BYTES // t.element_size()
    in_place = (
        dim_stride == 1
        and token_stride % stride_multiple == 0
        and head_stride % stride_multiple == 0
        and t.data_ptr() % _ALIGN_BYTES == 0
    )
    # clone, not contiguous(): a contiguous but misaligned view would come back as is.
    return t if in_place else t.clone(memory_format=torch.contiguous_format)


def _launch(entry, what: str, q: Tensor, k: Tensor, offsets: Tensor, scale: float, tensors, workspace=None,
            rotary=None, block_size=BLOCK_SIZE):  # fmt: skip
    """Runs a C entry point on q's device and that device's current stream;
    returns the workspace, which holds the call's block schedule.

    `tensors` are the call's (q, k, v, out, dout, dq, dk, dv), None where unused.
    A `workspace` given is one an earlier call with the same offsets filled:
    its schedule is reused instead of rebuilt.
    """
    if not offsets.is_contiguous():
        offsets = offsets.contiguous()
    device = q.get_device()
    if device != torch._C._cuda_getDevice():
        with torch.cuda.device(device):
            return _launch(entry, what, q, k, offsets, scale, tensors, workspace, rotary, block_size)
    num_seqs = offsets.shape[0] - 1
    reuse = workspace is not None
    if not reuse:
        # Allocated per call from the caching allocator on the current stream:
        # cheap, stream-ordered, and drawn from the graph pool under capture.
        workspace = torch.empty(_lib.workspace_size(num_seqs, q.shape[0]), dtype=torch.uint8, device=q.device)
    args = _pack_args(q, k, offsets, scale, tensors, workspace.data_ptr(), workspace.numel(),
                      torch._C._cuda_getCurrentRawStream(device), reuse, rotary, block_size)  # fmt: skip
    _raise_on_failure(entry(args), f"blockattn {what}")
    return workspace


def _pack_args(q, k, offsets, scale, tensors, workspace_ptr=0, workspace_bytes=0, stream=0, reuse=False, rotary=None,
               block_size=BLOCK_SIZE):  # fmt: skip
    """This thread's blockattn_args for q's problem (offsets contiguous)."""
    return _lib.pack_args(
        offsets.shape[0] - 1, q.shape[0], q.shape[1], k.shape[1], q.shape[2], _DTYPE_CODES[q.dtype], block_size,
        scale, _lib.BACKEND_AUTO, offsets.data_ptr(), tensors, workspace_ptr, workspace_bytes, stream, int(reuse),
        rotary,
    )  # fmt: skip


def _raise_on_failure(status: int, what: str) -> None:
    if status != _lib.OK:
        name = _lib.STATUS_NAMES.get(status, str(status))
        raise RuntimeError(f"{what} failed ({name}): {_lib.last_error()}")


def _query_backend(entry, what: str, q, k, v, offsets, scale, with_outputs) -> str:
    """The backend a call would take; `with_outputs(q, k, v)` gives the call's
    tensors (outputs as fresh tensors: they are validated, never written)."""
    _check_inputs(q, k, v, offsets)
    scale = _resolve_scale(scale, q.shape[2])
    q, k, v = _kernel_operand(q), _kernel_operand(k), _kernel_operand(v)
    offsets = offsets.contiguous()
    args = _pack_args(q, k, offsets, scale, with_outputs(q, k, v))
    chosen = ctypes.c_int32(0)
    with torch.cuda.device(q.device):
        _raise_on_failure(entry(args, ctypes.byref(chosen)), f"blockattn {what} backend query")
    return _lib.BACKEND_NAMES[chosen.value]


def forward_backend(q: Tensor, k: Tensor, v: Tensor, offsets: Tensor, *, scale: float | None = None) -> str:
    """Which implementation block_attention's forward would run for these
    arguments on q's device: "hopper" (sm_90: TMA + wgmma) or "portable"
    (sm_80+: mma.sync). Launches nothing."""
    return _query_backend(_lib.forward_backend, "forward", q, k, v, offsets, scale,
                          lambda q, k, v: (q, k, v, q.new_empty(q.shape), None, None, None, None))  # fmt: skip


def backward_backend(q: Tensor, k: Tensor, v: Tensor, offsets: Tensor, *, scale: float | None = None) -> str:
    """The same for the backward (on an H100, head dim 64 runs on "portable" unless heads are grouped)."""
    return _query_backend(_lib.backward_backend, "backward", q, k, v, offsets, scale,
                          lambda q, k, v: (q, k, v, None, q.new_empty(q.shape), q.new_empty(q.shape),
                                           k.new_empty(k.shape), v.new_empty(v.shape)))  # fmt: skip


# --------------------------------------------------------------------------- #
# FLOP counting (torch.utils.flop_counter.FlopCounterMode)
# --------------------------------------------------------------------------- #


def _block_area(offsets: Tensor, total_tokens: int, block_size: int = BLOCK_SIZE) -> int:
    """Sum over attention blocks of len^2, i.e. the number of (query, key) pairs.

    Reads offsets on the host, which is fine: this only runs under
    FlopCounterMode. Under fake tensors (compile-time estimates) the lengths are
    unknown, so it returns the upper bound of block_size keys per query.
    """
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    if isinstance(offsets, (FakeTensor, FunctionalTensor)) or offsets.device.type == "meta":
        return block_size * total_tokens
    lengths = offsets.diff().long()
    full_blocks, tail = lengths // block_size, lengths % block_size
    return int((full_blocks * block_size * block_size + tail * tail).sum())


@register_flop_formula(torch.ops.blockattn.block_attention_fwd, get_raw=True)
def _forward_flops(q, k, v, offsets, scale, cos=None, sin=None, seq_start=None, rotary_flags=0,
                   block_size=BLOCK_SIZE, **kwargs) -> int:  # fmt: skip
    # Two matmuls (Q K^T and P V), 2 FLOPs per multiply-add, per query head.
    return 4 * q.shape[1] * q.shape[2] * _block_area(offsets, q.shape[0], block_size)


@register_flop_formula(torch.ops.blockattn.block_attention_bwd, get_raw=True)
def _backward_flops(dout, q, k, v, offsets, scale, cos=None, sin=None, seq_start=None, rotary_flags=0,
                    block_size=BLOCK_SIZE, **kwargs) -> int:  # fmt: skip
    # Five matmuls (recomputed Q K^T, dO V^T, P^T dO, dS K, dS^T Q): 2.5x forward.
    return 10 * q.shape[1] * q.shape[2] * _block_area(offsets, q.shape[0], block_size)
