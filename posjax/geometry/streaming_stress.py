"""Stress against the Hellinger geometry of ``P`` without an ``[n, n]`` array.

The normalised raw stress ``sigma = sum_{i<j} (e_ij - D_ij)^2 / sum_{i<j} D_ij^2`` and the
optimal-scale stress ``sigma* = 1 - (sum e D)^2 / (sum e^2 sum D^2)`` (see
:mod:`posjax.geometry.stress`) are sums over pairs, with ``D^2_ij = g_i + g_j - 2 <s_i, s_j>``
(``S = sqrt(P)``; G. Cirrincione, arXiv 2604.05217, Eq. (3)) and ``e_ij = ||x_i - x_j||``.

* **Exact, blocked**: row blocks of ``S`` meet all later rows (``S S_blk^T``, an ``[n, r]``
  tile), the four sums ``(sum D^2, sum e^2, sum e D, sum (e - D)^2)`` are accumulated, and the
  tile is dropped. Memory ``O(n r)``; work ``O(nnz(S) n / 2)`` sparse, ``O(n^2 V)`` dense.
* **Sampled pairs** (``pairs=M``): ``M`` pairs ``i != j`` drawn uniformly with replacement; the
  stress is a smooth function of the three or four pair means, so the estimate is the plug-in
  value and its 95 % interval comes from the delta method (for the ratio ``mean(a)/mean(b)``:
  ``Var ~ Var(a - R b) / (M mean(b)^2)``). The interval is ``estimate +- 1.96 se``.
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from posjax.geometry.hellinger import _metric_from_sq, canonical_metric
from posjax.geometry.sqrt_rows import PAIR_CHUNK, SqrtRows, sqrt_rows
from posjax.geometry.stress import cross_sq_distances
from posjax.geometry.validation import check_coords

__all__ = ["StressEstimate", "stress_from_distributions", "sample_pairs", "pair_stress_estimate"]

#: Entries of one ``[n, r]`` tile of the exact pass (``r = TILE_ENTRIES / n``, at least 8).
TILE_ENTRIES = 1 << 23
Z95 = 1.959963984540054


class StressEstimate(NamedTuple):
    """Sampled-pair stress: the estimate, its 95 % confidence interval and the pair count."""

    value: float
    ci_low: float
    ci_high: float
    half_width: float
    num_pairs: int


def _canonical_scale(scale: str) -> str:
    s = {"raw": "raw", "optimal": "optimal", "optimal_scale": "optimal"}.get(str(scale))
    if s is None:
        raise ValueError(f"scale must be 'raw' or 'optimal', got {scale!r}")
    return s


def _stress_from_sums(sdd, see, sed, srr, scale):
    """Raw ``srr / sdd`` or optimal ``1 - sed^2 / (see sdd)`` (1 when ``see = 0``)."""
    if scale == "raw":
        return srr / sdd
    cos2 = jnp.where(see > 0, sed * sed / jnp.where(see > 0, see * sdd, 1.0), 0.0)
    return jnp.clip(1.0 - cos2, 0.0, 1.0)


@functools.partial(jax.jit, static_argnames=("metric", "fr_scale"))
def _tile_sums(G, g_all, g_blk, X_all, X_blk, start, lo, n, *, metric, fr_scale):
    """Sums over the pairs ``(j, i)`` of one tile with ``j > i``, ``j < n``, ``i >= lo``."""
    D2 = jnp.maximum(g_all[:, None] + g_blk[None, :] - 2.0 * G, 0.0)
    D = _metric_from_sq(D2, metric, fr_scale)
    E = jnp.sqrt(cross_sq_distances(X_all, X_blk))
    j = jnp.arange(G.shape[0])[:, None]
    i = start + jnp.arange(G.shape[1])[None, :]
    mask = (j > i) & (j < n) & (i >= lo)
    z = jnp.zeros((), D.dtype)

    def tot(x):
        return jnp.sum(jnp.where(mask, x, z))

    return tot(D * D), tot(E * E), tot(E * D), tot(jnp.square(E - D))


def sample_pairs(key: jax.Array, n: int, num_pairs: int) -> tuple[jax.Array, jax.Array]:
    """``num_pairs`` pairs ``(i, j)``, ``i != j``, uniform over the ``n (n - 1)`` ordered pairs
    (so uniform over unordered pairs), drawn with replacement. Pure; vmappable over ``key``."""
    ki, kj = jax.random.split(key)
    i = jax.random.randint(ki, (num_pairs,), 0, n)
    j = jax.random.randint(kj, (num_pairs,), 0, n - 1)
    return i, j + (j >= i)


def pair_stress_estimate(d: jax.Array, e: jax.Array, scale: str = "raw"
                         ) -> tuple[jax.Array, jax.Array]:
    """Plug-in stress from sampled pairs and the standard error of the delta method.

    Args:
      d: ``[M]`` target distances of the sampled pairs.
      e: ``[M]`` embedding distances of the same pairs.
      scale: ``"raw"`` or ``"optimal"``.

    Returns:
      ``(estimate, standard_error)`` scalars. Pure and vmappable.
    """
    scale = _canonical_scale(scale)
    M = d.shape[0]
    dd, ee, ed, rr = d * d, e * e, e * d, jnp.square(e - d)
    mdd, mee, med, mrr = dd.mean(), ee.mean(), ed.mean(), rr.mean()
    est = _stress_from_sums(mdd, mee, med, mrr, scale)
    if scale == "raw":
        z = (rr - est * dd) / mdd
    else:
        safe = jnp.where(mee > 0, mee, 1.0)
        z = (-2.0 * med / (safe * mdd) * ed + med * med / (safe * safe * mdd) * ee
             + med * med / (safe * mdd * mdd) * dd)
        z = jnp.where(mee > 0, z, 0.0)
    se = jnp.std(z, ddof=1) / jnp.sqrt(M)
    return est, se


@functools.partial(jax.jit, static_argnames=("metric", "fr_scale"))
def _pair_distances(dots, gi, gj, Xi, Xj, *, metric, fr_scale):
    D = _metric_from_sq(jnp.maximum(gi + gj - 2.0 * dots, 0.0), metric, fr_scale)
    return D, jnp.sqrt(jnp.sum(jnp.square(Xi - Xj), axis=-1))


def stress_from_distributions(P: Any, coords: Any, *, scale: str = "raw", metric: str = "chord",
                              fr_scale: float | None = None, block_size: int | None = None,
                              pairs: int | None = None, seed: int = 0, normalize: bool = False,
                              validate: bool = True) -> float | StressEstimate:
    """Stress of an embedding against the Hellinger geometry of ``P``, no ``[n, n]`` array.

    Args:
      P: ``[n, V]`` probability rows (dense, BCOO, scipy.sparse) or a prepared
        :class:`~posjax.geometry.sqrt_rows.SqrtRows` (streamed from counts, or row-sharded).
      coords: ``[n, k]`` embedding (MDS coordinates, a PE table, RoPE orbit coordinates, ALiBi's
        1-D positions as ``[n]``), or a list of them: each tile of ``S S^T`` (or each sampled
        pair's distance) is then computed once for all, and a list of results is returned.
      scale: ``"raw"`` (``sum (e - D)^2 / sum D^2``) or ``"optimal"`` (``min_a`` of it); or a
        tuple of them, for which every result becomes a dict ``{scale: result}`` computed from
        the same pass over the pairs.
      metric, fr_scale: the Hellinger metric of ``D`` (as in
        :func:`posjax.geometry.hellinger_matrix`).
      block_size: rows per tile of the exact pass (default ``max(8, 2^23 / n)``).
      pairs: None for the exact value; ``M`` to estimate from ``M`` sampled pairs.
      seed: seed of the pair sample.
      normalize, validate: as in :func:`posjax.geometry.hellinger_matrix`.

    Returns:
      The exact stress as a float, or with ``pairs`` a :class:`StressEstimate` (a list of them
      for a list of ``coords``)
      ``(value, ci_low, ci_high, half_width, num_pairs)`` with a 95 % interval.

    Raises:
      ValueError: bad shapes, options, probabilities, or an all-zero ``D``.
    """
    several = isinstance(scale, (tuple, list))
    scales = [_canonical_scale(s) for s in (scale if several else [scale])]
    if not scales:
        raise ValueError("scale is an empty tuple")
    metric = canonical_metric(metric)
    fr_scale = None if fr_scale is None else float(fr_scale)
    pick = (lambda by: by) if several else (lambda by: by[scales[0]])
    R = sqrt_rows(P, normalize=normalize, validate=validate)
    n = R.n
    if n < 2:
        raise ValueError(f"stress needs at least two positions, got n={n}")
    dtype = np.float64 if R.dtype == np.float64 else np.float32
    many = isinstance(coords, (list, tuple))
    Xs = [np.asarray(check_coords(c, n), dtype) for c in (coords if many else [coords])]
    if not Xs:
        raise ValueError("coords is an empty list")
    if pairs is not None:
        try:
            whole = not isinstance(pairs, (bool, str)) and float(pairs).is_integer()
        except (TypeError, ValueError):
            whole = False
        if not whole:
            raise ValueError(f"pairs must be an integer (number of sampled pairs), got {pairs!r}")
        out = [pick(by) for by in _sampled(R, Xs, scales, metric, fr_scale, int(pairs), seed)]
        return out if many else out[0]
    N = R.n_rows
    r = int(block_size) if block_size is not None else max(8, TILE_ENTRIES // N)
    if r < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    r = min(r, n)
    g = np.zeros(N, dtype)
    g[:n] = R.g
    g_j = jnp.asarray(g)
    X_js = [jnp.asarray(X if N == n else np.concatenate([X, np.zeros((N - n, X.shape[1]), dtype)]))
            for X in Xs]
    tot = np.zeros((len(Xs), 4))
    for lo in range(0, n, r):
        start = min(lo, n - r)
        G = R.cross_gram(start, r)  # one tile of S S^T serves every embedding
        for e, X_j in enumerate(X_js):
            sums = _tile_sums(G, g_j, g_j[start:start + r], X_j, X_j[start:start + r], start, lo,
                              n, metric=metric, fr_scale=fr_scale)
            tot[e] += np.asarray([float(v) for v in sums])
    if tot[0, 0] == 0.0:
        raise ValueError("D is identically zero (all positions share one distribution); stress "
                         "is undefined")
    out = [pick({s: float(_stress_from_sums(*t, s)) for s in scales}) for t in tot]
    return out if many else out[0]


def _sampled(R: SqrtRows, Xs, scales, metric, fr_scale, M: int, seed: int
             ) -> list[dict[str, StressEstimate]]:
    if M < 2:
        raise ValueError(f"pairs must be >= 2, got {M}")
    I, J = (np.asarray(a) for a in sample_pairs(jax.random.key(seed), R.n, M))
    dtype = Xs[0].dtype
    dots = R.pair_dots(I, J).astype(dtype)
    gI, gJ = R.g[I].astype(dtype), R.g[J].astype(dtype)
    d = np.empty(M, dtype)
    es = [np.empty(M, dtype) for _ in Xs]
    for a in range(0, M, PAIR_CHUNK):  # bounded memory: [chunk, k] coordinate gathers
        sl = slice(a, a + PAIR_CHUNK)
        for X, e in zip(Xs, es):
            dd, ee = _pair_distances(dots[sl], gI[sl], gJ[sl], X[I[sl]], X[J[sl]],
                                     metric=metric, fr_scale=fr_scale)
            d[sl], e[sl] = np.asarray(dd), np.asarray(ee)
    if not float(d.max()) > 0:
        raise ValueError("every sampled pair has D = 0; stress is undefined")
    est_fn = jax.jit(pair_stress_estimate, static_argnames="scale")
    out = []
    for e in es:
        by = {}
        for s in scales:
            est, se = (float(v) for v in est_fn(jnp.asarray(d), jnp.asarray(e), scale=s))
            h = Z95 * se
            by[s] = StressEstimate(est, est - h, est + h, h, M)
        out.append(by)
    return out
