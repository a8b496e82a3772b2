"""KERPLE: kernelized relative positional embedding (Chi, Fan, Ramadge, Rudnicky, "KERPLE:
Kernelized Relative Positional Embedding for Length Extrapolation", arXiv 2205.09921).

The logit bias is the negative of a conditionally positive definite kernel of the distance
``i - j`` (query minus key), with two positive parameters per head:

* log variant:   b_h(i, j) = -r1_h * log(1 + r2_h * (i - j))
* power variant: b_h(i, j) = -r1_h * (i - j) ** r2_h,  0 < r2_h <= 2

Parameters are clamped (>= 0.01, and r2 <= 2 for the power variant) in the forward pass, as in
the reference code (``chijames/KERPLE``, a GPT-NeoX fork).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register

MIN_PARAM = 0.01


def kerple_distance(q_positions: jax.Array, k_positions: jax.Array, *, causal: bool) -> jax.Array:
    """Distances ``[..., Tq, Tk]``: ``max(i - j, 0)`` (causal) or ``|i - j|`` (bidirectional)."""
    q = jnp.asarray(q_positions, jnp.float32)
    k = jnp.asarray(k_positions, jnp.float32)
    dist = q[..., :, None] - k[..., None, :]
    return jnp.maximum(dist, 0.0) if causal else jnp.abs(dist)


def kerple_log_bias(r1: jax.Array, r2: jax.Array, q_positions: jax.Array, k_positions: jax.Array,
                    *, causal: bool = True) -> jax.Array:
    """Log-kernel bias ``-r1_h log(1 + r2_h d)``: ``[H, Tq, Tk]`` (``[B, H, Tq, Tk]`` batched).

    Args:
      r1, r2: ``[H]`` per-head parameters (clamped to >= 0.01 here).
      q_positions, k_positions: ``[T]`` or ``[B, T]``.
      causal: distance ``max(i - j, 0)`` (0 on future keys, which the mask removes); otherwise
        ``|i - j|`` (a posjax extension for encoders).
    """
    d = kerple_distance(q_positions, k_positions, causal=causal)[..., None, :, :]
    r1 = jnp.maximum(jnp.asarray(r1, jnp.float32), MIN_PARAM)[:, None, None]
    r2 = jnp.maximum(jnp.asarray(r2, jnp.float32), MIN_PARAM)[:, None, None]
    return -r1 * jnp.log1p(r2 * d)


def kerple_power_bias(r1: jax.Array, r2: jax.Array, q_positions: jax.Array,
                      k_positions: jax.Array, *, causal: bool = True) -> jax.Array:
    """Power-kernel bias ``-r1_h d^{r2_h}`` with r2 clamped to [0.01, 2]; shapes as the log one."""
    d = kerple_distance(q_positions, k_positions, causal=causal)[..., None, :, :]
    r1 = jnp.maximum(jnp.asarray(r1, jnp.float32), MIN_PARAM)[:, None, None]
    r2 = jnp.clip(jnp.asarray(r2, jnp.float32), MIN_PARAM, 2.0)[:, None, None]
    # d ** r2 with d = 0 -> 0 (r2 >= 0.01 > 0); written through exp/log for a finite gradient.
    safe = jnp.where(d > 0, d, 1.0)
    return jnp.where(d > 0, -r1 * jnp.exp(r2 * jnp.log(safe)), 0.0)


@dataclasses.dataclass(frozen=True)
class KerpleOptions:
    """Options of KERPLE (arXiv 2205.09921).

    Attributes:
      bidirectional: None follows the model (causal -> ``max(i - j, 0)``); True uses ``|i - j|``.
      per_layer: one parameter set per layer (as the reference code, default) or one shared.
      r1_init, r2_init: ``(low, high)`` of the uniform inits; None takes the reference inits
        (log: r1 ~ U(0, 2), r2 ~ U(0, 1); power: r1 ~ U(0, 1), r2 ~ U(0, 2)).
      learned: train r1, r2 (True) or keep them fixed.
    """

    bidirectional: bool | None = None
    per_layer: bool = True
    r1_init: tuple[float, float] | None = None
    r2_init: tuple[float, float] | None = None
    learned: bool = True

    def __post_init__(self):
        for name in ("r1_init", "r2_init"):  # lists (from JSON) become hashable tuples
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))

    def validate(self, ctx: PEContext) -> None:
        for name in ("r1_init", "r2_init"):
            v = getattr(self, name)
            if v is not None and (len(v) != 2 or not v[0] <= v[1]):
                raise ValueError(f"KERPLE {name} must be a (low, high) pair, got {v!r}")


class _Kerple(PositionalEncoding):
    is_relative = True
    default_r1: tuple[float, float] = (0.0, 1.0)
    default_r2: tuple[float, float] = (0.0, 1.0)

    def __init__(self, options: KerpleOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require(self.name, "num_heads")
        lo1, hi1 = options.r1_init or self.default_r1
        lo2, hi2 = options.r2_init or self.default_r2
        k1, k2 = jax.random.split(rngs.params())
        r1 = jax.random.uniform(k1, (ctx.num_heads,), jnp.float32, lo1, hi1)
        r2 = jax.random.uniform(k2, (ctx.num_heads,), jnp.float32, lo2, hi2)
        wrap = nnx.Param if options.learned else nnx.Variable
        self.r1, self.r2 = wrap(r1), wrap(r2)

    @property
    def causal(self) -> bool:
        b = self.options.bidirectional
        return self.ctx.causal if b is None else not b


@register("kerple_log", options=KerpleOptions,
          paper="Chi et al., KERPLE, arXiv 2205.09921 (logarithmic variant)")
class KerpleLog(_Kerple):
    """Bias ``-r1 log(1 + r2 (i - j))`` per head (hook ``bias``); relative."""

    default_r1 = (0.0, 2.0)
    default_r2 = (0.0, 1.0)

    def bias(self, q_pos, k_pos):
        return kerple_log_bias(self.r1[...], self.r2[...], q_pos, k_pos, causal=self.causal)


@register("kerple_power", options=KerpleOptions,
          paper="Chi et al., KERPLE, arXiv 2205.09921 (power variant)")
class KerplePower(_Kerple):
    """Bias ``-r1 (i - j)^r2`` per head, 0 < r2 <= 2 (hook ``bias``); relative."""

    default_r1 = (0.0, 1.0)
    default_r2 = (0.0, 2.0)

    def bias(self, q_pos, k_pos):
        return kerple_power_bias(self.r1[...], self.r2[...], q_pos, k_pos, causal=self.causal)
