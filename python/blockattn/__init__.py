"""blockattn: block-diagonal jagged attention for PyTorch.

    out = blockattn.block_attention(q, k, v, offsets)

`python -m blockattn` prints an environment report. Importing the package
loads libblockattn.so (see blockattn._lib for where it
is looked up) and registers the `blockattn::block_attention_fwd` and
`blockattn::block_attention_bwd` custom ops.
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
from blockattn.reference import block_attention_reference

__all__ = [
    "BLOCK_SIZE",
    "SUPPORTED_HEAD_DIMS",
    "Rotary",
    "backward_backend",
    "block_attention",
    "block_attention_reference",
    "forward_backend",
    "library_path",
    "supported_configs",
    "__version__",
]
