"""Geometry part of the stress experiment: the stress, spectrum and parameter tables
and the sample-size sensitivity analysis (arXiv 2604.05217; docs/interpretations.md).

Every function here is called inside ``jax.enable_x64(True)`` by the driver: the full-rank MDS
stress is compared with zero below 1e-6.

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217 (Eq. (3), Eq. (4), Algorithm 1, minimal parametrisation).
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from posjax.analysis.encoding_geometry import encoding_coordinates, encoding_distances
import posjax.geometry as geo
from posjax.geometry.stress_targets import (DenseTarget, RowsTarget, coords_stress,
                                            has_gram_factorisation, not_computed, stress_pair)

from posjax.data.classification_corpus import ClassificationCorpus

from experiments.stress_table.config import StressConfig

FIXED_ENCODINGS = ("sinusoidal", "rope", "alibi", "nope")


def _estimate(prep: ClassificationCorpus, cfg: StressConfig, split_half: bool):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        P, N = geo.positional_distributions(
            prep.geo_tokens, lengths=prep.geo_lengths, vocab_size=prep.vocab_size,
            num_positions=cfg.num_positions, pad_id=prep.pad_id, keep_special=True,
            pad_mode=cfg.pad_mode, smoothing=cfg.smoothing, top_k=cfg.top_k,
            min_count=cfg.min_count, on_empty="truncate", split_half=split_half)
    return np.asarray(P), np.asarray(N), [str(w.message) for w in caught]


def distance_variants(prep: ClassificationCorpus, cfg: StressConfig, plugin: tuple | None = None
                      ) -> tuple[dict[str, dict[str, np.ndarray]], dict]:
    """Hellinger matrices of every estimator variant, truncated to a common ``n``
    (``plugin``: the already estimated ``(P, N, notes)``).

    Returns:
      ``({"plugin": {...}, "split_half": {...}, ["exact": {...}]}, info)``; each variant holds
      ``D`` (metric ``cfg.metric``) and ``D_fr`` (``fr_arc``, for the non-Euclidean mass), and
      ``info`` the sample counts ``N_i`` (min/median/max), ``n`` and truncation warnings.
    """
    P, N, notes = plugin if plugin is not None else _estimate(prep, cfg, split_half=False)
    Ph, Nh, notes_h = _estimate(prep, cfg, split_half=True)
    n = min(P.shape[0], Ph.shape[1])
    out = {
        "plugin": {"D": geo.hellinger_matrix(P[:n], metric=cfg.metric),
                   "D_fr": geo.hellinger_matrix(P[:n], metric="fr_arc")},
        "split_half": {"D": geo.hellinger_matrix(Ph[:, :n], metric=cfg.metric, debias="split_half"),
                       "D_fr": geo.hellinger_matrix(Ph[:, :n], metric="fr_arc",
                                                    debias="split_half")},
    }
    if prep.exact_P is not None:
        Pe = prep.exact_P[:n]
        out["exact"] = {"D": geo.hellinger_matrix(Pe, metric=cfg.metric),
                        "D_fr": geo.hellinger_matrix(Pe, metric="fr_arc")}
    out = {k: {m: np.asarray(v, np.float64) for m, v in d.items()} for k, d in out.items()}
    info = {"n": n, "requested_n": cfg.num_positions,
            "N_i": geo.counts_summary(N[:n]),
            "N_i_per_half": {"A": geo.counts_summary(Nh[0, :n]),
                             "B": geo.counts_summary(Nh[1, :n])},
            "columns": int(P.shape[1]), "warnings": notes + notes_h}
    return out, info


SENSITIVITY_ENCODINGS = ("sinusoidal", "rope", "alibi")


def _fixed_options(cfg: StressConfig, names=None) -> dict[str, dict[str, Any]]:
    """``{name: encoding options}`` of the fixed encodings of the stress table
    (docs/interpretations.md); ``t5`` is the registry's T5 bias at initialisation."""
    alibi = {"scale": cfg.alibi_scale, **({"num_heads": cfg.alibi_heads}
                                          if cfg.alibi_scale == "mean_slope" else {})}
    every = {"sinusoidal": {"dim": cfg.sinusoidal_dim},
             "rope": {"head_dim": cfg.rope_head_dim, "mode": cfg.rope_mode},
             "alibi": alibi, "nope": {},
             "t5": {"use_registry": True, "num_heads": cfg.alibi_heads}}
    return {k: every[k] for k in (names or cfg.fixed_encodings)}


