"""Stress and strain of a configuration against a target distance matrix (arXiv 2604.05217, Eq. (4)).

Normalised raw stress (Eq. (4) of arXiv 2604.05217; no square root):

  ``sigma(X; D) = sum_{i<j} (e_ij - D_ij)^2 / sum_{i<j} D_ij^2``, ``e_ij = ||x_i - x_j||``.

Optimal-scale stress (closed form, Derived): ``sigma* = min_a sigma(aX; D) =
1 - (sum e D)^2 / (sum e^2 sum D^2)`` with ``a* = sum e D / sum e^2``; ``sigma* = 1`` when
``sum e^2 = 0`` (NoPE). The same value minimises Kruskal's embedding-normalised form. Kruskal
stress-1 is ``sqrt(sigma)`` (J. B. Kruskal, "Multidimensional scaling by optimizing goodness of
fit to a nonmetric hypothesis", Psychometrika 1964).

Strain: ``||B - X X^T||_F^2 / ||B||_F^2`` with ``X`` centred (classical MDS minimises it,
Eckart-Young).
"""
from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from posjax.geometry.validation import (as_float_array, check_coords, check_distance_matrix,
                                        check_square_symmetric, is_tracer)

__all__ = ["STRESS_SCALES", "pairwise_distances", "cross_sq_distances", "stress", "optimal_scale", "strain"]

STRESS_SCALES = ("raw", "optimal", "max_normalized")
_SCALE_ALIASES = {"raw": "raw", "optimal": "optimal", "optimal_scale": "optimal",
                  "max_normalized": "max_normalized", "max_normalised": "max_normalized"}
HIGHEST = lax.Precision.HIGHEST
#: Direct-difference distances below this many ``n * n * k`` entries, GEMM form above.
_DIRECT_MAX = 1 << 24


#: Up to this many columns the distances are accumulated one coordinate at a time.
_PER_COLUMN_MAX = 16


def cross_sq_distances(X: jax.Array, Y: jax.Array) -> jax.Array:
    """Squared Euclidean distances ``[n, m]`` between the rows of ``X [n, k]`` and ``Y [m, k]``
    (traceable, not jitted).

    Up to 16 columns (MDS configurations) and for small problems the exact difference form
    ``sum_c (x_ic - y_jc)^2`` is used (accumulated column by column, which XLA fuses into one
    pass); otherwise the GEMM form ``|x_i|^2 + |y_j|^2 - 2 x_i . y_j`` (clamped at 0).
    """
    n, k = X.shape
    m = Y.shape[0]
    if k <= _PER_COLUMN_MAX:
        acc = jnp.zeros((n, m), jnp.result_type(X, Y))
        for c in range(k):
            d = X[:, c][:, None] - Y[:, c][None, :]
            acc = acc + d * d
        return acc
    if n * m * k <= _DIRECT_MAX:
        diff = X[:, None, :] - Y[None, :, :]
        return jnp.sum(diff * diff, axis=-1)
    d2 = (jnp.sum(X * X, axis=1)[:, None] + jnp.sum(Y * Y, axis=1)[None, :]
          - 2.0 * jnp.matmul(X, Y.T, precision=HIGHEST))
    return jnp.maximum(d2, 0.0)


@jax.jit
def pairwise_distances(X: jax.Array) -> jax.Array:
    """Euclidean distances ``e [n, n]`` between the rows of ``X [n, k]`` (exact zero diagonal,
    exactly symmetric); see :func:`cross_sq_distances` for the forms used."""
    d2 = cross_sq_distances(X, X)
    d2 = jnp.where(jnp.eye(X.shape[0], dtype=bool), 0.0, d2)
    return jnp.sqrt(0.5 * (d2 + d2.T))


def _embedding_distances(D, coords, distances):
    if (coords is None) == (distances is None):
        raise ValueError("pass exactly one of coords= (a configuration [n, k]) or distances= "
                         "(an [n, n] distance matrix)")
    n = D.shape[0]
    if coords is not None:
        return pairwise_distances(check_coords(coords, n))
    E = as_float_array(distances, "distances")
    if E.shape != D.shape:
        raise ValueError(f"distances has shape {E.shape} but D has shape {D.shape}")
    check_square_symmetric(E, "distances")
    return E


@jax.jit
def _sums(D: jax.Array, E: jax.Array):
    """Upper-triangle sums ``(sum D^2, sum e^2, sum e D, max D, max e)``."""
    mask = jnp.triu(jnp.ones(D.shape, bool), k=1)
    z = jnp.zeros((), jnp.result_type(D, E))
    sdd = jnp.sum(jnp.where(mask, D * D, z))
    see = jnp.sum(jnp.where(mask, E * E, z))
    sed = jnp.sum(jnp.where(mask, E * D, z))
    dmax = jnp.max(jnp.where(mask, D, z))
    emax = jnp.max(jnp.where(mask, E, z))
    return sdd, see, sed, dmax, emax


