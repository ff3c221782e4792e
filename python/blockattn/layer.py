"""The fused projection layer: one GEMM makes q, k and v, block attention
(with fused rotary) reads them in place, and its backward writes dq, dk and dv
straight into the one gradient buffer the GEMM's backward reads.

    out = blockattn.jagged_self_attention(x, weight, bias, offsets, num_q_heads=4)
    layer = blockattn.nn.JaggedSelfAttention(in_features=512, num_q_heads=4, head_dim=128)

Forward: z = x W^T + b ([T, N], N = (Hq + 2 Hkv) D, cuBLAS through
F.linear); q, k, v are the column slices [0, Hq D), [Hq D, (Hq + Hkv) D) and
the rest of z, viewed as [T, H, D] and read by the kernels with no copy.
Backward: the attention backward writes dq, dk, dv (rotated back) into the
matching slices of one dz [T, N]; autograd's F.linear backward then forms
dx = dz W, dW = dz^T x and db = sum_t dz. Nothing but z is saved for the
attention (the unfused pipeline keeps rotated copies of q, k, v too).

dz has no rows for tokens outside [offsets[0], offsets[B]): offsets must
cover all T rows of x (offsets[0] == 0, offsets[B] == T), as for
block_attention, whose uncovered output rows are uninitialized too.
"""

import math

import torch
from torch import Tensor
from torch.utils.flop_counter import register_flop_formula

from blockattn import ops


def jagged_self_attention(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    offsets: Tensor,
    *,
    num_q_heads: int,
    num_kv_heads: int | None = None,
    scale: float | None = None,
    rotary: "ops.Rotary | None" = None,
    block_size: int = ops.BLOCK_SIZE,
) -> Tensor:
    """Block attention over one projection of x.

    Args:
        x: [T, C] bf16 or fp16 CUDA tensor (the jagged token features).
        weight: [N, C] in nn.Linear layout, N = (num_q_heads + 2 num_kv_heads)
            head_dim; rows are all q heads, then k heads, then v heads. A
            [C, N] weight is weight.t() (a view).
        bias: [N] or None.
        offsets: int32 [B + 1] on x's device covering [0, T) (see
            block_attention).
        num_q_heads, num_kv_heads: Hq and Hkv (default Hq); head_dim is
            N / (Hq + 2 Hkv), one of blockattn.SUPPORTED_HEAD_DIMS.
        scale, rotary, block_size: as for block_attention.

    Returns:
        [T, num_q_heads * head_dim], x's dtype. Differentiable in x, weight
        and bias.
    """
    num_kv_heads = num_q_heads if num_kv_heads is None else num_kv_heads
    _check_layer_inputs(x, weight, bias, num_q_heads, num_kv_heads)
    z = torch.nn.functional.linear(x, weight, bias)
    q, k, v = _split(z, num_q_heads, num_kv_heads)
    ops._check_inputs(q, k, v, offsets)
    ops._check_block_size(block_size, q)
    scale = ops._resolve_scale(scale, q.shape[2])
    rot = ops._check_rotary(rotary, q, offsets)  # (cos, sin, seq_start, flags)
    needs_grad = torch.is_grad_enabled() and z.requires_grad
    ops._check_rotary_backward(needs_grad and rotary is not None, q, block_size, num_kv_heads)
    heads = (num_q_heads, num_kv_heads)
    if ops._plain_eager():
        if needs_grad:
            out = _PackedAttention.apply(z, offsets, *heads, scale, *rot, block_size)
        else:
            out = _run_forward(z, offsets, *heads, scale, rot, block_size=block_size)
    else:
        out = torch.ops.blockattn.packed_attention_fwd(z, offsets, *heads, scale, *rot, block_size)
    return out.view(x.shape[0], -1)


class JaggedSelfAttention(torch.nn.Module):
    """jagged_self_attention with its own weight [(Hq + 2 Hkv) D, C] and bias
    (nn.Linear's initialization). forward(x, offsets, rotary=None) returns
    [T, Hq D]."""

    def __init__(
        self,
        in_features: int,
        num_q_heads: int,
        head_dim: int,
        num_kv_heads: int | None = None,
        bias: bool = True,
        scale: float | None = None,
        block_size: int = ops.BLOCK_SIZE,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.in_features, self.num_q_heads, self.head_dim = in_features, num_q_heads, head_dim
        self.num_kv_heads = num_q_heads if num_kv_heads is None else num_kv_heads
        self.scale, self.block_size = scale, block_size
        out_features = (num_q_heads + 2 * self.num_kv_heads) * head_dim
        factory = {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features, **factory))
        self.bias = torch.nn.Parameter(torch.empty(out_features, **factory)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # nn.Linear's: U(-1/sqrt(C), 1/sqrt(C)) for both.
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        torch.nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            torch.nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor, offsets: Tensor, rotary: "ops.Rotary | None" = None) -> Tensor:
        return jagged_self_attention(
            x, self.weight, self.bias, offsets, num_q_heads=self.num_q_heads, num_kv_heads=self.num_kv_heads,
            scale=self.scale, rotary=rotary, block_size=self.block_size,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, num_q_heads={self.num_q_heads}, num_kv_heads={self.num_kv_heads}, "
            f"head_dim={self.head_dim}, bias={self.bias is not None}"
        )


