"""The geometries an encoding's stress is measured against, and the rows of trained,
pretrained and fixed encodings (arXiv 2604.05217; docs/interpretations.md,
docs/long_context_geometry.md).

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217: Eq. (3) (Hellinger distances ``D`` of the positional distributions ``P``),
Eq. (4) (stress, no square root, raw and at the optimal scale), Algorithm 1 (classical MDS).

* :func:`geometry_path`: the dense or matrix-free path for ``n`` positions;
* :func:`geometry_variants`: ``D`` (dense path) or ``P`` (matrix-free path) of every estimator
  variant (plug-in, split-half, exact) of a geometry corpus;
* :func:`fixed_distances` / :func:`fixed_coordinates`: the fixed encodings' rows;
  :func:`variant_tables`: every variant's stress, spectrum and parameter tables;
* :func:`as_targets`, :func:`trained_stress`, :func:`trained_encoding_stress`,
  :func:`pretrained_stress_rows`: a learned table (or bias) against every variant;
* :func:`sensitivity_stress`, :func:`summarise_sensitivity`: the sample-size analysis.

Call them inside ``jax.enable_x64(True)``: the full-rank MDS stress is compared with zero below
1e-6 by the callers.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

import posjax.geometry as geo
from posjax.analysis.encoding_geometry import encoding_coordinates, encoding_distances
from posjax.analysis.stress_tables import dense_tables, matrix_free_tables
from posjax.geometry.stress_targets import (DenseTarget, RowsTarget, coords_stress,
                                            has_gram_factorisation, not_computed, stress_pair)

#: The options of :func:`geometry_path`.
GEOMETRY_PATHS = ("auto", "dense", "matrix_free")


def geometry_path(n: int, option: str = "auto", *, matrix_free_above: int = 4096,
                  metric: str = "chord") -> str:
    """``"dense"`` (the ``[n, n]`` Hellinger matrix) or ``"matrix_free"`` (the rows ``P``, see
    docs/long_context_geometry.md) for ``n`` positions. ``option`` ``"dense"`` or
    ``"matrix_free"`` is taken as it is; ``"auto"`` is matrix-free when ``n >
    matrix_free_above`` and ``metric`` has a Gram factorisation (chord, normalized)."""
    if option not in GEOMETRY_PATHS:
        raise ValueError(f"geometry must be auto, dense or matrix_free, got {option!r}")
    if option != "auto":
        return option
    return ("matrix_free" if n > matrix_free_above and has_gram_factorisation(metric)
            else "dense")


def estimate(corpus: Any, split_half: bool, **options: Any):
    """``(P, N, warnings)`` of a geometry corpus (``corpus``: ``geo_tokens [M, T]``,
    ``geo_lengths [M]``, ``vocab_size``, ``pad_id``, as
    :class:`posjax.data.classification_corpus.ClassificationCorpus` holds them; ``options``: of
    :func:`posjax.geometry.positional_distributions`)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        P, N = geo.positional_distributions(
            corpus.geo_tokens, lengths=corpus.geo_lengths, vocab_size=corpus.vocab_size,
            pad_id=corpus.pad_id, keep_special=True, on_empty="truncate", split_half=split_half,
            **options)
    return np.asarray(P), np.asarray(N), [str(w.message) for w in caught]


def _variant(P: np.ndarray, metric: str, **kw) -> dict[str, np.ndarray]:
    return {"D": np.asarray(geo.hellinger_matrix(P, metric=metric, **kw), np.float64),
            "D_fr": np.asarray(geo.hellinger_matrix(P, metric="fr_arc", **kw), np.float64)}


