"""Matrix-free classical MDS from positional distributions: no ``[n, n]`` array.

For the chord metric the double-centred matrix of classical MDS is
``B = -1/2 J D^(2) J = (J S)(J S)^T`` with ``S = sqrt(P)`` and ``J = I - 11^T/n`` (G.
Cirrincione, arXiv 2604.05217, Eq. (3) with Torgerson's double centring), so the top-``k``
eigenpairs of ``B`` are the top-``k`` left singular pairs of the implicitly centred ``A = J S``
(``lambda = sigma^2``). :func:`mds_from_distributions` finds them by randomized subspace
iteration in a restarted block Krylov space with Rayleigh-Ritz (N. Halko, P.-G. Martinsson,
J. A. Tropp, "Finding structure with randomness", SIAM Review 2011, Alg. 4.4; C. Musco and
C. Musco, "Randomized block Krylov methods for stronger and faster approximate singular value
decomposition", NeurIPS 2015; the Ritz step of Y. Saad, *Numerical Methods for Large Eigenvalue
Problems*, ch. 5): one ``A^T Q`` and one ``A Z`` product per product with ``B``, each
``O(nnz(S) * (k + p))``, with the centring applied as a rank-one correction
(``A X = S X - 1 (mu^T X)``, ``mu = S^T 1 / n``). The ``"normalized"`` metric is
``chord / sqrt(2)``, so its ``B`` is half the chord one. ``fr_arc`` and ``fisher_rao`` have no
such factorisation.

Effective-rank diagnostics come from the top-``k`` eigenvalues and the closed-form
``trace(B) = sum_i ||s_i||^2 - ||1^T S||^2 / n`` (:func:`topk_spectrum_report`).
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np

from posjax.geometry.eigensolvers import fix_signs
from posjax.geometry.hellinger import canonical_metric
from posjax.geometry.mds import MDSResult
from posjax.geometry.sqrt_rows import sqrt_rows

__all__ = ["mds_from_distributions", "b_trace", "topk_spectrum_report"]

#: Squared-chord scale of each metric with a Gram factorisation (``D^2 = c * D^2_chord``).
_GRAM_SCALE = {"chord": 1.0, "normalized": 0.5}


def _gram_scale(metric: str) -> float:
    metric = canonical_metric(metric)
    if metric not in _GRAM_SCALE:
        raise ValueError(f"metric {metric!r} has no Gram factorisation of B; matrix-free MDS "
                         "supports 'chord' and 'normalized' (use hellinger_matrix and "
                         "classical_mds for the arc metrics)")
    return _GRAM_SCALE[metric]


def _orth(Y: np.ndarray, K: np.ndarray | None = None) -> np.ndarray:
    """Orthonormal basis of the columns of ``Y`` (orthogonal to the orthonormal ``K`` when
    given): two passes of projection and Gram-eigendecomposition scaling (CholeskyQR2-like;
    BLAS-3 only, which is far cheaper than Householder QR of a tall block on a CPU)."""
    for _ in range(2):
        if K is not None:
            Y = Y - K @ (K.T @ Y)
        G = Y.T @ Y
        lam, W = np.linalg.eigh(0.5 * (G + G.T))
        keep = lam > 1e-13 * max(lam[-1], np.finfo(np.float64).tiny)
        Y = Y @ (W[:, keep] / np.sqrt(lam[keep])[None, :])
    return Y


def mds_from_distributions(P: Any, k: int, *, metric: str = "chord",
                           oversample: int | None = None, depth: int = 3,
                           tol: float | None = None, max_iter: int = 300, seed: int = 0, normalize: bool = False,
                           validate: bool = True, return_info: bool = False
                           ) -> MDSResult | tuple[MDSResult, dict]:
    """Top-``k`` classical MDS of the Hellinger geometry of ``P``, without an ``[n, n]`` array.

    Args:
      P: ``[n, V]`` probability rows: dense (numpy/jax), BCOO, scipy.sparse, or a prepared
        :class:`~posjax.geometry.sqrt_rows.SqrtRows` (e.g. streamed from counts with
        :func:`~posjax.geometry.sqrt_rows.sqrt_rows_from_counts`, or row-sharded with
        :func:`posjax.distributed.sharded_sqrt_rows`).
      k: number of coordinates / eigenpairs.
      metric: ``"chord"`` (default) or ``"normalized"``.
      oversample: extra block columns ``p`` (default ``max(k, 16)``).
      depth: Krylov blocks per restart beyond the first (the basis has ``(depth + 1) (k + p)``
        columns; 0 is plain subspace iteration).
      tol: stop when every wanted Ritz pair has ``||B u - lambda u|| <= tol * lambda_1``
        (default 1e-9 for float64 ``P``, 1e-6 for float32).
      max_iter: cap on the products with ``B`` (a warning is issued when it is reached
        unconverged).
      seed: seed of the Gaussian start block.
      normalize, validate: as in :func:`posjax.geometry.hellinger_matrix`.
      return_info: also return ``{"b_products", "residual", "trace_b", "products"}``
        (``products`` counts the products with ``S`` or ``S^T``).

    Returns:
      :class:`~posjax.geometry.MDSResult` ``(coords [n, k], eigenvalues [k] of B descending,
      rank k, negative_mass None)``; coordinates ``U_k Lambda_k^(1/2)`` with the sign
      convention of :func:`posjax.geometry.classical_mds` (largest-|entry| positive).

    Raises:
      ValueError: invalid ``P``, a metric without Gram factorisation, ``k`` out of range,
        rows that are all the same distribution (``trace(B)`` zero to round-off).
    """
    c = _gram_scale(metric)
    R = sqrt_rows(P, normalize=normalize, validate=validate)
    n, V = R.shape
    if not 1 <= k <= min(n - 1, V):
        raise ValueError(f"k must be in [1, min(n - 1, V) = {min(n - 1, V)}], got {k}")
    p = max(k, 16) if oversample is None else int(oversample)
    if p < 0 or depth < 0:
        raise ValueError(f"oversample and depth must be >= 0, got {oversample}, {depth}")
    b = min(k + p, n, V)
    if tol is None:
        tol = 1e-9 if R.dtype == np.float64 else 1e-6
    mu = R.col_sum / n
    if not R.trace_b() > (1e-12 if R.dtype == np.float64 else 1e-6) * float(R.g.sum()):
        raise ValueError(f"every row of P is the same distribution (trace(B) = 0): the "
                         f"Hellinger distances are all 0 and there is no MDS embedding of "
                         f"{n} distinct points")

    def A(X):  # (J S) X
        Y = R.matmul(X).astype(np.float64)
        return Y - (mu @ X)[None, :]

    def At(Y):  # (J S)^T Y
        return R.rmatmul(Y).astype(np.float64) - np.outer(mu, Y.sum(axis=0))

    rng = np.random.default_rng(seed)
    Q = _orth(A(rng.standard_normal((V, b))))
    res, products, it = np.inf, 1, 0
    while it < max_iter:
        # One restart: block Krylov basis [Q, BQ, ..., B^depth Q], then Rayleigh-Ritz on it.
        K, BK = [Q], []
        for j in range(depth + 1):
            BK.append(A(At(K[-1])))
            products += 2
            it += 1
            if j < depth:
                nxt = _orth(BK[-1], np.hstack(K))
                if nxt.shape[1] == 0 or sum(x.shape[1] for x in K) >= n:
                    break
                K.append(nxt)
        K, BK = np.hstack(K), np.hstack(BK)
        T = K.T @ BK
        w, W = np.linalg.eigh(0.5 * (T + T.T))
        w, W = w[::-1][:b], W[:, ::-1][:, :b]
        U, BU = K @ W, BK @ W
        lam1 = max(abs(w[0]), np.finfo(np.float64).tiny)
        res = float(np.max(np.linalg.norm(BU[:, :k] - U[:, :k] * w[:k], axis=0)) / lam1)
        if res <= tol:
            break
        Q = _orth(U)
    else:
        warnings.warn(f"mds_from_distributions: block Krylov iteration did not reach "
                      f"tol={tol:.1e} in {max_iter} products with B (residual {res:.1e})",
                      stacklevel=2)
    lam = c * w[:k]
    U = fix_signs(jnp.asarray(U[:, :k]))
    coords = U * jnp.sqrt(jnp.maximum(jnp.asarray(lam), 0.0))[None, :]
    out_dtype = R.dtype if R.dtype in (np.float32, np.float64) else np.float32
    result = MDSResult(coords.astype(out_dtype), jnp.asarray(lam, out_dtype), int(k), None)
    if return_info:
        return result, {"b_products": it, "residual": res, "trace_b": c * R.trace_b(),
                        "products": products}
    return result


def b_trace(P: Any, *, metric: str = "chord", normalize: bool = False,
            validate: bool = True) -> float:
    """``trace(B)`` of the Hellinger geometry in closed form: ``c (sum_i ||s_i||^2 -
    ||sum_i s_i||^2 / n)`` (``= c n (1 - ||mean_i s_i||^2)`` for normalised rows; ``c = 1``
    chord, ``1/2`` normalised). It equals the sum of all eigenvalues of ``B``."""
    c = _gram_scale(metric)
    return c * sqrt_rows(P, normalize=normalize, validate=validate).trace_b()


def topk_spectrum_report(eigenvalues: Any, trace: float, *, tau: float = 1e-6,
                         eps: Sequence[float] = (1e-3, 1e-2, 1e-1)) -> dict[str, Any]:
    """Effective-rank diagnostics from the top-``k`` eigenvalues of a PSD ``B`` and its trace.

    The trace is the sum of the whole spectrum, so the energy captured by the top ``r`` is known
    exactly for ``r <= k``; ranks beyond ``k`` are only bounded.

    Args:
      eigenvalues: ``[k]`` top eigenvalues (any order).
      trace: ``trace(B)`` (:func:`b_trace`).
      tau: threshold of ``r_tau = #{lambda > tau lambda_1}``.
      eps: energy levels: ``r_eps = min{r : sum_{<=r} lambda / trace >= 1 - eps}``.

    Returns:
      ``{"k", "trace", "top_normalized" (lambda / trace), "lambda1_share", "captured" (top-k
      energy fraction), "r_tau" (int, or ">k" as the string when every computed eigenvalue
      passes), "r_eps" ({str(eps): int or ">k"})}``.
    """
    lam = np.sort(np.asarray(eigenvalues, np.float64).reshape(-1))[::-1]
    trace = float(trace)
    if not trace > 0:
        raise ValueError(f"trace(B) must be positive, got {trace}")
    k = lam.size
    top = float(np.maximum(lam, 0.0).sum())
    if top > trace * (1.0 + 1e-3):  # beyond round-off: not the same matrix
        raise ValueError(f"the top-{k} eigenvalues sum to {top:.6g} > trace(B) = {trace:.6g} "
                         f"(lambda_1 share {lam[0] / trace:.3g}); the eigenvalues and the trace "
                         f"are not of the same PSD matrix")
    frac = np.cumsum(np.maximum(lam, 0.0)) / trace
    r_tau = int(np.sum(lam > tau * lam[0]))
    r_eps = {}
    for e in eps:
        hit = np.flatnonzero(frac >= 1.0 - e - 1e-12)
        r_eps[str(e)] = int(hit[0]) + 1 if hit.size else f">{k}"
    return {"k": k, "trace": trace, "top_normalized": [float(v) for v in lam / trace],
            "lambda1_share": float(lam[0] / trace), "captured": float(frac[-1]),
            "r_tau": r_tau if r_tau < k else f">={k}", "r_eps": r_eps}
