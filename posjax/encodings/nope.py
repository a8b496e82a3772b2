"""NoPE: no positional signal (Theorem 1 of arXiv 2604.05217: a bidirectional encoder without
PE is permutation-equivariant; Kazemnejad et al., arXiv 2305.19466, for causal decoders)."""
from __future__ import annotations

import dataclasses

from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register


@dataclasses.dataclass(frozen=True)
class NoPEOptions:
    """NoPE has no options."""


@register("none", options=NoPEOptions, paper="Kazemnejad et al., arXiv 2305.19466 (causal NoPE)")
class NoPE(PositionalEncoding):
    """All hooks are identities: the only positional signal left is a causal mask, if any."""

    is_relative = True  # trivially: nothing depends on positions

    def __init__(self, options: NoPEOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
