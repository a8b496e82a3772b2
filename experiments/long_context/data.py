"""Data of ``experiments.long_context``: the contiguous token stream (corpus choice), the
retrieval vocabulary, and the training mix of language-model windows and passkey / needle rows.

Corpora (``LongContextConfig.dataset``):

* ``"stdlib"`` - the Python standard library's docstrings as one contiguous stream
  (:mod:`posjax.data.stdlib_text`), tokenised by a WordPiece vocabulary trained on them;
* ``"text"`` - a local UTF-8 text file (``text_file``; one document per non-empty line), same
  tokenisation;
* ``"synthetic"`` - a seeded order-2 Markov chain over ``vocab_size`` ids (no download, no
  tokenizer; for tests and machines without the corpus).

The retrieval tasks are those of :mod:`posjax.evals` (passkey, arXiv 2305.16300; needles with
distractors, the RULER family arXiv 2404.06654); two marker ids are appended to the corpus
vocabulary, keys are drawn from ``num_symbols`` corpus ids and the haystack from all corpus ids.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any

import numpy as np

from posjax.evals import RetrievalVocab, needle_prompts, passkey_prompts
from experiments.long_context.config import LongContextConfig

NUM_SPECIAL = 5  # [PAD] [UNK] [CLS] [SEP] [MASK] of the WordPiece tokenizers (posjax.data.text)


def markov_stream(num_tokens: int, vocab_size: int, *, seed: int, branching: int = 4
                  ) -> np.ndarray:
    """A stream ``[num_tokens]`` of an order-2 Markov chain: each context ``(a, b)`` has
    ``branching`` successors drawn from a Zipf-like law (fixed by ``seed``), so the
    perplexity floor is about ``branching`` and a longer context helps only through 2 tokens."""
    rng = np.random.default_rng(seed)
    succ = rng.integers(0, vocab_size, size=(vocab_size, vocab_size, branching))
    p = 1.0 / np.arange(1, branching + 1)
    choice = rng.choice(branching, size=num_tokens, p=p / p.sum())
    out = np.empty(num_tokens, np.int32)
    out[:2] = rng.integers(0, vocab_size, 2)
    for t in range(2, num_tokens):
        out[t] = succ[out[t - 2], out[t - 1], choice[t]]
    return out


def _tokenizer(texts, vocab_size: int, cache: str):
    from posjax.data.text import wordpiece_tokenizer
    return wordpiece_tokenizer(texts, vocab_size=vocab_size, cache_path=cache)


def corpus_stream(cfg: LongContextConfig, cache_dir: str) -> tuple[np.ndarray, int, dict[str, Any]]:
    """``(stream [T] int32, corpus vocabulary size, info)`` of the configured corpus, at most
    ``cfg.corpus_tokens`` tokens."""
    n = cfg.corpus_tokens
    if cfg.dataset == "synthetic":
        return (markov_stream(n, cfg.vocab_size, seed=cfg.data_seed), cfg.vocab_size,
                {"source": f"order-2 Markov chain (seed {cfg.data_seed})", "first_id": 0})
    if cfg.dataset == "stdlib":
        try:
            from posjax.data.stdlib_text import stdlib_sentences, stdlib_stream
        except ImportError as e:
            raise ValueError(f"dataset 'stdlib' needs posjax.data.stdlib_text ({e}); use "
                             "--set dataset=synthetic or dataset=text text_file=PATH") from None
        tok = _tokenizer(list(stdlib_sentences()), cfg.vocab_size,
                         os.path.join(cache_dir, f"stdlib_wordpiece_{cfg.vocab_size}.json"))
        windows = np.asarray(stdlib_stream(tok, 1024))              # contiguous [W, 1024]
        stream = windows.reshape(-1)[:n]
        source = "Python standard-library docstrings (posjax.data.stdlib_text)"
    else:
        with open(cfg.text_file, encoding="utf-8") as f:
            docs = [line.strip() for line in f if line.strip()]
        key = f"{os.path.abspath(cfg.text_file)}:{len(docs)}"
        tag = hashlib.sha1(key.encode()).hexdigest()[:10]
        tok = _tokenizer(docs, cfg.vocab_size, os.path.join(cache_dir, f"text_{tag}.json"))
        ids = [e.ids for e in tok.tokenizer.encode_batch(docs, add_special_tokens=False)]
        stream = np.concatenate([np.asarray(i, np.int32) for i in ids if i])[:n]
        source = f"text file {cfg.text_file}"
    if len(stream) < n // 4:
        raise ValueError(f"the {cfg.dataset} corpus gave {len(stream)} tokens, fewer than a "
                         f"quarter of corpus_tokens={n}")
    return (stream.astype(np.int32), tok.vocab_size,
            {"source": source, "tokenizer": tok.source, "first_id": NUM_SPECIAL})


def retrieval_vocab(cfg: LongContextConfig, corpus_vocab: int, first_id: int) -> RetrievalVocab:
    """Markers ``corpus_vocab`` and ``corpus_vocab + 1``; keys from ``num_symbols`` corpus ids,
    filler from every corpus id at or above ``first_id`` (the tokenizer's specials excluded)."""
    filler = tuple(range(first_id, corpus_vocab))
    step = max(1, len(filler) // cfg.num_symbols)
    symbols = filler[::step][:cfg.num_symbols]
    return RetrievalVocab(filler=filler, symbols=symbols, key_marker=corpus_vocab,
                          query_marker=corpus_vocab + 1, key_length=cfg.key_length)


def split_stream(stream: np.ndarray, cfg: LongContextConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(train stream, eval rows [eval_rows, 8L + 1])``: the evaluation rows are the stream's
    last tokens, never seen in training."""
    width = max(cfg.eval_factors) * cfg.train_length + 1
    need = cfg.eval_rows * width
    if len(stream) < 2 * need:
        raise ValueError(f"the corpus has {len(stream)} tokens; eval_rows={cfg.eval_rows} rows "
                         f"of {width} need at least {2 * need}")
    return stream[:-need], stream[-need:].reshape(cfg.eval_rows, width)


def _retrieval_row(kind: str, vocab: RetrievalVocab, total: int, width: int, cfg: LongContextConfig,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    k = vocab.key_length
    make = passkey_prompts if kind == "passkey" else (
        lambda v, L, d, t, r: needle_prompts(v, L, d, t, r, num_needles=cfg.num_needles))
    prompt, key = make(vocab, total - k, float(rng.uniform()), 1, rng)
    pad = rng.choice(np.asarray(vocab.filler), size=width - total)
    row = np.concatenate([prompt[0], key[0], pad]).astype(np.int32)
    mask = np.zeros(width, bool)
    mask[total - k:total] = True                                     # the answer only
    return row, mask


def training_arrays(train_stream: np.ndarray, vocab: RetrievalVocab, cfg: LongContextConfig, seed: int
                    ) -> dict[str, np.ndarray]:
    """One seed's training set: every non-overlapping window of ``L`` tokens of the training
    stream (loss on every next token), plus passkey and needle rows (half each) of total length
    ``l ~ U[min, L]`` (prompt, then the answer; filler after it, outside the loss) making up
    ``retrieval_fraction`` of the rows, shuffled per seed."""
    L = cfg.train_length
    n_lm = len(train_stream) // L
    lm = train_stream[:n_lm * L].reshape(n_lm, L)
    rng = np.random.default_rng((cfg.data_seed, seed))
    n_ret = int(round(n_lm * cfg.retrieval_fraction / (1 - cfg.retrieval_fraction)))
    k = vocab.key_length
    lo = {"passkey": k + 3, "needle": cfg.num_needles * (k + 2) + 3}
    rows, masks = [], []
    for i in range(n_ret):
        kind = "passkey" if i % 2 == 0 else "needle"
        row, mask = _retrieval_row(kind, vocab, int(rng.integers(lo[kind] + k, L + 1)), L, cfg,
                                   rng)
        rows.append(row)
        masks.append(mask)
    tokens = np.concatenate([lm, np.asarray(rows, np.int32).reshape(-1, L)])
    loss_mask = np.concatenate([np.ones_like(lm, bool), np.asarray(masks, bool).reshape(-1, L)])
    return {"tokens": tokens, "loss_mask": loss_mask}
