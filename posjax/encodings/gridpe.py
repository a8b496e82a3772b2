"""GridPE: grid-cell-inspired Fourier position encoding (Li et al., "GridPE: Unifying Positional
Encoding in Transformers with a Grid Cell-Inspired Framework", arXiv 2406.07049).

A position x in R^n is encoded by the phases exp(i kappa . x) of wave vectors
kappa_{m,a} = omega_m u_a: per scale m, the n + 1 unit directions u_a of a regular simplex (3 at
120 degrees in 2-D, {+1, -1} in 1-D), with geometric scales omega_m = omega_0 rho^(-m). Applied
like RoPE (each rotary pair of q and k is rotated by kappa . x), so q.k depends only on x - y; in
1-D it is RoPE with frequencies +-omega_m.

The optimal ratio rho for general n is to confirm from the paper; the default e^(1/n) gives the
grid-cell value sqrt(e) in 2-D. Option ``scale_ratio``.
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
from posjax.encodings.rope import rotary_dim, rotate_pairs


def simplex_directions(n: int) -> np.ndarray:
    """The n + 1 unit vertices ``[n + 1, n]`` of a regular simplex centred at 0 (pairwise cosine
    -1/n): ±1 for n = 1, three directions at 120 degrees for n = 2."""
    if n < 1:
        raise ValueError(f"simplex dimension must be >= 1, got {n}")
    centred = np.eye(n + 1) - 1.0 / (n + 1)
    # The centred vertices span an n-dim subspace; express them in an orthonormal basis of it.
    _, _, vt = np.linalg.svd(centred)
    coords = centred @ vt[:n].T
    coords /= np.linalg.norm(coords, axis=1, keepdims=True)
    # Fix the orientation (the SVD's is arbitrary): a Householder reflection maps the first
    # direction onto e_0.
    e0 = np.zeros(n)
    e0[0] = 1.0
    v = coords[0] - e0
    if np.linalg.norm(v) > 1e-12:
        coords = coords @ (np.eye(n) - 2.0 * np.outer(v, v) / (v @ v)).T
    return coords


def grid_wave_vectors(rot_dim: int, n: int, *, max_frequency: float = 1.0,
                      scale_ratio: float | None = None) -> jax.Array:
    """Wave vectors ``[rot_dim // 2, n]``: scale-major, direction-minor.

    Pairs beyond ``num_scales * (n + 1)`` get the zero vector (not rotated).
    """
    pairs = rot_dim // 2
    dirs = simplex_directions(n)
    rho = math.exp(1.0 / n) if scale_ratio is None else scale_ratio
    scales = pairs // (n + 1)
    if scales == 0:
        raise ValueError(f"GridPE needs at least {n + 1} rotary pairs for n={n}, got {pairs}")
    omega = max_frequency * rho ** (-np.arange(scales, dtype=np.float64))
    vecs = (omega[:, None, None] * dirs[None]).reshape(-1, n)
    out = np.zeros((pairs, n))
    out[: len(vecs)] = vecs
    return jnp.asarray(out, jnp.float32)


def apply_gridpe(x: jax.Array, positions: jax.Array, wave_vectors: jax.Array, *,
                 interleaved: bool = False) -> jax.Array:
    """Rotate pair k of ``x [..., T, H, d_h]`` by ``kappa_k . pos`` with ``positions [..., T, n]``.

    The first ``2 * wave_vectors.shape[0]`` dims are rotated, the rest pass through.
    """
    rot = 2 * wave_vectors.shape[0]
    angles = jnp.asarray(positions, jnp.float32) @ wave_vectors.T  # [..., T, rot/2]
    rotated = rotate_pairs(x[..., :rot], angles[..., :, None, :], interleaved=interleaved)
    return jnp.concatenate([rotated, x[..., rot:]], axis=-1)


@dataclasses.dataclass(frozen=True)
class GridPEOptions:
    """Options of GridPE (arXiv 2406.07049).

    Attributes:
      dims: n, the dimension of positions (1 for sequences, 2 for image grids).
      scale_ratio: rho; None uses e^(1/n) (to confirm from the paper).
      max_frequency: omega_0 of the finest scale (1, like RoPE's theta_0).
      grid: for n >= 2, the grid shape used to unravel flat integer positions ``[..., T]`` into
        coordinates (row-major); positions given as ``[..., T, n]`` need no grid.
      rotary_fraction: fraction of head dims rotated.
      interleaved: pairing convention (False: half-split, the RoPE default).
    """

    dims: int = 1
    scale_ratio: float | None = None
    max_frequency: float = 1.0
    grid: tuple[int, ...] | None = None
    rotary_fraction: float = 1.0
    interleaved: bool = False

    def __post_init__(self):
        if self.grid is not None:  # lists (from JSON) become a hashable tuple
            object.__setattr__(self, "grid", tuple(self.grid))

    def validate(self, ctx: PEContext) -> None:
        if self.dims < 1:
            raise ValueError(f"GridPE dims must be >= 1, got {self.dims}")
        if self.scale_ratio is not None and self.scale_ratio <= 1.0:
            raise ValueError(f"GridPE scale_ratio must be > 1, got {self.scale_ratio}")
        if self.max_frequency <= 0:
            raise ValueError(f"GridPE max_frequency must be > 0, got {self.max_frequency}")
        if self.grid is not None and len(self.grid) != self.dims:
            raise ValueError(f"GridPE grid {self.grid!r} must have dims={self.dims} entries")
        if ctx.head_dim is not None:
            pairs = rotary_dim(ctx.head_dim, self.rotary_fraction) // 2
            if pairs < self.dims + 1:
                raise ValueError(f"GridPE needs >= {self.dims + 1} rotary pairs, head_dim="
                                 f"{ctx.head_dim} gives {pairs}")


@register("gridpe", options=GridPEOptions,
          paper="Li et al., GridPE: grid cell-inspired positional encoding, arXiv 2406.07049")
class GridPE(PositionalEncoding):
    """Multi-scale simplex Fourier rotation of q and k (hook ``rotate``); relative in x - y."""

    is_relative = True

    def __init__(self, options: GridPEOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("gridpe", "head_dim")

    def wave_vectors(self) -> jax.Array:
        o = self.options
        return grid_wave_vectors(rotary_dim(self.ctx.head_dim, o.rotary_fraction), o.dims,
                                 max_frequency=o.max_frequency, scale_ratio=o.scale_ratio)

    def coordinates(self, positions: jax.Array) -> jax.Array:
        """Positions as ``[..., T, n]`` coordinates."""
        pos = jnp.asarray(positions)
        n = self.options.dims
        if n == 1:
            return pos[..., None]
        if pos.ndim >= 2 and pos.shape[-1] == n and self.options.grid is None:
            return pos
        if self.options.grid is None:
            raise ValueError(f"GridPE with dims={n} needs positions [..., T, {n}] or the grid "
                             "option to unravel flat positions")
        return jnp.stack(jnp.unravel_index(pos.astype(jnp.int32), tuple(self.options.grid)),
                         axis=-1)

    def rotate(self, q, k, q_pos, k_pos):
        w = self.wave_vectors()
        o = self.options
        return (apply_gridpe(q, self.coordinates(q_pos), w, interleaved=o.interleaved),
                apply_gridpe(k, self.coordinates(k_pos), w, interleaved=o.interleaved))