@functools.partial(jax.jit, static_argnames=("scale", "denominator", "sqrt"))
def _stress_value(D, E, *, scale, denominator, sqrt):
    sdd, see, sed, dmax, emax = _sums(D, E)
    if scale == "optimal":
        cos2 = jnp.where(see > 0, sed * sed / jnp.where(see > 0, see * sdd, 1.0), 0.0)
        value = jnp.clip(1.0 - cos2, 0.0, 1.0)
    else:
        a = (jnp.ones((), sdd.dtype) if scale == "raw" else
             jnp.where(emax > 0, dmax / jnp.where(emax > 0, emax, 1.0), 1.0))
        mask = jnp.triu(jnp.ones(D.shape, bool), k=1)
        r = a * E - D  # direct residuals: no expanded-square cancellation
        num = jnp.sum(jnp.where(mask, r * r, jnp.zeros((), r.dtype)))
        if denominator == "target":
            value = num / sdd
        else:
            den = a * a * see
            value = jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), jnp.inf)
    value = jnp.sqrt(value) if sqrt else value
    return value, sdd


def _canonical_scale(scale: str | None, mode: str | None) -> str:
    if mode is not None:
        scale = mode
    try:
        return _SCALE_ALIASES[scale]
    except KeyError:
        raise ValueError(f"unknown stress scale {scale!r}; choose one of {sorted(_SCALE_ALIASES)}"
                         ) from None


def stress(D: Any, *, coords: Any = None, distances: Any = None, scale: str = "raw",
           sqrt: bool = False, denominator: str = "target", mode: str | None = None,
           validate: bool = True) -> jax.Array:
    """Normalised stress of a configuration (or of embedding distances) against ``D``.

    Args:
      D: ``[n, n]`` target distances (e.g. the Hellinger matrix).
      coords: ``[n, k]`` configuration (e.g. MDS coordinates or a PE table); or
      distances: ``[n, n]`` embedding distances ``e`` (e.g. from :func:`encoding_distances`).
      scale: ``"raw"`` (default; use for MDS encodings, already in D's units),
        ``"optimal"`` (alias ``"optimal_scale"``: ``sigma* = min_a sigma(a e; D)``, scale free),
        or ``"max_normalized"`` (rescale so that ``max e = max D``).
      sqrt: return ``sqrt(sigma)`` (Kruskal stress-1).
      denominator: ``"target"`` (default, ``sum D^2``) or ``"embedding"`` (``sum e^2``,
        Kruskal's original normalisation; for ``scale="optimal"`` both give the same value).
      mode: alias of ``scale``.
      validate: check the inputs.

    Returns:
      Scalar (0-d array): ``sum_{i<j}(a e_ij - D_ij)^2 / sum_{i<j} D_ij^2`` with ``a = 1``
      (raw), ``a*`` (optimal) or ``max D / max e`` (max-normalised). A zero embedding gives 1
      for ``"optimal"``/``"max_normalized"`` and for raw with the target denominator; with the
      embedding denominator it gives ``inf``.

    Raises:
      ValueError: bad shapes, not exactly one of ``coords``/``distances``, an all-zero ``D``.
    """
    scale = _canonical_scale(scale, mode)
    if denominator not in ("target", "embedding"):
        raise ValueError(f"denominator must be 'target' or 'embedding', got {denominator!r}")
    D = check_distance_matrix(D) if validate else as_float_array(D, "D", ndim=2)
    E = _embedding_distances(D, coords, distances)
    value, sdd = _stress_value(D, E, scale=scale, denominator=denominator, sqrt=bool(sqrt))
    if not is_tracer(sdd) and float(sdd) == 0.0:
        raise ValueError("D is identically zero; stress is undefined")
    return value


def optimal_scale(D: Any, *, coords: Any = None, distances: Any = None,
                  validate: bool = True) -> jax.Array:
    """The scale ``a* = sum_{i<j} e D / sum_{i<j} e^2`` minimising raw stress (1 if ``e = 0``)."""
    D = check_distance_matrix(D) if validate else as_float_array(D, "D", ndim=2)
    return _alpha_star(D, _embedding_distances(D, coords, distances))


@jax.jit
def _alpha_star(D, E):
    _, see, sed, _, _ = _sums(D, E)
    return jnp.where(see > 0, sed / jnp.where(see > 0, see, 1.0), 1.0)


@jax.jit
def _strain(X: jax.Array, B: jax.Array) -> jax.Array:
    Xc = X - jnp.mean(X, axis=0, keepdims=True)
    R = B - jnp.matmul(Xc, Xc.T, precision=HIGHEST)
    norm = jnp.sum(B * B)
    return jnp.sum(R * R) / jnp.where(norm > 0, norm, 1.0), norm


def strain(coords: Any, B: Any) -> jax.Array:
    """Strain ``||B - X_c X_c^T||_F^2 / ||B||_F^2`` with ``X_c`` the column-centred ``coords``.

    Args:
      coords: ``[n, k]`` configuration.
      B: ``[n, n]`` double-centred Gram matrix (:func:`double_center`).

    Returns:
      Scalar strain; classical MDS minimises it over rank-``k`` configurations (Eckart-Young).
    """
    B = as_float_array(B, "B", ndim=2)
    check_square_symmetric(B, "B")
    X = check_coords(coords, B.shape[0])
    value, norm = _strain(X, B)
    if not is_tracer(norm) and float(norm) == 0.0:
        raise ValueError("B is identically zero; strain is undefined")
    return value