def _check_layer_inputs(x, weight, bias, num_q_heads, num_kv_heads) -> None:
    """TypeError/ValueError naming the argument; block_attention's checks
    then cover the q, k, v views (dtype, device, head dim, offsets)."""
    for name, t in (("x", x), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise TypeError(f"jagged_self_attention: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"jagged_self_attention: {name} must be 2-D, got shape {tuple(t.shape)}")
    for name, h in (("num_q_heads", num_q_heads), ("num_kv_heads", num_kv_heads)):
        if isinstance(h, bool) or not isinstance(h, int) or h <= 0:
            raise ValueError(f"jagged_self_attention: {name} must be a positive int, got {h!r}")
    if weight.shape[1] != x.shape[1]:
        raise ValueError(
            f"jagged_self_attention: weight must be [N, C] with C = x.shape[1] = {x.shape[1]}, "
            f"got {tuple(weight.shape)}"
        )
    heads = num_q_heads + 2 * num_kv_heads
    if weight.shape[0] % heads != 0:
        raise ValueError(
            f"jagged_self_attention: weight.shape[0] = {weight.shape[0]} must be (num_q_heads + 2 num_kv_heads) "
            f"* head_dim = {heads} * head_dim"
        )
    if weight.dtype != x.dtype or weight.device != x.device:
        raise TypeError(f"jagged_self_attention: weight must have x's dtype and device ({x.dtype}, {x.device})")
    if bias is not None:
        if not isinstance(bias, Tensor) or bias.shape != (weight.shape[0],):
            raise ValueError(f"jagged_self_attention: bias must be None or a [{weight.shape[0]}] tensor")
        if bias.dtype != x.dtype or bias.device != x.device:
            raise TypeError(f"jagged_self_attention: bias must have x's dtype and device ({x.dtype}, {x.device})")


def _split(z: Tensor, num_q_heads: int, num_kv_heads: int) -> tuple[Tensor, Tensor, Tensor]:
    """The [T, H, D] views of q, k, v in z [T, (Hq + 2 Hkv) D]: token stride
    N, head stride D, no copy."""
    head_dim = z.shape[1] // (num_q_heads + 2 * num_kv_heads)
    q, k, v = z.split((num_q_heads * head_dim, num_kv_heads * head_dim, num_kv_heads * head_dim), dim=1)
    return (
        q.unflatten(1, (num_q_heads, head_dim)),
        k.unflatten(1, (num_kv_heads, head_dim)),
        v.unflatten(1, (num_kv_heads, head_dim)),
    )


def _packed(z: Tensor) -> Tensor:
    """z with unit column stride (as F.linear makes it); others are copied."""
    return z if z.stride(1) == 1 else z.contiguous()


def _run_forward(z, offsets, num_q_heads, num_kv_heads, scale, rot, keep_schedule=False, block_size=ops.BLOCK_SIZE):
    q, k, v = _split(_packed(z), num_q_heads, num_kv_heads)
    return ops._run_forward(q, k, v, offsets, scale, rot, keep_schedule=keep_schedule, block_size=block_size)


def _run_backward(dout, z, offsets, num_q_heads, num_kv_heads, scale, rot, schedule=None,
                  block_size=ops.BLOCK_SIZE) -> Tensor:  # fmt: skip
    """dz: dq, dk, dv written into its column slices by the one backward kernel."""
    q, k, v = _split(_packed(z), num_q_heads, num_kv_heads)
    dz = z.new_empty(z.shape)
    ops._run_backward(dout, q, k, v, offsets, scale, rot, schedule, grads=_split(dz, num_q_heads, num_kv_heads),
                      block_size=block_size)  # fmt: skip
    return dz


class _PackedAttention(torch.autograd.Function):
    """The plain-eager path (ops._plain_eager), reusing the forward's schedule."""

    @staticmethod
    def forward(ctx, z, offsets, num_q_heads, num_kv_heads, scale, cos, sin, seq_start, flags, block_size):
        rot = (cos, sin, seq_start, flags)
        out, ctx.schedule = _run_forward(z, offsets, num_q_heads, num_kv_heads, scale, rot, keep_schedule=True,
                                         block_size=block_size)  # fmt: skip
        ctx.save_for_backward(z, offsets, cos, sin, seq_start)
        ctx.heads, ctx.scale, ctx.flags, ctx.block_size = (num_q_heads, num_kv_heads), scale, flags, block_size
        return out

    @staticmethod
    def backward(ctx, dout):
        z, offsets, cos, sin, seq_start = ctx.saved_tensors
        rot = (cos, sin, seq_start, ctx.flags)
        dz = _run_backward(dout, z, offsets, *ctx.heads, ctx.scale, rot, schedule=ctx.schedule,
                           block_size=ctx.block_size)  # fmt: skip
        return (dz, *([None] * 9))


@torch.library.custom_op("blockattn::packed_attention_fwd", mutates_args=(), device_types="cuda")
def packed_attention_fwd(
    z: Tensor, offsets: Tensor, num_q_heads: int, num_kv_heads: int, scale: float,
    cos: Tensor | None = None, sin: Tensor | None = None, seq_start: Tensor | None = None, rotary_flags: int = 0,
    block_size: int = ops.BLOCK_SIZE,
) -> Tensor:  # fmt: skip
    return _run_forward(z, offsets, num_q_heads, num_kv_heads, scale, (cos, sin, seq_start, rotary_flags),
                        block_size=block_size)  # fmt: skip


@packed_attention_fwd.register_fake
def _packed_attention_fwd_fake(z, offsets, num_q_heads, num_kv_heads, scale, cos=None, sin=None, seq_start=None,
                               rotary_flags=0, block_size=ops.BLOCK_SIZE):  # fmt: skip
    head_dim = z.shape[1] // (num_q_heads + 2 * num_kv_heads)
    return z.new_empty((z.shape[0], num_q_heads, head_dim))


@torch.library.custom_op("blockattn::packed_attention_bwd", mutates_args=(), device_types="cuda")
def packed_attention_bwd(
    dout: Tensor, z: Tensor, offsets: Tensor, num_q_heads: int, num_kv_heads: int, scale: float,
    cos: Tensor | None = None, sin: Tensor | None = None, seq_start: Tensor | None = None, rotary_flags: int = 0,
    block_size: int = ops.BLOCK_SIZE,
) -> Tensor:  # fmt: skip
    return _run_backward(dout, z, offsets, num_q_heads, num_kv_heads, scale, (cos, sin, seq_start, rotary_flags),
                         block_size=block_size)  # fmt: skip


@packed_attention_bwd.register_fake
def _packed_attention_bwd_fake(dout, z, offsets, num_q_heads, num_kv_heads, scale, cos=None, sin=None,
                               seq_start=None, rotary_flags=0, block_size=ops.BLOCK_SIZE):  # fmt: skip
    return z.new_empty(z.shape)


def _setup_context(ctx, inputs, output) -> None:
    z, offsets, num_q_heads, num_kv_heads, scale, cos, sin, seq_start, flags, block_size = inputs
    ctx.save_for_backward(z, offsets, cos, sin, seq_start)
    ctx.heads, ctx.scale, ctx.flags, ctx.block_size = (num_q_heads, num_kv_heads), scale, flags, block_size


def _op_backward(ctx, dout):
    z, offsets, cos, sin, seq_start = ctx.saved_tensors
    dz = torch.ops.blockattn.packed_attention_bwd(dout, z, offsets, *ctx.heads, ctx.scale, cos, sin, seq_start,
                                                  ctx.flags, ctx.block_size)  # fmt: skip
    return (dz, *([None] * 9))


packed_attention_fwd.register_autograd(_op_backward, setup_context=_setup_context)


@register_flop_formula(torch.ops.blockattn.packed_attention_fwd, get_raw=True)
def _forward_flops(z, offsets, num_q_heads, num_kv_heads, scale, cos=None, sin=None, seq_start=None, rotary_flags=0,
                   block_size=ops.BLOCK_SIZE, **kwargs) -> int:  # fmt: skip
    head_dim = z.shape[1] // (num_q_heads + 2 * num_kv_heads)
    return 4 * num_q_heads * head_dim * ops._block_area(offsets, z.shape[0], block_size)


@register_flop_formula(torch.ops.blockattn.packed_attention_bwd, get_raw=True)
def _backward_flops(dout, z, offsets, num_q_heads, num_kv_heads, scale, cos=None, sin=None, seq_start=None,
                    rotary_flags=0, block_size=ops.BLOCK_SIZE, **kwargs) -> int:  # fmt: skip
    head_dim = z.shape[1] // (num_q_heads + 2 * num_kv_heads)
    return 10 * num_q_heads * head_dim * ops._block_area(offsets, z.shape[0], block_size)
