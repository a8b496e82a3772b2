"""xPos: RoPE with an exponential decay per rotary pair (Sun et al., "A Length-Extrapolatable
Transformer", arXiv 2212.10554).

Pair k of the rotary dims gets the scale zeta_k = (2k/d_rot + gamma) / (1 + gamma); queries are
multiplied by zeta^(n/B) and keys by zeta^(-m/B), so the logit of pair k carries the factor
zeta_k^((n - m)/B) <= 1 for n >= m: a relative decay on top of RoPE's relative rotation.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext
from posjax.encodings.registry import register
from posjax.encodings.rope import RoPE, RoPEOptions, rotary_dim


def xpos_zeta(rot_dim: int, gamma: float = 0.4) -> jax.Array:
    """Per-pair decay bases ``[rot_dim // 2]``: zeta_k = (2k/d_rot + gamma) / (1 + gamma).

    Golden (arXiv 2212.10554): d_rot = 8 -> (0.285714, 0.464286, 0.642857, 0.821429).
    """
    if rot_dim <= 0 or rot_dim % 2:
        raise ValueError(f"xPos needs a positive even rotary dim, got {rot_dim}")
    if gamma <= 0:
        raise ValueError(f"xPos gamma must be > 0, got {gamma}")
    k = jnp.arange(rot_dim // 2, dtype=jnp.float32)
    return (2.0 * k / rot_dim + gamma) / (1.0 + gamma)


def xpos_scale(positions: jax.Array, zeta: jax.Array, *, scale_base: float, interleaved: bool,
               sign: float) -> jax.Array:
    """Scale factors ``[..., seq, 1, rot_dim]`` = zeta^(sign * p / B), expanded to the pairing.

    Args:
      positions: ``[..., seq]`` (already offset by the centring constant).
      zeta: ``[rot_dim // 2]`` from :func:`xpos_zeta`.
      scale_base: B (512 in the paper).
      interleaved: pairing of :func:`posjax.encodings.rotate_pairs` (both coordinates of a pair
        share the pair's scale).
      sign: +1 for queries, -1 for keys.
    """
    p = jnp.asarray(positions, jnp.float32)[..., :, None, None]
    per_pair = zeta ** (sign * p / scale_base)  # [..., seq, 1, rot/2]
    if interleaved:
        return jnp.repeat(per_pair, 2, axis=-1)
    return jnp.concatenate([per_pair, per_pair], axis=-1)


@dataclasses.dataclass(frozen=True)
class XPosOptions(RoPEOptions):
    """Options of xPos (arXiv 2212.10554), on top of RoPE's.

    Attributes:
      gamma: the zeta offset (0.4 in the paper).
      scale_base: B (512).
      position_offset: constant subtracted from positions before the decay, for numerical range
        (the logits do not depend on it); None centres at ``max_len / 2`` like x-transformers
        (0 when the model length is unknown).

    xPos is meant for causal models: for a key after the query (m > n) the factor
    zeta^((n-m)/B) exceeds 1 and grows with m - n. It is not refused in a bidirectional model
    (every registered PE builds with its defaults), but the decay then only holds for past keys.
    """

    gamma: float = 0.4
    scale_base: float = 512.0
    position_offset: float | None = None

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if self.gamma <= 0:
            raise ValueError(f"xPos gamma must be > 0, got {self.gamma}")
        if self.scale_base <= 0:
            raise ValueError(f"xPos scale_base must be > 0, got {self.scale_base}")


@register("xpos", options=XPosOptions,
          paper="Sun et al., A Length-Extrapolatable Transformer, arXiv 2212.10554")
class XPos(RoPE):
    """RoPE times zeta^(n/B) on queries and zeta^(-m/B) on keys (hook ``rotate``); relative.

    ``<q'_n, k'_m> = sum_k zeta_k^((n-m)/B) * (rotary term of pair k)``: a function of n - m only.
    Dims beyond the rotary fraction and heads beyond ``num_rotary_heads`` are left untouched.
    """

    def __init__(self, options: XPosOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx, rngs=rngs)

    @property
    def offset(self) -> float:
        o = self.options
        if o.position_offset is not None:
            return float(o.position_offset)
        return 0.5 * self.ctx.max_len if self.ctx.max_len else 0.0

    def _decay(self, x: jax.Array, positions: jax.Array, sign: float) -> jax.Array:
        o = self.options
        rot = rotary_dim(x.shape[-1], o.rotary_fraction)
        zeta = xpos_zeta(rot, o.gamma)
        pos = jnp.asarray(positions, jnp.float32) - self.offset
        scale = xpos_scale(pos, zeta, scale_base=o.scale_base, interleaved=o.interleaved,
                           sign=sign).astype(x.dtype)
        scaled = jnp.concatenate([x[..., :rot] * scale, x[..., rot:]], axis=-1)
        if o.num_rotary_heads is None:
            return scaled
        heads = jnp.arange(x.shape[-2]) < o.num_rotary_heads
        return jnp.where(heads[:, None], scaled, x)

    def rotate_prepared(self, q, k, q_pos, k_pos, prepared):
        q, k = super().rotate_prepared(q, k, q_pos, k_pos, prepared)
        return self._decay(q, q_pos, 1.0), self._decay(k, k_pos, -1.0)