def geometry_variants(corpus: Any, *, metric: str, estimator: dict[str, Any],
                      geometry: str = "auto", matrix_free_above: int = 4096,
                      split_half_ok: bool = True
                      ) -> tuple[str, dict[str, dict[str, np.ndarray]], dict]:
    """``(path, variants, info)``: the geometry of every estimator variant of ``corpus`` (see
    :func:`estimate`; ``corpus.exact_P [n, V]`` or None) on the path
    :func:`geometry_path` chooses for the estimated ``n``
    (``geometry``, ``matrix_free_above``, ``metric``), truncated to a common ``n``.

    Dense: ``{"plugin", "split_half", ["exact"]}``, each ``{"D" [n, n] (metric), "D_fr" [n, n]
    (fr_arc, for the non-Euclidean mass)}``; matrix-free: ``{"plugin", ["exact"]}``, each
    ``{"P" [n, V]}`` (split-half needs the dense path: a ValueError when not
    ``split_half_ok``). ``info``: ``n``, the sample counts ``N_i`` (min/median/max), columns and
    truncation warnings.
    """
    P, N, notes = estimate(corpus, False, **estimator)
    path = geometry_path(P.shape[0], geometry, matrix_free_above=matrix_free_above,
                         metric=metric)
    info = {"requested_n": estimator["num_positions"]}
    if path == "dense":
        Ph, Nh, notes_h = estimate(corpus, True, **estimator)
        n = min(P.shape[0], Ph.shape[1])
        out = {"plugin": _variant(P[:n], metric),
               "split_half": _variant(Ph[:, :n], metric, debias="split_half")}
        if corpus.exact_P is not None:
            out["exact"] = _variant(corpus.exact_P[:n], metric)
        info["N_i_per_half"] = {"A": geo.counts_summary(Nh[0, :n]),
                                "B": geo.counts_summary(Nh[1, :n])}
        notes = notes + notes_h
    else:
        n = P.shape[0]
        if not split_half_ok:
            raise ValueError(f"mds_variant='split_half' needs the dense geometry (n = {n} is "
                             "matrix-free); set geometry=dense or mds_variant=plugin")
        out = {"plugin": {"P": np.asarray(P, np.float64)}}
        if corpus.exact_P is not None:
            out["exact"] = {"P": np.asarray(corpus.exact_P[:n], np.float64)}
        info.update(N_i_per_half=not_computed(n), split_half=not_computed(n))
    info = {"n": n, **info, "N_i": geo.counts_summary(N[:n]), "columns": int(P.shape[1]),
            "warnings": notes}
    return path, out, info


def fixed_distances(n: int, options: dict[str, dict]) -> dict[str, np.ndarray]:
    """``{row: distances [n, n]}`` of the fixed encodings (``options``: ``{name: options}`` of
    :func:`~posjax.analysis.encoding_geometry.encoding_distances`; row ``t5_init`` for ``t5``)."""
    return {("t5_init" if k == "t5" else k): encoding_distances(k, n, **o)
            for k, o in options.items()}


def fixed_coordinates(n: int, options: dict[str, dict]) -> dict[str, np.ndarray]:
    """``{name: coordinates [n, r]}`` of the fixed encodings with the same options (so their
    distances equal :func:`fixed_distances`); a bias (T5) has none."""
    return {k: encoding_coordinates(k, n, **o) for k, o in options.items() if k != "t5"}


def variant_tables(path: str, variants: dict[str, dict], encodings: dict[str, dict], *,
                   k: int, pairs: dict[str, Any], smacof_max_iter: int,
                   smacof_tol: float | None, **tables: Any) -> tuple[dict, dict]:
    """``(summaries, arrays)``, ``{variant: ...}`` each: the stress, spectrum and parameter
    tables of every variant of :func:`geometry_variants` (``path`` as it returned it) against
    the fixed ``encodings`` (``{name: options}``). Dense:
    :func:`~posjax.analysis.stress_tables.dense_tables` of ``D``, ``D_fr``; matrix-free:
    :func:`~posjax.analysis.stress_tables.matrix_free_tables` of ``P`` (top ``k`` eigenpairs,
    stress with ``pairs``, the options of ``coords_stress``). ``tables``: ``tau``, ``eps``,
    ``eps_alt``, ``paper_d``, ``model_d``."""
    dense = path == "dense"
    n = next(iter(variants.values()))["D" if dense else "P"].shape[0]  # common to the variants
    fixed = (fixed_distances if dense else fixed_coordinates)(n, encodings)
    summaries, arrays = {}, {}
    for name, v in variants.items():
        summaries[name], arrays[name] = (
            dense_tables(v["D"], v["D_fr"], fixed, smacof_max_iter=smacof_max_iter,
                         smacof_tol=smacof_tol, **tables) if dense else
            matrix_free_tables(v["P"], fixed, k=k, **pairs, **tables))
    return summaries, arrays


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
    """Stress of an encoder (table rows ``[>= n, r]`` or distances ``[>= n, >= n]``) against
    every variant's geometry (dense ``D`` arrays or targets, see :func:`as_targets`)."""
    out = {}
    for name, t in as_targets(targets).items():
        n = t.n
        out[name] = t.stress_of(table=None if table is None else table[:n],
                                distances=None if distances is None else distances[:n, :n])
    return out


