"""Effective rank of a double-centred Gram spectrum (docs/interpretations.md).

The paper's claim (arXiv 2604.05217): the optimal encoding has rank ``r = rank(B) <= n - 1``.
With a finite corpus ``B`` is numerically full rank, so a rule is needed:

* ``"threshold"``: ``r_tau = #{k : lambda_k > tau * lambda_1}`` (default ``tau = 1e-6``);
* ``"energy"``: ``r_eps = min{r : sum_{k<=r} lambda_k / sum_{lambda>0} lambda >= 1 - eps}``
  (default ``eps = 1e-3``);
* ``"entropy"``: ``erank = exp(-sum_k p_k log p_k)``, ``p_k = lambda_k / sum_{lambda>0} lambda``
  over positive eigenvalues (O. Roy and M. Vetterli, "The effective rank: a measure of effective
  dimensionality", EUSIPCO 2007); real-valued, in ``[1, rank]``.
"""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

__all__ = ["RANK_RULES", "DEFAULT_TOL", "effective_rank", "parse_rank_rule"]

RANK_RULES = ("threshold", "energy", "entropy")
DEFAULT_TOL = {"threshold": 1e-6, "energy": 1e-3, "entropy": None}


def effective_rank(eigenvalues: Any, *, rule: str = "threshold", tol: float | None = None,
                   on: str = "eig_B") -> int | float:
    """Effective rank of a spectrum.

    Args:
      eigenvalues: ``[m]`` eigenvalues of ``B`` (any order; negative values are ignored except
        that they do not count as rank).
      rule: ``"threshold"``, ``"energy"`` or ``"entropy"`` (see module docstring).
      tol: ``tau`` for threshold, ``eps`` for energy (defaults 1e-6 and 1e-3); unused by
        entropy.
      on: ``"eig_B"`` (default) uses the eigenvalues as given; ``"sv_X"`` applies the rule to
        the singular values of ``X`` (``sqrt(lambda)``), which gives a different number.

    Returns:
      An ``int`` for threshold and energy (0 when no eigenvalue is positive), a ``float`` for
      entropy (0.0 when no eigenvalue is positive).

    Raises:
      ValueError: unknown rule or ``on``, NaN eigenvalues, or a tolerance outside its range.
    """
    if rule not in RANK_RULES:
        raise ValueError(f"rank rule must be one of {RANK_RULES}, got {rule!r}")
    if on not in ("eig_B", "sv_X"):
        raise ValueError(f"on must be 'eig_B' or 'sv_X', got {on!r}")
    lam = np.asarray(jnp.asarray(eigenvalues), dtype=np.float64).reshape(-1)
    if np.isnan(lam).any():
        raise ValueError("eigenvalues contain NaN")
    lam = np.sort(lam)[::-1]
    pos = lam[lam > 0]
    if on == "sv_X":
        pos = np.sqrt(pos)
    if pos.size == 0:
        return 0.0 if rule == "entropy" else 0
    tol = DEFAULT_TOL[rule] if tol is None else float(tol)
    if rule == "threshold":
        if tol < 0:
            raise ValueError(f"threshold tau must be >= 0, got {tol}")
        return int(np.sum(pos > tol * pos[0]))
    if rule == "energy":
        if not 0 <= tol < 1:
            raise ValueError(f"energy eps must be in [0, 1), got {tol}")
        frac = np.cumsum(pos) / pos.sum()
        # A tiny slack so that an exactly reached 1 - eps is not lost to round-off.
        return int(min(np.searchsorted(frac, 1.0 - tol - 1e-12, side="left") + 1, pos.size))
    p = pos / pos.sum()
    return float(np.exp(-np.sum(p * np.log(p))))


def parse_rank_rule(rank_rule: Any) -> tuple[str, float | None] | int:
    """Normalise a rank rule: ``"energy"``, ``("energy", 1e-3)`` or a fixed ``int`` rank."""
    if isinstance(rank_rule, (int, np.integer)) and not isinstance(rank_rule, bool):
        if rank_rule < 0:
            raise ValueError(f"a fixed rank must be >= 0, got {rank_rule}")
        return int(rank_rule)
    if isinstance(rank_rule, str):
        rule, tol = rank_rule, None
    elif isinstance(rank_rule, (tuple, list)) and len(rank_rule) == 2:
        rule, tol = rank_rule
    else:
        raise ValueError(f"rank_rule must be a rule name, (rule, tol) or an int, got {rank_rule!r}")
    if rule not in ("threshold", "energy"):
        raise ValueError(f"rank_rule must use 'threshold' or 'energy' (an integer rank is needed), "
                         f"got {rule!r}")
    return rule, tol
