"""ALiBi: attention with linear biases (Press et al., "Train Short, Test Long", arXiv 2108.12409)."""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register


def _power_of_two_slopes(n: int) -> list[float]:
    return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]


def alibi_slopes(num_heads: int, *, kind: str = "canonical", dtype=jnp.float32) -> jax.Array:
    """Head slopes ``[num_heads]``.

    ``canonical``: m_h = 2^(-8h/H) for a power-of-two H; otherwise the slopes of the closest lower
    power of two c followed by the even-indexed slopes of 2c (first H - c of them), as in the
    reference code. ``exp``: m_h = exp(-h/H), h = 0..H-1 (the code of arXiv 2505.13027).
    ``dtype=np.float64`` returns the exact NumPy float64 slopes (with or without x64).
    """
    if num_heads <= 0:
        raise ValueError(f"num_heads must be positive, got {num_heads}")
    if kind == "exp":
        if dtype is np.float64:
            return np.exp(-np.arange(num_heads, dtype=np.float64) / num_heads)
        return jnp.exp(-jnp.arange(num_heads, dtype=dtype) / num_heads)
    if kind != "canonical":
        raise ValueError(f"ALiBi slopes must be 'canonical' or 'exp', got {kind!r}")
    c = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = _power_of_two_slopes(c)
    if c < num_heads:
        slopes += _power_of_two_slopes(2 * c)[0::2][: num_heads - c]
    if dtype is np.float64:
        return np.array(slopes, np.float64)
    return jnp.asarray(np.array(slopes, dtype))


def alibi_mean_slope(num_heads: int) -> float:
    """Mean of the canonical slopes of ``num_heads`` heads (:func:`alibi_slopes`, in float64)."""
    return float(np.mean(alibi_slopes(num_heads, dtype=np.float64)))


def alibi_bias(num_heads: int, q_positions: jax.Array, k_positions: jax.Array, *,
               causal: bool = False, slopes: jax.Array | None = None) -> jax.Array:
    """Logit bias ``-m_h * dist(i, j)``.

    Args:
      num_heads: H.
      q_positions: ``[Tq]`` or ``[B, Tq]``.
      k_positions: ``[Tk]`` or ``[B, Tk]``.
      causal: decoder form ``-m_h (i - j)`` for keys j <= i (0 on future keys, which a causal
        mask removes); otherwise the bidirectional encoder form ``-m_h |i - j|``.
      slopes: optional ``[H]`` override (learned or exp slopes).

    Returns:
      ``[H, Tq, Tk]`` for 1-D positions, ``[B, H, Tq, Tk]`` for batched ones.
    """
    q = jnp.asarray(q_positions, jnp.float32)
    k = jnp.asarray(k_positions, jnp.float32)
    dist = q[..., :, None] - k[..., None, :]
    dist = jnp.maximum(dist, 0.0) if causal else jnp.abs(dist)
    m = alibi_slopes(num_heads) if slopes is None else jnp.asarray(slopes, jnp.float32)
    return -m[:, None, None] * dist[..., None, :, :]


@dataclasses.dataclass(frozen=True)
class AlibiOptions:
    """Options of ALiBi (arXiv 2108.12409). ``bidirectional=None`` follows the model (its
    ``causal`` flag); ``slopes="exp"`` is faithful to arXiv 2505.13027's code."""

    bidirectional: bool | None = None
    slopes: str = "canonical"
    learned_slopes: bool = False
    alibi_heads: int | None = None

    def validate(self, ctx: PEContext) -> None:
        if self.slopes not in ("canonical", "exp"):
            raise ValueError(f"ALiBi slopes must be 'canonical' or 'exp', got {self.slopes!r}")
        if self.alibi_heads is not None and (self.alibi_heads < 0 or (
                ctx.num_heads is not None and self.alibi_heads > ctx.num_heads)):
            raise ValueError(f"alibi_heads={self.alibi_heads} outside [0, num_heads]")


@register("alibi", options=AlibiOptions, paper="Press et al., Train Short, Test Long, arXiv 2108.12409")
class Alibi(PositionalEncoding):
    """Linear distance penalty on the logits (hook ``bias``); relative."""

    is_relative = True

    def __init__(self, options: AlibiOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("alibi", "num_heads")
        slopes = alibi_slopes(ctx.num_heads, kind=options.slopes)
        if options.alibi_heads is not None:
            slopes = jnp.where(jnp.arange(ctx.num_heads) < options.alibi_heads, slopes, 0.0)
        self.slopes = nnx.Param(slopes) if options.learned_slopes else nnx.Variable(slopes)

    @property
    def causal(self) -> bool:
        bidir = self.options.bidirectional
        return self.ctx.causal if bidir is None else not bidir

    def bias(self, q_pos, k_pos):
        return alibi_bias(self.ctx.num_heads, q_pos, k_pos, causal=self.causal,
                          slopes=self.slopes[...])
