"""Geometry part of the stress experiment: the estimator variants of ``D`` (or of ``P`` on the
matrix-free path), the fixed encodings' rows, trained and pretrained tables against every
variant, and the sample-size sensitivity analysis (arXiv 2604.05217; docs/interpretations.md,
docs/long_context_geometry.md). The tables themselves are :mod:`posjax.analysis.stress_tables`.

Every function takes explicit values (the driver reads them off the config) and is called inside
``jax.enable_x64(True)``: the full-rank MDS stress is compared with zero below 1e-6.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

import posjax.geometry as geo
from posjax.analysis.encoding_geometry import encoding_coordinates, encoding_distances
from posjax.data.classification_corpus import ClassificationCorpus
from posjax.geometry.stress_targets import (DenseTarget, RowsTarget, coords_stress, not_computed,
                                            stress_pair)

SENSITIVITY_ENCODINGS = ("sinusoidal", "rope", "alibi")


def estimate(prep: ClassificationCorpus, split_half: bool, **options: Any):
    """``(P, N, warnings)`` of the geometry corpus (``options``: of
    :func:`posjax.geometry.positional_distributions`)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        P, N = geo.positional_distributions(
            prep.geo_tokens, lengths=prep.geo_lengths, vocab_size=prep.vocab_size,
            pad_id=prep.pad_id, keep_special=True, on_empty="truncate", split_half=split_half,
            **options)
    return np.asarray(P), np.asarray(N), [str(w.message) for w in caught]


def _variant(P: np.ndarray, metric: str, **kw) -> dict[str, np.ndarray]:
    return {"D": np.asarray(geo.hellinger_matrix(P, metric=metric, **kw), np.float64),
            "D_fr": np.asarray(geo.hellinger_matrix(P, metric="fr_arc", **kw), np.float64)}


def geometry_variants(prep: ClassificationCorpus, *, metric: str, path_of: Callable[[int], str],
                      estimator: dict[str, Any], split_half_ok: bool = True
                      ) -> tuple[str, dict[str, dict[str, np.ndarray]], dict]:
    """``(path, variants, info)``: the geometry of every estimator variant on the path
    ``path_of(n)`` names, truncated to a common ``n``.

    Dense: ``{"plugin", "split_half", ["exact"]}``, each ``{"D" [n, n] (metric), "D_fr" [n, n]
    (fr_arc, for the non-Euclidean mass)}``; matrix-free: ``{"plugin", ["exact"]}``, each
    ``{"P" [n, V]}`` (split-half needs the dense path: a ValueError when not
    ``split_half_ok``). ``info``: ``n``, the sample counts ``N_i`` (min/median/max), columns and
    truncation warnings.
    """
    P, N, notes = estimate(prep, False, **estimator)
    path = path_of(P.shape[0])
    info = {"requested_n": estimator["num_positions"]}
    if path == "dense":
        Ph, Nh, notes_h = estimate(prep, True, **estimator)
        n = min(P.shape[0], Ph.shape[1])
        out = {"plugin": _variant(P[:n], metric),
               "split_half": _variant(Ph[:, :n], metric, debias="split_half")}
        if prep.exact_P is not None:
            out["exact"] = _variant(prep.exact_P[:n], metric)
        info["N_i_per_half"] = {"A": geo.counts_summary(Nh[0, :n]),
                                "B": geo.counts_summary(Nh[1, :n])}
        notes = notes + notes_h
    else:
        n = P.shape[0]
        if not split_half_ok:
            raise ValueError(f"mds_variant='split_half' needs the dense geometry (n = {n} is "
                             "matrix-free); set geometry=dense or mds_variant=plugin")
        out = {"plugin": {"P": np.asarray(P, np.float64)}}
        if prep.exact_P is not None:
            out["exact"] = {"P": np.asarray(prep.exact_P[:n], np.float64)}
        info.update(N_i_per_half=not_computed(n), split_half=not_computed(n))
    info = {"n": n, **info, "N_i": geo.counts_summary(N[:n]), "columns": int(P.shape[1]),
            "warnings": notes}
    return path, out, info


def fixed_distances(n: int, options: dict[str, dict]) -> dict[str, np.ndarray]:
    """``{row: distances [n, n]}`` of the fixed encodings (``options``: ``{name: options}``;
    row ``t5_init`` for ``t5``)."""
    return {("t5_init" if k == "t5" else k): encoding_distances(k, n, **o)
            for k, o in options.items()}


def fixed_coordinates(n: int, options: dict[str, dict]) -> dict[str, np.ndarray]:
    """``{name: coordinates [n, r]}`` of the fixed encodings with the same options (so their
    distances equal :func:`fixed_distances`); a bias (T5) has none."""
    return {k: encoding_coordinates(k, n, **o) for k, o in options.items() if k != "t5"}


