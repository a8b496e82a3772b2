"""Learned absolute PE that extends beyond its table by linear interpolation (arXiv
1706.03762, ``beyond="interpolate"``; ViT/CLIP practice for grids, here 1-D).

For a sequence whose positions reach L_new > n (the table size), the rows are resampled at the
fractional index p (n - 1) / (L_new - 1) with linear interpolation, so the whole table is
stretched over the longer sequence. ``beyond="clamp"`` repeats the last row instead. Within the
table, it is exactly the learned PE (Devlin et al., BERT, arXiv 1810.04805).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext
from posjax.encodings.learned import Learned, LearnedOptions
from posjax.encodings.registry import register


def interpolate_rows(table: jax.Array, index: jax.Array) -> jax.Array:
    """Linear interpolation of ``table [n, d]`` at fractional row indices ``index [...]`` (clipped
    to [0, n - 1]); returns ``[..., d]``."""
    n = table.shape[0]
    x = jnp.clip(jnp.asarray(index, jnp.float32), 0.0, n - 1.0)
    lo = jnp.floor(x).astype(jnp.int32)
    hi = jnp.minimum(lo + 1, n - 1)
    w = (x - lo)[..., None]
    return (1.0 - w) * jnp.take(table, lo, axis=0) + w * jnp.take(table, hi, axis=0)


def stretched_index(positions: jax.Array, num_rows: int) -> jax.Array:
    """Fractional row index of each position: p when every position fits the table, else
    p (n - 1) / (L_new - 1) with L_new = max position + 1 (over the whole array)."""
    p = jnp.asarray(positions, jnp.float32)
    new_len = jnp.max(p) + 1.0
    stretch = jnp.where(new_len > num_rows, (num_rows - 1.0) / jnp.maximum(new_len - 1.0, 1.0), 1.0)
    return p * stretch


@dataclasses.dataclass(frozen=True)
class LearnedInterpolatedOptions(LearnedOptions):
    """Learned-PE options plus ``beyond`` ("interpolate", default, or "clamp")."""

    beyond: str = "interpolate"

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if self.beyond not in ("interpolate", "clamp"):
            raise ValueError(f"learned_interpolated beyond must be 'interpolate' or 'clamp', got "
                             f"{self.beyond!r}")


@register("learned_interpolated", options=LearnedInterpolatedOptions,
          paper="Learned absolute PE (Devlin et al., arXiv 1810.04805) with linear "
                "interpolation beyond the table (ViT/CLIP practice)")
class LearnedInterpolated(Learned):
    """Trainable table; longer sequences resample it (hook ``embed``); absolute. Any position
    is accepted (``max_positions`` is None)."""

    def __init__(self, options: LearnedInterpolatedOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx, rngs=rngs)

    @property
    def num_rows(self) -> int:
        return int(self.embedding.shape[0])

    @property
    def max_positions(self) -> None:
        return None

    def table(self, positions):
        pos = jnp.asarray(positions)
        if pos.size and not isinstance(pos, jax.core.Tracer) and int(jnp.min(pos)) < 0:
            raise ValueError("learned_interpolated positions must be >= 0")
        table = self.embedding[...]
        if self.options.beyond == "clamp":
            return interpolate_rows(table, jnp.minimum(pos, self.num_rows - 1))
        return interpolate_rows(table, stretched_index(pos, self.num_rows))

    def embed(self, x, positions, *, deterministic=True, rngs=None):
        return x + self.table(positions).astype(x.dtype)
