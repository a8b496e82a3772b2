"""Stress of an encoding against a positional geometry, dense or matrix-free
(G. Cirrincione, arXiv 2604.05217, Eq. (4): normalised stress without square root).

A *target* is the geometry encodings are compared with:

* :class:`DenseTarget`: a Hellinger matrix ``D [n, n]``; accepts table rows (distances
  :func:`~posjax.geometry.dist_learned`) or distances ``E [n, n]``.
* :class:`RowsTarget`: the probability rows ``P [n, V]`` (no ``[n, n]`` array, see
  docs/long_context_geometry.md); accepts table rows only, exact (streamed) up to
  ``exact_max`` positions, else from ``pairs`` sampled pairs with a 95 % interval.

Both answer ``stress_of(table=..., distances=...)`` with ``{"raw", "optimal"}`` (plus
``"method"``, and ``"pairs"``/``"ci"`` when sampled, for rows targets).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from posjax.geometry.adapters import dist_learned
from posjax.geometry.hellinger import canonical_metric
from posjax.geometry.matrix_free import _GRAM_SCALE
from posjax.geometry.stress import stress
from posjax.geometry.streaming_stress import stress_from_distributions

__all__ = ["GRAM_METRICS", "has_gram_factorisation", "not_computed", "stress_pair",
           "coords_stress", "DenseTarget", "RowsTarget"]

#: Metrics whose ``B`` factorises as a Gram matrix of the centred ``sqrt(P)`` rows (the metrics
#: the matrix-free path of :mod:`posjax.geometry.matrix_free` accepts).
GRAM_METRICS = tuple(_GRAM_SCALE)


def has_gram_factorisation(metric: str) -> bool:
    """Whether ``metric`` (any alias) has a matrix-free path (chord, normalized)."""
    return canonical_metric(metric) in GRAM_METRICS


def not_computed(n: int) -> str:
    """The marker of a quantity the matrix-free path does not compute at ``n`` positions."""
    return f"not computed at n = {n} (matrix-free)"


def stress_pair(D: Any, E: Any) -> dict[str, float]:
    """``{"raw": sigma(E; D), "optimal": sigma*(E; D)}`` for distances ``D, E [n, n]``
    (Eq. (4), no square root; ``optimal`` at the least-squares scale of ``E``)."""
    return {"raw": float(stress(D, distances=E)),
            "optimal": float(stress(D, distances=E, scale="optimal"))}


def coords_stress(P: Any, coords: Sequence[Any], *, metric: str = "chord", exact_max: int = 8192,
                  pairs: int = 200_000, seed: int = 0) -> list[dict[str, Any]]:
    """Raw and optimal-scale stress of each configuration ``coords[i] [n, r_i]`` against the
    Hellinger geometry of ``P [n, V]``, without an ``[n, n]`` array.

    Exact (streamed) when ``n <= exact_max`` (``"method": "exact"``); otherwise estimated from
    ``pairs`` sampled pairs, the same for every configuration and both scales
    (``"method": "sampled_pairs"``, 95 % interval under ``"ci"``).
    """
    exact = P.shape[0] <= exact_max
    results = stress_from_distributions(P, list(coords), scale=("raw", "optimal"), metric=metric,
                                        pairs=None if exact else pairs, seed=seed)
    out = []
    for est in results:  # one pass over the pairs serves both scales
        if exact:
            out.append({"raw": float(est["raw"]), "optimal": float(est["optimal"]),
                        "method": "exact"})
        else:
            out.append({"raw": est["raw"].value, "optimal": est["optimal"].value,
                        "method": "sampled_pairs", "pairs": int(est["raw"].num_pairs),
                        "ci": {s: [e.ci_low, e.ci_high] for s, e in est.items()}})
    return out


class DenseTarget:
    """A dense Hellinger matrix ``D [n, n]`` to compare encodings with."""

    kind = "dense"

    def __init__(self, D: Any):
        self.D, self.n = D, int(D.shape[0])

    def head(self, n: int) -> "DenseTarget":
        """The target restricted to the first ``n`` positions."""
        return DenseTarget(self.D[:n, :n])

    def stress_of(self, *, table: Any = None, distances: Any = None) -> dict[str, float]:
        """:func:`stress_pair` of table rows ``[n, d]`` (Euclidean distances) or distances."""
        E = dist_learned(table) if table is not None else distances
        return stress_pair(self.D, np.asarray(E, np.float64))


class RowsTarget:
    """The Hellinger geometry of probability rows ``P [n, V]`` (no ``[n, n]`` array); the
    keyword arguments are those of :func:`coords_stress`."""

    kind = "matrix_free"

    def __init__(self, P: Any, *, metric: str = "chord", exact_max: int = 8192,
                 pairs: int = 200_000, seed: int = 0):
        self.P, self.n = P, int(P.shape[0])
        self.options = dict(metric=metric, exact_max=exact_max, pairs=pairs, seed=seed)

    def head(self, n: int) -> "RowsTarget":
        """The target restricted to the first ``n`` positions."""
        return RowsTarget(self.P[:n], **self.options)

    def stress_of(self, *, table: Any = None, distances: Any = None) -> dict[str, Any]:
        """:func:`coords_stress` of table rows ``[n, d]``; ValueError for distances alone (a
        bias-only encoding has no coordinates)."""
        if table is None:
            raise ValueError(f"stress {not_computed(self.n)}: this encoding has distances but no "
                             "coordinates")
        return coords_stress(self.P, [np.asarray(table, np.float64)], **self.options)[0]
