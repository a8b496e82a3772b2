"""Double centring and classical (Torgerson) MDS (arXiv 2604.05217, Alg. 1).

``B = -1/2 J D^(2) J`` with ``J = I - 11^T/n`` is computed without forming ``J``:
``B_ij = -1/2 (D2_ij - r_i - r_j + g)`` (``r`` row means, ``g`` grand mean of ``D2 = D o D``).
For the chord metric ``B = (J S)(J S)^T`` exactly, with ``S = sqrt(P)``
(:func:`gram_from_sqrtP`), so ``B`` is PSD and ``rank(B) <= min(n - 1, V)``.

Classical MDS: ``B = U Lambda U^T`` (descending), ``X_r = U_r Lambda_r^(1/2)``. It minimises the
strain ``||B - X X^T||_F`` among rank-``r`` configurations (Eckart-Young), not the stress.

References: W. S. Torgerson, "Multidimensional scaling: I. Theory and method", Psychometrika
1952; J. C. Gower, "Some distance properties of latent root and vector methods used in
multivariate analysis", Biometrika 1966; G. Cirrincione, "On the Geometry of Positional
Encodings in Transformers", arXiv 2604.05217, Proposition 5/6 and Algorithm 1.
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import sparse as jsparse

from posjax.geometry.eigensolvers import eigh_descending, top_eigh
from posjax.geometry.rank import effective_rank, parse_rank_rule
from posjax.geometry.validation import (as_float_array, check_distance_matrix,
                                        check_square_symmetric, is_sparse, is_tracer, to_bcoo)

__all__ = ["MDSResult", "EuclideanCheck", "double_center", "center_gram", "gram_from_sqrtP",
           "check_euclidean", "classical_mds", "negative_mass"]

HIGHEST = lax.Precision.HIGHEST
#: ``solver="auto"`` uses the top-k solver above this size (when ``dim`` is small).
TOPK_MIN_N = 1024


class MDSResult(NamedTuple):
    """Result of :func:`classical_mds`.

    Attributes:
      coords: ``[n, r]`` configuration ``X_r = U_r Lambda_r^(1/2)`` (negative eigenvalues
        clipped to 0, so such columns are zero).
      eigenvalues: eigenvalues of ``B`` in descending order, ``[n]`` with the full solver, or the
        ``[k]`` computed ones with the top-k solver.
      rank: ``r``, the number of columns of ``coords``.
      negative_mass: ``NM = sum_{lambda<0} |lambda| / sum |lambda|`` (full solver); None with the
        top-k solver, which does not see the whole spectrum (use :func:`check_euclidean`).
    """

    coords: jax.Array
    eigenvalues: jax.Array
    rank: int
    negative_mass: float | None


class EuclideanCheck(NamedTuple):
    """Result of :func:`check_euclidean`: the spectrum of ``B`` and its non-Euclidean mass.

    Attributes:
      eigenvalues: ``[n]`` descending.
      negative_mass: ``NM = sum_{lambda<0} |lambda| / sum |lambda|`` (0 for Euclidean D).
      max_negative_ratio: ``max(0, -lambda_min) / lambda_1``.
    """

    eigenvalues: jax.Array
    negative_mass: float
    max_negative_ratio: float


@functools.partial(jax.jit, static_argnames=("squared",))
def _double_center(D: jax.Array, *, squared: bool) -> jax.Array:
    D2 = D if squared else jnp.square(D)
    r = jnp.mean(D2, axis=1)
    g = jnp.mean(r)
    B = -0.5 * (D2 - r[:, None] - r[None, :] + g)
    return 0.5 * (B + B.T)


def double_center(D: Any, *, squared: bool = False, validate: bool = True) -> jax.Array:
    """``B = -1/2 J D^(2) J`` without forming ``J``.

    Args:
      D: ``[n, n]`` distance matrix (or squared distances with ``squared=True``).
      squared: whether ``D`` already holds squared distances.
      validate: check that ``D`` is a square, symmetric, non-negative matrix with zero diagonal.

    Returns:
      ``B [n, n]``, symmetric, rows and columns summing to zero.
    """
    D = check_distance_matrix(D) if validate else as_float_array(D, "D", ndim=2)
    return _double_center(D, squared=squared)


@jax.jit
def center_gram(G: jax.Array) -> jax.Array:
    """``J G J`` for a symmetric Gram matrix ``G [n, n]`` (``B`` for the chord metric)."""
    r = jnp.mean(G, axis=1)
    c = jnp.mean(G, axis=0)
    B = G - r[:, None] - c[None, :] + jnp.mean(r)
    return 0.5 * (B + B.T)


@jax.jit
def _centred_product(S: jax.Array) -> jax.Array:
    Sc = S - jnp.mean(S, axis=0, keepdims=True)
    B = jnp.matmul(Sc, Sc.T, precision=HIGHEST)
    return 0.5 * (B + B.T)


def gram_from_sqrtP(S: Any) -> jax.Array:
    """Exact chord shortcut ``B = (J S)(J S)^T`` (docs/design.md).

    Args:
      S: ``[n, V]`` square roots of the positional distributions (dense, BCOO or scipy.sparse).
        Dense input is centred before the product (no cancellation); sparse input uses
        ``J (S S^T) J`` so that no dense ``[n, V]`` copy is formed.

    Returns:
      ``B [n, n]``, PSD up to round-off, equal to ``double_center(D_chord)``.
    """
    if is_sparse(S):
        from posjax.geometry.hellinger import bhattacharyya_matrix  # noqa: PLC0415

        Sb = to_bcoo(S)
        P = jsparse.BCOO((jnp.square(Sb.data), Sb.indices), shape=Sb.shape,
                         indices_sorted=True, unique_indices=True)
        return center_gram(bhattacharyya_matrix(P))
    S = as_float_array(S, "S", ndim=2)
    return _centred_product(S)


def negative_mass(eigenvalues: Any) -> float:
    """``NM = sum_{lambda<0} |lambda| / sum |lambda|`` (0.0 for an all-zero spectrum)."""
    lam = np.asarray(eigenvalues, np.float64)
    total = np.abs(lam).sum()
    return float(np.abs(lam[lam < 0]).sum() / total) if total > 0 else 0.0


def check_euclidean(D: Any, *, gram: bool = False) -> EuclideanCheck:
    """Spectrum of ``B`` and non-Euclidean mass of a distance matrix (docs/design.md).

    ``D`` is Euclidean (embeddable with distances ``D``) iff ``B`` is PSD (Schoenberg 1935). For
    the chord metric negative eigenvalues are round-off; for ``fr_arc`` they can be genuine.

    Args:
      D: ``[n, n]`` distances, or ``B`` itself with ``gram=True``.
      gram: whether ``D`` is already the double-centred ``B``.
    """
    if gram:
        B = as_float_array(D, "B", ndim=2)
        check_square_symmetric(B, "B")
    else:
        B = double_center(D)
    w, _ = eigh_descending(B)
    wh = np.asarray(w)
    lam1, lam_min = float(wh[0]), float(wh[-1])
    ratio = max(0.0, -lam_min) / lam1 if lam1 > 0 else (0.0 if lam_min >= 0 else np.inf)
    return EuclideanCheck(w, negative_mass(wh), ratio)


def _resolve_solver(solver: str, n: int, dim: int | None) -> str:
    if solver not in ("auto", "eigh", "topk"):
        raise ValueError(f"solver must be 'auto', 'eigh' or 'topk', got {solver!r}")
    if solver == "topk" and dim is None:
        raise ValueError("solver='topk' needs dim (the number of eigenpairs to compute)")
    if solver == "auto":
        return "topk" if dim is not None and n > TOPK_MIN_N and 4 * dim <= n // 8 else "eigh"
    return solver


def classical_mds(D: Any, *, dim: int | None = None, rank_rule: Any = ("energy", 1e-3),
                  neg_eig: str = "clip", neg_tol: float | None = None, solver: str = "auto",
                  gram: bool = False, seed: int = 0, validate: bool = True) -> MDSResult:
    """Classical (Torgerson) MDS of a distance matrix.

    Args:
      D: ``[n, n]`` distance matrix, or the double-centred ``B`` with ``gram=True`` (for example
        :func:`gram_from_sqrtP` for the chord metric).
      dim: number of output dimensions; None chooses ``r`` with ``rank_rule``.
      rank_rule: ``("energy", eps)`` (default, ``eps = 1e-3``), ``("threshold", tau)``, a rule
        name with its default tolerance, or a fixed ``int``; the result is capped at ``n - 1``.
        Ignored when ``dim`` is given.
      neg_eig: ``"clip"`` (default: negative eigenvalues are set to 0 in the coordinates) or
        ``"error"`` (ValueError when ``lambda_min < -neg_tol * lambda_1``).
      neg_tol: relative tolerance for ``neg_eig="error"`` (default 1e-8 in float64, 1e-5 in
        float32).
      solver: ``"eigh"`` (full), ``"topk"`` (subspace iteration, needs ``dim``) or ``"auto"``
        (top-k when ``n > 1024`` and ``dim`` is small).
      gram: whether ``D`` is already ``B``.
      seed: seed of the top-k solver's start block.
      validate: check ``D`` (square, symmetric, non-negative, zero diagonal).

    Returns:
      :class:`MDSResult` ``(coords [n, r], eigenvalues, rank, negative_mass)``. Eigenvectors
      have a deterministic sign (largest-|entry| positive). In degenerate eigenspaces the
      coordinates are not unique; compare distances or eigenvalues, not raw coordinates.

    Raises:
      ValueError: invalid ``D``, options, or negative eigenvalues with ``neg_eig="error"``.
    """
    if neg_eig not in ("clip", "error"):
        raise ValueError(f"neg_eig must be 'clip' or 'error', got {neg_eig!r}")
    rule = parse_rank_rule(rank_rule)
    if gram:
        B = as_float_array(D, "B", ndim=2)
        if validate:
            check_square_symmetric(B, "B")
    else:
        B = double_center(D, validate=validate)
    n = B.shape[0]
    if is_tracer(B):
        raise ValueError("classical_mds picks the rank on the host; call it outside jax.jit")
    if dim is not None and not 1 <= dim <= n:
        raise ValueError(f"dim must be in [1, n={n}], got {dim}")
    method = _resolve_solver(solver, n, dim)
    if method == "topk":
        w, U = top_eigh(B, dim, seed=seed)
        nm = None
    else:
        w, U = eigh_descending(B)
        nm = negative_mass(np.asarray(w))
    w_host = np.asarray(w)
    lam1 = float(w_host[0])
    if neg_eig == "error":
        tol = neg_tol if neg_tol is not None else (1e-8 if B.dtype == jnp.float64 else 1e-5)
        lam_min = float(w_host.min())
        if lam_min < -tol * max(abs(lam1), np.finfo(np.float64).tiny):
            raise ValueError(f"B has a negative eigenvalue {lam_min:.3g} (lambda_1 = {lam1:.3g}, "
                             f"non-Euclidean mass {nm if nm is not None else float('nan'):.3g}); "
                             "D is not Euclidean; use neg_eig='clip'")
    if dim is not None:
        r = dim
    elif isinstance(rule, int):
        r = min(rule, n - 1 if n > 1 else 1)
    else:
        r = effective_rank(w_host, rule=rule[0], tol=rule[1])
        r = max(1, min(r, n - 1 if n > 1 else 1))
    return MDSResult(_coords(U, w, r=int(r)), w, int(r), nm)


@functools.partial(jax.jit, static_argnames=("r",))
def _coords(U: jax.Array, w: jax.Array, *, r: int) -> jax.Array:
    """``X_r = U_r max(Lambda_r, 0)^(1/2)``."""
    return U[:, :r] * jnp.sqrt(jnp.maximum(w[:r], 0.0))[None, :]
