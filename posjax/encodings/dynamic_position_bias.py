"""Dynamic position bias (DPB) of CrossFormer (Wang, Yao, Chen, Lin, Cai, He, Liu, "CrossFormer: A
Versatile Vision Transformer Hinging on Cross-scale Attention", ICLR 2022, arXiv 2108.00154,
Sec. 3.3).

The relative-position bias table of Swin is replaced by a small MLP of the offset, so any distance
(including ones never seen in training) gets a bias:

    b_h(i, j) = MLP(p_i - p_j)_h,
    MLP = [Linear -> LayerNorm -> ReLU] x depth -> Linear(-> H),

with hidden width ``D/4`` (the paper's Fig. 3: three fully connected layers, LayerNorm and ReLU
between them). For sequences the offset is one number (i - j); for image grids the paper feeds
(dx, dy). ``log_distance`` feeds ``sign(r) log(1 + |r|)`` instead of r (the x-transformers option
for long sequences). Relative: b depends on ``i - j`` only.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register


def dpb_offsets(q_positions: jax.Array, k_positions: jax.Array, *, log_distance: bool = False
                ) -> jax.Array:
    """MLP inputs ``[..., Tq, Tk]``: ``i - j`` or ``sign(i - j) log(1 + |i - j|)``."""
    dtype = jnp.promote_types(jnp.result_type(q_positions, k_positions), jnp.float32)
    rel = jnp.asarray(q_positions, dtype)[..., :, None] - jnp.asarray(k_positions, dtype)[..., None, :]
    return jnp.sign(rel) * jnp.log1p(jnp.abs(rel)) if log_distance else rel


@dataclasses.dataclass(frozen=True)
class DPBOptions:
    """Options of the dynamic position bias (arXiv 2108.00154, Sec. 3.3).

    Attributes:
      hidden: MLP width; None uses ``max(d_model // 4, 8)`` (the paper's D/4).
      depth: number of Linear-LayerNorm-ReLU layers before the output layer (2: three FC layers).
      log_distance: feed ``sign(r) log(1 + |r|)`` rather than the raw offset r.
      per_layer: one MLP per layer (False: one MLP shared by all layers).
    """

    hidden: int | None = None
    depth: int = 2
    log_distance: bool = False
    per_layer: bool = False

    def validate(self, ctx: PEContext) -> None:
        if self.hidden is not None and self.hidden <= 0:
            raise ValueError(f"dynamic_position_bias hidden must be positive, got {self.hidden}")
        if self.depth < 1:
            raise ValueError(f"dynamic_position_bias depth must be >= 1, got {self.depth}")


@register("dynamic_position_bias", options=DPBOptions,
          paper="Wang et al., CrossFormer (dynamic position bias), arXiv 2108.00154")
class DynamicPositionBias(PositionalEncoding):
    """MLP of the relative offset, one output per head (hook ``bias``); relative."""

    is_relative = True

    def __init__(self, options: DPBOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("dynamic_position_bias", "num_heads")
        hidden = options.hidden or max((ctx.d_model or 32) // 4, 8)
        widths = [1] + [hidden] * options.depth
        self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(widths, widths[1:])])
        self.norms = nnx.List([nnx.LayerNorm(hidden, rngs=rngs) for _ in range(options.depth)])
        self.out = nnx.Linear(hidden, ctx.num_heads, rngs=rngs)

    def mlp(self, r: jax.Array) -> jax.Array:
        """``[...] -> [..., H]``: the MLP applied to each offset."""
        h = r[..., None]
        for layer, norm in zip(self.layers, self.norms):
            h = jax.nn.relu(norm(layer(h)))
        return self.out(h)

    def bias(self, q_pos, k_pos):
        r = dpb_offsets(q_pos, k_pos, log_distance=self.options.log_distance)
        return jnp.moveaxis(self.mlp(r), -1, -3)  # [..., H, Tq, Tk]
