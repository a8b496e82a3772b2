"""The corpus of a stress run (the dataset names of :data:`~experiments.stress_table.config.DATASETS`):
``synthetic`` is :func:`posjax.data.classification_corpus.shift_task_corpus` (three-regime
corpus with exact ``P`` and the cyclic-shift task); ``sst2`` / ``imdb`` / ``text``
:func:`~posjax.data.classification_corpus.text_classification_corpus`; ``stdlib`` (and
``stream=True``) :func:`~posjax.data.classification_corpus.stream_corpus` windows."""
from __future__ import annotations

from posjax.data.classification_corpus import (ClassificationCorpus, corpus_tokenizer,
                                               docstring_sentences, shift_task_corpus,
                                               stream_corpus, text_classification_corpus)

from experiments.stress_table.config import StressConfig


def prepare(cfg: StressConfig, out_dir: str) -> ClassificationCorpus:
    """The corpus of ``cfg.dataset`` (tokenizers cached under ``out_dir``)."""
    if cfg.dataset == "synthetic":
        return shift_task_corpus(cfg.num_positions, cfg.vocab_size, cfg.samples_per_position,
                                 mixing=cfg.mixing, alpha=cfg.alpha, seed=cfg.data_seed,
                                 shift=cfg.task_shift, train_examples=cfg.train_examples,
                                 test_examples=cfg.test_examples)
    tokenizer = cfg.tokenizer
    if not tokenizer and not cfg.vocab_file and cfg.pretrained:  # the checkpoint's own
        from posjax.pretrained import resolve
        tokenizer = resolve(cfg.pretrained)
    if cfg.dataset != "stdlib" and not cfg.stream:
        return text_classification_corpus(
            cfg.dataset, out_dir, num_positions=cfg.num_positions, max_len=cfg.max_len,
            keep_special=cfg.keep_special, train_examples=cfg.train_examples,
            test_examples=cfg.test_examples, seed=cfg.data_seed, data_dir=cfg.data_dir,
            text_column=cfg.text_column, tokenizer=tokenizer, vocab_file=cfg.vocab_file,
            tokenizer_vocab=cfg.tokenizer_vocab, hub_timeout=cfg.hub_timeout)
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
