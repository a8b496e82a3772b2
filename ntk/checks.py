"""Numerical checks of the theorems and Appendix A lemmas of arXiv 2604.05217.

G. Cirrincione, "On the Geometry of Positional Encodings in Transformers". Every check returns
a :class:`CheckResult` ``(name, passed, statistic, threshold, detail, data)`` whose ``data``
holds a ``control`` (the claim must hold there) and a ``negative_control`` (the claim's premise
is violated, so it must fail). :data:`SPECS` says, for each check, whether it is a theory check
(a neural-tangents prediction against a quantity computed without it) or a guard (a symmetry or
an identity), its premise breakers and its nuisance grid; :func:`run_all` runs the checks
through the mutation harness of :mod:`ntk.mutants` (``python -m ntk --quick``). The readings
are in :mod:`ntk.theorems`, :mod:`ntk.appendix_a`, :mod:`ntk.attention_lemmas` and
:mod:`ntk.conjecture`, and in ``docs/interpretations.md``.
"""
from __future__ import annotations

import time
from typing import Callable

from ntk import appendix_a, attention_lemmas, conjecture, theorems
from ntk._compat import versions
from ntk.attention_lemmas import AttentionLemmaConfig
from ntk.conjecture import ConjectureConfig
from ntk.mutants import CheckSpec, run_check
from ntk.result import CheckResult
from ntk.sweeps import SweepConfig

