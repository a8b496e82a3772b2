"""Synthetic token-id tasks of arXiv 2505.13027 (*Deconstructing Positional Information: From
Attention Logits to Training Biases*): a position-sensitive "trigger distance" task and a
position-agnostic "trigger count" task (arXiv 2505.13027).

Both generators are seeded, vectorised with numpy (no Python loop over samples or positions) and
return a dict of equally long numpy arrays, ready for :class:`posjax.training.ArrayBatches`:

* ``tokens`` int32 ``[N, seq_len]``, right-padded with ``pad_id``;
* ``labels`` int32 ``[N]``;
* ``padding_mask`` bool ``[N, seq_len]`` (True on real tokens);
* ``trigger_positions`` int32 ``[N, 2]`` (trigger distance only; label = second - first).

The dataset-level trigger ids come from :func:`trigger_ids` (its own random stream of ``seed``),
so tests and analyses can recompute them. ``split`` makes the random 70/30 split of the paper
(``split_seed = 42``).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

VOCAB_SIZE = 574
NUM_SPECIAL = 5
PAD_ID = 0
SEQ_LEN = 128
FILLER_POOLS = ("all", "non_special")


def _check_range(name: str, lo_hi: tuple[int, int], minimum: int = 0) -> tuple[int, int]:
    lo, hi = (int(v) for v in lo_hi)
    if lo < minimum or hi < lo:
        raise ValueError(f"{name} must be (lo, hi) with {minimum} <= lo <= hi, got {lo_hi}")
    return lo, hi


def _check_vocab(vocab_size: int, num_special: int, pad_id: int, needed: int) -> None:
    if not 0 <= num_special < vocab_size:
        raise ValueError(f"num_special must be in [0, vocab_size={vocab_size}), got {num_special}")
    if not 0 <= pad_id < vocab_size:
        raise ValueError(f"pad_id={pad_id} is outside the vocabulary of {vocab_size} ids")
    if vocab_size - num_special < needed:
        raise ValueError(f"vocabulary of {vocab_size} ids with {num_special} specials is too "
                         f"small: {needed} non-special ids are needed")


def trigger_ids(seed: int, num_triggers: int, *, vocab_size: int = VOCAB_SIZE,
                num_special: int = NUM_SPECIAL) -> np.ndarray:
    """The dataset's distinct trigger ids ``[num_triggers]`` (sorted), drawn once per ``seed``.

    Triggers are drawn uniformly without replacement from the non-special ids
    ``num_special .. vocab_size - 1``, on a random stream reserved for them
    (``default_rng([seed, 0])``); the per-sample draws use ``default_rng([seed, 1])``.
    """
    _check_vocab(vocab_size, num_special, PAD_ID, num_triggers)
    rng = np.random.default_rng([int(seed), 0])
    ids = rng.choice(np.arange(num_special, vocab_size), size=num_triggers, replace=False)
    return np.sort(ids).astype(np.int32)


def _filler_pool(vocab_size: int, num_special: int, exclude: np.ndarray, filler_ids: str
                 ) -> np.ndarray:
    if filler_ids not in FILLER_POOLS:
        raise ValueError(f"filler_ids must be one of {FILLER_POOLS}, got {filler_ids!r}")
    start = 0 if filler_ids == "all" else num_special
    pool = np.arange(start, vocab_size, dtype=np.int32)
    return np.setdiff1d(pool, exclude).astype(np.int32)


def _distinct_draws(rng: np.random.Generator, pool: np.ndarray, n: int, k: int,
                    chunk: int = 8192) -> np.ndarray:
    """``[n, k]`` ids; each row is k distinct ids of ``pool`` in uniformly random order.

    The first k entries of a uniform random permutation: the k smallest of iid uniform keys,
    sorted by key (argpartition then a sort of k columns), in chunks of rows to bound memory.
    """
    if k > len(pool):
        raise ValueError(f"cannot draw {k} distinct ids from a pool of {len(pool)}")
    out = np.empty((n, k), np.int32)
    for start in range(0, n, chunk):
        keys = rng.random((min(chunk, n - start), len(pool)))
        idx = np.argpartition(keys, k - 1, axis=1)[:, :k] if k < len(pool) else \
            np.broadcast_to(np.arange(len(pool)), keys.shape).copy()
        order = np.argsort(np.take_along_axis(keys, idx, axis=1), axis=1)
        out[start:start + len(keys)] = pool[np.take_along_axis(idx, order, axis=1)]
    return out


def _dedup(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Drop exact duplicate token rows, keeping the first occurrence and the original order."""
    _, first = np.unique(arrays["tokens"], axis=0, return_index=True)
    keep = np.sort(first)
    return {k: v[keep] for k, v in arrays.items()}


