"""p-RoPE: RoPE with its lowest frequencies removed (Barbero, Vitvitskyi, Perivolaropoulos,
Pascanu, Velickovic, "Round and Round We Go! What Makes Rotary Positional Encodings Useful?",
ICLR 2025, arXiv 2410.06205, Sec. 6).

Of the ``d_rot / 2`` RoPE frequencies ``theta_k = base^(-2k/d_rot)`` only the highest fraction
``p`` is kept; the lowest ``1 - p`` are set to 0, so those pairs are not rotated and act as
position-free semantic channels. ``p = 1`` is RoPE and ``p = 0`` is NoPE. The kept frequencies are
RoPE's own (they are not re-spread over the kept pairs), and the number of kept pairs is
``floor(p * d_rot / 2)``.
"""
from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np
from flax import nnx

from posjax.encodings.base import PEContext
from posjax.encodings.registry import register
from posjax.encodings.rope import RoPE, RoPEOptions, rope_frequencies, rotary_dim


def p_rope_pairs(rot_dim: int, p: float) -> int:
    """Number of rotated (highest-frequency) pairs: ``floor(p * rot_dim / 2)``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p-RoPE p must be in [0, 1], got {p}")
    return int(math.floor(p * (rot_dim // 2) + 1e-9))


def p_rope_frequencies(rot_dim: int, p: float, base: float = 10000.0) -> np.ndarray:
    """RoPE frequencies ``[rot_dim // 2]`` with all but the first ``floor(p rot_dim / 2)`` zeroed,
    as exact float64 values (the precision :func:`posjax.encodings.rope.rope_angles` keeps)."""
    theta = np.array(rope_frequencies(rot_dim, base, np.float64))
    theta[p_rope_pairs(rot_dim, p):] = 0.0
    return theta


@dataclasses.dataclass(frozen=True)
class PRoPEOptions(RoPEOptions):
    """Options of p-RoPE: RoPE's plus ``p``, the kept fraction of frequencies (the paper's Gemma
    experiments use p = 0.75)."""

    p: float = 0.75

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"p-RoPE p must be in [0, 1], got {self.p}")


@register("p_rope", options=PRoPEOptions,
          paper="Barbero et al., Round and Round We Go! (p-RoPE), arXiv 2410.06205")
class PRoPE(RoPE):
    """RoPE rotating only the highest ``p`` fraction of frequencies (hook ``rotate``); relative."""

    def __init__(self, options: PRoPEOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx, rngs=rngs)

    def frequencies(self) -> np.ndarray:
        o = self.options
        return p_rope_frequencies(rotary_dim(self.ctx.head_dim, o.rotary_fraction), o.p, o.base)
