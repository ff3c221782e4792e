"""blockattn: block-diagonal jagged attention for PyTorch.

    out = blockattn.block_attention(q, k, v, offsets)

Importing the package loads libblockattn.so (see blockattn._lib for where it
is looked up) and registers the `blockattn::block_attention_fwd` and
`blockattn::block_attention_bwd` custom ops.
"""

__version__ = "0.1.0"

from blockattn._lib import LIBRARY_PATH as library_path
from blockattn.ops import block_attention
from blockattn.reference import block_attention_reference

__all__ = ["block_attention", "block_attention_reference", "library_path", "__version__"]
