"""Deterministic batching: the batch of step s depends only on (seed, s), which makes resumed
runs bit-identical to uninterrupted ones."""
from __future__ import annotations

from typing import Mapping

import numpy as np


class ArrayBatches:
    """Shuffled mini-batches of a dict of equally long arrays, as a function of the step.

    Every epoch is a fresh permutation drawn from ``(seed, epoch)``; the last incomplete batch of
    an epoch is dropped. ``batches(step)`` returns a dict of numpy arrays ``[batch_size, ...]``.
    """

    def __init__(self, arrays: Mapping[str, np.ndarray], batch_size: int, *, seed: int = 0):
        lengths = {k: len(v) for k, v in arrays.items()}
        if not lengths:
            raise ValueError("ArrayBatches needs at least one array")
        if len(set(lengths.values())) != 1:
            raise ValueError(f"arrays have different lengths: {lengths}")
        self.size = next(iter(lengths.values()))
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if self.size < batch_size:
            raise ValueError(f"dataset has {self.size} examples, fewer than batch_size={batch_size}")
        self.arrays = {k: np.asarray(v) for k, v in arrays.items()}
        self.batch_size = batch_size
        self.seed = seed
        self.steps_per_epoch = self.size // batch_size
        self._perm_epoch, self._perm = -1, None

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch != self._perm_epoch:
            self._perm = np.random.default_rng((self.seed, epoch)).permutation(self.size)
            self._perm_epoch = epoch
        return self._perm

    def __call__(self, step: int) -> dict[str, np.ndarray]:
        epoch, within = divmod(step, self.steps_per_epoch)
        idx = self._permutation(epoch)[within * self.batch_size:(within + 1) * self.batch_size]
        return {k: v[idx] for k, v in self.arrays.items()}


def iterate(arrays: Mapping[str, np.ndarray], batch_size: int):
    """Sequential (unshuffled) batches covering every example once, the last one possibly short."""
    size = len(next(iter(arrays.values())))
    for start in range(0, size, batch_size):
        yield {k: np.asarray(v)[start:start + batch_size] for k, v in arrays.items()}


def pack_sequences(sequences, length: int, *, labels=None, pad_id: int = 0
                   ) -> dict[str, np.ndarray]:
    """Pack variable-length token sequences into rows of ``length`` (first fit, in order).

    Each sequence goes into the first row with room for it, so a row holds several examples
    one after the other (docs/decoding_and_packing.md). Models given ``segment_ids`` restart
    positions at every segment and never attend across segments.

    Args:
      sequences: iterable of 1-D integer token arrays, each of length 1..``length``.
      length: row length.
      labels: optional one label per sequence (classification); packed per row in segment order.
      pad_id: token id of the padding after the last segment of a row.

    Returns:
      ``tokens [R, length]`` int32, ``segment_ids [R, length]`` int32 (1, 2, ... for the
      segments of a row, 0 on padding), ``padding_mask [R, length]`` bool (True on real tokens),
      ``example [R, S]`` int32 (index of the sequence in each segment slot, -1 where a row has
      fewer than S segments) and, with ``labels``, ``labels [R, S]`` (-1 on empty slots).
    """
    seqs = [np.asarray(s) for s in sequences]
    if length <= 0:
        raise ValueError(f"length must be positive, got {length}")
    if not seqs:
        raise ValueError("pack_sequences needs at least one sequence")
    for i, s in enumerate(seqs):
        if s.ndim != 1 or not 1 <= len(s) <= length:
            raise ValueError(f"sequence {i} has shape {s.shape}; each must be 1-D with 1 to "
                             f"{length} tokens")
        if not np.issubdtype(s.dtype, np.integer):
            raise ValueError(f"sequence {i} holds {s.dtype}, not integer token ids")
        if s.min() < 0 or s.max() > np.iinfo(np.int32).max:  # int32 rows would wrap them
            raise ValueError(f"sequence {i} holds token ids in [{s.min()}, {s.max()}], outside "
                             f"[0, 2^31 - 1]")
    if labels is not None and len(labels) != len(seqs):
        raise ValueError(f"{len(labels)} labels for {len(seqs)} sequences")
    if labels is not None and not np.issubdtype(np.asarray(labels).dtype, np.integer):
        raise ValueError(f"pack_sequences needs integer labels (class ids), got "
                         f"{np.asarray(labels).dtype}")
    rows: list[list[int]] = []  # sequence indices per row
    room: list[int] = []
    for i, s in enumerate(seqs):
        row = next((r for r, free in enumerate(room) if free >= len(s)), None)
        if row is None:
            rows.append([]), room.append(length)
            row = len(rows) - 1
        rows[row].append(i)
        room[row] -= len(s)
    width = max(len(r) for r in rows)
    tokens = np.full((len(rows), length), pad_id, np.int32)
    segment_ids = np.zeros((len(rows), length), np.int32)
    example = np.full((len(rows), width), -1, np.int32)
    for r, members in enumerate(rows):
        start = 0
        for slot, i in enumerate(members):
            n = len(seqs[i])
            tokens[r, start:start + n] = seqs[i]
            segment_ids[r, start:start + n] = slot + 1
            example[r, slot] = i
            start += n
    out = {"tokens": tokens, "segment_ids": segment_ids, "padding_mask": segment_ids > 0,
           "example": example}
    if labels is not None:
        lab = np.asarray(labels)
        out["labels"] = np.where(example >= 0, lab[np.maximum(example, 0)], -1).astype(lab.dtype)
    return out
