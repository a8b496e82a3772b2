"""Spectral diagnostics of positional geometry (docs/interpretations.md).

* :func:`spectrum_report` -- normalised top eigenvalues, ``lambda_1`` share, threshold / energy /
  entropy ranks and the non-Euclidean mass (table E2);
* :func:`dct_alignment` -- ``|corr(X[:, m-1], c_m)|`` with the DCT-II modes
  ``c_m(i) = cos(pi m (i + 1/2) / n)``: if ``D`` is Toeplitz, the MDS axes are close to DCT modes,
  so the MDS encoding is a sinusoidal one (an interpretation of the paper's sinusoidal
  justification);
* :func:`ramp_alignment` -- ``|corr(u_1, i - (n-1)/2)|`` (the ALiBi "rank-1" mechanism);
* :func:`shift_invariance_score` -- ``SIS = 1 - sum_{i<j} (D_ij - m_{j-i})^2 /
  sum_{i<j} (D_ij - m)^2`` (1 for a Toeplitz ``D``).

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217.
"""
from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from posjax.geometry.eigensolvers import eigh_descending
from posjax.geometry.mds import negative_mass
from posjax.geometry.rank import effective_rank
from posjax.geometry.validation import (as_float_array, check_distance_matrix,
                                        check_square_symmetric)

__all__ = ["spectrum_report", "dct_alignment", "ramp_alignment", "shift_invariance_score",
           "dct_modes"]


def spectrum_report(B: Any = None, k: int = 10, *, eigenvalues: Any = None, tau: float = 1e-6,
                    eps: Sequence[float] = (1e-3, 1e-2)) -> dict[str, Any]:
    """Summary of the spectrum of ``B`` (JSON-ready, plain Python numbers).

    Args:
      B: ``[n, n]`` double-centred Gram matrix (or pass ``eigenvalues``).
      k: number of leading normalised eigenvalues to report.
      eigenvalues: precomputed eigenvalues of ``B`` (any order).
      tau: threshold of ``r_tau``.
      eps: energy levels of ``r_eps``.

    Returns:
      ``{"n", "top_normalized" (lambda_k / sum lambda_+, k values), "lambda1_share", "r_tau",
      "tau", "r_eps" ({str(eps): r}), "erank", "negative_mass"}``.
    """
    if eigenvalues is None:
        if B is None:
            raise ValueError("pass B or eigenvalues")
        B = as_float_array(B, "B", ndim=2)
        check_square_symmetric(B, "B")
        eigenvalues, _ = eigh_descending(B)
    lam = np.sort(np.asarray(eigenvalues, np.float64).reshape(-1))[::-1]
    pos_sum = lam[lam > 0].sum()
    norm = lam[:k] / pos_sum if pos_sum > 0 else np.zeros(min(k, lam.size))
    return {
        "n": int(lam.size),
        "top_normalized": [float(v) for v in norm],
        "lambda1_share": float(norm[0]) if norm.size else 0.0,
        "r_tau": effective_rank(lam, rule="threshold", tol=tau),
        "tau": tau,
        "r_eps": {str(e): effective_rank(lam, rule="energy", tol=e) for e in eps},
        "erank": effective_rank(lam, rule="entropy"),
        "negative_mass": negative_mass(lam),
    }


def dct_modes(n: int, m_max: int) -> jax.Array:
    """DCT-II modes ``c_m(i) = cos(pi m (i + 1/2) / n)``, ``m = 1..m_max``, as ``[n, m_max]``."""
    i = jnp.arange(n, dtype=jnp.result_type(float))[:, None]
    m = jnp.arange(1, m_max + 1, dtype=i.dtype)[None, :]
    return jnp.cos(jnp.pi * m * (i + 0.5) / n)


def _abs_corr(a: jax.Array, b: jax.Array) -> jax.Array:
    """``|corr|`` between matching columns of ``a [n, m]`` and ``b [n, m]`` (0 for a constant)."""
    a = a - jnp.mean(a, axis=0)
    b = b - jnp.mean(b, axis=0)
    den = jnp.linalg.norm(a, axis=0) * jnp.linalg.norm(b, axis=0)
    return jnp.where(den > 0, jnp.abs(jnp.sum(a * b, axis=0)) / jnp.where(den > 0, den, 1.0), 0.0)


def dct_alignment(X: Any, m_max: int = 4) -> jax.Array:
    """``|corr(X[:, m-1], c_m)|`` for ``m = 1..m_max`` (docs/interpretations.md).

    Args:
      X: ``[n, k]`` MDS coordinates (or eigenvectors), axes in descending eigenvalue order,
        ``k >= m_max``.
      m_max: number of modes.

    Returns:
      ``[m_max]`` correlations in ``[0, 1]``.
    """
    X = as_float_array(X, "X", ndim=2)
    if X.shape[1] < m_max:
        raise ValueError(f"X has {X.shape[1]} columns, fewer than m_max={m_max}")
    return _abs_corr(X[:, :m_max], dct_modes(X.shape[0], m_max).astype(X.dtype))


def ramp_alignment(u1: Any) -> jax.Array:
    """``|corr(u_1, i - (n-1)/2)|`` for the leading eigenvector (or first MDS axis) ``u1 [n]``."""
    u = as_float_array(u1, "u1").reshape(-1)
    n = u.shape[0]
    ramp = jnp.arange(n, dtype=u.dtype) - (n - 1) / 2.0
    return _abs_corr(u[:, None], ramp[:, None])[0]


@jax.jit
def _sis(D: jax.Array) -> jax.Array:
    n = D.shape[0]
    i = jnp.arange(n)
    lag = i[None, :] - i[:, None]
    upper = lag > 0
    lag_idx = jnp.where(upper, lag, 0).ravel()
    w = upper.ravel().astype(D.dtype)
    sums = jnp.zeros(n, D.dtype).at[lag_idx].add(w * D.ravel())
    cnts = jnp.zeros(n, D.dtype).at[lag_idx].add(w)
    diag_mean = sums / jnp.maximum(cnts, 1.0)
    mean = jnp.sum(w * D.ravel()) / jnp.sum(w)
    resid = jnp.sum(w * jnp.square(D.ravel() - diag_mean[lag_idx]))
    total = jnp.sum(w * jnp.square(D.ravel() - mean))
    return jnp.where(total > 0, 1.0 - resid / jnp.where(total > 0, total, 1.0), 1.0)


def shift_invariance_score(D: Any) -> jax.Array:
    """Shift-invariance score ``SIS = 1 - sum_{i<j}(D_ij - m_{j-i})^2 / sum_{i<j}(D_ij - m)^2``.

    ``m_k`` is the mean of the ``k``-th superdiagonal and ``m`` the mean over ``i < j``. SIS is
    in ``[0, 1]``: 1 for a Toeplitz ``D`` (also returned when all off-diagonal ``D`` are equal).
    """
    D = check_distance_matrix(D)
    if D.shape[0] < 2:
        raise ValueError("shift_invariance_score needs n >= 2")
    return _sis(D)
