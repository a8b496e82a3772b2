"""Rotary position embedding (Su et al., "RoFormer", arXiv 2104.09864).

Each pair of coordinates of q and k is rotated by the angle ``p * theta_k``, so that
``<R_i q, R_j k> = q^T R_{j-i} k`` depends on positions only through ``j - i``.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register


def rotary_dim(head_dim: int, rotary_fraction: float = 1.0) -> int:
    """Number of rotated dims: ``2 * floor(f * d_h / 2)`` (GPT-NeoX ``rotary_pct``)."""
    if head_dim <= 0 or head_dim % 2:
        raise ValueError(f"RoPE needs a positive even head_dim, got {head_dim}")
    if not 0.0 < rotary_fraction <= 1.0:
        raise ValueError(f"rotary_fraction must be in (0, 1], got {rotary_fraction}")
    rot = 2 * int(rotary_fraction * head_dim // 2)
    if rot == 0:
        raise ValueError(f"rotary_fraction={rotary_fraction} rotates no dims of head_dim={head_dim}")
    return rot


def rope_frequencies(rot_dim: int, base: float = 10000.0, dtype=jnp.float32) -> jax.Array:
    """theta_k = base^(-2k/rot_dim), k = 0..rot_dim/2 - 1, as ``[rot_dim // 2]``."""
    k = jnp.arange(rot_dim // 2, dtype=dtype)
    return jnp.asarray(base, dtype) ** (-2.0 * k / rot_dim)


def rotate_pairs(x: jax.Array, angles: jax.Array, *, interleaved: bool) -> jax.Array:
    """Rotate the coordinate pairs of ``x [..., rot_dim]`` by ``angles [..., rot_dim // 2]``.

    Interleaved pairs are (x_2k, x_2k+1) (RoFormer); half-split pairs are (x_k, x_k+rot/2)
    (GPT-NeoX / LLaMA).
    """
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    if interleaved:
        pairs = x.reshape(*x.shape[:-1], -1, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        return jnp.stack([a * cos - b * sin, a * sin + b * cos], axis=-1).reshape(x.shape)
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return jnp.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def apply_rope(x: jax.Array, positions: jax.Array, *, base: float = 10000.0,
               rotary_fraction: float = 1.0, interleaved: bool = False,
               frequencies: jax.Array | None = None, position_scale: float = 1.0) -> jax.Array:
    """Apply RoPE to ``x [..., seq, heads, head_dim]`` at ``positions [..., seq]``.

    Args:
      x: queries or keys.
      positions: integer or float positions, broadcastable to ``x.shape[:-2]``.
      base: frequency base (10^4 in RoFormer).
      rotary_fraction: fraction of head dims rotated; the rest pass through.
      interleaved: pairing convention: False (default, as :class:`RoPEOptions` and Llama-family
        checkpoints): half-split pairs (k, k + rot/2); True: RoFormer's adjacent pairs (2k, 2k+1).
      frequencies: optional ``[rot_dim // 2]`` override (context-extension variants).
      position_scale: multiplies positions (linear position interpolation uses 1/s).

    Returns:
      Array of x's shape and dtype; norm-preserving per head.
    """
    head_dim = x.shape[-1]
    rot = rotary_dim(head_dim, rotary_fraction)
    # angles in float32, or float64 when x is float64 (exact relative tests)
    dtype = jnp.promote_types(x.dtype, jnp.float32)
    theta = rope_frequencies(rot, base, dtype) if frequencies is None else jnp.asarray(frequencies, dtype)
    if theta.shape != (rot // 2,):
        raise ValueError(f"frequencies must have shape ({rot // 2},), got {theta.shape}")
    pos = jnp.asarray(positions, dtype) * position_scale
    angles = pos[..., :, None, None] * theta  # [..., seq, 1, rot/2]
    rotated = rotate_pairs(x[..., :rot], angles, interleaved=interleaved)
    if rot == head_dim:
        return rotated
    return jnp.concatenate([rotated, x[..., rot:]], axis=-1)


@dataclasses.dataclass(frozen=True)
class RoPEOptions:
    """Options of RoPE (arXiv 2104.09864).

    ``interleaved=False`` (half-split, the LLaMA/HF convention) is the standard default;
    ``interleaved=True`` is RoFormer's and Paper A's. ``num_rotary_heads`` rotates only the first
    k heads (partial-head RoPE of arXiv 2505.13027); None rotates all.
    """

    base: float = 10000.0
    rotary_fraction: float = 1.0
    interleaved: bool = False
    num_rotary_heads: int | None = None

    def validate(self, ctx: PEContext) -> None:
        if self.base <= 1.0:
            raise ValueError(f"RoPE base must be > 1, got {self.base}")
        if not 0.0 < self.rotary_fraction <= 1.0:
            raise ValueError(f"RoPE rotary_fraction must be in (0, 1], got {self.rotary_fraction}")
        if ctx.head_dim is not None:
            if ctx.head_dim % 2:
                raise ValueError(f"RoPE needs an even head_dim, got head_dim={ctx.head_dim}")
            rotary_dim(ctx.head_dim, self.rotary_fraction)
        if self.num_rotary_heads is not None:
            if self.num_rotary_heads < 0 or (ctx.num_heads is not None
                                             and self.num_rotary_heads > ctx.num_heads):
                raise ValueError(f"num_rotary_heads={self.num_rotary_heads} is outside "
                                 f"[0, num_heads={ctx.num_heads}]")


@register("rope", options=RoPEOptions, paper="Su et al., RoFormer, arXiv 2104.09864")
class RoPE(PositionalEncoding):
    """Rotates q and k (hook ``rotate``); relative: q.k depends only on j - i."""

    is_relative = True

    def __init__(self, options: RoPEOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("rope", "head_dim")

    def frequencies(self) -> jax.Array:
        """The rotary frequencies ``[rot_dim // 2]`` (subclasses rescale them)."""
        return rope_frequencies(rotary_dim(self.ctx.head_dim, self.options.rotary_fraction),
                                self.options.base)

    def _apply(self, x: jax.Array, positions: jax.Array) -> jax.Array:
        o = self.options
        out = apply_rope(x, positions, rotary_fraction=o.rotary_fraction,
                         interleaved=o.interleaved, frequencies=self.frequencies())
        if o.num_rotary_heads is None:
            return out
        heads = jnp.arange(x.shape[-2]) < o.num_rotary_heads
        return jnp.where(heads[:, None], out, x)

    def rotate(self, q, k, q_pos, k_pos):
        return self._apply(q, q_pos), self._apply(k, k_pos)
