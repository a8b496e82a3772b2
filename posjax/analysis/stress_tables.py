"""The stress, spectrum and parameter tables of one positional geometry (arXiv 2604.05217).

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217: Eq. (3) (Hellinger distances ``D``), Eq. (4) (stress, reported without square
root, raw and at the optimal scale), Algorithm 1 (classical MDS at full rank ``r_tau`` and low rank
``r_eps``, energy rule) and the minimal parametrisation (``n d`` against ``r (n + d)``).

* :func:`dense_tables` works on the ``[n, n]`` distance matrix ``D``;
* :func:`matrix_free_tables` works on the probability rows ``P [n, V]`` without any ``[n, n]``
  array (top-``k`` MDS, streamed or sampled-pair stress; docs/long_context_geometry.md). What it
  cannot compute (SMACOF, split-half debiasing, the Fisher-Rao negative mass, the shift-invariance
  score, the effective rank) holds a :func:`~posjax.geometry.stress_targets.not_computed` string;
* :func:`parameter_rows` is the parameter table of both.

Call both under ``jax.enable_x64(True)``: the full-rank MDS stress is compared with zero below
1e-6 by the callers.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import posjax.geometry as geo
from posjax.geometry.stress_targets import coords_stress, not_computed, stress_pair


def parameter_rows(n: int, rows: dict[str, tuple[int, int, float]]) -> dict[str, dict[str, Any]]:
    """The parameter table: for each ``label: (d, r, eps)`` the dense ``n d`` against the
    factorised ``r (n + d)`` parameter count, the saving ``1 - r (n + d) / (n d)``, the
    break-even rank ``n d / (n + d)`` and the gauge-free dimension ``r (n + d) - r^2``
    (arXiv 2604.05217, minimal parametrisation)."""
    out = {}
    for label, (d, r, eps) in rows.items():
        dense, fact = geo.param_count(n, d, r)
        out[label] = {"n": n, "d": d, "r": r, "eps": eps, "nd": dense, "r(n+d)": fact,
                      "saving": 1.0 - fact / dense, "break_even_r": geo.break_even_rank(n, d),
                      "gauge_free_dim": fact - r * r}
    return out


def _parameters(n: int, r_low: int, r_alt: int, eps: float, eps_alt: float, paper_d: int,
                model_d: int) -> dict[str, dict[str, Any]]:
    return parameter_rows(n, {"paper_d": (paper_d, r_low, eps),
                              "paper_d_alt": (paper_d, r_alt, eps_alt),
                              "model_d": (model_d, r_low, eps)})


def dense_tables(D: np.ndarray, D_fr: np.ndarray, fixed: dict[str, np.ndarray], *,
                 tau: float, eps: float, eps_alt: float, smacof_max_iter: int,
                 smacof_tol: float | None, paper_d: int, model_d: int
                 ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Stress rows, spectrum and parameters of the geometry ``D [n, n]``.

    Args:
      D: the distances (Eq. (3), any metric); D_fr: the Fisher-Rao arc distances of the same
        rows (for the non-Euclidean mass); fixed: ``{row name: distances [n, n]}`` of encodings.
      tau: full rank ``r_tau`` (threshold rule); eps, eps_alt: low ranks ``r_eps`` (energy rule).
      smacof_max_iter, smacof_tol: SMACOF from the ``r_eps`` configuration.
      paper_d, model_d: the ``d`` of the parameter rows ``paper_d``/``paper_d_alt``, ``model_d``.

    Returns:
      ``(summary, arrays)``: JSON-ready ``{"n", "geometry": "dense", "r_full", "r_low",
      "stress", "spectrum", "parameters", "smacof_history_ends"}`` and the arrays
      ``coords_low [n, r_eps]``, ``coords_full [n, r_tau]``, ``coords_2d [n, 2]``,
      ``eigenvalues [n]`` of ``B``.
    """
    n = D.shape[0]
    full = geo.classical_mds(D, rank_rule=("threshold", tau))
    low = geo.classical_mds(D, rank_rule=("energy", eps))
    alt = geo.classical_mds(D, rank_rule=("energy", eps_alt))
    r_low = int(low.rank)
    X_sm, hist = geo.smacof(D, init=low.coords, max_iter=smacof_max_iter, tol=smacof_tol,
                            return_history=True)
    rows = {
        "mds_full": {**stress_pair(D, geo.dist_mds(full.coords)), "rank": int(full.rank)},
        "mds_low": {**stress_pair(D, geo.dist_mds(low.coords)), "rank": r_low},
        "mds_low_alt": {**stress_pair(D, geo.dist_mds(alt.coords)), "rank": int(alt.rank),
                        "eps": eps_alt},
        "mds_smacof": {**stress_pair(D, geo.dist_mds(X_sm)), "rank": r_low,
                       "iterations": int(len(hist) - 1)},
    }
    rows.update({name: stress_pair(D, E) for name, E in fixed.items()})
    lam = np.asarray(full.eigenvalues, np.float64)
    spec = geo.spectrum_report(eigenvalues=lam, k=10, tau=tau, eps=(1e-2, 1e-3))
    X = np.asarray(full.coords)
    lead = X if X.shape[1] >= 4 else np.asarray(geo.classical_mds(D, dim=min(4, n)).coords)
    spec.update({
        "sis": float(geo.shift_invariance_score(D)),
        "dct_alignment": [float(v) for v in geo.dct_alignment(lead, m_max=min(4, lead.shape[1]))],
        "ramp_alignment": float(geo.ramp_alignment(np.asarray(lead)[:, 0])),
        "negative_mass_fr_arc": float(geo.check_euclidean(D_fr).negative_mass),
        "negative_mass_chord": float(geo.negative_mass(lam)),
        "max_negative_ratio": float(max(0.0, -lam.min()) / lam[0]) if lam[0] > 0 else 0.0,
    })
    two = geo.classical_mds(D, dim=min(2, n)).coords
    summary = {"n": n, "geometry": "dense", "r_full": int(full.rank), "r_low": r_low,
               "stress": rows, "spectrum": spec,
               "parameters": _parameters(n, r_low, int(alt.rank), eps, eps_alt, paper_d, model_d),
               "smacof_history_ends": [float(hist[0]), float(hist[-1])]}
    arrays = {"coords_low": np.asarray(low.coords), "coords_full": X,
              "coords_2d": np.asarray(two), "eigenvalues": lam}
    return summary, arrays


