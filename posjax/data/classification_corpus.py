"""A text corpus for positional geometry plus classifier inputs, from one call.

:func:`text_classification_corpus` loads SST-2 / IMDB (:func:`posjax.data.load_text_classification`)
or your own files (``dataset="text"``, :func:`posjax.data.corpus.load_corpus`) or the labelled
word-order task on the standard library's docstrings (``dataset="word_order"``,
:func:`posjax.data.stdlib_text.word_order_task`, a stand-in for SST-2 / IMDB), picks a tokenizer
and returns a :class:`ClassificationCorpus`: the training split tokenised for
``posjax.geometry.positional_distributions`` (with or without ``[CLS]``/``[SEP]``) and BERT inputs
``[CLS] ... [SEP]`` of the (subsampled) train and evaluation splits. Used by the stress and the
fine-tuning experiments (G. Cirrincione, arXiv 2604.05217: SST-2, IMDB).
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Any

import numpy as np

__all__ = ["ClassificationCorpus", "TEXT_EVAL_SPLIT", "text_classification_corpus",
           "corpus_tokenizer", "model_arrays", "docstring_sentences", "stream_corpus",
           "WORD_ORDER_STAND_IN", "shift_task_corpus"]

#: Evaluation split of each named dataset.
TEXT_EVAL_SPLIT = {"sst2": "validation", "imdb": "test"}

#: What ``dataset="word_order"`` is, stated in every report that uses it.
WORD_ORDER_STAND_IN = (
    "SST-2 / IMDB cannot be downloaded here: this labelled task stands in for them. Each "
    "standard-library docstring sentence is kept (label 'original') or has its words shuffled "
    "within windows of 3 (label 'shuffled'); both classes hold the same bag of words, so a "
    "position-blind classifier is at chance (50 %) (posjax.data.stdlib_text.word_order_task).")


@dataclasses.dataclass
class ClassificationCorpus:
    """A geometry corpus and the classifier arrays that go with it.

    Attributes:
      geo_tokens: ``[M, n]`` int32 corpus for the positional distributions.
      geo_lengths: ``[M]`` true lengths.
      pad_id: padding id of ``geo_tokens`` (None: no padding).
      vocab_size: ``V`` of both the corpus and the model.
      exact_P: ``[n, V]`` exact distributions (synthetic corpora only, else None).
      train, test: model arrays ``{"tokens", "labels", "padding_mask"}`` (None without labels).
      num_classes: number of labels.
      model_offset: model position of corpus position 0 (1 when the corpus has no ``[CLS]`` but
        the model inputs do), used to read the table rows that match ``P_i``.
      info: provenance (source, tokenizer, sizes, task definition).
    """

    geo_tokens: np.ndarray
    geo_lengths: np.ndarray
    pad_id: int | None
    vocab_size: int
    exact_P: np.ndarray | None
    train: dict[str, np.ndarray] | None
    test: dict[str, np.ndarray] | None
    num_classes: int
    model_offset: int
    info: dict[str, Any]


def _texts_digest(texts: np.ndarray) -> str:
    h = hashlib.sha1()
    for t in texts:
        h.update(t.encode("utf-8", "replace"))
        h.update(b"\x00")
    return h.hexdigest()[:12]


def corpus_tokenizer(train_texts: Any, cache_dir: str, name: str, *, tokenizer: Any = None,
                     vocab_file: str | None = None, vocab_size: int = 8000):
    """``tokenizer`` (a :func:`~posjax.data.corpus.load_tokenizer` spec) if given, else the
    WordPiece ``vocab_file``, else WordPiece trained on ``train_texts`` (``vocab_size``; cached
    under ``cache_dir/tokenizer`` by a digest of the texts)."""
    from posjax.data.corpus import load_tokenizer
    from posjax.data.text import vocab_tokenizer, wordpiece_tokenizer

    if tokenizer:
        return load_tokenizer(tokenizer)
    if vocab_file:
        return vocab_tokenizer(vocab_file)
    cache = os.path.join(cache_dir, "tokenizer",
                         f"{name}-v{vocab_size}-{_texts_digest(train_texts)}.json")
    return wordpiece_tokenizer(train_texts, vocab_size=vocab_size, cache_path=cache)


def _subsample(data, limit: int | None, seed: int):
    if limit is None or len(data) <= limit:
        return data.texts, data.labels
    idx = np.sort(np.random.default_rng(seed).choice(len(data), limit, replace=False))
    return data.texts[idx], data.labels[idx]


def model_arrays(tok: Any, train: Any, test: Any, *, max_len: int, train_examples: int | None,
                 test_examples: int | None, seed: int) -> dict[str, dict[str, np.ndarray]]:
    """BERT inputs ``[CLS] ... [SEP]`` padded to ``max_len`` of the train and test splits
    (objects with ``texts``, ``labels`` and ``len``), each subsampled without replacement to at
    most ``*_examples`` (seeds ``seed`` and ``seed + 1``):
    ``{"train"|"test": {"tokens", "labels", "padding_mask"}}``."""
    arrays = {}
    for name, data, limit, s in (("train", train, train_examples, seed),
                                 ("test", test, test_examples, seed + 1)):
        texts, labels = _subsample(data, limit, s)
        enc = tok.encode(texts, max_len, keep_special=True)
        arrays[name] = {"tokens": enc.tokens, "labels": labels.astype(np.int32),
                        "padding_mask": enc.padding_mask}
    return arrays


def _geometry_info(train: Any, geo: Any, keep_special: bool, num_positions: int) -> dict:
    return {"split": "train", "sequences": len(train), "keep_special": keep_special,
            "truncated_fraction": float(np.mean(geo.lengths >= num_positions)),
            "length_median": float(np.median(geo.lengths))}


def text_classification_corpus(dataset: str, cache_dir: str, *, num_positions: int, max_len: int,
                               keep_special: bool = True, train_examples: int | None = None,
                               test_examples: int | None = None, seed: int = 0,
                               data_dir: str | None = None, text_column: str | None = None,
                               tokenizer: Any = None, vocab_file: str | None = None,
                               tokenizer_vocab: int = 8000, hub_timeout: float = 5.0
                               ) -> ClassificationCorpus:
    """``dataset`` ``"sst2"`` / ``"imdb"`` (local files under ``data_dir`` or the hub),
    ``"text"`` (your files under ``data_dir``) or ``"word_order"`` (original vs locally shuffled
    stdlib docstring sentences, split by ``seed``; ``info["stands_in_for"]`` says what it
    replaces) as a :class:`ClassificationCorpus`.

    The geometry corpus is the training split tokenised to ``num_positions`` with or without
    ``[CLS]``/``[SEP]`` (``keep_special``); the model arrays come from :func:`model_arrays`.
    For ``"text"`` without labels (or without a labelled validation/test file) ``train`` and
    ``test`` are None and ``info["accuracy_note"]`` says why. The tokenizer is chosen by
    :func:`corpus_tokenizer` (``tokenizer``, ``vocab_file``, ``tokenizer_vocab``).
    """
    sizes = dict(max_len=max_len, train_examples=train_examples, test_examples=test_examples,
                 seed=seed)
    tok_options = dict(tokenizer=tokenizer, vocab_file=vocab_file, vocab_size=tokenizer_vocab)
    if dataset in TEXT_EVAL_SPLIT:
        from posjax.data.text import load_text_classification

        kw = {"data_dir": data_dir, "hub_timeout": hub_timeout}
        train = load_text_classification(dataset, "train", **kw)
        test = load_text_classification(dataset, TEXT_EVAL_SPLIT[dataset], **kw)
        tok = corpus_tokenizer(train.texts, cache_dir, dataset, **tok_options)
        geo = tok.encode(train.texts, num_positions, keep_special=keep_special)
        arrays = model_arrays(tok, train, test, **sizes)
        info = {"source": {"train": train.source, "eval": test.source},
                "eval_split": TEXT_EVAL_SPLIT[dataset],
                "tokenizer": {"source": tok.source, "vocab_size": tok.vocab_size,
                              "pad_id": tok.pad_id, "cls_sep_ids": list(tok.special_ids)},
                "geometry_corpus": _geometry_info(train, geo, keep_special, num_positions),
                "model_examples": {"train": len(arrays["train"]["labels"]),
                                   "test": len(arrays["test"]["labels"])}}
        return ClassificationCorpus(geo.tokens, geo.lengths, tok.pad_id, tok.vocab_size, None,
                                    arrays["train"], arrays["test"], train.num_classes,
                                    0 if keep_special else 1, info)
    if dataset == "word_order":
        from posjax.data.stdlib_text import word_order_task

        if data_dir:
            raise ValueError("--dataset word_order is built from the standard library's "
                             "docstrings; it takes no --data-dir")
        splits = word_order_task(seed=seed)
    elif dataset == "text":
        from posjax.data.corpus import load_corpus

        if not data_dir:
            raise ValueError("--dataset text needs --data-dir DIR (.txt, .jsonl, .parquet or "
                             ".csv)")
        splits = load_corpus(data_dir, text_column=text_column)
    else:
        raise ValueError(f"unknown text dataset {dataset!r}; choose sst2, imdb, text or "
                         "word_order")
    train = splits["train"]
    tok = corpus_tokenizer(train.texts, cache_dir, dataset, **tok_options)
    geo = tok.encode(train.texts, num_positions, keep_special=keep_special)
    labelled = train.labels is not None
    evaluation = next((splits[s] for s in ("validation", "test") if s in splits), None)
    arrays: dict[str, Any] = {"train": None, "test": None}
    note = None
    if labelled and (evaluation is None or evaluation.labels is None):
        note = "accuracy table skipped: no labelled validation/test file"
    elif not labelled:
        note = "accuracy table skipped: the corpus has no label column"
    else:
        arrays = model_arrays(tok, train, evaluation, **sizes)
    num_classes = (int(max(train.labels.max(), evaluation.labels.max())) + 1
                   if arrays["train"] is not None else 0)
    info = {"source": {k: list(s.files) for k, s in splits.items()},
            "tokenizer": {"source": tok.source, "vocab_size": tok.vocab_size,
                          "pad_id": tok.pad_id},
            "geometry_corpus": _geometry_info(train, geo, keep_special, num_positions),
            "accuracy_note": note}
    if dataset == "word_order":
        info["stands_in_for"] = WORD_ORDER_STAND_IN
    return ClassificationCorpus(geo.tokens, geo.lengths, tok.pad_id, tok.vocab_size, None,
                                arrays["train"], arrays["test"], num_classes,
                                0 if keep_special else 1, info)


def docstring_sentences(package: str | None = None) -> tuple[list[str], str]:
    """``(sentences, source)``: the standard library's docstring sentences (``package=None``)
    or those of an installed package (``"numpy"``), read with :mod:`ast`, never imported
    (:mod:`posjax.data.stdlib_text`)."""
    from posjax.data.stdlib_text import package_sentences, stdlib_sentences

    if package:
        return package_sentences(package), f"docstrings:{package}"
    return stdlib_sentences(), "docstrings:stdlib"


def stream_corpus(texts: Any, tokenizer: Any, num_positions: int, *, keep_special: bool = True,
                  max_windows: int | None = None, source: str = "text") -> ClassificationCorpus:
    """An unlabelled geometry corpus cut from one contiguous token stream.

    ``texts`` are tokenised without specials and concatenated in order; the stream is cut
    into consecutive windows (:func:`posjax.data.stdlib_text.stdlib_stream`) of
    ``num_positions`` tokens, ``[CLS] + (n - 2) tokens + [SEP]`` when ``keep_special`` (BERT
    inputs, model offset 0), else ``n`` bare tokens (model offset 1). Unlike sentence rows,
    every position ``0..n-1`` then has one sample per window, so ``P_i`` at position 500 is
    estimated from as many samples as at position 0.

    Returns:
      a :class:`ClassificationCorpus` without model arrays (``train = test = None``);
      ``info`` holds the source, the stream size and the number of windows.

    Raises:
      ValueError: the stream is shorter than one window.
    """
    from posjax.data.stdlib_text import stdlib_digest, stdlib_stream

    windows = stdlib_stream(tokenizer, num_positions, sentences=list(texts),
                            specials=keep_special, max_windows=max_windows)
    count = windows.shape[0]
    info = {"source": source, "texts": len(texts), "texts_sha256": stdlib_digest(list(texts)),
            "geometry_corpus": {"kind": "contiguous stream windows", "windows": int(count),
                                "window_tokens": int(num_positions),
                                "keep_special": keep_special},
            "tokenizer": {"source": getattr(tokenizer, "source", str(type(tokenizer))),
                          "vocab_size": tokenizer.vocab_size, "pad_id": tokenizer.pad_id},
            "accuracy_note": "accuracy table skipped: a docstring stream has no labels"}
    return ClassificationCorpus(windows, np.full(count, num_positions, np.int32),
                                tokenizer.pad_id, tokenizer.vocab_size, None, None, None, 0,
                                0 if keep_special else 1, info)


def shift_task_corpus(num_positions: int, vocab_size: int, samples_per_position: int, *,
                      mixing: str, alpha: float, seed: int, shift: int | None = None,
                      train_examples: int, test_examples: int) -> ClassificationCorpus:
    """The three-regime corpus (:func:`posjax.data.synthetic.three_regime_corpus`, exact ``P``
    known) as a geometry corpus, plus the cyclic-shift detection task on its ``P``
    (:func:`posjax.data.tasks.shift_task`; ``shift`` None: ``max(1, n // 8)``; train and test
    drawn with seeds ``seed + 101`` and ``seed + 202``). ``info["task"]["bayes_accuracy"]`` is
    the task's ceiling with the exact ``P`` (:func:`posjax.data.tasks.bayes_accuracy`); an
    encoder without positional signal is at chance, 0.5 (arXiv 2604.05217, Theorem 1)."""
    from posjax.data.synthetic import three_regime_corpus
    from posjax.data.tasks import bayes_accuracy, shift_task

    corpus = three_regime_corpus(num_positions, vocab_size, samples_per_position,
                                 mixing=mixing, alpha=alpha, seed=seed)
    shift = shift or max(1, num_positions // 8)
    train = shift_task(corpus.P, train_examples, shift, seed=seed + 101)
    test = shift_task(corpus.P, test_examples, shift, seed=seed + 202)
    toks = np.asarray(corpus.tokens, np.int32)
    info = {"source": "synthetic:three_regime_corpus", "corpus": corpus.config,
            "task": {"name": "cyclic_shift_detection", "shift": shift,
                     "definition": "label 0: w_i ~ P_i; label 1: w_i ~ P_{(i+shift) mod n}",
                     "train_examples": train_examples, "test_examples": test_examples,
                     "bayes_accuracy": bayes_accuracy(corpus.P, test, shift),
                     "chance": 0.5},
            "tokenizer": None}
    return ClassificationCorpus(toks, np.full(len(toks), toks.shape[1], np.int32), None,
                                vocab_size, np.asarray(corpus.P), train, test, 2, 0, info)
