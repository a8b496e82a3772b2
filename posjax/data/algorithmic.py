"""Algorithmic tasks for length generalisation (arXiv 2305.19466: Kazemnejad et al., "The Impact
of Positional Encoding on Length Generalization in Transformers", arXiv 2305.19466).

Every instance is one token sequence ``<bos> input <sep> target <eos>``, right-padded with
``<pad>``; a decoder is trained with the loss on the target tokens (and ``<eos>``) only.

| task        | input (instance length l)             | target                                   |
|-------------|---------------------------------------|------------------------------------------|
| ``copy``    | l digits (alphabet of ``alphabet``)   | the same digits                          |
| ``reverse`` | l digits                              | the digits reversed                      |
| ``addition``| ``a + b``, two l-digit numbers        | digits of a + b (``digit_order``)        |
| ``parity``  | l bits                                | XOR of the bits (``scratchpad="running"``: every running XOR) |
| ``counting``| l letters over {a, b, c}, ``?``, q     | decimal count of q in the letters        |
| ``summation``| l digits                             | their sum mod 10                         |

All generators are vectorised numpy and seeded explicitly.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

SPECIALS = ("<pad>", "<bos>", "<sep>", "<eos>")
SYMBOLS = tuple("0123456789") + ("+", "a", "b", "c", "?")
VOCAB = SPECIALS + SYMBOLS
TOKEN = {s: i for i, s in enumerate(VOCAB)}
PAD, BOS, SEP, EOS = (TOKEN[s] for s in SPECIALS)
DIGIT0 = TOKEN["0"]
LETTER0 = TOKEN["a"]
TASKS = ("copy", "reverse", "addition", "parity", "counting", "summation")
DIGIT_ORDERS = ("msb_first", "lsb_first")
SCRATCHPADS = ("none", "running")


def _check(task: str, alphabet: int, digit_order: str, scratchpad: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; tasks: {', '.join(TASKS)}")
    if not 2 <= alphabet <= 10:
        raise ValueError(f"alphabet must be in [2, 10], got {alphabet}")
    if digit_order not in DIGIT_ORDERS:
        raise ValueError(f"digit_order must be one of {DIGIT_ORDERS}, got {digit_order!r}")
    if scratchpad not in SCRATCHPADS:
        raise ValueError(f"scratchpad must be one of {SCRATCHPADS}, got {scratchpad!r}")


def max_target_length(task: str, length: int, *, scratchpad: str = "none") -> int:
    """Longest target (without ``<eos>``) of an instance of length ``length``."""
    if task in ("copy", "reverse"):
        return length
    if task == "addition":
        return length + 1
    if task == "parity":
        return length if scratchpad == "running" else 1
    if task == "counting":
        return len(str(length))
    if task == "summation":
        return 1
    raise ValueError(f"unknown task {task!r}; tasks: {', '.join(TASKS)}")


def input_length(task: str, length: int) -> int:
    """Number of input tokens (between ``<bos>`` and ``<sep>``)."""
    if task == "addition":
        return 2 * length + 1
    if task == "counting":
        return length + 2
    if task in TASKS:
        return length
    raise ValueError(f"unknown task {task!r}; tasks: {', '.join(TASKS)}")


def sequence_length(task: str, length: int, *, scratchpad: str = "none") -> int:
    """Longest formatted sequence ``<bos> input <sep> target <eos>`` for instance length ``length``."""
    return input_length(task, length) + max_target_length(task, length, scratchpad=scratchpad) + 3


def _digits_to_tokens(d: np.ndarray) -> np.ndarray:
    return d.astype(np.int32) + DIGIT0


def _number_digits(values: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Most-significant-first decimal digits ``[n, width]`` (left-aligned) and their counts."""
    values = np.asarray(values, np.int64)
    counts = np.array([len(str(int(v))) for v in values], np.int32)
    out = np.zeros((len(values), width), np.int64)
    for i, v in enumerate(values):
        s = str(int(v))
        out[i, : len(s)] = [int(c) for c in s]
    return out, counts


