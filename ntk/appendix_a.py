"""Checks of the Appendix A lemmas and the Monotonicity Conjecture (arXiv 2604.05217).

The statements are a reconstruction (arXiv 2604.05217, App. A; docs/interpretations.md); the reading each
check tests is in its docstring and in ``CheckResult.detail``. All run on the NTK-parameterised
toy MLM model (:mod:`ntk.toy`) over a width sweep (:mod:`ntk.sweeps`) on the three-regime
corpus with exact ``P``, from a common position initialisation (``p_i(0) = 0``), so
``Delta p_i = p_i(t)``. Thresholds were fixed from the NTK theory before any run:

* the NTK limit of the context-free toy has ``Theta_p -> kappa I_V`` per position, so at small
  ``t``: ``Delta p_i ~ -t J^T (q - P_i)`` -- affine in ``P_i`` (L3) with an isometric ``A`` on
  the tangent space (L4: ``c2 / c1 -> 1``) and position distances ``~ ||P_i - P_j||_2`` (the
  Euclidean geometry of L5);
* "rising toward 1" is tested as ``1 - rho`` at least halving over the sweep (a 16x width
  range shrinks an ``O(d^{-1/2})`` deviation about 4x).
"""
from __future__ import annotations

import numpy as np

from ntk import lemma_statistics as lstats
from ntk.result import CheckResult, fmt
from ntk.sweeps import SweepConfig, corpus, sufficiency_sweep, training_sweep

__all__ = ["lemma1_linearization", "lemma2_sufficiency", "lemma3_linear_displacement",
           "lemma4_distortion_bounds", "lemma5_hellinger_monotonicity",
           "monotonicity_conjecture"]


def _series(sweep, fn) -> list[float]:
    """Seed mean of ``fn(run)`` for each width of a training sweep."""
    return [float(np.mean([fn(run) for run in runs])) for runs in sweep.values()]


def _meta(cfg: SweepConfig) -> dict:
    return {"config": cfg.to_dict(), "widths": list(cfg.widths)}


def lemma1_linearization(cfg: SweepConfig) -> CheckResult:
    """L1: ``p_t`` follows the linearised dynamics as width grows.

    Statistic: least-squares slope of ``log(||p_t - p_t^lin|| / ||p_t - p_0||)`` (seed mean)
    against ``log(width)``, with ``p_t^lin`` trained on neural-tangents' ``linearize`` of the
    toy at the lemma horizon. Pass: slope < 0 and the largest width's error below the
    smallest's (theory: slope -1/2).
    """
    sweep = training_sweep(cfg)
    err = _series(sweep, lambda r: r["lazy_error"])
    slope = lstats.loglog_slope(cfg.widths, err)
    ok = slope < 0 and err[-1] < err[0]
    detail = (f"||p_t - p_t^lin|| / ||p_t - p_0|| at t={cfg.lr * cfg.lemma_steps:g} vs width "
              f"{list(cfg.widths)}: {fmt(err)}; log-log slope {slope:.3f} (< 0; NTK theory "
              f"-0.5); pass: slope < 0 and last < first")
    return CheckResult("lemma1_linearization", bool(ok), slope, 0.0, detail,
                       {**_meta(cfg), "lazy_error": err,
                        "lazy_error_per_seed": [[r["lazy_error"] for r in runs]
                                                for runs in sweep.values()]})


def lemma2_sufficiency(cfg: SweepConfig) -> CheckResult:
    """L2: for MLM at initialisation, ``E[grad_{p_i} l]`` is a function of ``P_i`` only.

    Reading: the attention toy (masked slot ``i`` attends to the other positions) at
    initialisation; corpus A couples all positions comonotonically, corpora B are column
    shuffles of A (identical per-position empirical marginals, independent joint). Statistic:
    ``||g_A - g_B|| / ||g_B||`` at the largest width; noise floor: two shuffles B1 vs B2.
    Pass: gap < 1e-2 (fixed beforehand) with a noise floor < 1e-2. Reported too: the gap through the
    masked slot only (keys/values detached) and the context-free control (exact).
    """
    res = sufficiency_sweep(cfg)
    gap, noise = res["gap"], res["noise"]
    ok = gap[-1] < 1e-2 and noise[-1] < 1e-2
    detail = (f"attention toy at init, comonotone vs column-shuffled corpus "
              f"({cfg.sufficiency_sequences} seqs), widths {res['widths']}: relative gap "
              f"{fmt(gap)} (< 1e-2), noise floor {fmt(noise)}; at the largest width: masked-slot "
              f"path only {res['gap_self']:.4g}, context-free MLP control "
              f"{res['control_gap']:.2g}")
    return CheckResult("lemma2_sufficiency", bool(ok), gap[-1], 1e-2, detail,
                       {"config": cfg.to_dict(), **res})


