"""Polar-coordinate position embedding, PoPE (Gopalakrishnan, Csordas, Schmidhuber, Mozer,
"Decoupling the 'What' and 'Where' With Polar Coordinate Positional Embeddings", arXiv
2509.10534, Sec. 3). Registered as ``polar_pope``: ``pope`` is the Legendre PE of arXiv 2405.04585.

Each of the ``d`` components c of a query/key becomes a complex number whose magnitude carries
the content and whose phase carries only the position:

    q~_tc = softplus(q_tc) e^{i t theta_c},   k~_sc = softplus(k_sc) e^{i (s theta_c - delta_c)},
    a_ts = Re sum_c q~_tc conj(k~_sc) = sum_c softplus(q_tc) softplus(k_sc) cos((t - s) theta_c + delta_c),

with ``d`` frequencies ``theta_c = base^(-c/d)``, c = 0..d-1 (one per component, twice RoPE's
count) and a learned phase offset ``delta [H, d]`` (initialised at 0 and clamped to
``[-2 pi, 0]``). It is implemented by widening q and k to ``2 d`` real coordinates
``[m cos(phase) | m sin(phase)]``; the logit scale stays ``1/sqrt(d)``. Relative: a_ts depends on
``t - s`` only; the content enters only through the non-negative magnitudes.
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register


def polar_frequencies(dim: int, base: float = 10000.0, dtype=jnp.float32) -> jax.Array:
    """``theta_c = base^(-c/dim)``, c = 0..dim-1: ``[dim]``."""
    return jnp.asarray(base, dtype) ** (-jnp.arange(dim, dtype=dtype) / dim)


def polar_embed(x: jax.Array, positions: jax.Array, *, theta: jax.Array,
                phase_offset: jax.Array | None = None) -> jax.Array:
    """``x [..., seq, H, d] -> [..., seq, H, 2d]``: ``[m cos(phase) | m sin(phase)]`` with
    ``m = softplus(x)`` and ``phase = p theta (- delta)``.

    Args:
      x: queries or keys.
      positions: ``[..., seq]``.
      theta: ``[d]`` frequencies.
      phase_offset: optional ``[H, d]`` delta subtracted from the phase (keys).
    """
    dtype = jnp.promote_types(x.dtype, jnp.float32)
    phase = jnp.asarray(positions, dtype)[..., :, None, None] * theta.astype(dtype)  # [..., s, 1, d]
    if phase_offset is not None:
        phase = phase - phase_offset.astype(dtype)
    mag = jax.nn.softplus(x.astype(dtype))
    return jnp.concatenate([mag * jnp.cos(phase), mag * jnp.sin(phase)], axis=-1).astype(x.dtype)


@dataclasses.dataclass(frozen=True)
class PolarPoPEOptions:
    """Options of polar PoPE (arXiv 2509.10534).

    Attributes:
      base: frequency base (10^4).
      learned_offset: learn the per-head, per-component phase offset delta (else delta = 0).
    """

    base: float = 10000.0
    learned_offset: bool = True

    def validate(self, ctx: PEContext) -> None:
        if self.base <= 1.0:
            raise ValueError(f"polar_pope base must be > 1, got {self.base}")


@register("polar_pope", options=PolarPoPEOptions,
          paper="Gopalakrishnan et al., Decoupling the What and Where (polar PoPE), arXiv 2509.10534")
class PolarPoPE(PositionalEncoding):
    """Magnitude-from-content, phase-from-position q/k (hook ``rotate``, widens q/k to 2 d_h);
    relative."""

    is_relative = True

    def __init__(self, options: PolarPoPEOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("polar_pope", "head_dim", "num_heads")
        delta = jnp.zeros((ctx.num_heads, ctx.head_dim), jnp.float32)
        self.phase_offset = nnx.Param(delta) if options.learned_offset else nnx.Variable(delta)

    def attention_scale(self, head_dim: int) -> float:
        return float(self.ctx.head_dim) ** -0.5  # q and k are widened to 2 d_h: keep 1/sqrt(d_h)

    def rotate(self, q, k, q_pos, k_pos):
        theta = polar_frequencies(q.shape[-1], self.options.base)
        delta = jnp.clip(self.phase_offset[...], -2.0 * math.pi, 0.0)
        return (polar_embed(q, q_pos, theta=theta),
                polar_embed(k, k_pos, theta=theta, phase_offset=delta))
