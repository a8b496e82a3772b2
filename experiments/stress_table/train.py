"""The accuracy table of the stress experiment: train an encoder classifier with each PE and measure test
accuracy, PE parameter count and the stress of the trained positional geometry.

The MDS PE is the registered ``pe="mds"`` (:class:`posjax.encodings.mds.MDSEncoding`: low-rank
factors ``A W^T``, initialised from the rank-``r`` MDS coordinates, Algorithm 1 of
arXiv 2604.05217), built through ``TransformerConfig(pe="mds", pe_options={"coords": ...})``.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import jax
import numpy as np
from flax import nnx

from posjax.data.classification_corpus import ClassificationCorpus
from posjax.encodings.mds import mds_model_coords
from posjax.models.config import TransformerConfig

from experiments.stress_table.config import StressConfig
from experiments.stress_table.geometry import as_targets, trained_stress

def model_config(model: TransformerConfig, vocab_size: int, max_len: int, pe: str,
                 pe_options: dict | None = None) -> TransformerConfig:
    """``model`` with the corpus' ``vocab_size``, ``max_len`` and the PE of the row."""
    return dataclasses.replace(model, vocab_size=vocab_size, max_len=max_len, pe=pe,
                               pe_options=pe_options or {})


def build_model(cfg: StressConfig, prep: ClassificationCorpus, pe: str, seed: int, mds_coords: np.ndarray | None):
    """A :class:`posjax.models.Classifier` with the PE ``pe``."""
    from posjax.models import Classifier

    options = None
    if pe == "mds":
        if mds_coords is None:
            raise ValueError("the MDS PE needs MDS coordinates")
        max_len = prep.train["tokens"].shape[1]
        table = mds_model_coords(mds_coords, max_len, prep.model_offset, cfg.mds_scale)
        rank = min(table.shape[1], cfg.model.d_model, cfg.mds_max_rank or table.shape[1])
        options = {"coords": table, "rank": rank, "trainable": cfg.mds_trainable,
                   "lift": cfg.mds_lift}
    config = model_config(cfg.model, prep.vocab_size, prep.train["tokens"].shape[1], pe, options)
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

    With ``cfg.train.checkpoint_every > 0`` the run checkpoints under
    ``out_dir/train/<pe>-seed<seed>`` and resumes from there after an interrupt.
    """
    from posjax.training import ArrayBatches, classification_loss, evaluate_classifier, train

    model, config = build_model(cfg, prep, pe, seed, mds_coords)
    tcfg = dataclasses.replace(cfg.train, seed=seed,
                               log_every=max(1, min(cfg.train.log_every, cfg.train.steps)))
    run_dir = (os.path.join(out_dir, "train", f"{pe}-seed{seed}")
               if tcfg.checkpoint_every > 0 else None)
    t0 = time.perf_counter()
    result = train(model, classification_loss, ArrayBatches(prep.train, tcfg.batch_size, seed=seed),
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
