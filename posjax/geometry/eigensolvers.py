"""Symmetric eigensolvers for classical MDS: full ``eigh`` and a jitted top-k subspace iteration.

Both return eigenvalues in **descending** order and eigenvectors with a deterministic sign
(each column's largest-magnitude entry is positive; docs/design.md).

The top-k solver is block subspace iteration with Rayleigh-Ritz (Rutishauser's method; see
Y. Saad, *Numerical Methods for Large Eigenvalue Problems*, 2nd ed., ch. 5): one ``B @ Q`` GEMM
``[n, n] x [n, k + p]`` per step, a re-orthonormalisation, and a stop when every wanted Ritz
pair has residual ``||B u - lambda u|| <= tol * |lambda_1|``. The block is re-orthonormalised
through the eigendecomposition of its small Gram matrix after dividing each column of ``B U``
by its Ritz value (same span, near-orthonormal, so two passes are stable). It converges to
the eigenvalues of largest magnitude; for a PSD ``B`` (the chord metric) these are the top ones.
"""
from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["fix_signs", "eigh_descending", "top_eigh"]

HIGHEST = lax.Precision.HIGHEST


@jax.jit
def fix_signs(U: jax.Array) -> jax.Array:
    """Flip each column of ``U [n, k]`` so that its largest-|entry| is positive.

    Ties in magnitude are broken by the first index (``argmax``), so the result is deterministic.
    """
    idx = jnp.argmax(jnp.abs(U), axis=0)
    s = jnp.sign(U[idx, jnp.arange(U.shape[1])])
    return U * jnp.where(s == 0, 1.0, s).astype(U.dtype)


@jax.jit
def eigh_descending(B: jax.Array) -> tuple[jax.Array, jax.Array]:
    """All eigenpairs of the symmetric ``B [n, n]``, eigenvalues descending, signs fixed."""
    w, U = jnp.linalg.eigh(0.5 * (B + B.T), symmetrize_input=False)
    return w[::-1], fix_signs(U[:, ::-1])


def _orthonormalize(X: jax.Array) -> jax.Array:
    """Orthonormal basis of the columns of ``X [n, m]`` via the eigendecomposition of the small
    Gram ``X^T X`` (two passes, as in CholeskyQR2; an ``m x m`` ``eigh`` is far cheaper on CPU
    than a Householder QR of a tall matrix)."""
    for _ in range(2):
        G = jnp.matmul(X.T, X, precision=HIGHEST)
        lam, W = jnp.linalg.eigh(0.5 * (G + G.T))
        lam = jnp.maximum(lam, jnp.finfo(X.dtype).eps * jnp.max(lam))
        X = jnp.matmul(X, W * lax.rsqrt(lam)[None, :], precision=HIGHEST)
    return X


@functools.partial(jax.jit, static_argnames=("k", "block", "max_iter"))
def _subspace(B, key, tol, *, k, block, max_iter):
    n = B.shape[0]
    Q = _orthonormalize(jax.random.normal(key, (n, block), B.dtype))

    def ritz(Q):
        BQ = jnp.matmul(B, Q, precision=HIGHEST)
        T = jnp.matmul(Q.T, BQ, precision=HIGHEST)
        w, V = jnp.linalg.eigh(0.5 * (T + T.T))
        order = jnp.argsort(-jnp.abs(w))  # keep the largest-magnitude Ritz values first
        w, V = w[order], V[:, order]
        U = jnp.matmul(Q, V, precision=HIGHEST)
        BU = jnp.matmul(BQ, V, precision=HIGHEST)
        res = jnp.linalg.norm(BU[:, :k] - U[:, :k] * w[:k], axis=0)
        scale = jnp.maximum(jnp.abs(w), jnp.finfo(B.dtype).eps * jnp.abs(w[0]))
        # B U / theta = U + residual / theta: the same span, but well conditioned.
        return w, U, BU / scale[None, :], jnp.max(res) / jnp.maximum(jnp.abs(w[0]),
                                                                      jnp.finfo(B.dtype).tiny)

    w, U, BU, err = ritz(Q)

    def cond(state):
        it, _, _, _, err = state
        return (it < max_iter) & (err > tol)

    def body(state):
        it, _, _, BU, _ = state
        Q = _orthonormalize(BU)
        w, U, BU, err = ritz(Q)
        return it + 1, w, U, BU, err

    it, w, U, _, err = lax.while_loop(cond, body, (0, w, U, BU, err))
    return w, U, it, err


def top_eigh(B: jax.Array, k: int, *, tol: float | None = None, max_iter: int = 500,
             oversample: int | None = None, seed: int = 0, fallback: bool = True
             ) -> tuple[jax.Array, jax.Array]:
    """Top-``k`` eigenpairs of a symmetric ``B [n, n]`` by subspace iteration.

    Args:
      B: symmetric matrix (PSD for the guarantee that the top eigenvalues are found).
      k: number of eigenpairs.
      tol: residual tolerance relative to ``|lambda_1|`` (default 1e-5 in float32, 1e-10 in
        float64).
      max_iter: iteration cap.
      oversample: extra block columns ``p`` (default ``max(k, 16)``); more columns converge in
        fewer steps when the spectrum decays slowly.
      seed: PRNG seed of the random start block.
      fallback: when not converged after ``max_iter``, warn and use full ``eigh``; with False,
        return the unconverged pairs.

    Returns:
      ``(eigenvalues [k] descending, eigenvectors [n, k])`` with deterministic signs.
    """
    n = B.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, n={n}], got {k}")
    p = max(k, 16) if oversample is None else int(oversample)
    block = min(n, k + p)
    if block >= n // 2:
        w, U = eigh_descending(B)
        return w[:k], U[:, :k]
    if tol is None:
        tol = 1e-10 if B.dtype == jnp.float64 else 1e-5
    w, U, it, err = _subspace(B, jax.random.key(seed), jnp.asarray(tol, B.dtype), k=k,
                              block=block, max_iter=max_iter)
    if float(err) > tol:
        if fallback:
            warnings.warn(f"top_eigh: subspace iteration did not reach tol={tol:.1e} in "
                          f"{max_iter} steps (residual {float(err):.1e}); using full eigh",
                          stacklevel=2)
            w, U = eigh_descending(B)
            return w[:k], U[:, :k]
    order = jnp.argsort(-w[:k])
    return w[:k][order], fix_signs(U[:, :k][:, order])
