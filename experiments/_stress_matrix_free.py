"""Matrix-free geometry of the stress experiment: tables E1, E2 and E3 at large ``n`` without
any ``[n, n]`` array (arXiv 2604.05217; docs/long_context_geometry.md).

Chosen by the ``geometry`` option (``"auto"``: when ``n > matrix_free_above`` and the metric has
a Gram factorisation). What changes against the dense path:

* MDS: top-``k`` coordinates and eigenvalues of ``B`` (``k = matrix_free_k``) by
  :func:`posjax.geometry.mds_from_distributions`; the energy rule uses ``trace(B)``
  (:func:`posjax.geometry.b_trace`), so ``r_eps`` is exact when it is ``<= k`` and is otherwise
  reported as not reached (the row then uses ``r = k``). The full-rank row becomes MDS at ``k``.
* Stress: every encoding enters through coordinates (fixed encodings:
  :func:`posjax.analysis.encoding_geometry.encoding_coordinates`; trained encoders: their table rows), exact and
  streamed when ``n <= stress_exact_max``, else from ``stress_pairs`` sampled pairs with a 95 %
  confidence interval (:func:`posjax.geometry.stress_from_distributions`).
* Not computed (reported as such, never filled in): split-half debiasing, SMACOF, the Fisher-Rao
  negative mass, the shift-invariance score, the effective rank (needs the whole spectrum) and
  the stress of bias-only encoders (T5), which have distances but no coordinates.

Call inside ``jax.enable_x64(True)``, like the dense path.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from posjax.analysis.encoding_geometry import encoding_coordinates
import posjax.geometry as geo

#: Metrics whose ``B`` factorises as a Gram matrix of the centred ``sqrt(P)`` rows.
GRAM_METRICS = ("chord", "normalized")


def not_computed(n: int) -> str:
    """The marker of a quantity the matrix-free path does not compute."""
    return f"not computed at n = {n} (matrix-free)"


def has_gram_factorisation(metric: str) -> bool:
    return geo.canonical_metric(metric) in GRAM_METRICS


def fixed_coordinates(n: int, cfg: Any) -> dict[str, np.ndarray]:
    """Coordinates of the fixed encodings of E1, with the options of the dense path (so their
    distances equal ``fixed_distances``)."""
    return {
        "sinusoidal": encoding_coordinates("sinusoidal", n, dim=cfg.sinusoidal_dim),
        "rope": encoding_coordinates("rope", n, head_dim=cfg.rope_head_dim,
                                         mode=cfg.rope_mode),
        "alibi": encoding_coordinates("alibi", n, scale=cfg.alibi_scale,
                                          **({"num_heads": cfg.alibi_heads}
                                             if cfg.alibi_scale == "mean_slope" else {})),
        "nope": encoding_coordinates("nope", n),
    }


def coords_stress(P: np.ndarray, coords: list[np.ndarray], cfg: Any) -> list[dict[str, Any]]:
    """Raw and optimal-scale stress of each configuration against the Hellinger geometry of ``P``.

    Exact (streamed) when ``n <= cfg.stress_exact_max``; otherwise estimated from
    ``cfg.stress_pairs`` pairs (the same pairs for every configuration and both scales) with a
    95 % interval under ``"ci"``.
    """
    n = P.shape[0]
    exact = n <= cfg.stress_exact_max
    pairs = None if exact else cfg.stress_pairs
    results = geo.stress_from_distributions(P, list(coords), scale=("raw", "optimal"),
                                            metric=cfg.metric, pairs=pairs, seed=cfg.data_seed)
    out = []
    for est in results:  # one pass over the pairs serves both scales
        if exact:
            out.append({"raw": float(est["raw"]), "optimal": float(est["optimal"]),
                        "method": "exact"})
            continue
        out.append({"raw": est["raw"].value, "optimal": est["optimal"].value,
                    "method": "sampled_pairs", "pairs": int(est["raw"].num_pairs),
                    "ci": {s: [e.ci_low, e.ci_high] for s, e in est.items()}})
    return out


class RowsTarget:
    """The Hellinger geometry of probability rows ``P [n, V]`` (no ``[n, n]`` array)."""

    kind = "matrix_free"

    def __init__(self, P: np.ndarray, cfg: Any):
        self.P, self.cfg, self.n = P, cfg, int(P.shape[0])

    def head(self, n: int) -> "RowsTarget":
        return RowsTarget(self.P[:n], self.cfg)

    def stress_of(self, *, table: np.ndarray | None = None,
                  distances: np.ndarray | None = None) -> dict[str, Any]:
        if table is None:
            raise ValueError(f"stress {not_computed(self.n)}: this encoding has distances but no "
                             "coordinates")
        return coords_stress(self.P, [np.asarray(table, np.float64)], self.cfg)[0]


def _rank(spec: dict, eps: float, k: int) -> tuple[int, bool]:
    """``(r_eps, reached)``: the energy-rule rank, or ``(k, False)`` when the top ``k``
    eigenvalues hold less than ``1 - eps`` of ``trace(B)``."""
    r = spec["r_eps"][str(eps)]
    return (r, True) if isinstance(r, int) else (k, False)


def analyse_matrix_free(P: np.ndarray, cfg: Any, fixed: dict[str, np.ndarray]
                        ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """E1 rows (without trained encoders), E2 spectrum and E3 parameters from ``P [n, V]``.

    Returns:
      ``(summary, arrays)`` shaped as the dense ``analyse`` returns them; quantities this path
      cannot compute hold :func:`not_computed` strings.
    """
    from experiments._stress_geometry import param_rows

    n, V = P.shape
    nc = not_computed(n)
    k = min(cfg.matrix_free_k, n - 1, V)
    mds, solver = geo.mds_from_distributions(P, k, metric=cfg.metric, seed=cfg.data_seed,
                                             return_info=True)
    X = np.asarray(mds.coords, np.float64)
    lam = np.asarray(mds.eigenvalues, np.float64)
    trace = float(geo.b_trace(P, metric=cfg.metric))
    levels = sorted({1e-2, 1e-3, cfg.eps, cfg.eps_alt})
    top = geo.topk_spectrum_report(lam, trace, tau=cfg.tau, eps=levels)
    r_low, reached = _rank(top, cfg.eps, k)
    r_alt, reached_alt = _rank(top, cfg.eps_alt, k)
    configs = {"mds_k": X, "mds_low": X[:, :r_low], "mds_low_alt": X[:, :r_alt], **fixed}
    rows = dict(zip(configs, coords_stress(P, list(configs.values()), cfg)))
    rows["mds_k"]["rank"] = k
    rows["mds_low"].update(rank=r_low, energy_target_reached=reached)
    rows["mds_low_alt"].update(rank=r_alt, eps=cfg.eps_alt, energy_target_reached=reached_alt)
    rows["mds_smacof"] = {"raw": nc, "optimal": nc, "rank": r_low}
    lead = X[:, :min(4, k)]
    psd = "0 (B = (J√P)(J√P)ᵀ is a Gram matrix)"
    spec = {
        "n": n, "k": k, "trace": trace, "captured": top["captured"],
        "top_normalized": top["top_normalized"][:10], "lambda1_share": top["lambda1_share"],
        "r_tau": top["r_tau"], "tau": cfg.tau, "r_eps": top["r_eps"],
        "energy_target_reached": {str(cfg.eps): reached, str(cfg.eps_alt): reached_alt},
        "erank": nc, "sis": nc, "negative_mass_fr_arc": nc,
        "negative_mass_chord": psd, "max_negative_ratio": psd,
        "dct_alignment": [float(v) for v in geo.dct_alignment(lead, m_max=lead.shape[1])],
        "ramp_alignment": float(geo.ramp_alignment(lead[:, 0])),
        "solver": {"b_products": int(solver["b_products"]),
                   "residual": float(solver["residual"])},
    }
    notes = []
    for eps, ok in ((cfg.eps, reached), (cfg.eps_alt, reached_alt)):
        if not ok:
            notes.append(f"energy target 1 - {eps:g} not reached within k = {k} (top-k energy "
                         f"{top['captured']:.4f}); the r_eps rows use r = k")
    params = param_rows(n, cfg, r_low, r_alt)
    for p in params.values():  # r = k stands in for an r_eps beyond k: a lower bound
        p["energy_target_reached"] = reached if p["eps"] == cfg.eps else reached_alt
    summary = {"n": n, "geometry": "matrix_free", "k": k, "r_full": nc, "r_low": r_low,
               "E1": rows, "E2": spec, "E3": params,
               "smacof_history_ends": nc, "notes": notes}
    arrays = {"coords_low": X[:, :r_low], "coords_full": X, "coords_2d": X[:, :min(2, k)],
              "eigenvalues": lam, "trace": trace}
    return summary, arrays


def matrix_free_variants(prep: Any, P: np.ndarray, N: np.ndarray, notes: list[str],
                         cfg: Any) -> tuple[dict[str, dict[str, np.ndarray]], dict]:
    """``({"plugin": {"P"}, ["exact": {"P"}]}, info)``: the rows each variant's geometry is
    computed from (split-half debiasing needs the dense path)."""
    n = P.shape[0]
    out = {"plugin": {"P": np.asarray(P, np.float64)}}
    if prep.exact_P is not None:
        out["exact"] = {"P": np.asarray(prep.exact_P[:n], np.float64)}
    info = {"n": n, "requested_n": cfg.num_positions, "N_i": geo.counts_summary(N[:n]),
            "N_i_per_half": not_computed(n), "split_half": not_computed(n),
            "columns": int(P.shape[1]), "warnings": notes}
    return out, info


def geometry_paragraph(g: dict, summaries: dict, n: int, labels: dict[str, str]) -> str:
    """The report's account of which geometry path ran, why, and what it did not compute
    (``labels``: display names of the estimator variants)."""
    if g["path"] == "dense":
        return (f"Dense: the n x n Hellinger matrix D of every variant (n = {n}; option "
                f"`geometry={g['option']}`, matrix-free above n = {g['matrix_free_above']}).")
    s = next(iter(summaries.values()))
    stress = (f"exact, streamed over pairs (n <= {g['stress_exact_max']})"
              if n <= g["stress_exact_max"] else
              f"estimated from {g['stress_pairs']} sampled pairs (the same pairs for every "
              "row; 95 % intervals in brackets)")
    lines = [f"Matrix-free (option `geometry={g['option']}`, n = {n}, matrix-free above "
             f"{g['matrix_free_above']}): no n x n array. MDS from the top k = {s['k']} "
             "eigenpairs of B and the closed-form trace(B); the full-rank MDS row is replaced by "
             f"MDS at k. Stress {stress}. Not computed at this n: split-half debiasing, SMACOF, "
             "Fisher–Rao negative mass, shift-invariance score, effective rank, and the stress "
             "of bias-only encoders (T5)."]
    lines += [f"{labels[v]}: {note}." for v, sm in summaries.items()
              for note in sm.get("notes", [])]
    return " ".join(lines)
