"""Hellinger distance matrices between positional distributions.

Three metrics (arXiv 2604.05217, Eq. (3)), with ``BC_ij = sum_w sqrt(P_iw P_jw)``:

* ``"chord"`` (default, Eq. (3) of arXiv 2604.05217): ``d = ||sqrt(P_i) - sqrt(P_j)||_2 =
  sqrt(2 - 2 BC)``, in ``[0, sqrt(2)]``;
* ``"normalized"`` (alias ``"normalised"``): ``chord / sqrt(2) = sqrt(1 - BC)``, in ``[0, 1]``;
* ``"fr_arc"``: ``fr_scale * arccos(BC)`` (``fr_scale`` default 1, range ``[0, pi/2]``) and
  ``"fisher_rao"``: the Fisher-Rao geodesic ``2 arccos(BC)`` (Amari), range ``[0, pi]``. Both are
  computed as ``2 * fr_scale * arcsin(chord / 2)``, which is stable near ``BC = 1``.

The squared chord comes from a GEMM, ``D^2 = g_i + g_j - 2 G`` with ``G = sqrt(P) sqrt(P)^T``
and ``g = diag(G)`` (``= 1`` for normalised rows). Pairs with ``D^2 < exact_tol`` are recomputed
in the difference form ``sum_w (S_iw - S_jw)^2`` (docs/design.md), which removes the float32
cancellation error (about ``3e-4`` in ``D`` without the fix). The diagonal is exactly zero and the
result exactly symmetric.

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217, Eq. (3), Algorithm 1.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsparse

from posjax.geometry import gram as _gram
from posjax.geometry.validation import check_probabilities, is_sparse, is_tracer, to_bcoo

__all__ = ["METRICS", "canonical_metric", "hellinger_matrix", "split_half_hellinger",
           "bhattacharyya_matrix", "chord_to_metric", "sq_chord_from_gram", "scatter_pairs",
           "debiased_sq"]

METRICS = ("chord", "normalized", "fr_arc", "fisher_rao")
_ALIASES = {"chord": "chord", "euclidean": "chord", "normalized": "normalized",
            "normalised": "normalized", "fr_arc": "fr_arc", "fisher_rao": "fisher_rao",
            "fisher-rao": "fisher_rao"}


def canonical_metric(metric: str) -> str:
    """Map a metric name or alias to one of :data:`METRICS` (ValueError otherwise)."""
    try:
        return _ALIASES[str(metric).lower()]
    except KeyError:
        raise ValueError(f"unknown Hellinger metric {metric!r}; choose one of "
                         f"{sorted(_ALIASES)}") from None


def chord_to_metric(D2: jax.Array, metric: str = "chord", fr_scale: float | None = None, *,
                    squared: bool = False) -> jax.Array:
    """Convert squared chord distances to the requested metric (see module docstring); with
    ``squared=True`` return the squared metric."""
    return _chord_to_metric(D2, metric=canonical_metric(metric),
                            fr_scale=None if fr_scale is None else float(fr_scale),
                            squared=bool(squared))


@functools.partial(jax.jit, static_argnames=("metric", "fr_scale", "squared"))
def _chord_to_metric(D2, *, metric, fr_scale, squared=False):
    D = _metric_from_sq(D2, metric, fr_scale)
    return jnp.square(D) if squared else D


def _metric_from_sq(D2, metric, fr_scale):
    chord = jnp.sqrt(jnp.maximum(D2, 0))
    if metric == "chord":
        return chord
    if metric == "normalized":
        return chord / math.sqrt(2.0)
    scale = (2.0 if metric == "fisher_rao" else 1.0) if fr_scale is None else float(fr_scale)
    return 2.0 * scale * jnp.arcsin(jnp.clip(chord / 2.0, 0.0, 1.0))


def sq_chord_from_gram(G: jax.Array, exact_tol: jax.Array, n: int | None = None
                       ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Squared chord ``D^2 = g_i + g_j - 2 G`` from a Gram matrix (traceable, not jitted).

    ``G`` is symmetrised, ``D^2`` clamped at 0 with an exactly zero diagonal. Also returns the
    mask of upper-triangle pairs among the first ``n`` rows (default: all; the rest are padding,
    as in the row-sharded layout) with ``D^2 < exact_tol``, and its count.
    """
    G = 0.5 * (G + G.T)
    g = jnp.diagonal(G)
    D2 = jnp.maximum(g[:, None] + g[None, :] - 2.0 * G, 0.0)
    i = jnp.arange(G.shape[0])
    D2 = jnp.where(i[:, None] == i[None, :], 0.0, D2)
    upper = i[:, None] < i[None, :]
    if n is not None and n < G.shape[0]:
        upper = upper & (i[None, :] < n)
    near = upper & (D2 < exact_tol)
    return D2, near, jnp.sum(near, dtype=jnp.int32)


