"""Metric SMACOF (Guttman transform) for raw stress (de Leeuw 1977).

Unweighted update ``X <- (1/n) B~(X) X`` with ``B~_ij = -D_ij / e_ij`` (``i != j``, ``e_ij > 0``),
``B~_ij = 0`` when ``e_ij = 0`` and ``B~_ii = -sum_{j != i} B~_ij``. Each step is one
``[n, n] x [n, k]`` GEMM; the raw stress numerator ``sum_{i<j} (e_ij - D_ij)^2`` is
non-increasing along the iterations (majorisation).

References: J. de Leeuw, "Applications of convex analysis to multidimensional scaling", 1977;
I. Borg and P. J. F. Groenen, *Modern Multidimensional Scaling*, 2nd ed., Springer 2005, ch. 8.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from posjax.geometry.stress import pairwise_distances
from posjax.geometry.validation import as_float_array, check_coords, check_distance_matrix

__all__ = ["smacof", "guttman_transform"]

HIGHEST = lax.Precision.HIGHEST


def _stress_and_update(D: jax.Array, X: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One pass over ``D``: the raw stress numerator of ``X`` and its Guttman update.

    ``(B~(X) X)_i = sum_j r_ij (x_i - x_j) = x_i sum_j r_ij - (R X)_i`` with
    ``r_ij = D_ij / e_ij`` (0 where ``e_ij = 0``, so also on the diagonal).
    """
    n = D.shape[0]
    E = pairwise_distances(X)
    pos = E > 0
    ratio = jnp.where(pos, D / jnp.where(pos, E, 1.0), 0.0)
    numerator = 0.5 * jnp.sum(jnp.square(E - D))  # sum over i < j (D, E symmetric, 0 diagonal)
    BX = jnp.sum(ratio, axis=1, keepdims=True) * X - jnp.matmul(ratio, X, precision=HIGHEST)
    return numerator, BX / n


@jax.jit
def guttman_transform(D: jax.Array, X: jax.Array) -> jax.Array:
    """One Guttman update ``(1/n) B~(X) X`` of ``X [n, k]`` for targets ``D [n, n]``."""
    return _stress_and_update(D, X)[1]


@functools.partial(jax.jit, static_argnames=("max_iter", "run_all"))
def _smacof(D, X0, tol, *, max_iter, run_all=False):
    """Up to ``max_iter`` updates; each step reads ``D`` once (stress of X and its update)."""
    sdd = 0.5 * jnp.sum(jnp.square(D))
    hist = jnp.zeros((max_iter + 1,), D.dtype)
    if max_iter == 0:
        s0, _ = _stress_and_update(D, X0)
        return X0, hist.at[0].set(s0 / sdd), jnp.asarray(0)
    s0, X1 = _stress_and_update(D, X0)
    hist = hist.at[0].set(s0 / sdd)

    def cond(state):
        it, _, _, going, _ = state
        return (it < max_iter) & going

    def body(state):
        it, X, prev, _, hist = state
        s, X_next = _stress_and_update(D, X)  # s = stress numerator after `it` updates
        going = (run_all | ((prev - s) > tol * prev)) & (s > 0)
        return it + 1, X_next, s, going, hist.at[it].set(s / sdd)

    it, X, _, _, hist = lax.while_loop(
        cond, body, (jnp.asarray(1), X1, s0, s0 > 0, hist))
    s_final, _ = _stress_and_update(D, X)
    return X, hist.at[it].set(s_final / sdd), it


def smacof(D: Any, init: Any = "cmds", *, dim: int | None = None, max_iter: int = 300,
           tol: float | None = None, return_history: bool = False, seed: int = 0,
           validate: bool = True):
    """Minimise raw stress ``sigma(X; D)`` by SMACOF, starting from ``init``.

    Args:
      D: ``[n, n]`` target distances.
      init: ``[n, k]`` start configuration, ``"cmds"`` (classical MDS in ``dim`` dimensions)
        or ``"random"`` (standard normal, ``dim`` columns, ``seed``).
      dim: output dimension when ``init`` is a string.
      max_iter: maximum number of Guttman updates.
      tol: stop when the relative decrease of the stress numerator between two updates falls
        to ``tol`` or below. ``None`` (default): ``4 * eps`` of ``D``'s dtype (a few ulps: 4.8e-7
        in float32, 8.9e-16 in float64), the resolution at which the stress can still be seen to
        decrease; a smaller value only stops on rounding noise. ``0``: stop only when the stress
        no longer decreases at all in floating point. A negative value runs all ``max_iter``
        updates (a fixed budget, e.g. for benchmarks); every rule also stops at zero stress.
      return_history: also return the normalised raw stress before the first and after every
        update (``[num_updates + 1]``, non-increasing).
      seed: seed for ``init="random"``.
      validate: check ``D``.

    Each iteration reads ``D`` once: the stress of the current configuration and its Guttman
    update come out of the same pass.

    Returns:
      ``coords [n, k]``, or ``(coords, history)``.

    Raises:
      ValueError: invalid ``D``, ``init`` or ``dim``.
    """
    D = check_distance_matrix(D) if validate else as_float_array(D, "D", ndim=2)
    n = D.shape[0]
    if isinstance(init, str):
        if dim is None or dim < 1:
            raise ValueError(f"init={init!r} needs dim >= 1, got {dim}")
        if init == "cmds":
            from posjax.geometry.mds import classical_mds  # noqa: PLC0415

            X0 = classical_mds(D, dim=dim, validate=False).coords
        elif init == "random":
            X0 = jax.random.normal(jax.random.key(seed), (n, dim), D.dtype)
        else:
            raise ValueError(f"init must be an array, 'cmds' or 'random', got {init!r}")
    else:
        X0 = check_coords(init, n, "init")
    if max_iter < 0:
        raise ValueError(f"max_iter must be >= 0, got {max_iter}")
    X0 = X0.astype(D.dtype)
    if tol is None:
        tol = 4 * float(jnp.finfo(D.dtype).eps)
    elif not math.isfinite(tol):
        raise ValueError(f"tol must be a finite number or None, got {tol}")
    X, hist, it = _smacof(D, X0, jnp.asarray(max(tol, 0.0), D.dtype), max_iter=int(max_iter),
                          run_all=bool(tol < 0))
    if not return_history:
        return X
    return X, hist[: int(it) + 1]
