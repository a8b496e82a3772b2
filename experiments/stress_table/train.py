"""The accuracy table of the stress experiment: train an encoder classifier with each PE and measure test
accuracy, PE parameter count and the stress of the trained positional geometry.

The MDS PE is the registered ``pe="mds"`` (:class:`posjax.encodings.mds.MDSEncoding`: low-rank
factors ``A W^T``, initialised from the rank-``r`` MDS coordinates, Algorithm 1 of
arXiv 2604.05217), built through ``TransformerConfig(pe="mds", pe_options={"coords": ...})``.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any

import jax
import numpy as np
from flax import nnx

from posjax.analysis.stress_geometry import trained_encoding_stress
from posjax.data.classification_corpus import ClassificationCorpus
from posjax.encodings.mds import mds_model_coords
from posjax.models.config import TransformerConfig
from posjax.training.config import TrainConfig


def build_model(model: TransformerConfig, prep: ClassificationCorpus, pe: str, seed: int, *,
                pooling: str = "mean", mds_coords: np.ndarray | None = None,
                mds: dict[str, Any] | None = None):
    """``(Classifier, its TransformerConfig)``: ``model`` with the corpus' ``vocab_size``,
    ``max_len`` and the PE ``pe``; for ``pe="mds"`` the table of ``mds_coords [n, r]`` placed on
    model positions (``mds``: ``scale``, ``max_rank``, ``trainable``, ``lift``)."""
    from posjax.models import Classifier

    max_len = prep.train["tokens"].shape[1]
    options = {}
    if pe == "mds":
        if mds_coords is None:
            raise ValueError("the MDS PE needs MDS coordinates")
        mds = {"scale": 1.0, "max_rank": None, "trainable": "both", "lift": "pad", **(mds or {})}
        table = mds_model_coords(mds_coords, max_len, prep.model_offset, mds["scale"])
        rank = min(table.shape[1], model.d_model, mds["max_rank"] or table.shape[1])
        options = {"coords": table, "rank": rank, "trainable": mds["trainable"],
                   "lift": mds["lift"]}
    config = dataclasses.replace(model, vocab_size=prep.vocab_size, max_len=max_len, pe=pe,
                                 pe_options=options)
    return Classifier(config, prep.num_classes, pooling=pooling, rngs=nnx.Rngs(seed)), config


def train_cell(prep: ClassificationCorpus, pe: str, seed: int, *, model: TransformerConfig,
               train: TrainConfig, pooling: str, targets: dict[str, Any],
               mds_coords: np.ndarray | None = None, mds: dict[str, Any] | None = None,
               run_dir: str | None = None, run_config: dict | None = None) -> dict[str, Any]:
    """Train one (PE, seed) encoder classifier and return its accuracy-table row (JSON-ready).

    ``train.seed`` is set to ``seed`` and ``log_every`` capped at ``steps``; with
    ``train.checkpoint_every > 0`` the run checkpoints under ``run_dir`` and resumes from there
    after an interrupt. ``targets``: the geometry the trained table (learned, mds) or bias (t5)
    is scored against (:func:`posjax.analysis.stress_geometry.trained_encoding_stress`).
    """
    from posjax.pretrained import param_count
    from posjax.training import ArrayBatches, classification_loss, evaluate_classifier
    from posjax.training import train as train_loop

    net, config = build_model(model, prep, pe, seed, pooling=pooling, mds_coords=mds_coords,
                              mds=mds)
    tcfg = dataclasses.replace(train, seed=seed, log_every=max(1, min(train.log_every, train.steps)))
    t0 = time.perf_counter()
    result = train_loop(net, classification_loss,
                        ArrayBatches(prep.train, tcfg.batch_size, seed=seed), tcfg,
                        out_dir=run_dir if tcfg.checkpoint_every > 0 else None,
                        desc=f"{pe} s{seed}",
                        run_config={"model": config.to_dict(), "pe": pe, "pooling": pooling,
                                    **(run_config or {})})
    test = evaluate_classifier(net, prep.test)
    row = {"pe": pe, "seed": seed, "test_accuracy": test["accuracy"], "test_loss": test["loss"],
           "train_metrics": result.metrics, "pe_params": param_count(net.transformer.pes),
           "seconds": time.perf_counter() - t0, "resumed_from": result.resumed_from,
           "model": {k: v for k, v in config.to_dict().items() if k != "pe_options"},
           "pe_options": {k: v for k, v in config.pe_options.items() if k != "coords"}}
    if pe == "mds":
        row["mds_rank"] = int(net.transformer.pe.rank)
    try:
        with jax.enable_x64(True):
            row["trained_stress"] = trained_encoding_stress(net, pe, prep.model_offset, targets)
    except ValueError as e:  # a PE whose geometry cannot be read is reported, not fatal
        row["trained_stress"] = None
        row["trained_stress_error"] = str(e)
    return row
