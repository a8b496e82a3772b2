"""Numerical checks of the theorems and Appendix A lemmas of arXiv 2604.05217.

G. Cirrincione, "On the Geometry of Positional Encodings in Transformers". Every check returns
a :class:`CheckResult` ``(name, passed, statistic, threshold, detail, data)``;
:func:`run_all` runs them (``python -m ntk --quick``). The readings and thresholds are in
:mod:`ntk.theorems` (Theorems 1 and 4) and :mod:`ntk.appendix_a` (Lemmas 1-5, conjecture):

| check | passes when |
|---|---|
| theorem1_necessity | NoPE equivariance dev <= 1e-5; NoPE accuracy <= 1/2, loss >= log 2 on a reversal-closed order task; learned PE accuracy >= 0.95 |
| theorem4_separation | min/mean pairwise PE distance >= 0.1 on every seed after near-zero loss from a tied start; tied positions keep the loss above its exact bound |
| lemma1_linearization | exact-vs-linearised position error shrinks with width (log-log slope < 0) |
| lemma2_sufficiency | comonotone-vs-shuffled positional-gradient gap < 1e-2 (attention toy, init) |
| lemma3_linear_displacement | R^2(Delta p ~ P) >= 0.99 |
| lemma4_distortion_bounds | c1 > 0 and c2/c1 <= 2 on the tangent space |
| lemma5_hellinger_monotonicity | Hellinger inequalities hold; rho(|dp|, d_H) >= 0.9 and rising to 1 |
| monotonicity_conjecture | rho(learned |p_i - p_j|, d_H) >= 0.95 and rising to 1 |
"""
from __future__ import annotations

import time
from typing import Callable

from ntk import appendix_a, theorems
from ntk._compat import versions
from ntk.result import CheckResult
from ntk.sweeps import SweepConfig

__all__ = ["CheckResult", "CHECKS", "quick_config", "full_config", "run_all",
           "theorem1_necessity", "theorem4_separation", "lemma1_linearization",
           "lemma2_sufficiency", "lemma3_linear_displacement", "lemma4_distortion_bounds",
           "lemma5_hellinger_monotonicity", "monotonicity_conjecture", "SweepConfig"]

theorem1_necessity = theorems.theorem1_necessity
theorem4_separation = theorems.theorem4_separation
lemma1_linearization = appendix_a.lemma1_linearization
lemma2_sufficiency = appendix_a.lemma2_sufficiency
lemma3_linear_displacement = appendix_a.lemma3_linear_displacement
lemma4_distortion_bounds = appendix_a.lemma4_distortion_bounds
lemma5_hellinger_monotonicity = appendix_a.lemma5_hellinger_monotonicity
monotonicity_conjecture = appendix_a.monotonicity_conjecture

CHECKS: dict[str, Callable[[SweepConfig], CheckResult]] = {
    "theorem1_necessity": theorem1_necessity,
    "theorem4_separation": theorem4_separation,
    "lemma1_linearization": lemma1_linearization,
    "lemma2_sufficiency": lemma2_sufficiency,
    "lemma3_linear_displacement": lemma3_linear_displacement,
    "lemma4_distortion_bounds": lemma4_distortion_bounds,
    "lemma5_hellinger_monotonicity": lemma5_hellinger_monotonicity,
    "monotonicity_conjecture": monotonicity_conjecture,
}


def quick_config() -> SweepConfig:
    """Widths 64 -> 1024 x 3 seeds; L2 widths 64 -> 512 with 1024 sequences."""
    return SweepConfig()


def full_config() -> SweepConfig:
    """Widths 64 -> 4096 x 3 seeds; L2 widths 64 -> 2048 with 2048 sequences."""
    return SweepConfig(widths=(64, 128, 256, 512, 1024, 2048, 4096),
                       sufficiency_widths=(64, 128, 256, 512, 1024, 2048),
                       sufficiency_sequences=2048)


def run_all(quick: bool = True, *, config: SweepConfig | None = None,
            names: list[str] | None = None, log: Callable[[str], None] | None = None
            ) -> list[CheckResult]:
    """Run the checks (all, or ``names``) and return their results in order.

    Every result's ``data`` gets the library versions (``versions``) and its wall time.

    Args:
      quick: use :func:`quick_config` (else :func:`full_config`) unless ``config`` is given.
      names: subset of :data:`CHECKS`.
      log: optional progress callback (one line per finished check).
    """
    config = config or (quick_config() if quick else full_config())
    names = list(CHECKS) if names is None else list(names)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f"unknown check(s) {unknown}; choose from {list(CHECKS)}")
    vers = versions()
    out = []
    for name in names:
        start = time.perf_counter()
        res = CHECKS[name](config)
        wall = time.perf_counter() - start
        res = CheckResult(res.name, res.passed, res.statistic, res.threshold, res.detail,
                          {**res.data, "versions": vers, "wall_s": round(wall, 2)})
        out.append(res)
        if log is not None:
            log(f"{name}: {'PASS' if res.passed else 'FAIL'} ({wall:.1f} s)")
    return out
