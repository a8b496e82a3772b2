"""T5 relative position bias (Raffel et al., arXiv 1910.10683): a learned scalar per head and
per log-spaced bucket of the offset r = j - i (key minus query)."""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register


def t5_bucket(relative_position: jax.Array, *, bidirectional: bool = True, num_buckets: int = 32,
              max_distance: int = 128) -> jax.Array:
    """Bucket index of each offset ``r = j - i`` (same integers as the T5 reference).

    Bidirectional: half the buckets for r <= 0 and half (offset by B/2) for r > 0; causal: all
    future keys in bucket 0. Within a side, offsets below B/4 (B/2 causal) get their own bucket,
    larger ones share log-spaced buckets up to ``max_distance``.
    """
    if num_buckets < 2 or (bidirectional and num_buckets % 2):
        raise ValueError(f"num_buckets must be >= 2 (and even when bidirectional), got {num_buckets}")
    if max_distance <= 0:
        raise ValueError(f"max_distance must be positive, got {max_distance}")
    n = -jnp.asarray(relative_position, jnp.int32)
    ret = jnp.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        ret = ret + (n < 0).astype(jnp.int32) * num_buckets
        n = jnp.abs(n)
    else:
        n = jnp.maximum(n, 0)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    ratio = jnp.log(jnp.maximum(n, 1).astype(jnp.float32) / max_exact) / math.log(max_distance / max_exact)
    large = max_exact + (ratio * (num_buckets - max_exact)).astype(jnp.int32)
    large = jnp.minimum(large, num_buckets - 1)
    return ret + jnp.where(is_small, n, large)


@dataclasses.dataclass(frozen=True)
class T5Options:
    """Options of the T5 bias (arXiv 1910.10683). ``bidirectional=None`` follows the model;
    the table is shared across layers unless ``per_layer``; ``no_scale`` drops 1/sqrt(d_h)."""

    num_buckets: int = 32
    max_distance: int = 128
    bidirectional: bool | None = None
    per_layer: bool = False
    no_scale: bool = False
    init_std: float = 0.02

    def validate(self, ctx: PEContext) -> None:
        bidir = (not ctx.causal) if self.bidirectional is None else self.bidirectional
        if self.num_buckets < 2 or (bidir and self.num_buckets % 2):
            raise ValueError(f"T5 num_buckets must be >= 2 (even when bidirectional), got {self.num_buckets}")
        if self.max_distance <= 0:
            raise ValueError(f"T5 max_distance must be positive, got {self.max_distance}")
        if self.init_std < 0:
            raise ValueError(f"T5 init_std must be >= 0, got {self.init_std}")


@register("t5", options=T5Options, paper="Raffel et al., T5, arXiv 1910.10683")
class T5Bias(PositionalEncoding):
    """Learned bucketed relative bias (hook ``bias``); relative."""

    is_relative = True

    def __init__(self, options: T5Options, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("t5", "num_heads")
        self.bucket_table = nnx.Param(options.init_std * jax.random.normal(
            rngs.params(), (options.num_buckets, ctx.num_heads), jnp.float32))

    @property
    def bidirectional(self) -> bool:
        b = self.options.bidirectional
        return (not self.ctx.causal) if b is None else b

    def attention_scale(self, head_dim: int) -> float:
        return 1.0 if self.options.no_scale else super().attention_scale(head_dim)

    def bias(self, q_pos, k_pos):
        rel = jnp.asarray(k_pos)[..., None, :] - jnp.asarray(q_pos)[..., :, None]
        buckets = t5_bucket(rel, bidirectional=self.bidirectional,
                            num_buckets=self.options.num_buckets,
                            max_distance=self.options.max_distance)
        values = jnp.take(self.bucket_table[...], buckets, axis=0)  # [..., Tq, Tk, H]
        return jnp.moveaxis(values, -1, -3)