def lemma3_linear_displacement(cfg: SweepConfig) -> CheckResult:
    """L3: ``Delta p_i(t) = A_t P_i + b_t`` over positions at the lemma horizon.

    Statistic: multivariate R^2 (seed mean) of regressing ``Delta p`` on the coordinates of
    ``P_i`` in its affine span (rank k), at the largest width; also R^2 on the top-k principal
    coordinates of ``sqrt(P_i)``. Pass: R^2 >= 0.99 ("R^2 ~ 1").
    """
    P = corpus(cfg)
    sweep = training_sweep(cfg)
    regs = {w: [lstats.displacement_regression(r["delta_p"], P) for r in runs]
            for w, runs in sweep.items()}
    r2p = [float(np.mean([g["r2_P"] for g in v])) for v in regs.values()]
    r2s = [float(np.mean([g["r2_sqrtP"] for g in v])) for v in regs.values()]
    rank = next(iter(regs.values()))[0]["rank"]
    better = "P" if r2p[-1] >= r2s[-1] else "sqrt(P)"
    ok = r2p[-1] >= 0.99
    detail = (f"R^2 of Delta p on P (affine rank {rank}) vs width {list(cfg.widths)}: "
              f"{fmt(r2p)} (>= 0.99 at the largest); on sqrt(P): {fmt(r2s)}; better regressor: "
              f"{better}")
    return CheckResult("lemma3_linear_displacement", bool(ok), r2p[-1], 0.99, detail,
                       {**_meta(cfg), "r2_P": r2p, "r2_sqrtP": r2s, "rank": rank,
                        "better_regressor": better})


def lemma4_distortion_bounds(cfg: SweepConfig) -> CheckResult:
    """L4: ``c1 ||P_i - P_j|| <= ||A_t (P_i - P_j)|| <= c2 ||P_i - P_j||`` on ``1^T v = 0``.

    Statistic: ``c2 / c1`` from the extreme singular values of the regressed ``A_t`` restricted
    to the affine span of ``P`` (a subspace of ``{1^T v = 0}``), seed mean at the largest width.
    Pass: ``c1 > 0`` at every width and ``c2 / c1 <= 2`` at the largest (NTK small-t limit: 1).
    Pairwise ratios ``||Delta p_i - Delta p_j|| / ||P_i - P_j||`` are reported too.
    """
    P = corpus(cfg)
    sweep = training_sweep(cfg)
    dcs = {w: [lstats.distortion_constants(r["delta_p"], P) for r in runs]
           for w, runs in sweep.items()}
    ratio = [float(np.mean([d["ratio"] for d in v])) for v in dcs.values()]
    pair = [float(np.mean([d["pair_ratio"] for d in v])) for v in dcs.values()]
    c1 = [float(np.min([d["c1"] for d in v])) for v in dcs.values()]
    ok = min(c1) > 0 and ratio[-1] <= 2.0
    detail = (f"c2/c1 (singular values of A_t on span(P - mean)) vs width {list(cfg.widths)}: "
              f"{fmt(ratio)} (<= 2 at the largest; NTK limit 1); min c1 {fmt(c1)} (> 0); "
              f"pairwise-ratio c2/c1 {fmt(pair)}")
    return CheckResult("lemma4_distortion_bounds", bool(ok), ratio[-1], 2.0, detail,
                       {**_meta(cfg), "ratio": ratio, "pair_ratio": pair, "c1_min": c1,
                        "c2": [float(np.mean([d["c2"] for d in v])) for v in dcs.values()]})


def _rho_series(sweep, key: str, D) -> tuple[list[float], list[float]]:
    stats = [[lstats.monotonicity_spearman(r[key], D) for r in runs] for runs in sweep.values()]
    rho = [float(np.mean([s["rho"] for s in v])) for v in stats]
    viol = [float(np.mean([s["violations"] for s in v])) for v in stats]
    return rho, viol


def _rises(rho: list[float], viol: list[float]) -> bool:
    return (1 - rho[-1]) <= 0.5 * (1 - rho[0]) and viol[-1] < viol[0]


