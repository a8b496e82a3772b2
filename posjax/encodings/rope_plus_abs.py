"""``rope_plus_abs``: RoPE on q and k *plus* an absolute sinusoid added to the input embeddings.

The absolute part is the block-layout sinusoid ``[sin(p w) | cos(p w)]``, ``w_i = base^(-2i/d_model)``.
This is the ``rope`` option of the code of arXiv 2505.13027 (*Deconstructing Positional
Information: From Attention Logits to Training Biases*); plain ``rope`` is the standard row.
Because of the additive sinusoid the PE is absolute (not shift-invariant).
"""
from __future__ import annotations

import dataclasses

import jax
from flax import nnx

from posjax.encodings.base import PEContext
from posjax.encodings.registry import register
from posjax.encodings.rope import RoPE, RoPEOptions
from posjax.encodings.sinusoidal import sinusoidal_at

PAPER_A = ("arXiv 2505.13027 (Deconstructing Positional Information: From Attention Logits to "
           "Training Biases)")


@dataclasses.dataclass(frozen=True)
class RoPEPlusAbsOptions(RoPEOptions):
    """Options of ``rope_plus_abs``: every RoPE option plus the absolute sinusoid's.

    ``interleaved`` defaults to True here (the original code's pairing). ``abs_layout="block"``
    is the original's [sin | cos] layout, ``abs_base`` its base, ``abs_scale`` multiplies it.
    """

    interleaved: bool = True
    abs_base: float = 10000.0
    abs_layout: str = "block"
    abs_scale: float = 1.0

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if self.abs_base <= 1.0:
            raise ValueError(f"rope_plus_abs abs_base must be > 1, got {self.abs_base}")
        if self.abs_layout not in ("interleaved", "block"):
            raise ValueError(f"abs_layout must be 'interleaved' or 'block', "
                             f"got {self.abs_layout!r}")
        if ctx.d_model is not None and ctx.d_model % 2:
            raise ValueError(f"rope_plus_abs needs an even d_model, got {ctx.d_model}")


@register("rope_plus_abs", options=RoPEPlusAbsOptions,
          paper=f"RoPE (arXiv 2104.09864) + absolute sinusoid, as in the code of {PAPER_A}")
class RoPEPlusAbs(RoPE):
    """RoPE on q, k (hook ``rotate``) and an absolute sinusoid added in ``embed``; not relative.

    ``table(positions) [n, d_model]`` is the additive part (for displacement probes).
    """

    is_relative = False

    def __init__(self, options: RoPEPlusAbsOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx, rngs=rngs)
        ctx.require("rope_plus_abs", "d_model")

    def table(self, positions: jax.Array) -> jax.Array:
        o = self.options
        return o.abs_scale * sinusoidal_at(positions, self.ctx.d_model, o.abs_base,
                                           layout=o.abs_layout)

    def embed(self, x, positions, *, deterministic=True, rngs=None):
        return x + self.table(positions).astype(x.dtype)
