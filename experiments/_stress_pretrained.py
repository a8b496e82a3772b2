"""Pretrained checkpoints and custom corpora in the stress experiment (arXiv 2604.05217, E1).

* ``--pretrained PATH_OR_ID`` adds E1 rows for the checkpoint's own learned position table
  (:func:`posjax.pretrained.position_table`): ``pretrained`` (raw rows) and, with
  ``--set pretrained_layernorm=True``, ``pretrained_ln`` (rows after the embedding LayerNorm).
  Corpus position ``i`` is compared with model position ``i + model_offset`` (0 when the corpus
  keeps ``[CLS]``, as the model inputs do). The checkpoint's tokenizer is used for the corpus
  unless ``--tokenizer``/``--vocab-file`` says otherwise.
* ``--dataset text --data-dir DIR [--tokenizer SPEC]``: any corpus read by
  :func:`posjax.data.corpus.load_corpus`; E4 runs only when the files have labels.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np


def text_tokenizer(cfg: Any, train_texts, out_dir: str, name: str):
    """The tokenizer of a text run: ``tokenizer`` option, else ``vocab_file``, else the
    pretrained checkpoint's own, else WordPiece trained on the training texts (cached)."""
    from posjax.data.corpus import load_tokenizer
    from posjax.data.text import vocab_tokenizer, wordpiece_tokenizer

    if getattr(cfg, "tokenizer", None):
        return load_tokenizer(cfg.tokenizer)
    if cfg.vocab_file:
        return vocab_tokenizer(cfg.vocab_file)
    if getattr(cfg, "pretrained", None):
        from posjax.pretrained import resolve
        return load_tokenizer(resolve(cfg.pretrained))
    from experiments._stress_data import _texts_digest
    cache = os.path.join(out_dir, "tokenizer",
                         f"{name}-v{cfg.tokenizer_vocab}-{_texts_digest(train_texts)}.json")
    return wordpiece_tokenizer(train_texts, vocab_size=cfg.tokenizer_vocab, cache_path=cache)


def pretrained_e1_rows(cfg: Any, prep: Any, variants: dict[str, Any]
                       ) -> dict[str, dict[str, dict[str, Any]]]:
    """``{variant: {"pretrained": row, ["pretrained_ln": row]}}``: stress (raw and optimal
    scale) of the checkpoint's table rows against each variant's geometry (``{"D"}``,
    ``{"P"}`` or a target of ``_stress_geometry.as_targets``; call under x64)."""
    from experiments._stress_geometry import as_targets, trained_stress
    from posjax.pretrained import position_table

    off = prep.model_offset
    variants = as_targets(variants, cfg)
    out: dict[str, dict[str, dict[str, Any]]] = {v: {} for v in variants}
    kinds = [("pretrained", False)] + ([("pretrained_ln", True)]
                                       if cfg.pretrained_layernorm else [])
    for key, post_ln in kinds:
        table = np.asarray(position_table(cfg.pretrained, post_layernorm=post_ln), np.float64)
        n = min(next(iter(variants.values())).n, table.shape[0] - off)
        stress = trained_stress({k: t.head(n) for k, t in variants.items()},
                                table=table[off:off + n])
        for v, s in stress.items():
            out[v][key] = {**s, "rank": table.shape[1], "checkpoint": str(cfg.pretrained),
                           "rows": n}
    return out


def prepare_corpus(cfg: Any, out_dir: str):
    """``--dataset text``: a custom corpus as the experiment's ``Prepared`` (``train``/``test``
    are None when the files carry no labels: E4 is then skipped)."""
    from experiments._stress_data import Prepared, model_arrays
    from posjax.data.corpus import load_corpus

    if not cfg.data_dir:
        raise ValueError("--dataset text needs --data-dir DIR (.txt, .jsonl, .parquet or .csv)")
    splits = load_corpus(cfg.data_dir, text_column=cfg.text_column)
    train = splits["train"]
    tok = text_tokenizer(cfg, train.texts, out_dir, "text")
    geo = tok.encode(train.texts, cfg.num_positions, keep_special=cfg.keep_special)
    labelled = train.labels is not None
    evaluation = next((splits[s] for s in ("validation", "test") if s in splits), None)
    arrays: dict[str, Any] = {"train": None, "test": None}
    note = None
    if labelled and (evaluation is None or evaluation.labels is None):
        note = "E4 skipped: no labelled validation/test file"
    elif not labelled:
        note = "E4 skipped: the corpus has no label column"
    else:
        arrays = model_arrays(tok, train, evaluation, cfg)
    num_classes = (int(max(train.labels.max(), evaluation.labels.max())) + 1
                   if arrays["train"] is not None else 0)
    info = {"source": {k: list(s.files) for k, s in splits.items()},
            "tokenizer": {"source": tok.source, "vocab_size": tok.vocab_size,
                          "pad_id": tok.pad_id},
            "geometry_corpus": {"split": "train", "sequences": len(train),
                                "keep_special": cfg.keep_special,
                                "truncated_fraction": float(np.mean(
                                    geo.lengths >= cfg.num_positions)),
                                "length_median": float(np.median(geo.lengths))},
            "E4_note": note}
    return Prepared(geo.tokens, geo.lengths, tok.pad_id, tok.vocab_size, None, arrays["train"],
                    arrays["test"], num_classes, 0 if cfg.keep_special else 1, info)