def _rank(spec: dict, eps: float, k: int) -> tuple[int, bool]:
    """``(r_eps, reached)``: the energy-rule rank, or ``(k, False)`` when the top ``k``
    eigenvalues hold less than ``1 - eps`` of ``trace(B)``."""
    r = spec["r_eps"][str(eps)]
    return (r, True) if isinstance(r, int) else (k, False)


def matrix_free_tables(P: np.ndarray, fixed: dict[str, np.ndarray], *, k: int, metric: str,
                       tau: float, eps: float, eps_alt: float, seed: int, exact_max: int,
                       pairs: int, paper_d: int, model_d: int
                       ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The tables of :func:`dense_tables` from ``P [n, V]`` without an ``[n, n]`` array.

    MDS from the top ``min(k, n - 1, V)`` eigenpairs of ``B`` (row ``mds_k`` replaces
    ``mds_full``); the energy rule uses the closed-form ``trace(B)``, so ``r_eps`` is exact when it
    is ``<= k`` and otherwise the rows use ``r = k`` with ``energy_target_reached = False``.
    ``fixed`` holds coordinates ``[n, r_i]`` (not distances); stress is exact and streamed for
    ``n <= exact_max``, else estimated from ``pairs`` sampled pairs (``seed``) with a 95 %
    interval (:func:`~posjax.geometry.stress_targets.coords_stress`).

    Returns:
      ``(summary, arrays)`` shaped as :func:`dense_tables` returns them, plus ``summary["k"]``,
      ``summary["notes"]`` and ``arrays["trace"]``.
    """
    n, V = P.shape
    nc = not_computed(n)
    k = min(k, n - 1, V)
    mds, solver = geo.mds_from_distributions(P, k, metric=metric, seed=seed, return_info=True)
    X = np.asarray(mds.coords, np.float64)
    lam = np.asarray(mds.eigenvalues, np.float64)
    trace = float(geo.b_trace(P, metric=metric))
    top = geo.topk_spectrum_report(lam, trace, tau=tau, eps=sorted({1e-2, 1e-3, eps, eps_alt}))
    r_low, reached = _rank(top, eps, k)
    r_alt, reached_alt = _rank(top, eps_alt, k)
    configs = {"mds_k": X, "mds_low": X[:, :r_low], "mds_low_alt": X[:, :r_alt], **fixed}
    rows = dict(zip(configs, coords_stress(P, list(configs.values()), metric=metric,
                                           exact_max=exact_max, pairs=pairs, seed=seed)))
    rows["mds_k"]["rank"] = k
    rows["mds_low"].update(rank=r_low, energy_target_reached=reached)
    rows["mds_low_alt"].update(rank=r_alt, eps=eps_alt, energy_target_reached=reached_alt)
    rows["mds_smacof"] = {"raw": nc, "optimal": nc, "rank": r_low}
    lead = X[:, :min(4, k)]
    psd = "0 (B = (J√P)(J√P)ᵀ is a Gram matrix)"
    spec = {
        "n": n, "k": k, "trace": trace, "captured": top["captured"],
        "top_normalized": top["top_normalized"][:10], "lambda1_share": top["lambda1_share"],
        "r_tau": top["r_tau"], "tau": tau, "r_eps": top["r_eps"],
        "energy_target_reached": {str(eps): reached, str(eps_alt): reached_alt},
        "erank": nc, "sis": nc, "negative_mass_fr_arc": nc,
        "negative_mass_chord": psd, "max_negative_ratio": psd,
        "dct_alignment": [float(v) for v in geo.dct_alignment(lead, m_max=lead.shape[1])],
        "ramp_alignment": float(geo.ramp_alignment(lead[:, 0])),
        "solver": {"b_products": int(solver["b_products"]),
                   "residual": float(solver["residual"])},
    }
    notes = [f"energy target 1 - {e:g} not reached within k = {k} (top-k energy "
             f"{top['captured']:.4f}); the r_eps rows use r = k"
             for e, ok in ((eps, reached), (eps_alt, reached_alt)) if not ok]
    params = _parameters(n, r_low, r_alt, eps, eps_alt, paper_d, model_d)
    for p in params.values():  # r = k stands in for an r_eps beyond k: a lower bound
        p["energy_target_reached"] = reached if p["eps"] == eps else reached_alt
    summary = {"n": n, "geometry": "matrix_free", "k": k, "r_full": nc, "r_low": r_low,
               "stress": rows, "spectrum": spec, "parameters": params,
               "smacof_history_ends": nc, "notes": notes}
    arrays = {"coords_low": X[:, :r_low], "coords_full": X, "coords_2d": X[:, :min(2, k)],
              "eigenvalues": lam, "trace": trace}
    return summary, arrays