_sq_from_gram = jax.jit(sq_chord_from_gram, static_argnames=("n",))


@functools.partial(jax.jit, static_argnames=("size",))
def _near_pairs(near: jax.Array, size: int) -> tuple[jax.Array, jax.Array]:
    n = near.shape[0]
    return jnp.nonzero(near, size=size, fill_value=n)


@jax.jit
def scatter_pairs(D2: jax.Array, I: jax.Array, J: jax.Array, vals: jax.Array) -> jax.Array:
    """``D2[I, J] = D2[J, I] = vals`` (out-of-range ids are padding and dropped)."""
    D2 = D2.at[I, J].set(vals, mode="drop")
    return D2.at[J, I].set(vals, mode="drop")


def _exact_fix(D2, near, count, source, *, max_row_nnz=None):
    """Recompute flagged pairs in the difference form (host-driven, exact pair count)."""
    count = int(count)
    if count == 0:
        return D2
    size = 1 << max(0, (count - 1).bit_length())  # pad to a power of two: few recompiles
    I, J = _near_pairs(near, size)
    vals = _gram.pair_sq_distances(source, I, J, max_row_nnz=max_row_nnz).astype(D2.dtype)
    return scatter_pairs(D2, I, J, vals)


def _prepare(P: Any, name: str, normalize: bool, validate: bool):
    """Return (P dense or BCOO of P, is_sparse)."""
    if is_sparse(P):
        P = to_bcoo(P)
        if not jnp.issubdtype(P.dtype, jnp.floating):
            P = P.astype(jnp.result_type(float))
    else:
        P = jnp.asarray(P)
        if not jnp.issubdtype(P.dtype, jnp.floating):
            P = P.astype(jnp.result_type(float))
    if validate or normalize:
        P = check_probabilities(P, name, normalize=normalize)
    return P, isinstance(P, jsparse.BCOO)


def _sqrt_bcoo(P: jsparse.BCOO) -> tuple[jsparse.BCOO, int]:
    S = jsparse.BCOO((jnp.sqrt(P.data), P.indices), shape=P.shape, indices_sorted=True,
                     unique_indices=True)
    counts = np.bincount(np.asarray(P.indices[:, 0]), minlength=P.shape[0])
    return S, int(counts.max()) if counts.size else 0


def bhattacharyya_matrix(P_a: Any, P_b: Any | None = None, *, block_size: int | None = None
                         ) -> jax.Array:
    """Bhattacharyya coefficients ``BC_ij = <sqrt(P_a[i]), sqrt(P_b[j])>`` (no validation).

    Args:
      P_a: ``[n, V]`` dense, BCOO or scipy.sparse.
      P_b: ``[m, V]`` or None (symmetric case ``P_b = P_a``).
      block_size: rows per tile; None picks automatically, 0 forces one GEMM.

    Returns:
      ``[n, m]`` dense matrix ``sqrt(P_a) sqrt(P_b)^T`` computed with HIGHEST precision.
    """
    symmetric = P_b is None
    if is_sparse(P_a) or (P_b is not None and is_sparse(P_b)):
        S_a, _ = _sqrt_bcoo(to_bcoo(P_a) if is_sparse(P_a) else jsparse.BCOO.fromdense(P_a))
        S_b, m_b = (S_a, None) if symmetric else _sqrt_bcoo(
            to_bcoo(P_b) if is_sparse(P_b) else jsparse.BCOO.fromdense(jnp.asarray(P_b)))
        if m_b is None:
            m_b = int(np.bincount(np.asarray(S_a.indices[:, 0]), minlength=S_a.shape[0]).max())
        m = S_b.shape[0]
        block = _gram.auto_block(m, S_b.shape[1], block_size) or m
        return _gram.gram_sparse(S_a, S_b, block=block, max_row_nnz=max(m_b, 1))
    P_a = jnp.asarray(P_a)
    P_b = P_a if symmetric else jnp.asarray(P_b)
    n, V = P_a.shape
    block = _gram.auto_block(min(n, P_b.shape[0]), V, block_size, symmetric=symmetric)
    if block is None:
        return _gram.gram_dense(P_a, P_b)
    return _gram.gram_tiled(P_a, P_b, block=block, symmetric=symmetric)


