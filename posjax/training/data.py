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
