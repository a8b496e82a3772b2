"""Training-time position schemes that work with any PE.

* :func:`randomized_positions`: randomized positional encodings (Ruoss et al., "Randomized
  Positional Encodings Boost Length Generalization of Transformers", arXiv 2305.16843, Sec. 3):
  each training sequence of length n gets the positions of an ordered random subset of n
  distinct integers of ``[0, M)``, M the largest test length, so that every position a test
  sequence uses was seen in training. Used by :func:`posjax.training.train` when
  ``TrainConfig.random_positions = M``.
* :func:`check_position_range`: a table-based PE (learned, ...) must hold all M positions.

The schedule of PEs over training steps (e.g. DroPE, arXiv 2512.12167) is
``TrainConfig.pe_schedule`` (see :func:`posjax.training.train`).
"""
from __future__ import annotations

import numpy as np
from flax import nnx


def randomized_positions(batch_size: int, length: int, max_range: int, *, seed: int = 0,
                         step: int = 0) -> np.ndarray:
    """Positions ``[batch_size, length]`` int32: row b is a sorted sample without replacement of
    ``length`` integers from ``[0, max_range)`` (strictly increasing), drawn from a generator
    seeded by ``(seed, step)``, so a step's positions do not depend on earlier steps (bit-identical
    resumption). Position k of a row is the k-th order statistic of a uniform ``length``-subset:
    ``P(pos_k = j) = C(j, k) C(M - 1 - j, n - 1 - k) / C(M, n)``.

    Raises:
      ValueError: ``length > max_range`` (no n distinct positions), or non-positive sizes.
    """
    for name, v in (("batch_size", batch_size), ("length", length), ("max_range", max_range)):
        if int(v) != v or v <= 0:
            raise ValueError(f"randomized_positions: {name} must be a positive int, got {v!r}")
    if length > max_range:
        raise ValueError(f"randomized_positions: sequence length {length} > max_range "
                         f"{max_range}: the positions of a row must be distinct")
    rng = np.random.default_rng([int(seed), int(step), 0x2305_16843])
    # the n smallest of M uniform keys index a uniform n-subset (argpartition: O(M) per row)
    keys = rng.random((int(batch_size), int(max_range)))
    picks = np.argpartition(keys, int(length) - 1, axis=1)[:, :int(length)]
    return np.sort(picks, axis=1).astype(np.int32)


def check_position_range(model: nnx.Module, max_range: int, *, what: str = "random_positions"
                         ) -> None:
    """Raise ValueError when a table-based PE of ``model`` holds fewer than ``max_range``
    positions (its ``max_positions``), naming the PE, its table size and the option."""
    for _, node in nnx.iter_graph(model):
        limit = getattr(node, "max_positions", None) if hasattr(node, "hooks") else None
        if isinstance(limit, int) and limit < max_range:
            raise ValueError(
                f"TrainConfig.{what}={max_range} needs positions up to {max_range - 1}, but the "
                f"'{getattr(node, 'name', type(node).__name__)}' PE's table holds {limit} "
                f"positions (max_len={limit}); build the model with max_len >= {max_range} or "
                f"use a PE without a table")
