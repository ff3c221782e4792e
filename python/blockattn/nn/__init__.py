"""blockattn's modules: blockattn.nn.JaggedSelfAttention (blockattn.layer)."""

from blockattn.layer import JaggedSelfAttention

__all__ = ["JaggedSelfAttention"]
