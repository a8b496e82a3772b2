"""Masked-language-model inputs from token windows: BERT's masking recipe with a fixed number
of targets per window (static shapes), and a block-wise train / held-out split of windows.

BERT masking (Devlin et al., arXiv 1810.04805, Sec. 3.1): of the chosen target positions 80 %
become ``[MASK]``, 10 % a random token, 10 % stay unchanged; the loss is taken at the targets.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def split_windows(windows: np.ndarray, eval_windows: int) -> tuple[np.ndarray, np.ndarray]:
    """``(train, held_out)`` of ``windows [W, n]``: blocks of 10 consecutive windows, every 10th
    block held out (the first ``eval_windows`` of its windows), so that both halves sample the
    whole corpus of a contiguous stream. ValueError when fewer windows are held out."""
    block = np.arange(len(windows)) // 10
    held = block % 10 == 9
    if held.sum() < eval_windows:
        raise ValueError(f"only {int(held.sum())} held-out windows for eval_windows="
                         f"{eval_windows}; lower eval_windows or max_len")
    return windows[~held], windows[held][:eval_windows]


def mask_windows(windows: np.ndarray, k: int, *, vocab_size: int, mask_id: int,
                 special: Sequence[int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """BERT masking with exactly ``k`` targets per window among positions ``1..n-2`` (the first
    and last positions hold ``[CLS]`` / ``[SEP]``).

    Args:
      windows: ``[B, n]`` token ids.
      k: targets per window (``<= n - 2``).
      vocab_size, mask_id: the vocabulary and the ``[MASK]`` id.
      special: ids never drawn as random replacements.
      rng: the generator (the same state gives the same masks).

    Returns ``tokens [B, n]`` int32 (the input: 80 % of targets ``[MASK]``, 10 % a random
    non-special token, 10 % kept), ``where [B, k]`` (target positions, sorted) and
    ``targets [B, k]`` (the original ids).
    """
    B, n = windows.shape
    if k > n - 2:
        raise ValueError(f"cannot mask {k} of {n - 2} content positions")
    where = np.sort(np.argsort(rng.random((B, n - 2)), axis=1)[:, :k] + 1, axis=1)
    targets = np.take_along_axis(windows, where, axis=1)
    tokens = windows.copy()
    u = rng.random((B, k))
    special = np.asarray(sorted(set(special)), np.int64)
    normal = np.setdiff1d(np.arange(vocab_size), special)
    random_ids = normal[rng.integers(0, len(normal), (B, k))]
    new = np.where(u < 0.8, mask_id, np.where(u < 0.9, random_ids, targets))
    np.put_along_axis(tokens, where, new, axis=1)
    return {"tokens": tokens.astype(np.int32), "where": where.astype(np.int32),
            "targets": targets.astype(np.int32)}
