"""Data of the stress experiment: the geometry corpus and the E4 classification task.

* ``synthetic``: the three-regime corpus of docs/interpretations.md (synthetic corpus)
  (:func:`posjax.data.synthetic.three_regime_corpus`, exact ``P`` known). The E4 task is
  **cyclic-shift detection**: a sequence of label 0 draws its token at position ``i`` from
  ``P_i``; a sequence of label 1 draws it from ``P_{(i + shift) mod n}``. Both classes have the
  same bag-of-tokens distribution (a permutation of positions leaves ``sum_i P_i`` unchanged), so
  the label depends on position-specific token statistics only: an encoder without any
  positional signal is at chance (Theorem 1), and the Bayes accuracy (likelihood-ratio rule with
  the exact ``P``) is reported as the ceiling.
* ``sst2`` / ``imdb``: :func:`posjax.data.load_text_classification` + a WordPiece tokenizer
  trained on the training split (cached) or a local ``vocab.txt``. The geometry corpus is the
  training split tokenised with or without ``[CLS]``/``[SEP]`` (option ``keep_special``); the
  model inputs are BERT inputs ``[CLS] ... [SEP]`` padded to ``max_len``.

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217 (synthetic corpus, SST-2, IMDB).
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Any

import numpy as np

TEXT_EVAL_SPLIT = {"sst2": "validation", "imdb": "test"}


@dataclasses.dataclass
class Prepared:
    """Everything the experiment needs from a dataset.

    Attributes:
      geo_tokens: ``[M, n]`` int32 corpus for the positional distributions.
      geo_lengths: ``[M]`` true lengths.
      pad_id: padding id of ``geo_tokens`` (None: no padding).
      vocab_size: ``V`` of both the corpus and the model.
      exact_P: ``[n, V]`` exact distributions (synthetic only).
      train, test: model arrays ``{"tokens", "labels", "padding_mask"}``.
      num_classes: number of labels.
      model_offset: model position of corpus position 0 (1 when the corpus has no ``[CLS]`` but
        the model inputs do), used to read the learned table rows that match ``P_i``.
      info: provenance (source, tokenizer, sizes, Bayes accuracy, task definition).
    """

    geo_tokens: np.ndarray
    geo_lengths: np.ndarray
    pad_id: int | None
    vocab_size: int
    exact_P: np.ndarray | None
    train: dict[str, np.ndarray]
    test: dict[str, np.ndarray]
    num_classes: int
    model_offset: int
    info: dict[str, Any]


def shift_task(P: np.ndarray, num_examples: int, shift: int, *, seed: int
               ) -> dict[str, np.ndarray]:
    """Cyclic-shift detection examples (see module docstring).

    Args:
      P: ``[n, V]`` exact positional distributions.
      num_examples: number of sequences (labels balanced up to one).
      shift: cyclic shift of class 1, ``0 < shift < n``.
      seed: sampling seed.

    Returns:
      ``{"tokens" [M, n] int32, "labels" [M] int32, "padding_mask" [M, n] bool}``.
    """
    from posjax.data.synthetic import sample_tokens

    n = P.shape[0]
    if not 0 < shift < n:
        raise ValueError(f"task shift must be in (0, n={n}), got {shift}")
    n1 = num_examples // 2
    n0 = num_examples - n1
    perm = (np.arange(n) + shift) % n
    t0 = np.asarray(sample_tokens(P, n0, seed=seed))
    t1 = np.asarray(sample_tokens(P[perm], n1, seed=seed + 7919))
    tokens = np.concatenate([t0, t1]).astype(np.int32)
    labels = np.concatenate([np.zeros(n0), np.ones(n1)]).astype(np.int32)
    order = np.random.default_rng(seed).permutation(num_examples)
    return {"tokens": tokens[order], "labels": labels[order],
            "padding_mask": np.ones(tokens.shape, bool)}


def bayes_accuracy(P: np.ndarray, data: dict[str, np.ndarray], shift: int) -> float:
    """Accuracy of the likelihood-ratio rule with the exact ``P`` (the task's ceiling).

    ``LLR = sum_i log P_i(w_i) - log P_{(i+shift) mod n}(w_i)``; predict 1 when ``LLR < 0``.
    """
    n = P.shape[0]
    logp = np.log(np.maximum(P, 1e-300))
    tok = data["tokens"]
    cols = np.arange(n)[None, :]
    llr = (logp[cols, tok] - logp[(cols + shift) % n, tok]).sum(axis=1)
    return float(np.mean((llr < 0).astype(np.int32) == data["labels"]))


def prepare_synthetic(cfg: Any) -> Prepared:
    """Three-regime corpus (geometry) plus the cyclic-shift task (E4)."""
    from posjax.data.synthetic import three_regime_corpus

    corpus = three_regime_corpus(cfg.num_positions, cfg.vocab_size, cfg.samples_per_position,
                                 mixing=cfg.mixing, alpha=cfg.alpha, seed=cfg.data_seed)
    shift = cfg.task_shift or max(1, cfg.num_positions // 8)
    train = shift_task(corpus.P, cfg.train_examples, shift, seed=cfg.data_seed + 101)
    test = shift_task(corpus.P, cfg.test_examples, shift, seed=cfg.data_seed + 202)
    toks = np.asarray(corpus.tokens, np.int32)
    info = {"source": "synthetic:three_regime_corpus", "corpus": corpus.config,
            "task": {"name": "cyclic_shift_detection", "shift": shift,
                     "definition": "label 0: w_i ~ P_i; label 1: w_i ~ P_{(i+shift) mod n}",
                     "train_examples": cfg.train_examples, "test_examples": cfg.test_examples,
                     "bayes_accuracy": bayes_accuracy(corpus.P, test, shift),
                     "chance": 0.5},
            "tokenizer": None}
    return Prepared(toks, np.full(len(toks), toks.shape[1], np.int32), None, cfg.vocab_size,
                    np.asarray(corpus.P), train, test, 2, 0, info)


def _texts_digest(texts: np.ndarray) -> str:
    h = hashlib.sha1()
    for t in texts:
        h.update(t.encode("utf-8", "replace"))
        h.update(b"\x00")
    return h.hexdigest()[:12]


def _subsample(data, limit: int | None, seed: int):
    if limit is None or len(data) <= limit:
        return data.texts, data.labels
    idx = np.sort(np.random.default_rng(seed).choice(len(data), limit, replace=False))
    return data.texts[idx], data.labels[idx]


def model_arrays(tok: Any, train: Any, test: Any, cfg: Any) -> dict[str, dict[str, np.ndarray]]:
    """BERT inputs ``[CLS] ... [SEP]`` of the (subsampled) train and test splits (objects with
    ``texts``, ``labels`` and ``len``): ``{"train"|"test": {"tokens", "labels", "padding_mask"}}``."""
    arrays = {}
    for name, data, limit, seed in (("train", train, cfg.train_examples, cfg.data_seed),
                                    ("test", test, cfg.test_examples, cfg.data_seed + 1)):
        texts, labels = _subsample(data, limit, seed)
        enc = tok.encode(texts, cfg.max_len, keep_special=True)
        arrays[name] = {"tokens": enc.tokens, "labels": labels.astype(np.int32),
                        "padding_mask": enc.padding_mask}
    return arrays


def prepare_text(cfg: Any, out_dir: str) -> Prepared:
    """SST-2 / IMDB: load, tokenise (train split -> geometry corpus; model arrays)."""
    from posjax.data.text import load_text_classification

    kw = {"data_dir": cfg.data_dir, "hub_timeout": cfg.hub_timeout}
    train = load_text_classification(cfg.dataset, "train", **kw)
    test = load_text_classification(cfg.dataset, TEXT_EVAL_SPLIT[cfg.dataset], **kw)
    tok = text_tokenizer(cfg, train.texts, out_dir, cfg.dataset)
    geo = tok.encode(train.texts, cfg.num_positions, keep_special=cfg.keep_special)
    arrays = model_arrays(tok, train, test, cfg)
    info = {"source": {"train": train.source, "eval": test.source},
            "eval_split": TEXT_EVAL_SPLIT[cfg.dataset],
            "tokenizer": {"source": tok.source, "vocab_size": tok.vocab_size,
                          "pad_id": tok.pad_id, "cls_sep_ids": list(tok.special_ids)},
            "geometry_corpus": {"split": "train", "sequences": len(train),
                                "keep_special": cfg.keep_special,
                                "truncated_fraction": float(np.mean(
                                    geo.lengths >= cfg.num_positions)),
                                "length_median": float(np.median(geo.lengths))},
            "model_examples": {"train": len(arrays["train"]["labels"]),
                               "test": len(arrays["test"]["labels"])}}
    return Prepared(geo.tokens, geo.lengths, tok.pad_id, tok.vocab_size, None, arrays["train"],
                    arrays["test"], train.num_classes, 0 if cfg.keep_special else 1, info)


def prepare(cfg: Any, out_dir: str) -> Prepared:
    """Dispatch on ``cfg.dataset`` (ValueError for an unknown name)."""
    if cfg.dataset == "synthetic":
        return prepare_synthetic(cfg)
    if cfg.dataset in TEXT_EVAL_SPLIT:
        return prepare_text(cfg, out_dir)
    if cfg.dataset == "text":
        return prepare_corpus(cfg, out_dir)
    raise ValueError(f"unknown dataset {cfg.dataset!r}; choose synthetic, sst2 or imdb")


# --- pretrained tokenizers and custom corpora (--dataset text) ---------------------
# Pretrained checkpoints and custom corpora in the stress experiment (arXiv 2604.05217, E1).
# 
# * ``--pretrained PATH_OR_ID`` adds E1 rows for the checkpoint's own learned position table
#   (:func:`posjax.pretrained.position_table`): ``pretrained`` (raw rows) and, with
#   ``--set pretrained_layernorm=True``, ``pretrained_ln`` (rows after the embedding LayerNorm).
#   Corpus position ``i`` is compared with model position ``i + model_offset`` (0 when the corpus
#   keeps ``[CLS]``, as the model inputs do). The checkpoint's tokenizer is used for the corpus
#   unless ``--tokenizer``/``--vocab-file`` says otherwise.
# * ``--dataset text --data-dir DIR [--tokenizer SPEC]``: any corpus read by
#   :func:`posjax.data.corpus.load_corpus`; E4 runs only when the files have labels.
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
    cache = os.path.join(out_dir, "tokenizer",
                         f"{name}-v{cfg.tokenizer_vocab}-{_texts_digest(train_texts)}.json")
    return wordpiece_tokenizer(train_texts, vocab_size=cfg.tokenizer_vocab, cache_path=cache)


def prepare_corpus(cfg: Any, out_dir: str):
    """``--dataset text``: a custom corpus as the experiment's ``Prepared`` (``train``/``test``
    are None when the files carry no labels: E4 is then skipped)."""
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