def trigger_distance(num_samples: int = 100_000, *, seed: int, vocab_size: int = VOCAB_SIZE,
                     num_special: int = NUM_SPECIAL, pad_id: int = PAD_ID,
                     seq_len: int = SEQ_LEN, max_tokens: int = 120,
                     left_range: tuple[int, int] = (1, 25),
                     between_range: tuple[int, int] = (1, 70),
                     right_range: tuple[int, int] = (1, 25),
                     exclude_triggers_from_fillers: bool = True, filler_ids: str = "all",
                     dedup: bool = True) -> dict[str, np.ndarray]:
    """Task 1 of arXiv 2505.13027: classify the distance between two trigger tokens.

    Sequence = left ⊕ [w₁] ⊕ between ⊕ [w₂] ⊕ right, each segment of uniform length
    (``*_range`` inclusive) filled with ids drawn uniformly *without replacement within the
    segment*; truncated to ``max_tokens`` and right-padded to ``seq_len``. The label is
    ``y = pos(w₂) - pos(w₁) = between + 1``, so with the defaults y ∈ {2..71} (70 uniform classes;
    a classifier needs ``between_range[1] + 2`` outputs).

    Args:
      num_samples: samples drawn (before ``dedup``).
      seed: data seed (trigger ids and all per-sample draws).
      vocab_size, num_special, pad_id: the vocabulary (574 ids; ids 0-4 reserved; pad 0).
      seq_len, max_tokens: padded length and truncation length.
      left_range, between_range, right_range: segment lengths (paper: U{1..25}, U{1..70}, U{1..25}).
      exclude_triggers_from_fillers: True (standard) keeps w₁, w₂ out of the fillers; False is
        faithful to the original, where ≈ 19.6 % of samples hold an extra trigger copy.
      filler_ids: "all" (the paper: the whole vocabulary) or "non_special" (ids >= num_special).
        Triggers are always non-special ids (docs/interpretations.md).
      dedup: drop exact duplicate token rows (paper: ≈ 100k remain of 100k).

    Returns:
      ``tokens [N, seq_len]``, ``labels [N]``, ``padding_mask [N, seq_len]``,
      ``trigger_positions [N, 2]``.
    """
    if num_samples <= 0:
        raise ValueError(f"num_samples must be positive, got {num_samples}")
    lo_l, hi_l = _check_range("left_range", left_range)
    lo_b, hi_b = _check_range("between_range", between_range)
    lo_r, hi_r = _check_range("right_range", right_range)
    if hi_l + hi_b + 2 > max_tokens:
        raise ValueError(f"left_range[1] + between_range[1] + 2 = {hi_l + hi_b + 2} exceeds "
                         f"max_tokens={max_tokens}: truncation would cut the second trigger")
    if max_tokens > seq_len:
        raise ValueError(f"max_tokens={max_tokens} exceeds seq_len={seq_len}")
    _check_vocab(vocab_size, num_special, pad_id, 2)
    trig = trigger_ids(seed, 2, vocab_size=vocab_size, num_special=num_special)
    w1, w2 = np.random.default_rng([int(seed), 2]).permutation(trig)
    pool = _filler_pool(vocab_size, num_special, trig if exclude_triggers_from_fillers else
                        np.empty(0, np.int32), filler_ids)
    rng = np.random.default_rng([int(seed), 1])
    n = num_samples
    lengths = np.stack([rng.integers(lo, hi + 1, n) for lo, hi in
                        ((lo_l, hi_l), (lo_b, hi_b), (lo_r, hi_r))], axis=1)
    segs = [_distinct_draws(rng, pool, n, max(hi, 1)) for hi in (hi_l, hi_b, hi_r)]
    left, between, right = lengths.T
    p1 = left
    p2 = left + between + 1
    total = np.minimum(p2 + 1 + right, max_tokens)

    j = np.arange(seq_len)[None, :]
    tokens = np.full((n, seq_len), pad_id, np.int32)

    def place(seg: np.ndarray, start: np.ndarray, stop: np.ndarray) -> None:
        inside = (j >= start[:, None]) & (j < stop[:, None])
        idx = np.clip(j - start[:, None], 0, seg.shape[1] - 1)
        np.copyto(tokens, np.take_along_axis(seg, idx, axis=1), where=inside)

    place(segs[0], np.zeros(n, np.int64), p1)
    place(segs[1], p1 + 1, p2)
    place(segs[2], p2 + 1, total)
    tokens[np.arange(n), p1] = w1
    tokens[np.arange(n), p2] = w2
    out = {"tokens": tokens, "labels": (p2 - p1).astype(np.int32),
           "padding_mask": j < total[:, None],
           "trigger_positions": np.stack([p1, p2], axis=1).astype(np.int32)}
    return _dedup(out) if dedup else out


