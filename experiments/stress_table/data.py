"""Data of the stress experiment: the geometry corpus and the classification task.

* ``synthetic``: the three-regime corpus of docs/interpretations.md
  (:func:`posjax.data.synthetic.three_regime_corpus`, exact ``P`` known) and the cyclic-shift
  detection task :func:`posjax.data.tasks.shift_task` (an encoder without positional signal is at
  chance, Theorem 1; the Bayes accuracy with the exact ``P`` is the ceiling).
* ``sst2`` / ``imdb`` / ``text``: :func:`posjax.data.classification_corpus.text_classification_corpus`.

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217 (synthetic corpus, SST-2, IMDB).
"""
from __future__ import annotations

import numpy as np

from posjax.data.classification_corpus import (ClassificationCorpus, corpus_tokenizer,
                                               docstring_sentences, stream_corpus,
                                               text_classification_corpus)
from posjax.data.tasks import bayes_accuracy, shift_task

from experiments.stress_table.config import StressConfig


def prepare_synthetic(cfg: StressConfig) -> ClassificationCorpus:
    """Three-regime corpus (geometry) plus the cyclic-shift task (accuracy table)."""
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
    return ClassificationCorpus(toks, np.full(len(toks), toks.shape[1], np.int32), None,
                                cfg.vocab_size, np.asarray(corpus.P), train, test, 2, 0, info)


def prepare(cfg: StressConfig, out_dir: str) -> ClassificationCorpus:
    """The corpus of ``cfg.dataset`` (tokenizers cached under ``out_dir``)."""
    if cfg.dataset == "synthetic":
        return prepare_synthetic(cfg)
    tokenizer = cfg.tokenizer
    if not tokenizer and not cfg.vocab_file and cfg.pretrained:  # the checkpoint's own
        from posjax.pretrained import resolve
        tokenizer = resolve(cfg.pretrained)
    if cfg.dataset == "stdlib" or cfg.stream:
        if cfg.dataset == "stdlib":
            texts, source = docstring_sentences(cfg.package)
        else:
            from posjax.data.corpus import load_corpus
            if not cfg.data_dir:
                raise ValueError("--dataset text needs --data-dir DIR")
            texts = list(load_corpus(cfg.data_dir, text_column=cfg.text_column)["train"].texts)
            source = f"text:{cfg.data_dir}"
        tok = corpus_tokenizer(texts, out_dir, cfg.dataset, tokenizer=tokenizer,
                               vocab_file=cfg.vocab_file, vocab_size=cfg.tokenizer_vocab)
        return stream_corpus(texts, tok, cfg.num_positions, keep_special=cfg.keep_special,
                             source=source)
    return text_classification_corpus(
        cfg.dataset, out_dir, num_positions=cfg.num_positions, max_len=cfg.max_len,
        keep_special=cfg.keep_special, train_examples=cfg.train_examples,
        test_examples=cfg.test_examples, seed=cfg.data_seed, data_dir=cfg.data_dir,
        text_column=cfg.text_column, tokenizer=tokenizer, vocab_file=cfg.vocab_file,
        tokenizer_vocab=cfg.tokenizer_vocab, hub_timeout=cfg.hub_timeout)
