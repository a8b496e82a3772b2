"""Input checks shared by the geometry toolkit.

Every public geometry function validates its inputs on the host before calling its jitted
kernel, and raises ``ValueError`` with a message that names the problem (negative or NaN
probabilities, rows that do not sum to one, non-square or asymmetric distance matrices,
mismatched shapes). Inputs that are JAX tracers (the function is being traced under an outer
``jax.jit``) cannot be inspected and are passed through unchecked.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jax.experimental import sparse as jsparse

__all__ = [
    "as_float_array", "is_tracer", "is_sparse", "to_bcoo", "check_probabilities",
    "check_distance_matrix", "check_square_symmetric", "check_coords", "float_eps",
    "check_row_sums",
]


def is_tracer(x: Any) -> bool:
    """True when ``x`` is an abstract value being traced (its values cannot be inspected)."""
    return isinstance(x, jax.core.Tracer)


def is_sparse(x: Any) -> bool:
    """True for a ``jax.experimental.sparse.BCOO`` or any ``scipy.sparse`` matrix / array."""
    if isinstance(x, jsparse.BCOO):
        return True
    mod = type(x).__module__ or ""
    return mod.startswith("scipy.sparse")


def to_bcoo(x: Any) -> jsparse.BCOO:
    """A 2-D BCOO with row-major sorted, unique indices from a scipy.sparse matrix or a BCOO.

    The canonicalisation (duplicate summing, sorting) runs on the host with scipy, so no device
    kernel has to be compiled for it; a BCOO already flagged sorted and unique passes through.
    """
    if isinstance(x, jsparse.BCOO):
        if x.ndim != 2 or x.n_batch or x.n_dense:
            raise ValueError(f"sparse input must be a plain 2-D matrix, got BCOO with shape "
                             f"{x.shape}, n_batch={x.n_batch}, n_dense={x.n_dense}")
        if x.indices_sorted and x.unique_indices:
            return x
        import scipy.sparse as sp  # noqa: PLC0415

        idx = np.asarray(x.indices)
        x = sp.coo_matrix((np.asarray(x.data), (idx[:, 0], idx[:, 1])), shape=x.shape)
    if x.ndim != 2:
        raise ValueError(f"sparse input must be 2-D, got shape {x.shape}")
    csr = x.tocsr(copy=True)
    csr.sum_duplicates()
    csr.sort_indices()
    rows = np.repeat(np.arange(csr.shape[0], dtype=np.int32), np.diff(csr.indptr))
    indices = np.stack([rows, csr.indices.astype(np.int32)], axis=1)
    return jsparse.BCOO((jnp.asarray(csr.data), jnp.asarray(indices)), shape=csr.shape,
                        indices_sorted=True, unique_indices=True)


def float_eps(dtype: Any) -> float:
    """Machine epsilon of a floating dtype."""
    return float(jnp.finfo(dtype).eps)


def as_float_array(x: Any, name: str, *, ndim: int | None = None) -> jax.Array:
    """``jnp.asarray`` with a floating dtype (integers become the default float)."""
    arr = jnp.asarray(x)
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(jnp.result_type(float))
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    return arr


@jax.jit
def _dense_prob_stats(P: jax.Array):
    return jnp.sum(P, axis=-1), jnp.any(jnp.isnan(P)), jnp.any(P < 0)


def _row_sums_and_stats(P: Any) -> tuple[np.ndarray, bool, bool, float]:
    """Row sums, any-NaN, any-negative and the dtype epsilon of a dense or sparse P."""
    if isinstance(P, jsparse.BCOO):
        data = np.asarray(P.data)
        sums = np.bincount(np.asarray(P.indices[:, 0]), weights=data, minlength=P.shape[0])
        return sums, bool(np.isnan(data).any()), bool((data < 0).any()), float_eps(data.dtype)
    sums, nan, neg = jax.device_get(_dense_prob_stats(P))
    return np.asarray(sums), bool(nan), bool(neg), float_eps(P.dtype)


@jax.jit
def _matrix_stats(M: jax.Array):
    """(all finite, max |M|, max |M - M^T|, any negative, max |diag|, max M) in one pass."""
    finite = jnp.all(jnp.isfinite(M))
    A = jnp.where(jnp.isfinite(M), M, 0)
    return (finite, jnp.max(jnp.abs(A)), jnp.max(jnp.abs(A - A.T)), jnp.any(A < 0),
            jnp.max(jnp.abs(jnp.diagonal(A))), jnp.max(A))


def check_probabilities(P: Any, name: str = "P", *, normalize: bool = False,
                        atol: float | None = None) -> Any:
    """Check that the rows of ``P [n, V]`` (dense or BCOO) are probability vectors.

    Args:
      P: dense array or BCOO, shape ``[n, V]``.
      name: name used in error messages.
      normalize: divide each row by its sum instead of requiring sum one.
      atol: tolerance on ``|sum - 1|``; default ``max(1e-6, 64 * eps * sqrt(V))``.

    Returns:
      ``P`` (normalised if requested).

    Raises:
      ValueError: NaN or infinite entries, negative entries, an all-zero row, or (without
        ``normalize``) a row whose sum differs from one by more than ``atol``.
    """
    if P.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array [num_positions, vocab], got shape {P.shape}")
    if P.shape[0] == 0 or P.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {P.shape})")
    if is_tracer(P) or (isinstance(P, jsparse.BCOO) and is_tracer(P.data)):
        return P
    sums, has_nan, has_neg, eps = _row_sums_and_stats(P)
    check_row_sums(sums, has_nan=has_nan, has_neg=has_neg, eps=eps, vocab=P.shape[1], name=name,
                   require_one=not normalize, atol=atol)
    if normalize:
        if isinstance(P, jsparse.BCOO):
            scale = jnp.asarray(1.0 / sums, P.dtype)
            return jsparse.BCOO((P.data * scale[P.indices[:, 0]], P.indices), shape=P.shape,
                                indices_sorted=P.indices_sorted, unique_indices=P.unique_indices)
        return P / jnp.asarray(sums, P.dtype)[:, None]
    return P


def check_row_sums(sums: np.ndarray, *, has_nan: bool, has_neg: bool, eps: float, vocab: int,
                   name: str = "P", require_one: bool = True, atol: float | None = None) -> None:
    """Raise ValueError for NaN, infinite or negative probabilities, empty rows, or (with
    ``require_one``) row sums off one by more than ``atol`` (default
    ``max(1e-6, 64 * eps * sqrt(vocab))``).

    Args:
      sums: ``[n]`` host row sums.
      has_nan, has_neg: whether any entry is NaN / negative.
      eps: machine epsilon of the probabilities' dtype.
      vocab: the number of columns ``V``.
    """
    if has_nan:
        raise ValueError(f"{name} contains NaN probabilities")
    if not np.all(np.isfinite(sums)):
        raise ValueError(f"{name} contains infinite probabilities")
    if has_neg:
        raise ValueError(f"{name} contains negative probabilities")
    zero = np.flatnonzero(sums <= 0)
    if zero.size:
        raise ValueError(f"{name} has all-zero rows (positions {zero[:10].tolist()}"
                         f"{'...' if zero.size > 10 else ''}); an empty position has no "
                         "distribution")
    if not require_one:
        return
    tol = atol if atol is not None else max(1e-6, 64.0 * eps * float(np.sqrt(vocab)))
    bad = np.flatnonzero(np.abs(sums - 1.0) > tol)
    if bad.size:
        worst = bad[np.argmax(np.abs(sums[bad] - 1.0))]
        raise ValueError(
            f"rows of {name} must sum to one (tolerance {tol:.1e}); {bad.size} rows do not, e.g. "
            f"row {int(worst)} sums to {float(sums[worst]):.8g}; pass normalize=True to rescale")


def _square_symmetric_stats(M: jax.Array, name: str, atol: float | None):
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"{name} must be a square [n, n] matrix, got shape {M.shape}")
    if is_tracer(M) or M.size == 0:
        return None
    finite, scale, asym, neg, diag, mx = (v.item() for v in jax.device_get(_matrix_stats(M)))
    if not finite:
        raise ValueError(f"{name} contains NaN or infinite entries")
    tol = atol if atol is not None else 1e3 * float_eps(M.dtype) * max(scale, 1.0)
    if asym > tol:
        raise ValueError(f"{name} is not symmetric: max |{name} - {name}^T| = {asym:.3g} "
                         f"(tolerance {tol:.1e})")
    return neg, diag, mx, tol


def check_square_symmetric(M: jax.Array, name: str, *, atol: float | None = None) -> None:
    """Raise ValueError unless ``M`` is a finite, square, symmetric 2-D matrix."""
    _square_symmetric_stats(M, name, atol)


def check_distance_matrix(D: Any, name: str = "D", *, atol: float | None = None) -> jax.Array:
    """Check a distance matrix: square, symmetric, finite, non-negative, zero diagonal.

    Returns:
      ``D`` as a floating ``jax.Array``.
    """
    D = as_float_array(D, name)
    stats = _square_symmetric_stats(D, name, atol)
    if stats is None:
        return D
    neg, diag, _, tol = stats
    if neg:
        raise ValueError(f"{name} has negative entries; distances must be >= 0")
    if diag > tol:
        raise ValueError(f"{name} has a non-zero diagonal (max |D_ii| = {diag:.3g}); a distance "
                         "matrix has D_ii = 0")
    return D


def check_coords(X: Any, n: int, name: str = "coords") -> jax.Array:
    """Check a configuration ``[n, k]`` (a ``[n]`` vector is read as ``[n, 1]``)."""
    X = as_float_array(X, name)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"{name} must be [n, k], got shape {X.shape}")
    if X.shape[0] != n:
        raise ValueError(f"{name} has {X.shape[0]} rows but the distance matrix is {n} x {n}")
    if not is_tracer(X) and not bool(_all_finite(X)):
        raise ValueError(f"{name} contains NaN or infinite entries")
    return X


@jax.jit
def _all_finite(X: jax.Array) -> jax.Array:
    return jnp.all(jnp.isfinite(X))
