"""Sinusoidal absolute PE (Vaswani et al., "Attention Is All You Need", arXiv 1706.03762)."""
from __future__ import annotations

import dataclasses
from typing import Literal

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding, check_table_length
from posjax.encodings.registry import register


def sinusoidal_frequencies(dim: int, base: float = 10000.0, *, freq_spacing: str = "2k/d",
                           dtype=jnp.float32) -> jax.Array:
    """Angular frequencies ``[dim // 2]``: w_k = base^(-2k/dim) (or base^(-k/(dim/2 - 1))),
    computed in ``dtype`` (``jnp.float64`` under ``jax.enable_x64`` for the geometry path)."""
    if dim <= 0 or dim % 2:
        raise ValueError(f"sinusoidal PE needs a positive even dim, got {dim}")
    k = jnp.arange(dim // 2, dtype=dtype)
    if freq_spacing == "2k/d":
        exponent = 2.0 * k / dim
    elif freq_spacing == "k/(d/2-1)":
        exponent = k / max(dim // 2 - 1, 1)
    else:
        raise ValueError(f"freq_spacing must be '2k/d' or 'k/(d/2-1)', got {freq_spacing!r}")
    return jnp.asarray(base, dtype) ** (-exponent)


def sinusoidal_at(positions: jax.Array, dim: int, base: float = 10000.0, *,
                  layout: str = "interleaved", freq_spacing: str = "2k/d",
                  dtype=jnp.float32) -> jax.Array:
    """Sinusoidal vectors at arbitrary (integer or continuous) positions.

    Args:
      positions: ``[...]`` positions.
      dim: even embedding width.
      base: frequency base (10^4 in the Transformer paper).
      layout: ``"interleaved"`` (PE[2k] = sin, PE[2k+1] = cos) or ``"block"`` ([sin | cos]).
      freq_spacing: ``"2k/d"`` (standard) or ``"k/(d/2-1)"`` (flax lm1b/wmt examples).
      dtype: dtype of the positions, frequencies and result (float32 for the model).

    Returns:
      ``[..., dim]`` in ``dtype``.
    """
    angles = jnp.asarray(positions, dtype)[..., None] * sinusoidal_frequencies(
        dim, base, freq_spacing=freq_spacing, dtype=dtype)
    sin, cos = jnp.sin(angles), jnp.cos(angles)
    if layout == "interleaved":
        return jnp.stack([sin, cos], axis=-1).reshape(*angles.shape[:-1], dim)
    if layout == "block":
        return jnp.concatenate([sin, cos], axis=-1)
    raise ValueError(f"layout must be 'interleaved' or 'block', got {layout!r}")


def sinusoidal(num_positions: int, dim: int, base: float = 10000.0) -> jax.Array:
    """Sinusoidal table ``[num_positions, dim]``: PE[i, 2k] = sin(i w_k), PE[i, 2k+1] = cos(i w_k).

    w_k = base^(-2k/dim) (Vaswani et al. 2017, arXiv 1706.03762).
    """
    if num_positions < 0:
        raise ValueError(f"num_positions must be >= 0, got {num_positions}")
    return sinusoidal_at(jnp.arange(num_positions), dim, base)


@dataclasses.dataclass(frozen=True)
class SinusoidalOptions:
    """Options of the sinusoidal PE (arXiv 1706.03762)."""

    base: float = 10000.0
    layout: Literal["interleaved", "block"] = "interleaved"
    freq_spacing: Literal["2k/d", "k/(d/2-1)"] = "2k/d"
    scale: float = 1.0
    bounded: bool = False  # True: refuse positions >= max_len like a table PE

    def validate(self, ctx: PEContext) -> None:
        if self.base <= 1.0:
            raise ValueError(f"sinusoidal base must be > 1, got {self.base}")
        if self.layout not in ("interleaved", "block"):
            raise ValueError(f"sinusoidal layout must be 'interleaved' or 'block', got {self.layout!r}")
        if self.freq_spacing not in ("2k/d", "k/(d/2-1)"):
            raise ValueError(f"unknown freq_spacing {self.freq_spacing!r}")
        if ctx.d_model is not None and ctx.d_model % 2:
            raise ValueError(f"sinusoidal PE needs an even d_model, got {ctx.d_model}")


@register("sinusoidal", options=SinusoidalOptions,
          paper="Vaswani et al., Attention Is All You Need, arXiv 1706.03762")
class Sinusoidal(PositionalEncoding):
    """Fixed sinusoidal PE added to the input embeddings. No parameters; any position."""

    is_relative = False

    def __init__(self, options: SinusoidalOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("sinusoidal", "d_model")

    @property
    def max_positions(self) -> int | None:
        return self.ctx.max_len if self.options.bounded else None

    def table(self, positions: jax.Array) -> jax.Array:
        o = self.options
        return o.scale * sinusoidal_at(positions, self.ctx.d_model, o.base, layout=o.layout,
                                       freq_spacing=o.freq_spacing)

    def embed(self, x, positions, *, deterministic=True, rngs=None):
        if self.max_positions is not None:
            check_table_length(self.name, positions, self.max_positions)
        return x + self.table(positions).astype(x.dtype)