def fixed_distances(n: int, cfg: StressConfig, names=None) -> dict[str, np.ndarray]:
    """Distances of the fixed encodings of the stress table (``names``, default
    ``cfg.fixed_encodings``; row ``t5_init`` for ``t5``)."""
    return {("t5_init" if k == "t5" else k): encoding_distances(k, n, **o)
            for k, o in _fixed_options(cfg, names).items()}


def analyse(D: np.ndarray, D_fr: np.ndarray, cfg: StressConfig, fixed: dict[str, np.ndarray]
            ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Stress rows (without trained encoders), spectrum and parameters for one ``D``.

    Returns:
      ``(summary, arrays)``: a JSON-ready summary and the arrays the report and the model need
      (``coords_low``, ``coords_full``, ``eigenvalues``, ``coords_2d``).
    """
    n = D.shape[0]
    full = geo.classical_mds(D, rank_rule=("threshold", cfg.tau))
    low = geo.classical_mds(D, rank_rule=("energy", cfg.eps))
    alt = geo.classical_mds(D, rank_rule=("energy", cfg.eps_alt))
    r_low = int(low.rank)
    X_sm, hist = geo.smacof(D, init=low.coords, max_iter=cfg.smacof_max_iter,
                            tol=cfg.smacof_tol, return_history=True)
    rows = {
        "mds_full": {**stress_pair(D, geo.dist_mds(full.coords)), "rank": int(full.rank)},
        "mds_low": {**stress_pair(D, geo.dist_mds(low.coords)), "rank": r_low},
        "mds_low_alt": {**stress_pair(D, geo.dist_mds(alt.coords)), "rank": int(alt.rank),
                        "eps": cfg.eps_alt},
        "mds_smacof": {**stress_pair(D, geo.dist_mds(X_sm)), "rank": r_low,
                       "iterations": int(len(hist) - 1)},
    }
    rows.update({name: stress_pair(D, E) for name, E in fixed.items()})
    lam = np.asarray(full.eigenvalues, np.float64)
    spec = geo.spectrum_report(eigenvalues=lam, k=10, tau=cfg.tau, eps=(1e-2, 1e-3))
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
               "stress": rows, "spectrum": spec, "parameters": param_rows(n, cfg, r_low, int(alt.rank)),
               "smacof_history_ends": [float(hist[0]), float(hist[-1])]}
    arrays = {"coords_low": np.asarray(low.coords), "coords_full": X,
              "coords_2d": np.asarray(two), "eigenvalues": lam}
    return summary, arrays


def param_rows(n: int, cfg: StressConfig, r_low: int, r_alt: int) -> dict[str, dict[str, Any]]:
    """The parameter table: dense ``n d`` against factorised ``r (n + d)`` parameters at the low ranks."""
    params = {}
    for label, d, r, eps in (("paper_d", cfg.sinusoidal_dim, r_low, cfg.eps),
                             ("paper_d_alt", cfg.sinusoidal_dim, r_alt, cfg.eps_alt),
                             ("model_d", cfg.model.d_model, r_low, cfg.eps)):
        dense, fact = geo.param_count(n, d, r)
        params[label] = {"n": n, "d": d, "r": r, "eps": eps, "nd": dense, "r(n+d)": fact,
                         "saving": 1.0 - fact / dense,
                         "break_even_r": geo.break_even_rank(n, d),
                         "gauge_free_dim": fact - r * r}
    return params


def rows_options(cfg: StressConfig) -> dict[str, Any]:
    """The options of :func:`~posjax.geometry.stress_targets.coords_stress` this run uses."""
    return dict(metric=cfg.metric, exact_max=cfg.stress_exact_max, pairs=cfg.stress_pairs,
                seed=cfg.data_seed)


def as_targets(variants: dict[str, Any], options: dict[str, Any] | None = None
               ) -> dict[str, Any]:
    """``{variant: target}`` from ``{variant: {"D": ...}}`` (dense), ``{variant: {"P": ...}}``
    (matrix-free, :class:`RowsTarget` with ``options`` from :func:`rows_options`), bare ``D``
    arrays, or targets (returned as they are)."""
    out = {}
    for name, v in variants.items():
        if hasattr(v, "stress_of"):
            out[name] = v
        elif isinstance(v, dict) and "P" in v:
            out[name] = RowsTarget(v["P"], **(options or {}))
        else:
            out[name] = DenseTarget(np.asarray(v["D"] if isinstance(v, dict) else v))
    return out


def trained_stress(targets: dict[str, Any], *, table: np.ndarray | None = None,
                   distances: np.ndarray | None = None) -> dict[str, dict[str, float]]:
    """Stress of a trained encoder (table rows or distances) against every variant's geometry
    (dense ``D`` arrays or targets, see :func:`as_targets`)."""
    out = {}
    for name, t in as_targets(targets).items():
        n = t.n
        out[name] = t.stress_of(table=None if table is None else table[:n],
                                distances=None if distances is None else distances[:n, :n])
    return out


def geometry_path(cfg: StressConfig, n: int) -> str:
    """``"dense"`` or ``"matrix_free"`` for ``n`` positions: the ``geometry`` option, where
    ``"auto"`` is matrix-free when ``n > matrix_free_above`` and the metric has a Gram
    factorisation (chord, normalized)."""
    if cfg.geometry != "auto":
        return cfg.geometry
    return ("matrix_free" if n > cfg.matrix_free_above and has_gram_factorisation(cfg.metric)
            else "dense")


def geometry_variants(prep: ClassificationCorpus, cfg: StressConfig) -> tuple[str, dict[str, dict[str, np.ndarray]], dict]:
    """``(path, variants, info)``: the geometry of every estimator variant on the chosen path
    (dense: ``{"D", "D_fr"}`` per variant, :func:`distance_variants`; matrix-free: ``{"P"}``)."""
    P, N, notes = _estimate(prep, cfg, split_half=False)
    path = geometry_path(cfg, P.shape[0])
    if path == "dense":
        variants, info = distance_variants(prep, cfg, plugin=(P, N, notes))
    else:
        if cfg.mds_variant == "split_half":
            raise ValueError(f"mds_variant='split_half' needs the dense geometry (n = "
                             f"{P.shape[0]} > matrix_free_above = {cfg.matrix_free_above}); "
                             "set geometry=dense or mds_variant=plugin")
        variants, info = matrix_free_variants(prep, P, N, notes, cfg)
    if cfg.require_n and info["n"] < cfg.num_positions:
        raise ValueError(f"only n = {info['n']} positions could be analysed, fewer than the "
                         f"num_positions = {cfg.num_positions} requested (require_n)")
    info["geometry"] = {"path": path, "option": cfg.geometry,
                        "matrix_free_above": cfg.matrix_free_above,
                        "matrix_free_k": cfg.matrix_free_k,
                        "stress_exact_max": cfg.stress_exact_max,
                        "stress_pairs": cfg.stress_pairs}
    return path, variants, info


def sensitivity_cell(cfg: StressConfig, samples: int | None, debias: str, repeat: int) -> dict[str, Any]:
    """One cell of the sample-size analysis: stress of MDS (r = 1, 2, 3) and of ALiBi, sinusoidal and
    RoPE against ``D`` estimated from ``samples`` draws per position (None: exact ``P``).

    Matrix-free (no ``[n, n]`` array) when :func:`geometry_path` says so for
    ``cfg.sens_positions``; split-half cells then do not exist (see :func:`sensitivity_settings`).
    """
    from posjax.data.synthetic import sample_distributions, three_regime_corpus

    corpus = three_regime_corpus(cfg.sens_positions, cfg.sens_vocab, mixing=cfg.mixing,
                                 alpha=cfg.alpha, seed=cfg.data_seed)
    seed = cfg.data_seed + 1000 * repeat + 17
    if geometry_path(cfg, cfg.sens_positions) == "matrix_free":
        if debias != "none":
            raise ValueError(f"split-half debiasing {not_computed(cfg.sens_positions)}")
        P = (corpus.P if samples is None else sample_distributions(corpus.P, samples, seed=seed)[0])
        P = np.asarray(P, np.float64)
        X = np.asarray(geo.mds_from_distributions(P, 3, metric=cfg.metric,
                                                  seed=cfg.data_seed).coords, np.float64)
        fixed = fixed_coordinates(P.shape[0], cfg, SENSITIVITY_ENCODINGS)
        configs = {**{f"mds_r{r}": X[:, :r] for r in (1, 2, 3)}, **fixed}
        return dict(zip(configs, coords_stress(P, list(configs.values()), **rows_options(cfg))))
    if samples is None:
        D = geo.hellinger_matrix(corpus.P, metric=cfg.metric)
    elif debias == "split_half":
        Ph, _ = sample_distributions(corpus.P, samples, seed=seed, split_half=True)
        D = geo.hellinger_matrix(Ph, metric=cfg.metric, debias="split_half")
    else:
        Ph, _ = sample_distributions(corpus.P, samples, seed=seed)
        D = geo.hellinger_matrix(Ph, metric=cfg.metric)
    D = np.asarray(D, np.float64)
    n = D.shape[0]
    mds = geo.classical_mds(D, dim=3)
    out = {f"mds_r{r}": stress_pair(D, geo.dist_mds(np.asarray(mds.coords)[:, :r]))
           for r in (1, 2, 3)}
    out.update({k: stress_pair(D, E)
                for k, E in fixed_distances(n, cfg, SENSITIVITY_ENCODINGS).items()})
    return out


def sensitivity_settings(cfg: StressConfig) -> tuple[list[tuple[int | None, str]], dict[str, Any]]:
    """``(settings, path_key)``: the ``(samples, debias)`` cells of the sample-size analysis
    and the extra cell-key entries of its path (empty for the dense path; on the matrix-free
    path the split-half cells are left out)."""
    mf = geometry_path(cfg, cfg.sens_positions) == "matrix_free"
    settings = [(s, d) for s in cfg.sens_samples
                for d in (("none",) if s is None or mf else ("none", "split_half"))]
    key = ({"path": "matrix_free", "k": 3, "stress_exact_max": cfg.stress_exact_max,
            "stress_pairs": cfg.stress_pairs} if mf else {})
    return settings, key


def summarise_sensitivity(cells: dict[tuple, list[dict]]) -> list[dict[str, Any]]:
    """Mean (and sd over repeats) per (samples, debias), plus whether ALiBi < sinusoidal ~ RoPE
    holds (ALiBi strictly lowest of the three; sinusoidal and RoPE within 25 % of each other)."""
    rows = []
    for (samples, debias), reps in cells.items():
        row: dict[str, Any] = {"samples_per_position": samples, "debias": debias,
                               "repeats": len(reps)}
        for key in reps[0]:
            for scale in ("raw", "optimal"):
                vals = np.array([r[key][scale] for r in reps])
                row[f"{key}/{scale}"] = float(vals.mean())
                row[f"{key}/{scale}/sd"] = float(vals.std())
        a, s, r = (row[f"{k}/optimal"] for k in ("alibi", "sinusoidal", "rope"))
        row["alibi_lowest"] = bool(a < min(s, r))
        row["sin_rope_close"] = bool(abs(s - r) <= 0.25 * max(s, r))
        row["paper_ordering_holds"] = row["alibi_lowest"] and row["sin_rope_close"]
        rows.append(row)
    return rows


# The toy table of docs/interpretations.md (a derived toy, not from the paper): optimal-scale
# stress, three-regime mixture, V = 2000, n = 128.
INTERPRETATIONS_TOY_STRESS = {
    None: {"mds": (0.087, 0.0001, 0.0), "alibi": 0.044, "sinusoidal": 0.135, "rope": 0.140},
    100000: {"mds": (0.095, 0.002, 0.002), "alibi": 0.049, "sinusoidal": 0.115, "rope": 0.120},
    10000: {"mds": (0.157, 0.039, 0.037), "alibi": 0.088, "sinusoidal": 0.056, "rope": 0.059},
    1000: {"mds": (0.366, 0.224, 0.211), "alibi": 0.203, "sinusoidal": 0.012, "rope": 0.013},
}


# --- matrix-free path ---------------------------------------------------------------
# Matrix-free geometry of the stress experiment: the stress, spectrum and parameter tables at large ``n`` without
# any ``[n, n]`` array (arXiv 2604.05217; docs/long_context_geometry.md).
# 
# Chosen by the ``geometry`` option (``"auto"``: when ``n > matrix_free_above`` and the metric has
# a Gram factorisation). What changes against the dense path:
# 
# * MDS: top-``k`` coordinates and eigenvalues of ``B`` (``k = matrix_free_k``) by
#   :func:`posjax.geometry.mds_from_distributions`; the energy rule uses ``trace(B)``
#   (:func:`posjax.geometry.b_trace`), so ``r_eps`` is exact when it is ``<= k`` and is otherwise
#   reported as not reached (the row then uses ``r = k``). The full-rank row becomes MDS at ``k``.
# * Stress: every encoding enters through coordinates (fixed encodings:
#   :func:`posjax.analysis.encoding_geometry.encoding_coordinates`; trained encoders: their table rows), exact and
#   streamed when ``n <= stress_exact_max``, else from ``stress_pairs`` sampled pairs with a 95 %
#   confidence interval (:func:`posjax.geometry.stress_from_distributions`).
# * Not computed (reported as such, never filled in): split-half debiasing, SMACOF, the Fisher-Rao
#   negative mass, the shift-invariance score, the effective rank (needs the whole spectrum) and
#   the stress of bias-only encoders (T5), which have distances but no coordinates.
# 
# Call inside ``jax.enable_x64(True)``, like the dense path.


def fixed_coordinates(n: int, cfg: StressConfig, names=None) -> dict[str, np.ndarray]:
    """Coordinates of the fixed encodings of the stress table, with the options of the dense
    path (so their distances equal ``fixed_distances``); a bias (T5) has none."""
    return {k: encoding_coordinates(k, n, **o) for k, o in _fixed_options(cfg, names).items()
            if k != "t5"}


def _rank(spec: dict, eps: float, k: int) -> tuple[int, bool]:
    """``(r_eps, reached)``: the energy-rule rank, or ``(k, False)`` when the top ``k``
    eigenvalues hold less than ``1 - eps`` of ``trace(B)``."""
    r = spec["r_eps"][str(eps)]
    return (r, True) if isinstance(r, int) else (k, False)


def analyse_matrix_free(P: np.ndarray, cfg: StressConfig, fixed: dict[str, np.ndarray]
                        ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Stress rows (without trained encoders), spectrum and parameters from ``P [n, V]``.

    Returns:
      ``(summary, arrays)`` shaped as the dense ``analyse`` returns them; quantities this path
      cannot compute hold :func:`not_computed` strings.
    """
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
    rows = dict(zip(configs, coords_stress(P, list(configs.values()), **rows_options(cfg))))
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
               "stress": rows, "spectrum": spec, "parameters": params,
               "smacof_history_ends": nc, "notes": notes}
    arrays = {"coords_low": X[:, :r_low], "coords_full": X, "coords_2d": X[:, :min(2, k)],
              "eigenvalues": lam, "trace": trace}
    return summary, arrays


