"""blockattn: block-diagonal jagged attention for PyTorch.

    out = blockattn.block_attention(q, k, v, offsets)
    out = blockattn.attention(q, k, v, causal=True)  # dense flash attention (forward)
    out = blockattn.jagged_self_attention(x, weight, bias, offsets, num_q_heads=4)  # projection + attention
    layer = blockattn.nn.JaggedSelfAttention(in_features=512, num_q_heads=4, head_dim=128)

`python -m blockattn` prints an environment report. Importing the package
loads libblockattn.so (see blockattn._lib for where it
is looked up) and registers the `blockattn::block_attention_fwd`,
`blockattn::block_attention_bwd` and `blockattn::dense_attention_fwd` custom ops.
"""

__version__ = "0.2.0"

from blockattn._lib import LIBRARY_PATH as library_path
from blockattn.ops import (
    BLOCK_SIZE,
    SUPPORTED_HEAD_DIMS,
    Rotary,
    backward_backend,
    block_attention,
    forward_backend,
    supported_configs,
)
from blockattn.dense import DENSE_HEAD_DIMS, attention, dense_backend
from blockattn.reference import block_attention_reference
from blockattn.layer import jagged_self_attention
from blockattn import nn

__all__ = [
    "BLOCK_SIZE",
    "DENSE_HEAD_DIMS",
    "SUPPORTED_HEAD_DIMS",
    "Rotary",
    "attention",
    "dense_backend",
    "backward_backend",
    "block_attention",
    "block_attention_reference",
    "forward_backend",
    "jagged_self_attention",
    "nn",
    "library_path",
    "supported_configs",
    "__version__",
]
