"""The PE-swap experiment's geometry: the corpus' Hellinger distances and MDS tables, each
variant's PE (``replace_pe`` arguments) and distances, and its stress (arXiv 2604.05217)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from experiments.pe_swap.config import PESwapConfig
from experiments.pe_swap.mlm import Data


def corpus_geometry(cfg: PESwapConfig, data: Data) -> dict[str, Any]:
    """Hellinger distances ``D [n', n']`` of the corpus' positional distributions and their
    classical MDS (full rank and rank r).

    ``geometry="sentences"`` (default): the sentences one per row (``[CLS] ... [SEP]``, padding
    dropped), positions with no sample cut off (``n' <= max_len``); the stream windows the
    model trains on are stationary (every content position sees the same distribution), so
    their geometry is flat up to noise. ``"windows"``: the training windows themselves.
    """
    import jax

    import posjax.geometry as geo

    with jax.enable_x64(True):
        if cfg.geometry == "sentences":
            P, _ = geo.positional_distributions(
                data.sentence_tokens, lengths=data.sentence_lengths, vocab_size=data.vocab_size,
                num_positions=cfg.max_len, pad_id=data.pad_id, keep_special=True,
                on_empty="truncate")
        else:
            P, _ = geo.positional_distributions(data.train, vocab_size=data.vocab_size,
                                                num_positions=cfg.max_len, keep_special=True)
        D = np.asarray(geo.hellinger_matrix(np.asarray(P), metric=cfg.metric), np.float64)
        full = geo.classical_mds(D, rank_rule=("threshold", 1e-9))
        low = geo.classical_mds(D, rank_rule=("energy", cfg.mds_eps))
    coords_full = np.asarray(full.coords, np.float64)
    r = cfg.mds_rank or int(low.rank)
    r = max(1, min(r, coords_full.shape[1]))
    return {"D": D, "n": int(D.shape[0]), "coords_full": coords_full,
            "coords_r": coords_full[:, :r], "rank_r": r, "rank_full": int(coords_full.shape[1])}


def model_rows(coords: np.ndarray, max_len: int) -> np.ndarray:
    """Coordinates ``[n', r]`` placed on model positions ``0..max_len-1`` (positions past
    ``n'`` take the last analysed position's row)."""
    return np.asarray(coords)[np.clip(np.arange(max_len), 0, coords.shape[0] - 1)]


def variant_pe(variant: str, cfg: PESwapConfig, tcfg, table: np.ndarray, geom: dict
               ) -> tuple[str, dict | None]:
    """``(pe name, options)`` that ``replace_pe`` gets for a variant (None: keep the table)."""
    target = float(np.linalg.norm(table[:cfg.max_len], axis=1).mean())
    if variant == "learned":
        return "learned", None
    if variant == "learned_reinit":
        return "learned", {"num_positions": tcfg.max_len}
    if variant == "sinusoidal":
        scale = target / math.sqrt(tcfg.d_model / 2) if cfg.pe_scale == "match" else 1.0
        return "sinusoidal", {"scale": scale}
    if variant in ("mds", "mds_r"):
        coords = model_rows(geom["coords_full" if variant == "mds" else "coords_r"],
                            cfg.max_len).astype(np.float32)
        rank = min(coords.shape[1], tcfg.d_model)
        coords = coords[:, :rank]
        if cfg.pe_scale == "match":
            coords = coords * (target / float(np.linalg.norm(coords, axis=1).mean()))
        return "mds", {"coords": coords, "rank": rank, "trainable": "both"}
    return variant, {}


def variant_distances(variant: str, model, cfg: PESwapConfig, tcfg, table: np.ndarray,
                      geom: dict) -> np.ndarray:
    """The distance matrix ``E [n, n]`` of a variant's PE at positions ``0..n-1``."""
    import jax

    import posjax.geometry as geo
    from posjax.analysis.encoding_geometry import encoding_distances

    n = geom["n"]
    with jax.enable_x64(True):
        if variant == "learned":
            E = geo.dist_learned(np.asarray(table[:n], np.float64))
        elif variant == "learned_reinit":
            E = geo.dist_learned(np.asarray(model.transformer.pe.embedding[...],
                                            np.float64)[:n])
        elif variant in ("mds", "mds_r"):
            E = geo.dist_mds(geom["coords_full" if variant == "mds" else "coords_r"])
        elif variant == "sinusoidal":
            E = encoding_distances("sinusoidal", n, dim=tcfg.d_model)
        elif variant == "rope":
            E = encoding_distances("rope", n, head_dim=tcfg.d_model // tcfg.num_heads,
                                   mode="kernel")
        elif variant == "alibi":
            E = encoding_distances("alibi", n, num_heads=tcfg.num_heads)
        elif variant == "none":
            E = encoding_distances("none", n)
        else:
            E = encoding_distances(variant, n, module=model.transformer.pe)
        return np.asarray(E, np.float64)


def stress_of(D: np.ndarray, E: np.ndarray) -> dict[str, float]:
    import jax

    import posjax.geometry as geo

    with jax.enable_x64(True):
        return {"raw": float(geo.stress(D, distances=E)),
                "optimal": float(geo.stress(D, distances=E, scale="optimal"))}