def hellinger_matrix(P: Any, *, metric: str = "chord", fr_scale: float | None = None,
                     exact_tol: float = 1e-3, normalize: bool = False,
                     block_size: int | None = None, debias: str = "none",
                     halves: tuple[Any, Any] | None = None, squared: bool = False,
                     validate: bool = True) -> jax.Array:
    """Pairwise Hellinger distances between the rows of ``P``.

    Args:
      P: ``[n, V]`` probability rows, dense (``jax``/``numpy``), a BCOO, or a ``scipy.sparse``
        matrix. With ``debias="split_half"`` it may instead be a dense ``[2, n, V]`` stack of the
        two halves' distributions (or pass them as ``halves``).
      metric: ``"chord"`` (default), ``"normalized"``/``"normalised"``, ``"fr_arc"`` or
        ``"fisher_rao"`` (see module docstring).
      fr_scale: multiplier of the arc for the ``fr_arc``/``fisher_rao`` metrics (defaults 1, 2).
      exact_tol: pairs with squared chord below this are recomputed in the difference form
        (docs/design.md); 0 disables the fix.
      normalize: rescale rows to sum one instead of requiring it.
      block_size: rows per tile of the Gram product (None: automatic: tiles of at most
        ``2^24 / V`` rows, and at least four row blocks from ``n = 1024`` on so that only the
        upper-triangular tiles are computed; small problems use one GEMM; 0: always one GEMM).
        At most two ``[block, V]`` tiles of ``sqrt(P)`` exist at a time when tiled.
      debias: ``"none"`` or ``"split_half"`` (attenuation-corrected cross-half estimate; see
        :func:`split_half_hellinger`).
      halves: ``(P_a, P_b)`` for ``debias="split_half"``.
      squared: return the squared distances.
      validate: check the probability rows (ValueError on NaN, negatives, empty rows, sums).

    Returns:
      ``D [n, n]``, symmetric with an exactly zero diagonal.

    Raises:
      ValueError: invalid probabilities, unknown metric or debias mode, mismatched halves.
    """
    metric = canonical_metric(metric)
    if debias not in ("none", "split_half"):
        raise ValueError(f"debias must be 'none' or 'split_half', got {debias!r}")
    if debias == "split_half":
        if halves is None:
            arr = None if is_sparse(P) else jnp.asarray(P)
            if arr is None or arr.ndim != 3 or arr.shape[0] != 2:
                raise ValueError("debias='split_half' needs halves=(P_a, P_b) or P of shape "
                                 f"[2, n, V]; got P of shape {getattr(P, 'shape', None)}")
            halves = (arr[0], arr[1])
        return split_half_hellinger(*halves, metric=metric, fr_scale=fr_scale,
                                    normalize=normalize, block_size=block_size, squared=squared,
                                    validate=validate)
    P, sparse = _prepare(P, "P", normalize, validate)
    if sparse:
        S, max_nnz = _sqrt_bcoo(P)
        n, V = S.shape
        block = _gram.auto_block(n, V, block_size) or n
        G = _gram.gram_sparse(S, S, block=block, max_row_nnz=max(max_nnz, 1))
        source, fix_kw = S, {"max_row_nnz": max(max_nnz, 1)}
    else:
        G = bhattacharyya_matrix(P, block_size=block_size)
        source, fix_kw = P, {}
    D2, near, count = _sq_from_gram(G, jnp.asarray(exact_tol, G.dtype))
    del G
    if exact_tol > 0:
        if is_tracer(D2):
            # Traced under an outer jit: fix up to n near pairs (the usual case: duplicates).
            I, J = _near_pairs(near, D2.shape[0])
            vals = _gram.pair_sq_distances(source, I, J, **fix_kw).astype(D2.dtype)
            D2 = scatter_pairs(D2, I, J, vals)
        else:
            D2 = _exact_fix(D2, near, count, source, **fix_kw)
    return D2 if squared and metric == "chord" else _finish(D2, metric, fr_scale, squared)