def trained_encoding_stress(model: Any, pe: str, offset: int, targets: dict[str, Any]
                            ) -> dict[str, dict[str, float]] | None:
    """Stress of a trained model's table (``pe`` learned or mds: the rows
    ``offset:offset + n``) or bias (t5: its distances) against every variant's geometry
    (``targets``: as :func:`as_targets` takes them); None for another PE or no targets.
    ``model``: a :class:`posjax.models.Classifier` (or anything with ``model.transformer``)."""
    if pe not in ("learned", "mds", "t5") or not targets:
        return None
    targets = as_targets(targets)
    module = model.transformer.pe
    max_len = int(model.transformer.config.max_len)
    n = min(next(iter(targets.values())).n, max_len - offset)
    heads = {k: t.head(n) for k, t in targets.items()}
    if pe in ("learned", "mds"):
        table = module.embedding[...] if pe == "learned" else module.full_table()
        return trained_stress(heads, table=np.asarray(table, np.float64)[offset:offset + n])
    if any(t.kind == "matrix_free" for t in heads.values()):
        raise ValueError(f"T5 stress not computed at n = {n} (matrix-free): a bias "
                         "has distances but no coordinates")
    E = np.asarray(encoding_distances("t5", max_len, module=module),
                   np.float64)[offset:offset + n, offset:offset + n]
    return trained_stress(heads, distances=E)


def pretrained_stress_rows(tables: dict[str, np.ndarray], offset: int,
                           targets: dict[str, Any], *, checkpoint: str,
                           required: int | None = None
                           ) -> dict[str, dict[str, dict[str, Any]]]:
    """``{variant: {row: ...}}``: stress (raw and optimal scale) of each position table of a
    checkpoint (``tables``: ``{row: [rows, d]}``, e.g. ``pretrained`` and ``pretrained_ln``),
    rows ``offset:offset + n``, against each variant's target (:func:`as_targets`), with the
    table's ``rank`` (d), ``checkpoint`` and ``rows`` (n); ``required``: a ValueError when the
    table has fewer rows."""
    out: dict[str, dict[str, dict[str, Any]]] = {v: {} for v in targets}
    for key, table in tables.items():
        table = np.asarray(table, np.float64)
        n = min(next(iter(targets.values())).n, table.shape[0] - offset)
        if required is not None and n < required:
            raise ValueError(f"{checkpoint} has {table.shape[0]} position rows: fewer than "
                             f"the num_positions = {required} requested (require_n)")
        stress = trained_stress({k: t.head(n) for k, t in targets.items()},
                                table=table[offset:offset + n])
        for v, s in stress.items():
            out[v][key] = {**s, "rank": table.shape[1], "checkpoint": str(checkpoint), "rows": n}
    return out


def sensitivity_stress(P: np.ndarray, *, debias: str, matrix_free: bool,
                       encodings: dict[str, dict], pair_options: dict[str, Any],
                       mds_seed: int = 0) -> dict[str, dict[str, Any]]:
    """Stress of MDS at r = 1, 2, 3 (``mds_r1..3``) and of the fixed ``encodings`` against the
    geometry of ``P [n, V]`` (``[2, n, V]`` split halves with ``debias="split_half"``).

    Dense: ``D = hellinger_matrix(P)``, classical MDS and :func:`stress_pair`; matrix-free (no
    ``[n, n]`` array; no split-half): top-3 MDS of ``P`` (``mds_seed``) and
    :func:`coords_stress` with ``pair_options`` (``metric``, ``exact_max``, ``pairs``,
    ``seed``). The dense path uses ``pair_options["metric"]`` only.
    """
    metric = pair_options["metric"]
    if matrix_free:
        n = np.shape(P)[-2]
        if debias != "none":
            raise ValueError(f"split-half debiasing {not_computed(n)}")
        P = np.asarray(P, np.float64)
        X = np.asarray(geo.mds_from_distributions(P, 3, metric=metric, seed=mds_seed).coords,
                       np.float64)
        configs = {**{f"mds_r{r}": X[:, :r] for r in (1, 2, 3)},
                   **fixed_coordinates(P.shape[0], encodings)}
        return dict(zip(configs, coords_stress(P, list(configs.values()), **pair_options)))
    D = geo.hellinger_matrix(P, metric=metric,
                             **({"debias": "split_half"} if debias == "split_half" else {}))
    D = np.asarray(D, np.float64)
    mds = geo.classical_mds(D, dim=3)
    out = {f"mds_r{r}": stress_pair(D, geo.dist_mds(np.asarray(mds.coords)[:, :r]))
           for r in (1, 2, 3)}
    out.update({k: stress_pair(D, E) for k, E in fixed_distances(D.shape[0], encodings).items()})
    return out


def summarise_sensitivity(cells: dict[tuple, list[dict]]) -> list[dict[str, Any]]:
    """One row per ``(samples, debias)`` key of ``cells`` (``{key: [repeat results of
    :func:`sensitivity_stress`]}``): mean and population sd over repeats of every
    ``row/scale``, and whether ALiBi < sinusoidal ~ RoPE holds (σ*: ALiBi strictly lowest of the
    three; sinusoidal and RoPE within 25 % of each other)."""
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
