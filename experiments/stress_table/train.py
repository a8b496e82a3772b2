"""The accuracy table of the stress experiment: train an encoder classifier with each PE and measure test
accuracy, PE parameter count and the stress of the trained positional geometry.

The MDS PE is the registered ``pe="mds"`` (:class:`posjax.encodings.mds.MDSEncoding`: low-rank
factors ``A W^T``, initialised from the rank-``r`` MDS coordinates, Algorithm 1 of
arXiv 2604.05217), built through ``TransformerConfig(pe="mds", pe_options={"coords": ...})``.
"""
from __future__ import annotations

import os
import time
from typing import Any

import jax
import numpy as np
from flax import nnx

from posjax.data.classification_corpus import ClassificationCorpus
from posjax.encodings.mds import mds_model_coords

from experiments.stress_table.config import StressConfig
from experiments.stress_table.geometry import as_targets, trained_stress

def model_config(cfg: StressConfig, prep: ClassificationCorpus, pe: str, pe_options: dict | None = None):
    """The :class:`TransformerConfig` of the encoder classifier for ``pe``."""
    from posjax.models import TransformerConfig

    return TransformerConfig(
        vocab_size=prep.vocab_size, num_layers=cfg.num_layers, d_model=cfg.d_model,
        num_heads=cfg.num_heads, d_ff=cfg.d_ff, max_len=prep.train["tokens"].shape[1],
        pe=pe, pe_options=pe_options or {}, causal=False, pre_norm=True, dropout=cfg.dropout)


def build_model(cfg: StressConfig, prep: ClassificationCorpus, pe: str, seed: int, mds_coords: np.ndarray | None):
    """A :class:`posjax.models.Classifier` with the PE ``pe``."""
    from posjax.models import Classifier

    options = None
    if pe == "mds":
        if mds_coords is None:
            raise ValueError("the MDS PE needs MDS coordinates")
        max_len = prep.train["tokens"].shape[1]
        table = mds_model_coords(mds_coords, max_len, prep.model_offset, cfg.mds_scale)
        rank = min(table.shape[1], cfg.d_model, cfg.mds_max_rank or table.shape[1])
        options = {"coords": table, "rank": rank, "trainable": cfg.mds_trainable,
                   "lift": cfg.mds_lift}
    config = model_config(cfg, prep, pe, options)
    model = Classifier(config, prep.num_classes, pooling=cfg.pooling, rngs=nnx.Rngs(seed))
    return model, config


def pe_param_count(model) -> int:
    """Number of trainable parameters in the model's positional encoding(s)."""
    state = nnx.state(model.transformer.pes, nnx.Param)
    return int(sum(np.size(x) for x in jax.tree.leaves(state)))


def _trained_geometry(model, pe: str, prep: ClassificationCorpus, targets: dict[str, Any]):
    """Stress of the trained table (learned, mds) or bias (t5) against every variant's geometry
    (``targets``: dense ``D`` arrays or the targets of ``geometry.as_targets``)."""
    from posjax.analysis.encoding_geometry import encoding_distances
    import posjax.geometry as geo


    if pe not in ("learned", "mds", "t5") or not targets:
        return None
    targets = as_targets(targets)
    module = model.transformer.pe
    off = prep.model_offset
    n = min(next(iter(targets.values())).n, module_len(model) - off)
    heads = {k: t.head(n) for k, t in targets.items()}
    with jax.enable_x64(True):
        if pe == "learned":
            table = np.asarray(module.embedding[...], np.float64)[off:off + n]
            return trained_stress(heads, table=table)
        if pe == "mds":
            table = np.asarray(module.full_table(), np.float64)[off:off + n]
            return trained_stress(heads, table=table)
        if pe == "t5":
            if any(t.kind == "matrix_free" for t in heads.values()):
                raise ValueError(f"T5 stress not computed at n = {n} (matrix-free): a bias "
                                 "has distances but no coordinates")
            E = np.asarray(encoding_distances("t5", module_len(model), module=module),
                           np.float64)[off:off + n, off:off + n]
            return trained_stress(heads, distances=E)


def module_len(model) -> int:
    return int(model.transformer.config.max_len)


def train_cell(cfg: StressConfig, prep: ClassificationCorpus, pe: str, seed: int, mds_coords: np.ndarray | None,
               targets: dict[str, Any], out_dir: str) -> dict[str, Any]:
    """Train one (PE, seed) encoder and return its accuracy-table row (JSON-ready).

    With ``cfg.checkpoint_every > 0`` the run checkpoints under
    ``out_dir/train/<pe>-seed<seed>`` and resumes from there after an interrupt.
    """
    from posjax.training import (ArrayBatches, TrainConfig, classification_loss,
                                 evaluate_classifier, train)

    model, config = build_model(cfg, prep, pe, seed, mds_coords)
    tcfg = TrainConfig(steps=cfg.steps, batch_size=cfg.batch_size, optimizer="adamw",
                       learning_rate=cfg.learning_rate, weight_decay=cfg.weight_decay,
                       schedule="cosine", warmup_fraction=cfg.warmup_fraction, seed=seed,
                       log_every=max(1, min(100, cfg.steps)),
                       checkpoint_every=cfg.checkpoint_every, progress=cfg.progress)
    run_dir = (os.path.join(out_dir, "train", f"{pe}-seed{seed}")
               if cfg.checkpoint_every > 0 else None)
    t0 = time.perf_counter()
    result = train(model, classification_loss, ArrayBatches(prep.train, cfg.batch_size, seed=seed),
                   tcfg, out_dir=run_dir, desc=f"{pe} s{seed}",
                   run_config={"model": config.to_dict(), "pe": pe, "pooling": cfg.pooling,
                               "dataset": cfg.dataset})
    test = evaluate_classifier(model, prep.test)
    row = {"pe": pe, "seed": seed, "test_accuracy": test["accuracy"], "test_loss": test["loss"],
           "train_metrics": result.metrics, "pe_params": pe_param_count(model),
           "seconds": time.perf_counter() - t0, "resumed_from": result.resumed_from,
           "model": {k: v for k, v in config.to_dict().items() if k != "pe_options"},
           "pe_options": {k: v for k, v in config.pe_options.items() if k != "coords"}}
    if pe == "mds":
        row["mds_rank"] = int(model.transformer.pe.rank)
    try:
        row["trained_stress"] = _trained_geometry(model, pe, prep, targets)
    except ValueError as e:  # a PE whose geometry cannot be read is reported, not fatal
        row["trained_stress"] = None
        row["trained_stress_error"] = str(e)
    return row