def _finish(D2, metric, fr_scale, squared):
    return _chord_to_metric(D2, metric=metric, fr_scale=None if fr_scale is None else
                            float(fr_scale), squared=squared)


def debiased_sq(C: jax.Array) -> jax.Array:
    """Split-half squared chord ``2 - 2 clip(C_ij / sqrt(C_ii C_jj), 0, 1)`` from the cross-half
    Gram ``C`` (symmetrised), zero diagonal; pairs with ``C_ii C_jj = 0`` (padding rows) get
    ``BC~ = 0`` instead of NaN. Traceable, not jitted."""
    C = 0.5 * (C + C.T)
    d = jnp.diagonal(C)
    denom = jnp.sqrt(d[:, None] * d[None, :])
    ok = denom > 0
    bc = jnp.clip(jnp.where(ok, C / jnp.where(ok, denom, 1.0), 0.0), 0.0, 1.0)
    D2 = 2.0 - 2.0 * bc
    return jnp.where(jnp.eye(C.shape[0], dtype=bool), 0.0, D2)


_debiased_sq = jax.jit(debiased_sq)


def split_half_hellinger(P_a: Any, P_b: Any, *, metric: str = "chord",
                         fr_scale: float | None = None, normalize: bool = False,
                         block_size: int | None = None, squared: bool = False,
                         validate: bool = True) -> jax.Array:
    """Split-half, attenuation-corrected Hellinger distances (docs/interpretations.md).

    The plug-in coefficient ``<sqrt(P^_i), sqrt(P^_j)>`` is biased downwards (Jensen). With the
    corpus split by sequence into halves A and B:

      ``C_ij = <sqrt(P^A_i), sqrt(P^B_j)>``, ``C <- (C + C^T)/2``,
      ``BC~_ij = clip(C_ij / sqrt(C_ii C_jj), 0, 1)``, ``BC~_ii = 1``, ``D~^2 = 2 - 2 BC~``.

    The cross-half term alone is *more* biased than plug-in; the attenuation correction (the
    division by ``sqrt(C_ii C_jj)``) is what removes most of the bias. Near-diagonal
    values carry float32 cancellation (no difference form exists across halves); use float64
    when pairs of nearly identical positions matter.

    Args:
      P_a: ``[n, V]`` distributions estimated on half A (dense, BCOO or scipy.sparse).
      P_b: ``[n, V]`` distributions estimated on half B.
      metric, fr_scale, normalize, block_size, squared, validate: as in :func:`hellinger_matrix`.

    Returns:
      ``D~ [n, n]`` symmetric with zero diagonal.

    Raises:
      ValueError: mismatched shapes, invalid rows, or a position whose two halves share no
        token (``C_ii = 0``), for which the correction is undefined.
    """
    metric = canonical_metric(metric)
    P_a, _ = _prepare(P_a, "P_a", normalize, validate)
    P_b, _ = _prepare(P_b, "P_b", normalize, validate)
    if P_a.shape != P_b.shape:
        raise ValueError(f"split-half inputs must have the same shape, got {P_a.shape} and "
                         f"{P_b.shape}")
    C = bhattacharyya_matrix(P_a, P_b, block_size=block_size)
    if not is_tracer(C):
        diag = np.asarray(jnp.diagonal(C))
        bad = np.flatnonzero(diag <= 0)
        if bad.size:
            raise ValueError(
                f"split-half debiasing is undefined at positions {bad[:10].tolist()}: their two "
                "halves share no token (C_ii = 0); use more samples, top_k, or debias='none'")
    D2 = _debiased_sq(C)
    return D2 if squared and metric == "chord" else _finish(D2, metric, fr_scale, squared)
