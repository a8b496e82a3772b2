"""The result record of every ``ntk`` check."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

__all__ = ["CheckResult", "jsonable", "fmt"]


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """Outcome of one check.

    Attributes:
      name: the check's name (e.g. ``"lemma1_linearization"``).
      passed: whether ``statistic`` meets ``threshold`` and the conditions stated in ``detail``.
      statistic / threshold: the headline number and its pass threshold.
      detail: one line stating the reading tested, the numbers and the pass rule.
      data: per-width series, the configuration (every interpretation choice) and versions.
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


def jsonable(x):
    """Convert numpy containers / scalars recursively to JSON-serialisable Python objects."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    if isinstance(x, float) and not np.isfinite(x):
        return str(x)
    return x


def fmt(values) -> str:
    """``[v1, v2, ...]`` with 4 significant digits."""
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]"
