"""Lemma and theorem quantities of arXiv 2604.05217 (Theorems 1, 4 and Appendix A;
our readings are described in ``docs/ntk.md``).

Pure numpy / JAX functions of arrays; the training that produces the arrays lives in
:mod:`ntk.dynamics` and :mod:`ntk.theorems`. Float64 numpy throughout (these are small
``n x n`` or ``n x d`` quantities).

* :func:`hellinger_chord` - ``d_H(i, j) = ||sqrt(P_i) - sqrt(P_j)||_2`` (Eq. 3 of the paper).
* :func:`hellinger_inequalities` - ``d_H^2 <= ||P_i - P_j||_1 <= 2 d_H`` and
  ``||P_i - P_j||_2 <= 2 d_H`` (L5's Euclidean -> Hellinger step).
* :func:`displacement_regression` - L3: regress ``Delta p_i`` on ``P_i`` (and on ``sqrt(P_i)``).
* :func:`distortion_constants` - L4: ``c1 ||P_i - P_j|| <= ||A (P_i - P_j)|| <= c2 ||P_i - P_j||``
  on the tangent space ``{v : 1^T v = 0}`` spanned by the data.
* :func:`monotonicity_spearman` - L5 / conjecture: Spearman rho between position distances and a
  target distance, and the fraction of order violations.
* :func:`separation_stats` - Theorem 4: minimum pairwise distance, numerical rank, condition.
* :func:`permutation_deviation` - Theorem 1: ``max |F(Pi x) - Pi F(x)|``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["pairwise_distances", "hellinger_chord", "clr_distances", "hellinger_inequalities",
           "affine_basis", "displacement_regression", "distortion_constants",
           "monotonicity_spearman", "separation_stats", "permutation_deviation", "loglog_slope",
           "width_window", "seed_bootstrap_slope", "DEGENERATE"]

# Below this a relative error / gap is "zero": the two sides of the comparison are the same
# computation (e.g. the linearised model is the model itself), so no rate can be read off.
DEGENERATE = 1e-6


def pairwise_distances(X) -> np.ndarray:
    """Euclidean distances ``[n, n]`` between the rows of ``X [n, k]`` (float64, zero diagonal),
    by ``posjax.geometry.pairwise_distances`` in float64."""
    import jax
    import jax.numpy as jnp

    import posjax.geometry as geo
    with jax.enable_x64(True):
        return np.asarray(geo.pairwise_distances(jnp.asarray(np.asarray(X, np.float64))))


def hellinger_chord(P) -> np.ndarray:
    """Chord Hellinger distances ``||sqrt(P_i) - sqrt(P_j)||_2`` ``[n, n]`` (Eq. 3 of the
    paper), by ``posjax.geometry.hellinger_matrix`` in float64."""
    import jax
    import jax.numpy as jnp

    import posjax.geometry as geo
    P = _check_P(P)
    with jax.enable_x64(True):
        return np.asarray(geo.hellinger_matrix(jnp.asarray(P)), np.float64)


def clr_distances(P) -> np.ndarray:
    """Aitchison distances ``||clr(P_i) - clr(P_j)||_2`` (``clr = log P - mean(log P)``)."""
    P = _check_P(P)
    if np.any(P <= 0):
        raise ValueError("clr distances need strictly positive distributions")
    L = np.log(P)
    return pairwise_distances(L - L.mean(axis=1, keepdims=True))


def _check_P(P) -> np.ndarray:
    P = np.asarray(P, np.float64)
    if P.ndim != 2:
        raise ValueError(f"P must be [n, V], got shape {P.shape}")
    if np.any(P < 0) or not np.allclose(P.sum(axis=1), 1.0, atol=1e-8):
        raise ValueError("P rows must be probability distributions (>= 0, summing to 1)")
    return P


def hellinger_inequalities(P) -> dict[str, float]:
    """Worst slack of ``d_H^2 <= ||dP||_1 <= 2 d_H`` and ``||dP||_2 <= 2 d_H`` over all pairs.

    Returns:
      ``{"lower_l1", "upper_l1", "upper_l2"}``: the maximum of (left - right) of each inequality
      (``<= 0`` means it holds), float64.
    """
    P = _check_P(P)
    dH = hellinger_chord(P)
    diff = P[:, None, :] - P[None, :, :]
    l1 = np.abs(diff).sum(-1)
    l2 = np.sqrt((diff * diff).sum(-1))
    return {"lower_l1": float(np.max(dH ** 2 - l1)), "upper_l1": float(np.max(l1 - 2 * dH)),
            "upper_l2": float(np.max(l2 - 2 * dH))}


def affine_basis(F, *, rtol: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal basis of the affine span of the rows of ``F [n, V]``.

    Returns:
      ``(coords [n, k], basis [V, k])`` with ``F - mean(F) = coords @ basis.T`` and ``k`` the
      numerical rank (singular values above ``rtol * max``).
    """
    F = np.asarray(F, np.float64)
    C = F - F.mean(axis=0)
    U, s, Vt = np.linalg.svd(C, full_matrices=False)
    k = int(np.sum(s > rtol * max(s.max(initial=0.0), 1e-300)))
    return U[:, :k] * s[:k], Vt[:k].T


