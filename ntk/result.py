"""The result record of every ``ntk`` check."""
from __future__ import annotations

import dataclasses
from typing import Any

from posjax._json import jsonable

__all__ = ["CheckResult", "outcome", "fmt"]


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """Outcome of one check.

    Attributes:
      name: the check's name (e.g. ``"lemma1_linearization"``).
      passed: whether ``statistic`` meets ``threshold`` and the conditions stated in ``detail``.
      statistic / threshold: the headline number and its pass threshold (fixed before the run).
      detail: one line stating the reading tested, the numbers and the pass rule.
      data: per-width series, the configuration, ``control`` and ``negative_control``
        (:func:`outcome` records), ``neural_tangents`` (the functions the check called,
        recorded at call time by :mod:`ntk.recording`) and versions.
    """

    name: str
    passed: bool
    statistic: float
    threshold: float
    detail: str
    data: dict = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": bool(self.passed),
                "statistic": float(self.statistic), "threshold": float(self.threshold),
                "detail": self.detail, "data": jsonable(self.data)}


def outcome(statistic: float, threshold: float, passed: bool, case: str) -> dict[str, Any]:
    """A control / negative-control record ``{"statistic", "threshold", "passed", "case"}``.

    ``passed`` means "the claim holds in this case": expected true for a control (a case where
    the claim must hold) and false for a negative control (a case violating its premise).
    """
    return {"statistic": float(statistic), "threshold": float(threshold),
            "passed": bool(passed), "case": case}


def fmt(values) -> str:
    """``[v1, v2, ...]`` with 4 significant digits."""
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]"