def _generate_fixed_length(task: str, n: int, length: int, rng: np.random.Generator, *,
                           alphabet: int, digit_order: str, scratchpad: str
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs ``[n, input_length]`` and targets ``[n, max_target]`` as token ids, target counts."""
    if task in ("copy", "reverse"):
        x = rng.integers(0, alphabet, (n, length))
        y = x if task == "copy" else x[:, ::-1]
        return _digits_to_tokens(x), _digits_to_tokens(y), np.full(n, length, np.int32)
    if task == "addition":
        a = rng.integers(0, 10, (n, length))
        b = rng.integers(0, 10, (n, length))
        if length > 1:  # l-digit numbers: no leading zero
            a[:, 0] = rng.integers(1, 10, n)
            b[:, 0] = rng.integers(1, 10, n)
        # Column-wise sum from the least significant digit, vectorised over instances.
        total = np.zeros((n, length + 1), np.int64)
        carry = np.zeros(n, np.int64)
        for col in range(length - 1, -1, -1):
            s = a[:, col] + b[:, col] + carry
            total[:, col + 1] = s % 10
            carry = s // 10
        total[:, 0] = carry
        has_carry = carry > 0
        counts = np.where(has_carry, length + 1, length).astype(np.int32)
        y = np.zeros((n, length + 1), np.int64)
        y[has_carry] = total[has_carry]
        y[~has_carry, :length] = total[~has_carry, 1:]
        if digit_order == "lsb_first":
            for i in range(n):
                y[i, : counts[i]] = y[i, : counts[i]][::-1]
        plus = np.full((n, 1), TOKEN["+"] - DIGIT0)
        x = np.concatenate([a, plus, b], axis=1)
        return _digits_to_tokens(x), _digits_to_tokens(y), counts
    if task == "parity":
        x = rng.integers(0, 2, (n, length))
        running = np.bitwise_xor.accumulate(x, axis=1)
        y = running if scratchpad == "running" else running[:, -1:]
        return _digits_to_tokens(x), _digits_to_tokens(y), np.full(n, y.shape[1], np.int32)
    if task == "counting":
        letters = rng.integers(0, 3, (n, length))
        query = rng.integers(0, 3, n)
        count = (letters == query[:, None]).sum(axis=1)
        digits, counts = _number_digits(count, max_target_length("counting", length))
        x = np.concatenate([letters + LETTER0, np.full((n, 1), TOKEN["?"]),
                            (query + LETTER0)[:, None]], axis=1).astype(np.int32)
        return x, _digits_to_tokens(digits), counts
    if task == "summation":
        x = rng.integers(0, 10, (n, length))
        y = x.sum(axis=1, keepdims=True) % 10
        return _digits_to_tokens(x), _digits_to_tokens(y), np.ones(n, np.int32)
    raise ValueError(f"unknown task {task!r}; tasks: {', '.join(TASKS)}")


def make_dataset(task: str, lengths: Sequence[int] | np.ndarray, *, seed: int,
                 width: int | None = None, alphabet: int = 10, digit_order: str = "msb_first",
                 scratchpad: str = "none") -> dict[str, np.ndarray]:
    """Formatted instances, one per entry of ``lengths``.

    Args:
      task: one of :data:`TASKS`.
      lengths: instance length l of every instance (``[n]`` ints >= 1).
      seed: data seed (numpy ``default_rng``).
      width: padded sequence width (default: the longest formatted sequence of ``max(lengths)``).
      alphabet, digit_order, scratchpad: task options (see the module docstring).

    Returns:
      dict with ``tokens [n, width]`` int32 (``<pad>``-padded), ``loss_mask [n, width]`` bool (True
      on target tokens and ``<eos>``: the tokens a decoder must predict), ``prefix_len [n]`` (index
      of the first target token), ``target_len [n]`` (target tokens, without ``<eos>``) and
      ``length [n]`` (l).
    """
    _check(task, alphabet, digit_order, scratchpad)
    lengths = np.asarray(lengths, np.int64)
    if lengths.ndim != 1 or lengths.size == 0 or lengths.min() < 1:
        raise ValueError("lengths must be a non-empty 1-D array of ints >= 1")
    need = sequence_length(task, int(lengths.max()), scratchpad=scratchpad)
    width = need if width is None else width
    if width < need:
        raise ValueError(f"width={width} is shorter than the longest {task} sequence ({need})")
    n = len(lengths)
    tokens = np.full((n, width), PAD, np.int32)
    loss_mask = np.zeros((n, width), bool)
    prefix_len = np.zeros(n, np.int32)
    target_len = np.zeros(n, np.int32)
    rng = np.random.default_rng(seed)
    for length in np.unique(lengths):
        idx = np.flatnonzero(lengths == length)
        x, y, counts = _generate_fixed_length(task, len(idx), int(length), rng, alphabet=alphabet,
                                              digit_order=digit_order, scratchpad=scratchpad)
        p = x.shape[1] + 2  # <bos> input <sep>
        tokens[idx, 0] = BOS
        tokens[idx, 1:p - 1] = x
        tokens[idx, p - 1] = SEP
        for row, (i, c) in enumerate(zip(idx, counts)):
            tokens[i, p:p + c] = y[row, :c]
            tokens[i, p + c] = EOS
            loss_mask[i, p:p + c + 1] = True
        prefix_len[idx] = p
        target_len[idx] = counts
    return {"tokens": tokens, "loss_mask": loss_mask, "prefix_len": prefix_len,
            "target_len": target_len, "length": lengths.astype(np.int32)}


def train_lengths(n: int, max_length: int, *, seed: int, min_length: int = 1) -> np.ndarray:
    """``n`` instance lengths uniform over [min_length, max_length] (seeded)."""
    if not 1 <= min_length <= max_length:
        raise ValueError(f"need 1 <= min_length <= max_length, got {min_length}, {max_length}")
    return np.random.default_rng(seed).integers(min_length, max_length + 1, n)


def eval_lengths(lengths: Iterable[int], per_length: int) -> np.ndarray:
    """Each length in ``lengths`` repeated ``per_length`` times."""
    lengths = np.asarray(list(lengths), np.int64)
    if per_length < 1:
        raise ValueError(f"per_length must be >= 1, got {per_length}")
    return np.repeat(lengths, per_length)


def decode(tokens: Sequence[int]) -> str:
    """Readable string of token ids (pads dropped)."""
    return " ".join(VOCAB[int(t)] for t in tokens if int(t) != PAD)


def vocab_size() -> int:
    return len(VOCAB)


__all__ = ["BOS", "EOS", "PAD", "SEP", "TASKS", "TOKEN", "VOCAB", "decode", "input_length",
           "make_dataset", "max_target_length", "sequence_length", "eval_lengths",
           "train_lengths", "vocab_size"]