def _r2(Y, X) -> tuple[float, np.ndarray, np.ndarray]:
    """Multivariate R^2 of the least-squares fit ``Y ~ X A^T + b`` (sums over columns of Y)."""
    Xc = X - X.mean(axis=0)
    Yc = Y - Y.mean(axis=0)
    A, *_ = np.linalg.lstsq(Xc, Yc, rcond=None)           # [k, d]
    res = Yc - Xc @ A
    ss_tot = float(np.sum(Yc * Yc))
    r2 = 1.0 - float(np.sum(res * res)) / ss_tot if ss_tot > 0 else float("nan")
    return r2, A.T, Y.mean(axis=0) - X.mean(axis=0) @ A


def displacement_regression(delta_p, P, *, rank: int | None = None) -> dict:
    """Lemma 3: fit ``Delta p_i = A P_i + b`` (and ``A' sqrt(P_i) + b'``) over positions.

    ``P`` is represented by its coordinates in an orthonormal basis of its affine span (rank
    ``k``), so the fit has ``k + 1`` free coefficients per output column and is not vacuous when
    ``k + 1 < n``. The ``sqrt(P)`` fit uses the top-``k`` principal coordinates of ``sqrt(P)``
    (same number of regressors, so the two R^2 are comparable).

    Args:
      delta_p: ``[n, d]`` displacements ``p_i(t) - p_i(0)``.
      P: ``[n, V]`` positional distributions.
      rank: override ``k`` (default: numerical affine rank of P).

    Returns:
      dict with ``r2_P``, ``r2_sqrtP``, ``rank``, ``A [d, k]`` (in the orthonormal basis, so its
      singular values are those of the operator on the span) and ``basis [V, k]``.

    Raises:
      ValueError: if ``k + 1 >= n`` (the regression would fit anything).
    """
    Y = np.asarray(delta_p, np.float64)
    P = _check_P(P)
    coords, basis = affine_basis(P)
    k = coords.shape[1] if rank is None else int(rank)
    if k + 1 >= P.shape[0]:
        raise ValueError(f"affine rank {k} of P is too high for {P.shape[0]} positions: the "
                         "regression would be exact for any displacement")
    coords, basis = coords[:, :k], basis[:, :k]
    r2_p, A, b = _r2(Y, coords)
    s_coords, _ = affine_basis(np.sqrt(P))
    r2_s, _, _ = _r2(Y, s_coords[:, :k])
    return {"r2_P": r2_p, "r2_sqrtP": r2_s, "rank": k, "A": A, "b": b, "basis": basis}


def distortion_constants(delta_p, P, *, rank: int | None = None, tol: float = 1e-12) -> dict:
    """Lemma 4: two-sided bounds ``c1 ||v|| <= ||A v|| <= c2 ||v||`` on the data's tangent space.

    Two estimates: the extreme singular values of the regressed operator ``A`` restricted to
    the affine span of ``P`` (a subspace of ``{v : 1^T v = 0}``), and the extreme pairwise
    ratios ``||Delta p_i - Delta p_j|| / ||P_i - P_j||_2`` over pairs with ``P_i != P_j``.

    Returns:
      dict with ``c1, c2, ratio`` (= c2 / c1, singular values) and ``pair_c1, pair_c2,
      pair_ratio``.
    """
    reg = displacement_regression(delta_p, P, rank=rank)
    s = np.linalg.svd(reg["A"], compute_uv=False)
    dP = pairwise_distances(P)
    dX = pairwise_distances(delta_p)
    mask = np.triu(dP > tol, k=1)
    ratios = dX[mask] / dP[mask]
    c1, c2 = float(s.min()), float(s.max())
    return {"c1": c1, "c2": c2, "ratio": c2 / c1 if c1 > 0 else float("inf"),
            "pair_c1": float(ratios.min()), "pair_c2": float(ratios.max()),
            "pair_ratio": float(ratios.max() / ratios.min()) if ratios.min() > 0 else float("inf")}


def monotonicity_spearman(X, D, *, tie_tol: float = 1e-9) -> dict:
    """Spearman rho between the pairwise distances of ``X [n, k]`` and a target ``D [n, n]``.

    Also the fraction of order violations: over pairs of pairs with ``D_ij < D_kl - tie_tol``,
    the fraction with ``||x_i - x_j|| > ||x_k - x_l||`` (strong form of the conjecture).

    Returns:
      ``{"rho", "violations", "num_pairs"}``.
    """
    from scipy.stats import spearmanr
    E = pairwise_distances(X)
    D = np.asarray(D, np.float64)
    iu = np.triu_indices(D.shape[0], k=1)
    e, t = E[iu], D[iu]
    rho = float(spearmanr(e, t).statistic)
    less = t[:, None] < t[None, :] - tie_tol
    viol = less & (e[:, None] > e[None, :])
    return {"rho": rho, "violations": float(viol.sum() / max(less.sum(), 1)),
            "num_pairs": int(len(e))}