def matrix_free_variants(prep: ClassificationCorpus, P: np.ndarray, N: np.ndarray, notes: list[str],
                         cfg: StressConfig) -> tuple[dict[str, dict[str, np.ndarray]], dict]:
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


def pretrained_stress_rows(cfg: StressConfig, prep: ClassificationCorpus, variants: dict[str, Any]
                       ) -> dict[str, dict[str, dict[str, Any]]]:
    """``{variant: {"pretrained": row, ["pretrained_ln": row]}}``: stress (raw and optimal
    scale) of the checkpoint's table rows against each variant's geometry (``{"D"}``,
    ``{"P"}`` or a target of ``as_targets``; call under x64)."""
    from posjax.pretrained import position_table

    off = prep.model_offset
    variants = as_targets(variants, rows_options(cfg))
    out: dict[str, dict[str, dict[str, Any]]] = {v: {} for v in variants}
    kinds = [("pretrained", False)] + ([("pretrained_ln", True)]
                                       if cfg.pretrained_layernorm else [])
    for key, post_ln in kinds:
        table = np.asarray(position_table(cfg.pretrained, post_layernorm=post_ln), np.float64)
        n = min(next(iter(variants.values())).n, table.shape[0] - off)
        if cfg.require_n and n < cfg.num_positions:
            raise ValueError(f"{cfg.pretrained} has {table.shape[0]} position rows: fewer than "
                             f"the num_positions = {cfg.num_positions} requested (require_n)")
        stress = trained_stress({k: t.head(n) for k, t in variants.items()},
                                table=table[off:off + n])
        for v, s in stress.items():
            out[v][key] = {**s, "rank": table.shape[1], "checkpoint": str(cfg.pretrained),
                           "rows": n}
    return out
