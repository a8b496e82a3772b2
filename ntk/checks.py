"""Numerical checks of the theorems and Appendix A lemmas of arXiv 2604.05217.

G. Cirrincione, "On the Geometry of Positional Encodings in Transformers". Every check returns
a :class:`CheckResult` ``(name, passed, statistic, threshold, detail, data)`` whose ``data``
holds a ``control`` (the claim must hold there) and a ``negative_control`` (the claim's premise
is violated there, so it must fail), and ``neural_tangents``: the neural-tangents functions the
check called, recorded at call time (:mod:`ntk.recording`). :func:`run_all` runs them
(``python -m ntk --quick``). The readings are in :mod:`ntk.theorems`, :mod:`ntk.appendix_a`
and :mod:`ntk.conjecture`, and in ``docs/ntk.md``:

| check | statistic | passes when |
|---|---|---|
| theorem1_necessity | z of NoPE attention-NTK accuracy over the bag-of-tokens Bayes accuracy | z <= 1.96 and permuted predictions unchanged |
| theorem4_separation | min distinct-P / max tied-P position distance (worst seed) | > 2 |
| lemma1_linearization | log-log slope of the linearisation error vs width | in [-0.7, -0.3] |
| lemma2_sufficiency | positional-gradient gap minus its noise floor (attention toy) | <= 1e-2 |
| lemma3_linear_displacement | log-log slope of 1 - R^2 (Delta p on P) vs width | < 0 |
| lemma4_distortion_bounds | c2/c1 of J_p^T on the tangent space at the largest width | <= 2, shrinking |
| lemma5_hellinger_monotonicity | rho(|dp|, d_H) minus its Euclidean ceiling | <= 0.02, bounds on every pair |
| monotonicity_conjecture | Spearman(Hellinger stress, held-out loss) over frozen PE tables | bootstrap CI above 0 |
"""
from __future__ import annotations

import time
from typing import Callable

import jax

from ntk import appendix_a, conjecture, theorems
from ntk._compat import versions
from ntk.recording import recording
from ntk.conjecture import ConjectureConfig
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
monotonicity_conjecture = conjecture.monotonicity_conjecture

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
    """CPU-sized: widths 64 -> 1024 x 3 seeds; L2 widths 64 -> 512 with 1024 sequences; the
    conjecture with 24 tables x 5 seeds x 2 corpora and finite widths 64 -> 1024."""
    return SweepConfig()


def full_config() -> SweepConfig:
    """Sized for one GPU: widths 64 -> 4096 x 5 seeds; L2 widths 64 -> 2048 with 4096
    sequences; the conjecture with 40 tables x 10 seeds x 3 corpora and finite widths
    64 -> 4096 (8 Monte Carlo samples)."""
    return SweepConfig(widths=(64, 128, 256, 512, 1024, 2048, 4096), seeds=(0, 1, 2, 3, 4),
                       sufficiency_widths=(64, 128, 256, 512, 1024, 2048),
                       sufficiency_sequences=4096, sufficiency_resamples=5,
                       theorem1_train=1024, theorem1_test=2048, theorem4_seeds=(0, 1, 2, 3, 4),
                       conjecture=ConjectureConfig(tables=40, seeds=tuple(range(10)),
                                                   corpora=(0, 1, 2), widths=(64, 256, 1024, 4096),
                                                   mc_samples=8))


def run_all(quick: bool = True, *, config: SweepConfig | None = None,
            names: list[str] | None = None, log: Callable[[str], None] | None = None
            ) -> list[CheckResult]:
    """Run the checks (all, or ``names``) and return their results in order.

    Every result's ``data`` gets the neural-tangents functions the check called
    (``neural_tangents``, recorded at call time), the library versions and its wall time. JAX's
    compilation caches are cleared before each check, so every traced neural-tangents call is
    made (and recorded) again by the check that needs it.

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
        jax.clear_caches()
        with recording() as calls:
            res = CHECKS[name](config)
        wall = time.perf_counter() - start
        res = CheckResult(res.name, res.passed, res.statistic, res.threshold, res.detail,
                          {**res.data, "neural_tangents": sorted(calls), "versions": vers,
                           "wall_s": round(wall, 2)})
        out.append(res)
        if log is not None:
            log(f"{name}: {'PASS' if res.passed else 'FAIL'} ({wall:.1f} s)")
    return out