def separation_stats(table, *, rtol: float = 1e-3) -> dict:
    """Theorem 4 statistics of a position table ``[n, d]``.

    Returns:
      ``min_distance``, ``mean_distance``, ``min_over_mean`` (scale-free separation),
      ``numerical_rank`` of the centred table (singular values above ``rtol * max``),
      ``raw_rank`` (of the table itself: ``n`` means linearly independent rows), ``condition``
      (largest over smallest non-zero singular value of the centred table),
      ``singular_values``.
    """
    X = np.asarray(table, np.float64)
    D = pairwise_distances(X)
    iu = np.triu_indices(X.shape[0], k=1)
    s = np.linalg.svd(X - X.mean(axis=0), compute_uv=False)
    rank = int(np.sum(s > rtol * s.max())) if s.max() > 0 else 0
    s_raw = np.linalg.svd(X, compute_uv=False)
    raw_rank = int(np.sum(s_raw > rtol * s_raw.max())) if s_raw.max() > 0 else 0
    return {"raw_rank": raw_rank, "min_distance": float(D[iu].min()),
            "mean_distance": float(D[iu].mean()),
            "min_over_mean": float(D[iu].min() / D[iu].mean()) if D[iu].mean() > 0 else 0.0,
            "numerical_rank": rank,
            "condition": float(s[0] / s[rank - 1]) if rank else float("inf"),
            "singular_values": s.tolist()}


def permutation_deviation(fn: Callable, x, perms) -> float:
    """Theorem 1: ``max_perm max |F(x[:, perm]) - F(x)[:, perm]|`` for a token-wise map.

    Args:
      fn: ``x [B, T, ...] -> [B, T, ...]``.
      x: inputs; perms: iterable of permutations of ``range(T)``.
    """
    ref = np.asarray(fn(x))
    worst = 0.0
    for perm in perms:
        perm = np.asarray(perm)
        out = np.asarray(fn(x[:, perm]))
        worst = max(worst, float(np.max(np.abs(out - ref[:, perm]))))
    return worst


def loglog_slope(widths, values) -> float:
    """Least-squares slope of ``log(values)`` against ``log(widths)``."""
    w = np.log(np.asarray(widths, np.float64))
    v = np.log(np.asarray(values, np.float64))
    return float(np.polyfit(w, v, 1)[0])


def width_window(widths, top: int | None = None, size: int = 3) -> tuple[int, ...]:
    """The ``size`` consecutive widths of ``widths`` ending at ``top`` (default: the largest).

    Raises:
      ValueError: if ``top`` is not a width of the sweep or fewer than ``size`` widths end there.
    """
    widths = tuple(int(w) for w in widths)
    top = widths[-1] if top is None else int(top)
    if top not in widths:
        raise ValueError(f"window top {top} is not one of the swept widths {list(widths)}")
    end = widths.index(top) + 1
    if end < size:
        raise ValueError(f"a window of {size} widths ending at {top} needs {size} widths up to "
                         f"it; the sweep has {list(widths[:end])}")
    return widths[end - size:end]


def seed_bootstrap_slope(widths, values, *, num: int = 2000, seed: int = 0,
                         level: float = 0.95, floor: float = DEGENERATE) -> dict:
    """Log-log slope of the seed mean of ``values [S, W]`` against ``widths [W]``, with a
    percentile bootstrap CI over seeds (resampled with replacement, one draw for all widths).

    Values below ``floor`` are clipped to it before the logarithm (an exactly-zero series has
    slope 0: it does not decay).

    Returns:
      ``{"slope", "ci": [lo, hi], "per_width_mean": [W]}``.
    """
    v = np.clip(np.asarray(values, np.float64), floor, None)
    if v.ndim != 2 or v.shape[1] != len(widths):
        raise ValueError(f"values must be [seeds, {len(widths)}], got {v.shape}")
    w = np.log(np.asarray(widths, np.float64))
    slope = float(np.polyfit(w, np.log(v.mean(0)), 1)[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, v.shape[0], size=(num, v.shape[0]))
    means = np.log(v[idx].mean(1))                                     # [num, W]
    wc = w - w.mean()
    boot = (means - means.mean(1, keepdims=True)) @ wc / (wc @ wc)
    a = (1 - level) / 2
    return {"slope": slope, "ci": [float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))],
            "per_width_mean": v.mean(0).tolist()}