def lemma5_hellinger_monotonicity(cfg: SweepConfig) -> CheckResult:
    """L5: Euclidean -> Hellinger, monotonicity up to distortion.

    (a) ``d_H^2 <= ||P_i - P_j||_1 <= 2 d_H`` and ``||P_i - P_j||_2 <= 2 d_H`` on all pairs
    (float64, slack <= 1e-12); (b) Spearman rho between ``||Delta p_i - Delta p_j||`` (lemma
    horizon) and ``d_H`` -> 1 with width: rho >= 0.9 at the largest width, ``1 - rho`` at least
    halving over the sweep and the fraction of order violations shrinking. Reported: rho
    against ``||P_i - P_j||_2`` (the NTK-limit geometry) and the ceiling rho(||dP||_2, d_H).
    """
    P = corpus(cfg)
    sweep = training_sweep(cfg)
    ineq = lstats.hellinger_inequalities(P)
    H = lstats.hellinger_chord(P)
    rho, viol = _rho_series(sweep, "delta_p", H)
    rho_l2, _ = _rho_series(sweep, "delta_p", lstats.pairwise_distances(P))
    ceiling = lstats.monotonicity_spearman(P, H)["rho"]
    ineq_ok = max(ineq.values()) <= 1e-12
    ok = ineq_ok and rho[-1] >= 0.9 and _rises(rho, viol)
    detail = (f"inequalities max slack {max(ineq.values()):.1e} (<= 1e-12); rho(|dp|, d_H) vs "
              f"width {list(cfg.widths)}: {fmt(rho)} (>= 0.9, 1-rho halves), violations "
              f"{fmt(viol)} (shrink); rho(|dp|, |dP|_2) {fmt(rho_l2)}; ceiling "
              f"rho(|dP|_2, d_H) = {ceiling:.4f}")
    return CheckResult("lemma5_hellinger_monotonicity", bool(ok), rho[-1], 0.9, detail,
                       {**_meta(cfg), "inequalities": ineq, "rho_hellinger": rho,
                        "violations": viol, "rho_euclidean": rho_l2,
                        "ceiling_euclidean_vs_hellinger": ceiling})


def monotonicity_conjecture(cfg: SweepConfig) -> CheckResult:
    """Monotonicity Conjecture (strong form) on learned positions.

    Learned positions: the first snapshot whose excess MLM loss is below ``excess_tol`` of its
    initial value (near-converged). Statistic: Spearman rho between ``||p_i - p_j||`` and
    ``d_H(P_i, P_j)`` (seed mean) at the largest width. Pass: rho >= 0.95 and rising toward 1
    (``1 - rho`` at least halves over the sweep, violations shrink). Reported: rho against
    ``||dP||_2`` and the Aitchison (clr) distance, and the alternative reading "optimal-scale
    stress against d_H is non-increasing along training" (fraction of non-increasing steps).
    """
    import posjax.geometry as geo
    P = corpus(cfg)
    sweep = training_sweep(cfg)
    H = lstats.hellinger_chord(P)
    rho, viol = _rho_series(sweep, "learned", H)
    rho_l2, _ = _rho_series(sweep, "learned", lstats.pairwise_distances(P))
    rho_clr, _ = _rho_series(sweep, "learned", lstats.clr_distances(P))
    mono, stress_end = [], []
    for runs in sweep.values():
        fr, se = [], []
        for r in runs:
            s = np.array([float(geo.stress(H, coords=x, scale="optimal"))
                          for x in r["snapshots"]])
            fr.append(float(np.mean(np.diff(s) <= 1e-9)) if len(s) > 1 else 1.0)
            se.append(float(s[-1]))
        mono.append(float(np.mean(fr)))
        stress_end.append(float(np.mean(se)))
    stops = [[r["stop_step"] for r in runs] for runs in sweep.values()]
    reached = all(r["stop_reached"] for runs in sweep.values() for r in runs)
    ok = rho[-1] >= 0.95 and _rises(rho, viol)
    detail = (f"learned = first state with excess loss <= {cfg.excess_tol:g} x initial "
              f"(reached on all runs: {reached}); rho(|p_i-p_j|, d_H) vs width "
              f"{list(cfg.widths)}: {fmt(rho)} (>= 0.95, 1-rho halves), violations "
              f"{fmt(viol)} (shrink); rho vs |dP|_2 {fmt(rho_l2)}, vs clr {fmt(rho_clr)}; "
              f"stress non-increasing along training on {fmt(mono)} of steps")
    return CheckResult("monotonicity_conjecture", bool(ok), rho[-1], 0.95, detail,
                       {**_meta(cfg), "rho_hellinger": rho, "violations": viol,
                        "rho_euclidean": rho_l2, "rho_clr": rho_clr,
                        "stress_nonincreasing_fraction": mono, "final_stress": stress_end,
                        "stop_steps": stops, "stop_reached": reached})