def as_targets(variants: dict[str, Any], options: dict[str, Any] | None = None
               ) -> dict[str, Any]:
    """``{variant: target}`` from ``{variant: {"D": ...}}`` (dense), ``{variant: {"P": ...}}``
    (matrix-free, :class:`RowsTarget` with ``options`` of ``coords_stress``), bare ``D``
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
    """Stress of a trained encoder (table rows ``[>= n, r]`` or distances ``[>= n, >= n]``)
    against every variant's geometry (dense ``D`` arrays or targets, see :func:`as_targets`)."""
    out = {}
    for name, t in as_targets(targets).items():
        n = t.n
        out[name] = t.stress_of(table=None if table is None else table[:n],
                                distances=None if distances is None else distances[:n, :n])
    return out


def pretrained_stress_rows(checkpoint: str, offset: int, targets: dict[str, Any], *,
                           layernorm: bool = False, required: int | None = None
                           ) -> dict[str, dict[str, dict[str, Any]]]:
    """``{variant: {"pretrained": row, ["pretrained_ln": row]}}``: stress (raw and optimal
    scale) of the checkpoint's table rows ``offset:offset + n`` against each variant's target
    (:func:`as_targets`); ``required``: fail when the checkpoint has fewer rows."""
    from posjax.pretrained import position_table

    out: dict[str, dict[str, dict[str, Any]]] = {v: {} for v in targets}
    for key, post_ln in [("pretrained", False)] + ([("pretrained_ln", True)] if layernorm else []):
        table = np.asarray(position_table(checkpoint, post_layernorm=post_ln), np.float64)
        n = min(next(iter(targets.values())).n, table.shape[0] - offset)
        if required is not None and n < required:
            raise ValueError(f"{checkpoint} has {table.shape[0]} position rows: fewer than "
                             f"the num_positions = {required} requested (require_n)")
        stress = trained_stress({k: t.head(n) for k, t in targets.items()},
                                table=table[offset:offset + n])
        for v, s in stress.items():
            out[v][key] = {**s, "rank": table.shape[1], "checkpoint": str(checkpoint), "rows": n}
    return out


def sensitivity_settings(samples: tuple[int | None, ...], matrix_free: bool,
                         pair_options: dict[str, Any]
                         ) -> tuple[list[tuple[int | None, str]], dict[str, Any]]:
    """``(settings, path_key)``: the ``(samples, debias)`` cells of the sample-size analysis
    and the extra cell-key entries of its path (empty for the dense path; on the matrix-free
    path the split-half cells are left out)."""
    settings = [(s, d) for s in samples
                for d in (("none",) if s is None or matrix_free else ("none", "split_half"))]
    key = ({"path": "matrix_free", "k": 3, "stress_exact_max": pair_options["exact_max"],
            "stress_pairs": pair_options["pairs"]} if matrix_free else {})
    return settings, key


def sensitivity_cell(n: int, vocab: int, samples: int | None, debias: str, repeat: int, *,
                     mixing: str, alpha: float, data_seed: int, matrix_free: bool,
                     encodings: dict[str, dict], pair_options: dict[str, Any]) -> dict[str, Any]:
    """One cell of the sample-size analysis: stress of MDS (r = 1, 2, 3) and of the fixed
    ``encodings`` against ``D`` estimated from ``samples`` draws per position (None: exact
    ``P``) of the ``n``-position three-regime corpus; matrix-free (no ``[n, n]`` array, no
    split-half cells) when ``matrix_free``."""
    from posjax.data.synthetic import sample_distributions, three_regime_corpus

    corpus = three_regime_corpus(n, vocab, mixing=mixing, alpha=alpha, seed=data_seed)
    seed = data_seed + 1000 * repeat + 17
    metric = pair_options["metric"]
    if matrix_free:
        if debias != "none":
            raise ValueError(f"split-half debiasing {not_computed(n)}")
        P = (corpus.P if samples is None else sample_distributions(corpus.P, samples, seed=seed)[0])
        P = np.asarray(P, np.float64)
        X = np.asarray(geo.mds_from_distributions(P, 3, metric=metric, seed=data_seed).coords,
                       np.float64)
        configs = {**{f"mds_r{r}": X[:, :r] for r in (1, 2, 3)},
                   **fixed_coordinates(P.shape[0], encodings)}
        return dict(zip(configs, coords_stress(P, list(configs.values()), **pair_options)))
    if samples is None:
        D = geo.hellinger_matrix(corpus.P, metric=metric)
    else:
        half = debias == "split_half"
        Ph, _ = sample_distributions(corpus.P, samples, seed=seed, split_half=half)
        D = geo.hellinger_matrix(Ph, metric=metric, **({"debias": "split_half"} if half else {}))
    D = np.asarray(D, np.float64)
    mds = geo.classical_mds(D, dim=3)
    out = {f"mds_r{r}": stress_pair(D, geo.dist_mds(np.asarray(mds.coords)[:, :r]))
           for r in (1, 2, 3)}
    out.update({k: stress_pair(D, E) for k, E in fixed_distances(D.shape[0], encodings).items()})
    return out


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
