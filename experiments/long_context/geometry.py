"""Geometry connection of ``experiments.long_context`` (exploratory): each trained PE's stress
against the corpus's Hellinger geometry at n = L and n = 4L, beside its perplexity at 4L.

The target is the Hellinger matrix ``D`` of the positional distributions of non-overlapping
windows of the training stream (:func:`posjax.geometry.positional_distributions`, the ``top_k``
most frequent tokens plus an OTHER bucket, :func:`posjax.geometry.hellinger_matrix`); a PE's
distances come from its trained module (:func:`posjax.analysis.encoding_geometry.encoding_distances`
with ``module=``, the first layer's PE, per seed), compared by the optimal-scale normalised stress
``sigma*`` (:func:`posjax.geometry.stress`; G. Cirrincione, arXiv 2604.05217). PEs whose hooks
depend on the content (FoX, CoPE, DAPE, ...) have no static geometry and are listed as such.
Spearman's rho between mean stress and mean perplexity over the PEs, with a percentile
bootstrap CI over PEs: exploratory, the PEs are few.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from experiments.long_context.config import LongContextConfig

TOP_K = 64


def _target(cfg: LongContextConfig, corpus: dict, n: int) -> np.ndarray:
    import posjax.geometry as geo

    cache = corpus.setdefault("D", {})
    if n not in cache:
        stream = corpus["train"]
        count = cfg.geometry_windows                        # available: check_windows
        windows = stream[:count * n].reshape(count, n)
        P, _ = geo.positional_distributions(windows, vocab_size=corpus["model_vocab"],
                                            num_positions=n,
                                            top_k=min(TOP_K, corpus["model_vocab"] - 1))
        cache[n] = np.asarray(geo.hellinger_matrix(P))
    return cache[n]


def geometry_lengths(cfg: LongContextConfig) -> list[int]:
    return [cfg.train_length, 4 * cfg.train_length]


def check_windows(cfg: LongContextConfig, train_stream: np.ndarray) -> None:
    """ValueError unless the training stream holds ``geometry_windows`` non-overlapping windows
    at every geometry length (a shorter corpus would silently give fewer)."""
    for n in geometry_lengths(cfg):
        if len(train_stream) // n < cfg.geometry_windows:
            raise ValueError(f"geometry_windows={cfg.geometry_windows} windows of {n} tokens need "
                             f"{cfg.geometry_windows * n} training tokens; the corpus's training "
                             f"stream has {len(train_stream)} (lower geometry_windows or raise "
                             f"corpus_tokens)")


def pe_stress(pe: str, models: list, cfg: LongContextConfig, corpus: dict) -> dict[str, Any]:
    """``{"stress": {n: [per seed]}}`` or ``{"none": reason}`` for a PE without a static
    geometry."""
    import posjax.geometry as geo
    from posjax.analysis.encoding_geometry import encoding_distances

    out: dict[str, Any] = {"stress": {}}
    for n in geometry_lengths(cfg):
        D = _target(cfg, corpus, n)
        values = []
        for model in models:
            try:
                E = encoding_distances(pe, n, module=model.transformer.pe)
            except ValueError as e:
                return {"none": str(e)[:300]}
            values.append(float(geo.stress(D, distances=np.asarray(E, D.dtype),
                                           scale="optimal")))
        out["stress"][n] = values
    return out


def _spearman(x: np.ndarray, y: np.ndarray, draws: int = 2000, seed: int = 0) -> dict:
    from scipy import stats

    n = len(x)
    if n < 3:
        return {"rho": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": n}
    rho = float(stats.spearmanr(x, y).statistic)
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(draws):
        i = rng.integers(0, n, n)
        if len(set(x[i])) > 1 and len(set(y[i])) > 1:
            boot.append(stats.spearmanr(x[i], y[i]).statistic)
    lo, hi = (np.percentile(boot, [2.5, 97.5]) if boot else (np.nan, np.nan))
    return {"rho": rho, "lo": float(lo), "hi": float(hi), "n": n, "bootstrap_draws": len(boot)}


def corpus_stress(cfg: LongContextConfig, corpus: dict, cells: dict) -> dict[str, Any]:
    """Per PE: mean stress at n = L, 4L and perplexity at 4L (or the largest evaluated length);
    Spearman's rho of stress vs perplexity over the PEs with a geometry."""
    L = cfg.train_length
    at = 4 * L if 4 in cfg.eval_factors else max(cfg.eval_factors) * L
    rows, none = {}, {}
    for pe, cell in cells.items():
        g = cell.get("geometry")
        if g is None:
            continue
        if "none" in g:
            none[pe] = g["none"]
            continue
        ppl = [float(np.exp(s["nll"][str(at)])) for s in cell["seeds"]]
        rows[pe] = {"stress": {str(n): float(np.mean(v)) for n, v in g["stress"].items()},
                    "stress_per_seed": g["stress"], "ppl": float(np.mean(ppl)),
                    "ppl_per_seed": ppl}
    corr = {}
    for n in geometry_lengths(cfg):
        pes = [p for p in rows if np.isfinite(rows[p]["stress"][str(n)])]
        x = np.asarray([rows[p]["stress"][str(n)] for p in pes])
        y = np.asarray([rows[p]["ppl"] for p in pes])
        corr[str(n)] = {**_spearman(x, y), "pes": pes}
    return {"ppl_length": at, "rows": rows, "no_static_geometry": none, "spearman": corr,
            "top_k": TOP_K, "label": "exploratory (few PEs; percentile bootstrap over PEs)"}