def trigger_count(num_samples: int = 50_000, *, seed: int, vocab_size: int = VOCAB_SIZE,
                  num_special: int = NUM_SPECIAL, pad_id: int = PAD_ID, seq_len: int = SEQ_LEN,
                  length: int = 120, num_triggers: int = 30,
                  count_range: tuple[int, int] = (0, 100), filler_ids: str = "all",
                  ignore_label0: bool = False, dedup: bool = False) -> dict[str, np.ndarray]:
    """Task 2 of arXiv 2505.13027: count the trigger tokens in a shuffled sequence.

    Per sample c ~ U{count_range}; c ids are drawn *with replacement* from the dataset's
    ``num_triggers`` trigger ids and ``length - c`` fillers with replacement from the other ids,
    then the row is shuffled uniformly and right-padded to ``seq_len``. The label is ``y = c``
    (defaults: 101 classes, chance ≈ 1 %).

    Args:
      num_samples: samples drawn (paper: 50,000, no dedup).
      seed: data seed.
      vocab_size, num_special, pad_id, seq_len: as in :func:`trigger_distance`.
      length: real tokens per sample (paper: exactly 120).
      num_triggers: size of the trigger set (paper: 30).
      count_range: inclusive range of c (paper: 0..100).
      filler_ids: "all" (non-trigger ids of the whole vocabulary) or "non_special".
      ignore_label0: faithful option of the original code, whose loss ignores y = 0 and whose
        accuracy skips it. Implemented by dropping the y = 0 samples, which is the same for the
        accuracy and, up to batch composition, for a mean-reduced loss. Default False.
      dedup: drop exact duplicate rows (off in the paper).

    Returns:
      ``tokens [N, seq_len]``, ``labels [N]``, ``padding_mask [N, seq_len]``.
    """
    if num_samples <= 0:
        raise ValueError(f"num_samples must be positive, got {num_samples}")
    lo, hi = _check_range("count_range", count_range)
    if hi > length:
        raise ValueError(f"count_range[1]={hi} exceeds the sequence length {length}")
    if length > seq_len:
        raise ValueError(f"length={length} exceeds seq_len={seq_len}")
    if num_triggers <= 0:
        raise ValueError(f"num_triggers must be positive, got {num_triggers}")
    _check_vocab(vocab_size, num_special, pad_id, num_triggers + 1)
    trig = trigger_ids(seed, num_triggers, vocab_size=vocab_size, num_special=num_special)
    pool = _filler_pool(vocab_size, num_special, trig, filler_ids)
    rng = np.random.default_rng([int(seed), 1])
    n = num_samples
    counts = rng.integers(lo, hi + 1, n)
    trig_draw = trig[rng.integers(0, len(trig), (n, length))]
    fill_draw = pool[rng.integers(0, len(pool), (n, length))]
    ordered = np.where(np.arange(length)[None, :] < counts[:, None], trig_draw, fill_draw)
    perm = np.argsort(rng.random((n, length)), axis=1)
    tokens = np.full((n, seq_len), pad_id, np.int32)
    tokens[:, :length] = np.take_along_axis(ordered, perm, axis=1)
    padding_mask = np.zeros((n, seq_len), bool)
    padding_mask[:, :length] = True
    out = {"tokens": tokens, "labels": counts.astype(np.int32), "padding_mask": padding_mask}
    if ignore_label0:
        keep = out["labels"] != 0
        out = {k: v[keep] for k, v in out.items()}
    return _dedup(out) if dedup else out


