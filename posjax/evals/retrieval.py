"""Retrieval over long contexts: passkey retrieval (Mohtashami and Jaggi, arXiv 2305.16300,
Sec. 4.2) and a token-level needle-in-a-haystack task with several needles and a distractor (the
RULER family, arXiv 2404.06654), as exact-match accuracy over a length x depth grid.

Both are token-level, so they run on any vocabulary: :class:`RetrievalVocab` names the filler
tokens, the key symbols and the marker tokens. The model answers by greedy decoding
(``posjax.models.generate``), or any callable ``prompts [B, T] -> answers [B, k]`` (an oracle).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

__all__ = ["RetrievalVocab", "passkey_prompts", "needle_prompts", "passkey_retrieval",
           "needle_retrieval"]


@dataclasses.dataclass(frozen=True)
class RetrievalVocab:
    """Token ids of a retrieval task.

    Attributes:
      filler: ids the haystack is drawn from (uniformly).
      symbols: ids a key (or a needle's value) is drawn from.
      key_marker: precedes the passkey (and every needle).
      query_marker: ends the prompt; the answer follows it.
      key_length: symbols per passkey / needle value.
    """

    filler: tuple[int, ...]
    symbols: tuple[int, ...]
    key_marker: int
    query_marker: int
    key_length: int = 4

    def __post_init__(self):
        if not self.filler or not self.symbols:
            raise ValueError("RetrievalVocab needs at least one filler and one symbol id")
        if self.key_length < 1:
            raise ValueError(f"key_length must be >= 1, got {self.key_length}")
        special = {self.key_marker, self.query_marker}
        if len(special) != 2 or special & (set(self.filler) | set(self.symbols)):
            raise ValueError("key_marker and query_marker must differ from each other and from "
                             "the filler and symbol ids")

    def max_id(self) -> int:
        return max(max(self.filler), max(self.symbols), self.key_marker, self.query_marker)


def _check_grid(length: int, depth: float, overhead: int):
    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"depth must be in [0, 1], got {depth}")
    if length < overhead + 1:
        raise ValueError(f"length {length} is too short for the {overhead} task tokens")


def passkey_prompts(vocab: RetrievalVocab, length: int, depth: float, trials: int,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``trials`` prompts ``[trials, length]``: filler with ``key_marker k_1..k_n`` inserted at
    ``depth`` (0 = start, 1 = just before the query) and ``query_marker`` last; answers
    ``[trials, n]``."""
    n = vocab.key_length
    _check_grid(length, depth, n + 2)
    hay = length - (n + 2)
    at = int(round(depth * hay))
    filler = rng.choice(np.asarray(vocab.filler), size=(trials, hay))
    keys = rng.choice(np.asarray(vocab.symbols), size=(trials, n))
    marker = np.full((trials, 1), vocab.key_marker)
    query = np.full((trials, 1), vocab.query_marker)
    prompts = np.concatenate([filler[:, :at], marker, keys, filler[:, at:], query], axis=1)
    return prompts.astype(np.int32), keys.astype(np.int32)


def needle_prompts(vocab: RetrievalVocab, length: int, depth: float, trials: int,
                   rng: np.random.Generator, *, num_needles: int = 3
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Prompts with ``num_needles`` needles ``key_marker name v_1..v_n`` (distinct names drawn
    from the symbols; the asked needle at ``depth``, the others - distractors - at random
    depths) and the query ``query_marker name``; answers the asked needle's values."""
    n = vocab.key_length
    if num_needles < 1 or num_needles > len(vocab.symbols):
        raise ValueError(f"num_needles must be in [1, {len(vocab.symbols)}], got {num_needles}")
    size = n + 2
    _check_grid(length, depth, num_needles * size + 2)
    hay = length - num_needles * size - 2
    prompts = np.empty((trials, length), np.int32)
    answers = np.empty((trials, n), np.int32)
    symbols = np.asarray(vocab.symbols)
    for t in range(trials):                      # per trial: a handful of slices, not per token
        names = rng.choice(symbols, size=num_needles, replace=False)
        values = rng.choice(symbols, size=(num_needles, n))
        spots = np.concatenate([[int(round(depth * hay))],
                                rng.integers(0, hay + 1, size=num_needles - 1)])
        order = np.argsort(spots, kind="stable")
        filler = rng.choice(np.asarray(vocab.filler), size=hay)
        parts, prev = [], 0
        for j in order:
            parts += [filler[prev:spots[j]], [vocab.key_marker, names[j]], values[j]]
            prev = spots[j]
        parts += [filler[prev:], [vocab.query_marker, names[0]]]
        prompts[t] = np.concatenate(parts)
        answers[t] = values[0]
    return prompts, answers


def _answer_fn(model, key_length: int) -> Callable:
    if callable(model) and not hasattr(model, "transformer"):
        return model
    from posjax.models.generate import generate

    def answer(prompts):
        out = generate(model, prompts, max_new_tokens=key_length, temperature=0.0)
        return np.asarray(out)[:, prompts.shape[1]:]
    return answer


def _grid(model, make, vocab, lengths, depths, trials, rng, batch_size):
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    if hasattr(model, "config") and vocab.max_id() >= model.config.vocab_size:
        raise ValueError(f"task token id {vocab.max_id()} is outside the model's vocabulary "
                         f"of {model.config.vocab_size}")
    answer = _answer_fn(model, vocab.key_length)
    acc = np.zeros((len(lengths), len(depths)))
    for a, L in enumerate(lengths):
        for b, depth in enumerate(depths):
            prompts, keys = make(vocab, int(L), float(depth), trials, rng)
            got = np.concatenate([np.asarray(answer(p)) for p in
                                  np.array_split(prompts, max(1, -(-trials // batch_size)))])
            acc[a, b] = float(np.mean(np.all(got == keys, axis=1)))
    return {"lengths": [int(L) for L in lengths], "depths": [float(d) for d in depths],
            "trials": int(trials), "accuracy": acc.tolist(),
            "chance": float(len(vocab.symbols) ** -vocab.key_length)}


def passkey_retrieval(model, vocab: RetrievalVocab, lengths: Sequence[int],
                      depths: Sequence[float], trials: int, rng: np.random.Generator, *,
                      batch_size: int = 16) -> dict:
    """Exact-match passkey accuracy ``[len(lengths), len(depths)]`` of greedy decoding.

    Args:
      model: a causal posjax ``LanguageModel`` (greedy ``generate`` of ``key_length`` tokens),
        or a callable ``prompts [B, T] -> answers [B, key_length]``.
      vocab: the task's token ids.
      lengths / depths: the grid (depth in [0, 1]).
      trials: prompts per cell; rng: ``numpy.random.Generator``.

    Returns:
      ``{"lengths", "depths", "trials", "accuracy" [[...]], "chance"}`` (``chance`` = the
      probability of guessing a key, ``|symbols|^-key_length``).
    """
    return _grid(model, passkey_prompts, vocab, lengths, depths, trials, rng, batch_size)


def needle_retrieval(model, vocab: RetrievalVocab, lengths: Sequence[int],
                     depths: Sequence[float], trials: int, rng: np.random.Generator, *,
                     num_needles: int = 3, batch_size: int = 16) -> dict:
    """Exact-match accuracy of the needle task (see :func:`needle_prompts`) on the grid; same
    arguments and result as :func:`passkey_retrieval`."""
    make = lambda v, L, d, t, r: needle_prompts(v, L, d, t, r,             # noqa: E731
                                                num_needles=num_needles)
    return _grid(model, make, vocab, lengths, depths, trials, rng, batch_size)
