"""Positional encodings: pure functions, thin NNX modules, and a registry selectable by name.

>>> import posjax.encodings as pe
>>> pe.names()                      # every registered PE
>>> rope = pe.make("rope", head_dim=64, base=10000.0)
"""
from posjax.encodings.base import PEContext, PositionalEncoding, batch_positions, check_table_length
from posjax.encodings.registry import PEInfo, build_options, info, make, names, register

# Importing a family module registers it.
from posjax.encodings.nope import NoPE
from posjax.encodings.sinusoidal import Sinusoidal, sinusoidal, sinusoidal_at, sinusoidal_frequencies
from posjax.encodings.learned import Learned, init_table
from posjax.encodings.rope import RoPE, apply_rope, rope_frequencies, rotary_dim, rotate_pairs
from posjax.encodings.alibi import Alibi, alibi_bias, alibi_slopes
from posjax.encodings.t5 import T5Bias, t5_bucket

__all__ = [
    "PEContext", "PEInfo", "PositionalEncoding", "batch_positions", "build_options",
    "check_table_length", "info", "make", "names", "register",
    "NoPE", "Sinusoidal", "Learned", "RoPE", "Alibi", "T5Bias",
    "sinusoidal", "sinusoidal_at", "sinusoidal_frequencies", "init_table", "apply_rope",
    "rope_frequencies", "rotary_dim", "rotate_pairs", "alibi_bias", "alibi_slopes", "t5_bucket",
]