def split(arrays: Mapping[str, np.ndarray], fractions: tuple[float, ...] = (0.7, 0.3), *,
          split_seed: int = 42) -> tuple[dict[str, np.ndarray], ...]:
    """Random split of a dataset dict into parts of the given fractions (paper: 70/30, seed 42).

    The rounding remainder goes to the last part; every sample lands in exactly one part.
    """
    fractions = tuple(float(f) for f in fractions)
    if not fractions or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-9:
        raise ValueError(f"fractions must be positive and sum to 1, got {fractions}")
    sizes = {len(v) for v in arrays.values()}
    if len(sizes) != 1:
        lengths = {k: len(v) for k, v in arrays.items()}
        raise ValueError(f"arrays have different lengths: {lengths}")
    n = sizes.pop()
    perm = np.random.default_rng(split_seed).permutation(n)
    bounds = np.floor(np.cumsum(fractions)[:-1] * n).astype(int)
    return tuple({k: np.asarray(v)[idx] for k, v in arrays.items()}
                 for idx in np.split(perm, bounds))


def num_classes(labels: np.ndarray) -> int:
    """Classifier width for labels ``0..max`` (paper: max label + 1; 72 and 101 by default)."""
    return int(np.max(labels)) + 1


def order_blind_baselines(train: Mapping[str, np.ndarray], test: Mapping[str, np.ndarray]
                          ) -> dict[str, float]:
    """Test accuracies reachable without token order: chance, majority class, length prior.

    A bidirectional NoPE model with mean pooling is permutation-invariant, but it still sees how
    many real tokens a sample has; for trigger distance that number correlates with the label
    (length = left + between + right + 2). ``length_prior`` predicts, for each length, the most
    frequent training label of that length (majority class for lengths unseen in training).
    """
    labels = np.asarray(train["labels"])
    lengths = np.asarray(train["padding_mask"]).sum(1)
    test_lengths = np.asarray(test["padding_mask"]).sum(1)
    width = int(max(lengths.max(), test_lengths.max())) + 1
    counts = np.zeros((width, int(labels.max()) + 1))
    np.add.at(counts, (lengths, labels), 1)
    majority = int(np.bincount(labels).argmax())
    by_length = np.where(counts.sum(1) > 0, counts.argmax(1), majority)
    test_labels = np.asarray(test["labels"])
    return {"chance": 1.0 / len(np.unique(labels)),
            "majority": float(np.mean(test_labels == majority)),
            "length_prior": float(np.mean(by_length[test_lengths] == test_labels))}


# --- cyclic-shift detection (arXiv 2604.05217, stress experiment) ----------------------------


def shift_task(P: np.ndarray, num_examples: int, shift: int, *, seed: int
               ) -> dict[str, np.ndarray]:
    """Cyclic-shift detection over known positional distributions (G. Cirrincione,
    arXiv 2604.05217, the classification task of the stress experiment).

    A sequence of label 0 draws its token at position ``i`` from ``P_i``; a sequence of label 1
    from ``P_{(i + shift) mod n}``. Both classes have the same bag-of-tokens distribution (a
    permutation of positions leaves ``sum_i P_i`` unchanged), so the label depends on
    position-specific token statistics only: an encoder without positional signal is at chance.

    Args:
      P: ``[n, V]`` exact positional distributions.
      num_examples: number of sequences (labels balanced up to one).
      shift: cyclic shift of class 1, ``0 < shift < n``.
      seed: sampling seed.

    Returns:
      ``{"tokens" [M, n] int32, "labels" [M] int32, "padding_mask" [M, n] bool}``, shuffled.
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


def bayes_accuracy(P: np.ndarray, data: Mapping[str, np.ndarray], shift: int) -> float:
    """Accuracy of the likelihood-ratio rule with the exact ``P [n, V]`` on
    :func:`shift_task` examples ``data`` (the task's ceiling).

    ``LLR = sum_i log P_i(w_i) - log P_{(i+shift) mod n}(w_i)``; predict 1 when ``LLR < 0``.
    """
    n = P.shape[0]
    logp = np.log(np.maximum(P, 1e-300))
    tok = data["tokens"]
    cols = np.arange(n)[None, :]
    llr = (logp[cols, tok] - logp[(cols + shift) % n, tok]).sum(axis=1)
    return float(np.mean((llr < 0).astype(np.int32) == data["labels"]))
