"""Sandwich: a parameter-free relative logit bias built from sinusoids (Chi, Fan, Rudnicky,
Ramadge, "Dissecting Transformer Length Extrapolation via the Lens of Receptive Field Analysis",
ACL 2023, arXiv 2212.10356, Sec. 5).

The bias is the inner product of two sinusoidal position vectors of width ``d'`` (Sec. 5, the
"Sandwich" equation), shifted so that it is 0 at distance 0 (softmax is unchanged by the shift):

    b_h(i, j) = sum_{k=1}^{d'/2} cos((i - j) / (r_h * 10000^(2k/d'))) - d'/2,

a decreasing-then-oscillating function of the distance that acts like ALiBi's linear decay over
the distances a model sees. ``r_h`` compresses the distance per head the way ALiBi spreads its
slopes over heads (``r_h = 8h/H``, h = 1..H, the ALiBi exponents of the paper's Fig. 1) or is 1
for every head (``compress="none"``). Relative: b depends on ``i - j`` only.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register

COMPRESS = ("heads", "none")


def sandwich_ratios(num_heads: int, compress: str = "heads") -> jax.Array:
    """Per-head distance compression ``r_h [H]``: ``8h/H`` (h = 1..H) or all ones."""
    if num_heads <= 0:
        raise ValueError(f"num_heads must be positive, got {num_heads}")
    if compress == "none":
        return jnp.ones((num_heads,), jnp.float32)
    if compress != "heads":
        raise ValueError(f"Sandwich compress must be one of {COMPRESS}, got {compress!r}")
    return 8.0 * jnp.arange(1, num_heads + 1, dtype=jnp.float32) / num_heads


def sandwich_bias(q_positions: jax.Array, k_positions: jax.Array, *, dim: int = 128,
                  base: float = 10000.0, ratios: jax.Array | None = None) -> jax.Array:
    """Sandwich logit bias ``sum_{k=1}^{d'/2} cos(r / (r_h base^(2k/d'))) - d'/2``.

    Args:
      q_positions: ``[Tq]`` or ``[B, Tq]`` (i).
      k_positions: ``[Tk]`` or ``[B, Tk]`` (j).
      dim: d' (even), the width of the sinusoidal vectors whose inner product is the bias.
      base: frequency base (10^4).
      ratios: ``[H]`` per-head compression ``r_h`` (default: a single head with r = 1).

    Returns:
      ``[H, Tq, Tk]`` (``[B, H, Tq, Tk]`` for batched positions), 0 on the diagonal, <= 0.
    """
    if dim <= 0 or dim % 2:
        raise ValueError(f"Sandwich dim must be a positive even integer, got {dim}")
    dtype = jnp.promote_types(jnp.result_type(q_positions, k_positions), jnp.float32)
    q = jnp.asarray(q_positions, dtype)
    k = jnp.asarray(k_positions, dtype)
    ratios = jnp.ones((1,), dtype) if ratios is None else jnp.asarray(ratios, dtype)
    kk = jnp.arange(1, dim // 2 + 1, dtype=dtype)
    inv = jnp.asarray(base, dtype) ** (-2.0 * kk / dim)  # [d'/2], k = 1..d'/2 as in the paper
    rel = q[..., :, None] - k[..., None, :]  # [..., Tq, Tk]
    angles = rel[..., None, :, :, None] * (inv / ratios[:, None])[:, None, None, :]
    # sum_k (cos(a_k) - 1) written as -2 sum_k sin^2(a_k / 2): no cancellation near i = j
    return -2.0 * jnp.sum(jnp.square(jnp.sin(0.5 * angles)), axis=-1)


@dataclasses.dataclass(frozen=True)
class SandwichOptions:
    """Options of Sandwich (arXiv 2212.10356, Sec. 5).

    Attributes:
      dim: d', the sinusoid width of the bias (the paper's experiments use 128; it need not equal
        the head or model width).
      base: frequency base (10^4).
      compress: ``"heads"`` (r_h = 8h/H, ALiBi's per-head spread) or ``"none"`` (r_h = 1).
    """

    dim: int = 128
    base: float = 10000.0
    compress: str = "heads"

    def validate(self, ctx: PEContext) -> None:
        if self.dim <= 0 or self.dim % 2:
            raise ValueError(f"Sandwich dim must be a positive even integer, got {self.dim}")
        if self.base <= 1.0:
            raise ValueError(f"Sandwich base must be > 1, got {self.base}")
        if self.compress not in COMPRESS:
            raise ValueError(f"Sandwich compress must be one of {COMPRESS}, got {self.compress!r}")


@register("sandwich", options=SandwichOptions,
          paper="Chi et al., Dissecting Transformer Length Extrapolation (Sandwich), arXiv 2212.10356")
class Sandwich(PositionalEncoding):
    """Sinusoid inner-product bias per head (hook ``bias``); relative, no parameters."""

    is_relative = True

    def __init__(self, options: SandwichOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("sandwich", "num_heads")
        self.ratios = nnx.Variable(sandwich_ratios(ctx.num_heads, options.compress))

    def bias(self, q_pos, k_pos):
        o = self.options
        return sandwich_bias(q_pos, k_pos, dim=o.dim, base=o.base, ratios=self.ratios[...])