__all__ = ["CheckResult", "CHECKS", "SPECS", "quick_config", "full_config", "run_all",
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


def _leave_one_seed_out(cfg) -> tuple:
    return tuple(tuple(s for s in cfg.seeds if s != drop) for drop in cfg.seeds)


def _windows(cfg) -> tuple:
    return tuple(w for w in cfg.window_grid if w in cfg.widths)


def _horizons(cfg) -> tuple:
    """Half and twice the default horizon, where the recorded trajectory has them."""
    h = cfg.horizon_steps
    return tuple(v for v in (h // 2, 2 * h)
                 if 0 < v <= cfg.lemma_steps and v % cfg.record_every == 0 and v != h)


_LAZY_NUISANCE = {"window_top": _windows, "horizon_steps": _horizons,
                  "seed_subset": _leave_one_seed_out}
_SHUFFLED = {"shuffle_positions": True}

SPECS: dict[str, CheckSpec] = {
    "theorem1_necessity": CheckSpec(
        theorem1_necessity, kind="guard",
        premise_breakers={"positional_signal": {"theorem1_pe": "SUM"}},
        nuisance={"theorem1_ridge": (0.01, 1.0), "theorem1_train": (128, 512)},
        description="permutation symmetry and the bag-of-tokens bound of a NoPE attention NTK"),
    "theorem4_separation": CheckSpec(
        theorem4_separation, kind="guard",
        premise_breakers={"shared_P": {"theorem4_shared_P": True}},
        nuisance={"theorem4_samples": (100, 400, 1000), "theorem4_seeds": ((3, 4, 5),)},
        description="separation of trained positions relative to the data's own separation"),
    "lemma1_linearization": CheckSpec(
        lemma1_linearization, premise_breakers={"mean_field": appendix_a.mean_field},
        nuisance=_LAZY_NUISANCE,
        description="exact vs nt.linearize training: error rate with width"),
    "lemma2_sufficiency": CheckSpec(
        lemma2_sufficiency, kind="guard",
        premise_breakers={"different_marginals": {"sufficiency_reversed": True}},
        nuisance={"sufficiency_sequences": (512, 2048), "sufficiency_seed": (2,)},
        description="identity at initialisation (context-free readout)"),
    "lemma3_linear_displacement": CheckSpec(
        lemma3_linear_displacement,
        premise_breakers={"mean_field": appendix_a.mean_field, "shuffled_positions": _SHUFFLED},
        nuisance=_LAZY_NUISANCE,
        description="exact vs nt.linearize affine maps of the displacement"),
    "lemma4_distortion_bounds": CheckSpec(
        lemma4_distortion_bounds, premise_breakers={"bottleneck": appendix_a.bottleneck},
        nuisance={"window_top": _windows, "seed_subset": _leave_one_seed_out},
        description="c1, c2 from nt.empirical_ntk_fn against exact one-step displacements"),
    "lemma5_hellinger_monotonicity": CheckSpec(
        lemma5_hellinger_monotonicity, premise_breakers={"mean_field": appendix_a.mean_field},
        nuisance=_LAZY_NUISANCE,
        description="Hellinger-monotonicity score of trained displacements, L4 bounds"),
    "monotonicity_conjecture": CheckSpec(
        monotonicity_conjecture,
        premise_breakers=getattr(conjecture, "PREMISE_BREAKERS", {}),
        nuisance=getattr(conjecture, "NUISANCE", {}),
        description="specificity of stress-vs-loss to the corpus' Hellinger geometry"),
}
_ATT_BREAKERS = getattr(attention_lemmas, "PREMISE_BREAKERS", {})
_ATT_PREMISES = {
    "lemma1_attention": {k: v for k, v in _ATT_BREAKERS.items() if k == "non_lazy"},
    "lemma3_attention": dict(_ATT_BREAKERS),
    # widths below V - 1: J_p^T cannot be injective on the tangent space
    "lemma4_attention": {"bottleneck": lambda cfg: {"attention.widths": tuple(
        w for w in (2, 4, 8) if w < cfg.attention.vocab_size - 1
        and w % cfg.attention.num_heads == 0), "attention.window_top": None}},
}
for _name, _premises in _ATT_PREMISES.items():
    if hasattr(attention_lemmas, _name):
        SPECS[_name] = CheckSpec(
            getattr(attention_lemmas, _name), premise_breakers=_premises,
            nuisance=getattr(attention_lemmas, "NUISANCE", {}),
            description=f"{_name.split('_')[0]} on a one-layer posjax Transformer")

CHECKS: dict[str, Callable[[SweepConfig], CheckResult]] = {n: s.fn for n, s in SPECS.items()}


def quick_config() -> SweepConfig:
    """CPU-sized: widths 64 -> 4096 x 3 seeds (windows shifted down to 2048 and 1024 in the
    robustness grid; the mean-field premise breaker to 1024); L2 widths 64 -> 512 with 1024
    sequences; the conjecture and the attention-model lemmas at their default settings."""
    return SweepConfig()


def full_config() -> SweepConfig:
    """Sized for one GPU: widths 64 -> 16384 x 5 seeds (default window ending at 4096, shifted
    up to 8192 and 16384); L2 widths to 2048 with 4096 sequences; more corpora, tables and
    seeds for the conjecture; the attention model to width 2048."""
    conj = (ConjectureConfig.full() if hasattr(ConjectureConfig, "full") else
            ConjectureConfig(tables=40, seeds=tuple(range(10)), corpora=(0, 1, 2),
                             widths=(64, 256, 1024, 4096), mc_samples=8))
    att = (AttentionLemmaConfig.full() if hasattr(AttentionLemmaConfig, "full")
           else AttentionLemmaConfig())
    return SweepConfig(widths=(64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384),
                       seeds=(0, 1, 2, 3, 4), window_top=4096, window_grid=(8192, 16384),
                       sufficiency_widths=(64, 128, 256, 512, 1024, 2048),
                       sufficiency_sequences=4096, sufficiency_resamples=5,
                       theorem1_train=1024, theorem1_test=2048, theorem4_seeds=(0, 1, 2, 3, 4),
                       conjecture=conj, attention=att)


def run_all(quick: bool = True, *, config: SweepConfig | None = None,
            names: list[str] | None = None, log: Callable[[str], None] | None = None,
            mutants: bool = True, robustness: bool = True) -> list[CheckResult]:
    """Run the checks (all, or ``names``) through the mutation harness and return the results.

    Every result's ``data`` gets ``nt_called`` (the neural-tangents functions called, recorded
    at call time), ``mutants``, ``neural_tangents`` (the functions whose poison flips the
    verdict), ``robustness``, ``robust_verdict``, the library versions and its wall time. JAX's
    compilation caches are cleared before each run, so every traced call is made (and
    recorded) again by the run that needs it.

    Args:
      quick: use :func:`quick_config` (else :func:`full_config`) unless ``config`` is given.
      names: subset of :data:`SPECS`.
      log: optional progress callback (one line per finished check and mutant).
      mutants / robustness: run the poisons and premise breakers / the nuisance grid.
    """
    config = config or (quick_config() if quick else full_config())
    names = list(SPECS) if names is None else list(names)
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        raise ValueError(f"unknown check(s) {unknown}; choose from {list(SPECS)}")
    vers = versions()
    out = []
    for name in names:
        start = time.perf_counter()
        res = run_check(name, SPECS[name], config, mutants=mutants, robustness=robustness,
                        log=log)
        wall = time.perf_counter() - start
        res = CheckResult(res.name, res.passed, res.statistic, res.threshold, res.detail,
                          {**res.data, "versions": vers, "wall_s": round(wall, 2)})
        out.append(res)
        if log is not None:
            log(f"{name}: {'PASS' if res.passed else 'FAIL'} at the default, "
                f"{res.data['robust_verdict']} over the grid ({wall:.1f} s)")
    return out
