"""Positional encodings on a 2-D grid of tokens (row-major flat positions p = r * W + c).

* ``sinusoidal2d``: the ground-truth 2-D sinusoid of arXiv 2406.08272: the
  first d/2 dims are a 1-D sinusoid of the column c, the last d/2 the same of the row r.
* ``rope2d_axial``: axial 2-D RoPE (Heo et al., *Rotary Position Embedding for Vision
  Transformer*, arXiv 2403.13298): the first half of the rotary dims rotates with the column,
  the second half with the row, each half with its own frequencies over d_rot/2.

Positions stay explicit flat indices ``[B or 1, T]`` (the model contract); each PE derives
(r, c) = divmod(p, grid_width) from its ``grid_width`` option.
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register
from posjax.encodings.rope import rope_frequencies, rope_tables, rotary_dim, rotate_pairs_by
from posjax.encodings.sinusoidal import sinusoidal_at


def grid_coordinates(positions: jax.Array, grid_width: int) -> tuple[jax.Array, jax.Array]:
    """Row and column ``(r, c)`` of flat row-major positions ``p = r * grid_width + c``."""
    if grid_width <= 0:
        raise ValueError(f"grid_width must be positive, got {grid_width}")
    if not isinstance(positions, np.ndarray):  # host positions stay NumPy (static tables)
        positions = jnp.asarray(positions)
    return positions // grid_width, positions % grid_width


def sinusoidal_2d_at(rows: jax.Array, cols: jax.Array, dim: int, base: float = 10000.0
                     ) -> jax.Array:
    """2-D sinusoid ``[..., dim]`` at grid coordinates (arXiv 2406.08272).

    With w_k = base^(-2k/(dim/2)), k = 0..dim/4 - 1:
    PE[2k] = sin(c w_k), PE[2k+1] = cos(c w_k), PE[dim/2 + 2k] = sin(r w_k),
    PE[dim/2 + 2k + 1] = cos(r w_k).

    Args:
      rows, cols: broadcastable integer (or float) coordinates.
      dim: embedding width, divisible by 4.
      base: frequency base.
    """
    if dim <= 0 or dim % 4:
        raise ValueError(f"the 2-D sinusoidal PE needs a positive dim divisible by 4, got {dim}")
    rows, cols = jnp.broadcast_arrays(jnp.asarray(rows), jnp.asarray(cols))
    return jnp.concatenate([sinusoidal_at(cols, dim // 2, base),
                            sinusoidal_at(rows, dim // 2, base)], axis=-1)


def sinusoidal_2d(height: int, width: int, dim: int, base: float = 10000.0) -> jax.Array:
    """2-D sinusoid table ``[height * width, dim]`` in row-major order."""
    r, c = grid_coordinates(jnp.arange(height * width), width)
    return sinusoidal_2d_at(r, c, dim, base)


def rope_2d_tables(rows, cols, rot: int, base: float = 10000.0, *, dtype=jnp.float32):
    """``(col_tables, row_tables)`` of axial 2-D RoPE with ``rot`` rotated dims: each the
    :func:`posjax.encodings.rope.rope_tables` ``(cos, sin)`` ``[..., seq, rot / 4]`` of the
    column or row coordinate with theta_k = base^(-2k/(rot/2)) (exact float64 frequencies)."""
    theta = rope_frequencies(rot // 2, base, np.float64)
    return rope_tables(cols, theta, dtype=dtype), rope_tables(rows, theta, dtype=dtype)


def apply_rope_2d(x: jax.Array, rows: jax.Array, cols: jax.Array, *, base: float = 10000.0,
                  rotary_fraction: float = 1.0, interleaved: bool = False,
                  tables: tuple | None = None) -> jax.Array:
    """Axial 2-D RoPE on ``x [..., seq, heads, head_dim]`` (Heo et al., arXiv 2403.13298).

    The rotated dims d_rot = 2 floor(f d_h / 2) (a multiple of 4) are split in halves: the first
    half is rotated by c * theta_k, the second by r * theta_k, with theta_k = base^(-2k/(d_rot/2)),
    k = 0..d_rot/4 - 1. So <R(r1, c1) q, R(r2, c2) k> depends only on (r2 - r1, c2 - c1).

    Args:
      x: queries or keys.
      rows, cols: ``[..., seq]`` coordinates broadcastable to ``x.shape[:-2]``.
      base: frequency base.
      rotary_fraction: fraction of head dims rotated; the rest pass through.
      interleaved: pairing inside each half ((2k, 2k+1) if True, else (k, k + d_rot/4)).
      tables: optional ``(col_tables, row_tables)``, each the :func:`rope_tables` ``(cos, sin)``
        of these coordinates (from :func:`rope_2d_tables`); rows and cols are then not read.
    """
    head_dim = x.shape[-1]
    rot = rotary_dim(head_dim, rotary_fraction)
    if rot % 4:
        raise ValueError(f"axial 2-D RoPE needs a rotary dim divisible by 4, got {rot} "
                         f"(head_dim={head_dim}, rotary_fraction={rotary_fraction})")
    half = rot // 2
    if tables is None:
        dtype = jnp.promote_types(x.dtype, jnp.float32)  # float64 angles under x64
        tables = rope_2d_tables(rows, cols, rot, base, dtype=dtype)
    (cos_c, sin_c), (cos_r, sin_r) = tables
    h = (..., slice(None), None, slice(None))  # [..., seq, n] -> [..., seq, 1, n]
    parts = [rotate_pairs_by(x[..., :half], cos_c[h], sin_c[h], interleaved=interleaved),
             rotate_pairs_by(x[..., half:rot], cos_r[h], sin_r[h], interleaved=interleaved)]
    if rot < head_dim:
        parts.append(x[..., rot:])
    return jnp.concatenate(parts, axis=-1)


def _grid_width(options, ctx: PEContext, name: str) -> int:
    if options.grid_width is not None:
        return options.grid_width
    if ctx.max_len is not None and math.isqrt(ctx.max_len) ** 2 == ctx.max_len:
        return math.isqrt(ctx.max_len)
    raise ValueError(f"PE '{name}' needs the option grid_width (or a square max_len, got "
                     f"{ctx.max_len})")


def _check_width(width: int | None) -> None:
    if width is not None and width <= 0:
        raise ValueError(f"grid_width must be positive, got {width}")


@dataclasses.dataclass(frozen=True)
class Sinusoidal2DOptions:
    """Options of the 2-D sinusoid. ``grid_width`` None: sqrt(max_len) for a square max_len."""

    grid_width: int | None = None
    base: float = 10000.0
    scale: float = 1.0

    def validate(self, ctx: PEContext) -> None:
        _check_width(self.grid_width)
        if self.base <= 1.0:
            raise ValueError(f"sinusoidal2d base must be > 1, got {self.base}")
        if ctx.d_model is not None and ctx.d_model % 4:
            raise ValueError(f"sinusoidal2d needs d_model divisible by 4, got {ctx.d_model}")


@register("sinusoidal2d", options=Sinusoidal2DOptions,
          paper="2-D sinusoid, ground truth of arXiv 2406.08272 (LST)")
class Sinusoidal2D(PositionalEncoding):
    """Fixed 2-D sinusoid added to the input embeddings (hook ``embed``)."""

    is_relative = False

    def __init__(self, options: Sinusoidal2DOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("sinusoidal2d", "d_model")
        self.grid_width = _grid_width(options, ctx, "sinusoidal2d")

    def table(self, positions: jax.Array) -> jax.Array:
        r, c = grid_coordinates(positions, self.grid_width)
        return self.options.scale * sinusoidal_2d_at(r, c, self.ctx.d_model, self.options.base)

    def embed(self, x, positions, *, deterministic=True, rngs=None):
        return x + self.table(positions).astype(x.dtype)


@dataclasses.dataclass(frozen=True)
class Rope2DOptions:
    """Options of axial 2-D RoPE. The image-grid default base is to confirm from arXiv
    2403.13298 (its code uses 100); 10^4 here, recorded in results."""

    grid_width: int | None = None
    base: float = 10000.0
    rotary_fraction: float = 1.0
    interleaved: bool = False

    def validate(self, ctx: PEContext) -> None:
        _check_width(self.grid_width)
        if self.base <= 1.0:
            raise ValueError(f"rope2d_axial base must be > 1, got {self.base}")
        if ctx.head_dim is not None:
            rot = rotary_dim(ctx.head_dim, self.rotary_fraction)
            if rot % 4:
                raise ValueError(f"rope2d_axial needs a rotary dim divisible by 4, got {rot} "
                                 f"(head_dim={ctx.head_dim})")


@register("rope2d_axial", options=Rope2DOptions,
          paper="Heo et al., Rotary Position Embedding for Vision Transformer, arXiv 2403.13298")
class Rope2DAxial(PositionalEncoding):
    """Axial 2-D RoPE (hook ``rotate``); relative along each grid axis."""

    is_relative = True
    # one grid row wider than every probed position: a flat shift is then a column shift
    probe_options = {"grid_width": 64}

    def __init__(self, options: Rope2DOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("rope2d_axial", "head_dim")
        self.grid_width = _grid_width(options, ctx, "rope2d_axial")

    def prepare(self, q_pos, k_pos):
        """``(q_tables, k_tables)`` of :func:`rope_2d_tables` (one when ``k_pos is q_pos``)."""
        o = self.options
        rot = rotary_dim(self.ctx.head_dim, o.rotary_fraction)
        dtype = jax.dtypes.canonicalize_dtype(jnp.float64)  # float64 tables under x64
        make = lambda p: rope_2d_tables(*grid_coordinates(p, self.grid_width), rot, o.base,
                                        dtype=dtype)
        q_tables = make(q_pos)
        return q_tables, (q_tables if k_pos is q_pos else make(k_pos))

    def rotate(self, q, k, q_pos, k_pos):
        return self.rotate_prepared(q, k, q_pos, k_pos, self.prepare(q_pos, k_pos))

    def rotate_prepared(self, q, k, q_pos, k_pos, prepared):
        o = self.options
        apply = lambda x, t: apply_rope_2d(x, None, None, rotary_fraction=o.rotary_fraction,
                                           interleaved=o.interleaved, tables=t)
        return apply(q, prepared[0]), apply(k, prepared[1])
