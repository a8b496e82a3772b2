"""A deterministic WordPiece vocabulary trainer.

The ``tokenizers`` library trains a WordPiece vocabulary with byte-pair merges (Sennrich et al.,
arXiv 1508.07909): words split into characters, a non-initial character written ``##c``, the
most frequent adjacent pair merged until the vocabulary is full. Its trainer is not
reproducible: the ``##c`` tokens get their ids in hash-map order, and equal pair counts are
broken by those ids, so two runs on the same text can give different vocabularies and
different token ids (``tokenizers`` issue 1794). Every experiment that trains a tokenizer on its
corpus would then give other numbers on every run.

:func:`train_wordpiece_vocab` runs the same algorithm with every order fixed: specials first,
then the alphabet by code point, then the ``##`` alphabet by code point, then the merges in the
order they are made; among pairs of equal count the one with the smaller ``(left id, right id)``
is merged first (the rule of ``tokenizers``, made deterministic by the id order above). Where
the library's result does not depend on ties it is the same vocabulary (tested).
"""
from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from typing import Any, Iterable, Sequence

__all__ = ["train_wordpiece_vocab", "word_counts"]

PREFIX = "##"


def word_counts(texts: Iterable[str], normalizer: Any, pre_tokenizer: Any) -> Counter:
    """How often each pre-tokenized word occurs in ``texts`` (``tokenizers`` normalizer and
    pre-tokenizer objects, e.g. ``BertNormalizer`` / ``BertPreTokenizer``)."""
    counts: Counter = Counter()
    for text in texts:
        normal = normalizer.normalize_str(str(text)) if normalizer is not None else str(text)
        counts.update(w for w, _ in pre_tokenizer.pre_tokenize_str(normal))
    return counts


def _merge_word(word: list[int], a: int, b: int, new: int) -> list[int]:
    """``word`` with every non-overlapping ``(a, b)``, left to right, replaced by ``new``."""
    out: list[int] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def _recount(word: list[int]) -> Counter:
    return Counter(zip(word, word[1:]))


def train_wordpiece_vocab(counts: Counter | dict[str, int], *, vocab_size: int,
                          special_tokens: Sequence[str] = (), min_frequency: int = 2,
                          inner_order: Sequence[str] | None = None) -> list[str]:
    """The WordPiece vocabulary (token strings in id order) of the words in ``counts``.

    Args:
      counts: word -> occurrences (from :func:`word_counts`).
      vocab_size: the size to stop at (specials and alphabet included; the alphabet is always
        kept whole, so the result can be larger when the alphabet alone exceeds it).
      special_tokens: the first ids, in order.
      min_frequency: a pair seen fewer times is never merged.
      inner_order: the ``##`` characters in id order instead of by code point (e.g. the order
        in a vocabulary that ``tokenizers`` trained: then the result is that vocabulary, ids
        included); must hold each needed ``##c`` token once.

    Returns:
      ``[token, ...]``, index = id: specials, characters (by code point), ``##`` characters
      (by code point), then the merged tokens in merge order.

    Raises:
      ValueError: no words, ``min_frequency < 1``, or an ``inner_order`` that is not a
        permutation of the needed ``##`` tokens.
    """
    if not counts:
        raise ValueError("cannot train a WordPiece vocabulary on no words")
    if min_frequency < 1:
        raise ValueError(f"min_frequency must be >= 1, got {min_frequency}")
    words = sorted((w, int(c)) for w, c in counts.items() if w and c > 0)
    vocab: list[str] = list(dict.fromkeys(special_tokens))
    ids = {t: i for i, t in enumerate(vocab)}
    alphabet = sorted({ch for w, _ in words for ch in w})
    inner = [PREFIX + ch for ch in sorted({ch for w, _ in words for ch in w[1:]})]
    if inner_order is not None:
        if sorted(inner_order) != inner:
            raise ValueError(f"inner_order must hold each of the {len(inner)} needed ## tokens "
                             f"once, got {len(inner_order)} (missing "
                             f"{sorted(set(inner) - set(inner_order))[:5]})")
        inner = list(inner_order)
    for token in alphabet + inner:
        if token not in ids:
            ids[token] = len(vocab)
            vocab.append(token)
    seqs = [[ids[w[0]]] + [ids[PREFIX + ch] for ch in w[1:]] for w, _ in words]
    freq = [c for _, c in words]

    pair_count: defaultdict = defaultdict(int)
    where: defaultdict = defaultdict(set)
    for k, seq in enumerate(seqs):
        for pair in zip(seq, seq[1:]):
            pair_count[pair] += freq[k]
            where[pair].add(k)
    heap = [(-c, p) for p, c in pair_count.items() if c > 0]
    heapq.heapify(heap)
    while heap and len(vocab) < vocab_size:
        neg, pair = heapq.heappop(heap)
        current = pair_count.get(pair, 0)
        if -neg != current:  # stale entry: put it back with its count now
            if current > 0:
                heapq.heappush(heap, (-current, pair))
            continue
        if current < min_frequency:
            break
        a, b = pair
        left, right = vocab[a], vocab[b]
        token = left + (right[len(PREFIX):] if right.startswith(PREFIX) else right)
        if token not in ids:
            ids[token] = len(vocab)
            vocab.append(token)
        new = ids[token]
        touched = set()
        for k in sorted(where.pop(pair, ())):
            seq = seqs[k]
            before = _recount(seq)
            merged = _merge_word(seq, a, b, new)
            after = _recount(merged)
            seqs[k] = merged
            for p in before.keys() | after.keys():
                delta = after.get(p, 0) - before.get(p, 0)
                if delta:
                    pair_count[p] += delta * freq[k]
                    touched.add(p)
                if after.get(p, 0):
                    where[p].add(k)
        pair_count.pop(pair, None)
        for p in sorted(touched):
            c = pair_count.get(p, 0)
            if c > 0:
                heapq.heappush(heap, (-c, p))
            elif p in pair_count:
                del pair_count[p]
    return vocab
