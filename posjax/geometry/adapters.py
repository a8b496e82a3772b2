"""Distances between positions from arrays: tables, coordinates, biases, orbits (docs/interpretations.md).

Every function returns an ``[n, n]`` matrix ``E`` of distances between positions, to compare with
the Hellinger matrix ``D`` (:func:`stress`). They take arrays (a table, coordinates, a bias, the
frequencies and per-plane weights of an orbit), never a positional encoding by name: the bridge
from a PE to these arrays is :mod:`posjax.analysis.encoding_geometry` (``encoding_distances``),
which sits above both ``posjax.encodings`` and ``posjax.geometry``.

* orbit: ``E^2 = sum_k c_k 4 sin^2(delta w_k / 2)`` (``delta = p_j - p_i``), averaged over rows of
  weights ``c`` (the sinusoidal table has ``c = 1``; RoPE's orbit of a unit vector ``c = 2/d_h``);
* bias PEs: ``E_ij = b(0) - b(i - j)`` clipped at 0 (reduces to ``m |i - j|`` for ALiBi);
* learned / MDS: Euclidean distances between table rows; NoPE: ``E = 0``.

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217 (stress of sinusoidal, learned and relative encodings).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from posjax.geometry.stress import pairwise_distances
from posjax.geometry.validation import as_float_array

__all__ = ["dist_mds", "dist_learned", "dist_bias", "dist_nope", "offset_distances",
           "orbit_distances", "check_positions"]


def check_positions(num_positions: int, positions: Any) -> jax.Array | None:
    """``positions`` as an ``[n]`` array (None stays None); ValueError naming a bad ``n`` or shape."""
    if num_positions <= 0:
        raise ValueError(f"num_positions must be positive, got {num_positions}")
    if positions is None:
        return None
    pos = jnp.asarray(positions)
    if pos.shape != (num_positions,):
        raise ValueError(f"positions must have shape ({num_positions},), got {pos.shape}")
    return pos


def offset_distances(num_positions: int, positions: jax.Array | None,
                     profile: Callable[[jax.Array], jax.Array]) -> jax.Array:
    """``E_ij = profile(|p_j - p_i|)``: a Toeplitz gather for ``arange`` positions, else direct."""
    if positions is None:
        prof = profile(jnp.arange(num_positions, dtype=jnp.result_type(float)))
        idx = jnp.abs(jnp.arange(num_positions)[:, None] - jnp.arange(num_positions)[None, :])
        return prof[idx]
    pos = positions.astype(jnp.result_type(float))
    return jax.lax.map(lambda p: profile(jnp.abs(pos - p)), pos)


def dist_mds(coords: Any) -> jax.Array:
    """``E_ij = ||x_i - x_j||`` for a configuration ``coords [n, k]`` (Algorithm 1)."""
    X = as_float_array(coords, "coords")
    return pairwise_distances(X[:, None] if X.ndim == 1 else X)


def dist_learned(table: Any, *, num_positions: int | None = None, ln: bool = False,
                 ln_scale: Any = None, ln_bias: Any = None, ln_eps: float = 1e-12) -> jax.Array:
    """Distances between the rows ``p_i`` of a learned (or any additive) PE table.

    Args:
      table: ``[L, d]`` table; the first ``num_positions`` rows are used (default all).
      num_positions: ``n <= L``.
      ln: apply a LayerNorm to each row first (BERT's embedding LayerNorm when ``ln_scale``,
        ``ln_bias``, ``ln_eps`` are the model's; ``ln_eps=1e-12`` is BERT's).
      ln_scale, ln_bias: optional ``[d]`` affine parameters of that LayerNorm.

    Returns:
      ``E [n, n]``.
    """
    T = as_float_array(table, "table", ndim=2)
    n = T.shape[0] if num_positions is None else num_positions
    if n > T.shape[0]:
        raise ValueError(f"num_positions={n} exceeds the {T.shape[0]} rows of the table")
    T = T[:n]
    if ln:
        T = _layer_norm(T, 1.0 if ln_scale is None else jnp.asarray(ln_scale),
                        0.0 if ln_bias is None else jnp.asarray(ln_bias), ln_eps)
    return pairwise_distances(T)


@jax.jit
def _layer_norm(T, scale, bias, eps):
    mu = jnp.mean(T, axis=1, keepdims=True)
    var = jnp.mean(jnp.square(T - mu), axis=1, keepdims=True)
    return (T - mu) / jnp.sqrt(var + eps) * scale + bias


def orbit_distances(num_positions: int, frequencies: Any, weights: Any = None, *,
                    positions: Any = None) -> jax.Array:
    """Distances on a torus orbit: ``E_ij = mean_s sqrt(sum_k c_sk 4 sin^2((p_j - p_i) w_k / 2))``.

    ``4 sin^2(a / 2) = (cos a - 1)^2 + sin^2 a`` is the squared chord of angle ``a``, so with one row
    of weights ``c = 1`` this is the distance between rows of the table ``[sin p w_k, cos p w_k]_k``
    (the sinusoidal PE, Vaswani et al., arXiv 1706.03762), and with ``c = 2/d_h`` the orbit
    ``||R_i u - R_j u||`` of a unit vector with equal energy per rotation plane (RoPE, Su et al.,
    arXiv 2104.09864).

    Args:
      num_positions: ``n``.
      frequencies: ``[K]`` angular frequencies ``w_k``.
      weights: ``[S, K]`` non-negative energies per plane; the distances of the ``S`` rows are
        averaged. None: one row of ones (the sinusoidal table).
      positions: optional ``[n]`` positions (default ``0..n-1``).

    Returns:
      ``E [n, n]`` in the dtype of ``frequencies``.
    """
    pos = check_positions(num_positions, positions)
    w = jnp.asarray(frequencies)
    if weights is None:
        if w.ndim != 1:
            raise ValueError(f"orbit_distances needs frequencies [K], got shape {w.shape}")
        return _unit_orbit(pos, w, n=num_positions)
    c = jnp.asarray(weights, w.dtype)
    if w.ndim != 1 or c.ndim != 2 or c.shape[1] != w.shape[0]:
        raise ValueError(f"orbit_distances needs frequencies [K] and weights [S, K], got shapes "
                         f"{w.shape} and {c.shape}")
    return _orbit(pos, w, c, n=num_positions)


@functools.partial(jax.jit, static_argnames=("n",))
def _unit_orbit(pos, w, *, n):
    return offset_distances(n, pos, lambda d: jnp.sqrt(
        jnp.sum(4.0 * jnp.square(jnp.sin(d[:, None] * w / 2.0)), axis=-1)))


@functools.partial(jax.jit, static_argnames=("n",))
def _orbit(pos, w, c, *, n):
    def profile(d):
        s2 = 4.0 * jnp.square(jnp.sin(d[:, None] * w / 2.0))  # [m, K]
        return jnp.mean(jnp.sqrt(jnp.maximum(s2 @ c.T, 0.0)), axis=-1)

    return offset_distances(n, pos, profile)


def dist_bias(b: Any, *, num_positions: int | None = None, heads: str | int = "mean",
              side: str = "both") -> jax.Array:
    """Distances from a logit bias: ``E_ij = b(0) - b(i - j)`` clipped at 0 (docs/interpretations.md).

    Args:
      b: a bias array ``[n, n]``, ``[H, n, n]`` or ``[1, H, n, n]`` with ``b[h, i, j]`` the bias of
        query ``i`` on key ``j`` (``b(0)`` is read on the diagonal), or a callable mapping the
        offsets ``r = j - i`` ``[n, n]`` to such an array (then ``num_positions`` is required).
      num_positions: ``n`` for a callable ``b``.
      heads: ``"mean"`` (default: average ``E`` over heads), ``"per_head"`` (return
        ``[H, n, n]``), or an int head index.
      side: ``"both"`` (default: average ``E`` and ``E^T``), ``"lower"`` (keys ``j <= i`` only,
        mirrored; for causal biases) or ``"upper"``. Non-finite entries (masked keys) are
        replaced by their transposed value.

    Returns:
      ``E [n, n]`` (``[H, n, n]`` with ``heads="per_head"``), symmetric, zero diagonal.
    """
    if callable(b):
        if num_positions is None:
            raise ValueError("dist_bias with a callable b needs num_positions")
        r = jnp.arange(num_positions)[None, :] - jnp.arange(num_positions)[:, None]
        b = b(r)
    B = as_float_array(b, "b")
    if B.ndim == 4:
        if B.shape[0] != 1:
            raise ValueError(f"a batched bias must have batch size 1, got shape {B.shape}")
        B = B[0]
    if B.ndim == 2:
        B = B[None]
    if B.ndim != 3 or B.shape[1] != B.shape[2]:
        raise ValueError(f"bias must be [n, n], [H, n, n] or [1, H, n, n], got shape {B.shape}")
    if side not in ("both", "lower", "upper"):
        raise ValueError(f"side must be 'both', 'lower' or 'upper', got {side!r}")
    if not (heads in ("mean", "per_head") or isinstance(heads, (int, np.integer))):
        raise ValueError(f"heads must be 'mean', 'per_head' or an int, got {heads!r}")
    E, finite = _bias_distances(B, side=side)
    if not bool(finite):
        raise ValueError("bias has non-finite entries on both sides of the diagonal")
    if heads == "mean":
        return jnp.mean(E, axis=0)
    if heads == "per_head":
        return E
    return E[int(heads)]


@functools.partial(jax.jit, static_argnames=("side",))
def _bias_distances(B, *, side):
    E = jnp.diagonal(B, axis1=1, axis2=2)[:, :, None] - B
    Et = jnp.swapaxes(E, 1, 2)
    E = jnp.where(jnp.isfinite(E), E, Et)
    Et = jnp.swapaxes(E, 1, 2)
    lower = jnp.tril(jnp.ones(E.shape[1:], bool))
    if side == "both":
        E = 0.5 * (E + Et)
    elif side == "lower":
        E = jnp.where(lower, E, Et)
    else:
        E = jnp.where(lower, Et, E)
    finite = jnp.all(jnp.isfinite(E))
    E = jnp.where(jnp.isfinite(E), E, 0.0)
    return jnp.maximum(E, 0.0) * (1 - jnp.eye(E.shape[1], dtype=E.dtype)), finite


def dist_nope(num_positions: int) -> jax.Array:
    """NoPE: ``E = 0`` (so ``sigma_raw = 1``, ``sigma* = 1``); the Theorem 1 sanity check."""
    check_positions(num_positions, None)
    return jnp.zeros((num_positions, num_positions), jnp.result_type(float))
