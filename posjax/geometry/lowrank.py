"""Minimal (low-rank) parametrisation of an MDS positional encoding (arXiv 2604.05217, Alg. 1).

A rank-``r`` encoding factorises as ``P = A W^T`` with ``A [n, r]`` (the MDS coordinates) and
``W [d, r]`` with orthonormal columns, i.e. ``r (n + d)`` parameters instead of ``n d``; the saving
is positive iff ``r < n d / (n + d)``. The pair ``(A, W)`` has an ``r x r`` gauge freedom
(``A W^T = (A M)(W M^-T)^T``), so the intrinsic dimension is ``r (n + d) - r^2``.

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217 (minimal parametrisation, Algorithm 1 step 7).
"""
from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp

from posjax.geometry.validation import as_float_array

__all__ = ["LIFTS", "lift_matrix", "low_rank_factors", "lift_to_width", "param_count",
           "break_even_rank"]

LIFTS = ("pad", "random_orthonormal")


def lift_matrix(d_model: int, rank: int, *, lift: str = "pad", key: jax.Array | None = None,
                seed: int = 0, dtype: Any = None) -> jax.Array:
    """``W [d_model, rank]`` with orthonormal columns.

    ``"pad"``: ``W = [I_r; 0]`` (the MDS axes occupy the first ``r`` model dims).
    ``"random_orthonormal"``: the Q factor of a Gaussian matrix (``key`` or ``seed``).
    """
    if not 0 < rank <= d_model:
        raise ValueError(f"rank must be in [1, d_model={d_model}], got {rank}")
    dtype = dtype or jnp.result_type(float)
    if lift == "pad":
        return jnp.eye(d_model, rank, dtype=dtype)
    if lift == "random_orthonormal":
        key = jax.random.key(seed) if key is None else key
        Q, R = jnp.linalg.qr(jax.random.normal(key, (d_model, rank), dtype))
        return Q * jnp.where(jnp.diagonal(R) < 0, -1.0, 1.0).astype(dtype)[None, :]
    raise ValueError(f"lift must be one of {LIFTS}, got {lift!r}")


def low_rank_factors(coords: Any, d_model: int, *, lift: str = "pad",
                     key: jax.Array | None = None, seed: int = 0) -> tuple[jax.Array, jax.Array]:
    """Factors ``(A [n, r], W [d_model, r])`` of the encoding ``P_MDS = A W^T``.

    Args:
      coords: ``[n, r]`` MDS coordinates ``X_r``.
      d_model: model width ``d``.
      lift: ``"pad"`` (default) or ``"random_orthonormal"`` (see :func:`lift_matrix`).
      key, seed: randomness of the random lift.

    Returns:
      ``(A, W)``; if ``r > d_model`` the coordinates are truncated to their first ``d_model``
      axes (with a warning: the stress is then > 0).
    """
    A = as_float_array(coords, "coords")
    A = A[:, None] if A.ndim == 1 else A
    if A.ndim != 2:
        raise ValueError(f"coords must be [n, r], got shape {A.shape}")
    r = A.shape[1]
    if r > d_model:
        warnings.warn(f"rank {r} exceeds d_model={d_model}; keeping the first {d_model} MDS axes",
                      stacklevel=2)
        A, r = A[:, :d_model], d_model
    return A, lift_matrix(d_model, r, lift=lift, key=key, seed=seed, dtype=A.dtype)


def lift_to_width(coords: Any, d_model: int, *, lift: str = "pad", key: jax.Array | None = None,
                  seed: int = 0) -> jax.Array:
    """The dense encoding table ``P_MDS = A W^T [n, d_model]`` (row distances equal those of
    ``coords``, because ``W`` has orthonormal columns)."""
    A, W = low_rank_factors(coords, d_model, lift=lift, key=key, seed=seed)
    return A @ W.T


def param_count(n: int, d: int, r: int) -> tuple[int, int]:
    """``(n * d, r * (n + d))``: parameters of a full table vs the rank-``r`` factorisation."""
    for name, v in (("n", n), ("d", d), ("r", r)):
        if v < 0:
            raise ValueError(f"{name} must be >= 0, got {v}")
    return n * d, r * (n + d)


def break_even_rank(n: int, d: int) -> float:
    """``n d / (n + d)``: the factorisation saves parameters iff ``r`` is below this."""
    if n <= 0 or d <= 0:
        raise ValueError(f"n and d must be positive, got n={n}, d={d}")
    return n * d / (n + d)
