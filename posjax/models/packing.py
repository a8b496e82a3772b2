"""Packed sequences: several examples in one row, told apart by ``segment_ids [B, T]``.

A segment is a contiguous run of equal ids (a new segment starts wherever the id changes), so
ids need only differ between neighbours. Within a packed row, positions restart at 0 at every
segment, attention never crosses segments, and pooling is per segment (docs/decoding_and_packing.md).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def check_segment_ids(segment_ids: jax.Array, batch: int, length: int) -> jax.Array:
    """Validate ``segment_ids`` (integer ``[batch, length]``) and return them as an array."""
    seg = jnp.asarray(segment_ids)
    if seg.shape != (batch, length):
        raise ValueError(f"segment_ids must have shape {(batch, length)} (like the tokens), "
                         f"got {seg.shape}")
    if not jnp.issubdtype(seg.dtype, jnp.integer):
        raise ValueError(f"segment_ids must be integers, got dtype {seg.dtype}")
    return seg


def segment_runs(segment_ids: jax.Array) -> jax.Array:
    """Index of each token's segment within its row, ``[B, T]`` int32: 0 for the first run of
    equal ids, 1 for the next, ..."""
    seg = jnp.asarray(segment_ids)
    change = (seg[:, 1:] != seg[:, :-1]).astype(jnp.int32)
    # the first column from seg itself: change[:, :1] is empty for rows of one token
    first = jnp.zeros(seg.shape[:1] + (1,), jnp.int32)
    return jnp.concatenate([first, jnp.cumsum(change, axis=1)], axis=1)


def segment_positions(segment_ids: jax.Array) -> jax.Array:
    """Positions that restart at 0 at every segment: ``[B, T]`` int32."""
    seg = jnp.asarray(segment_ids)
    idx = jnp.broadcast_to(jnp.arange(seg.shape[1], dtype=jnp.int32), seg.shape)
    start = jnp.concatenate([jnp.ones_like(seg[:, :1], bool), seg[:, 1:] != seg[:, :-1]], axis=1)
    first = jax.lax.cummax(jnp.where(start, idx, 0), axis=1)
    return idx - first


def segment_mask(q_runs: jax.Array, k_runs: jax.Array) -> jax.Array:
    """Boolean ``[B, 1, Tq, Tk]``: True where query and key are in the same segment (by run
    index, from :func:`segment_runs`)."""
    return (q_runs[:, :, None] == k_runs[:, None, :])[:, None]


def segment_pool(hidden: jax.Array, runs: jax.Array, pooling: str, num_segments: int,
                 padding_mask: jax.Array | None = None) -> jax.Array:
    """Pool ``hidden [B, T, d]`` per segment: ``[B, num_segments, d]``.

    ``cls``: the first (real) token of the segment; ``mean``: mean over its real tokens
    (``padding_mask`` True); ``last``: its last real token. Segments absent from a row give
    zeros.
    """
    if (isinstance(num_segments, bool) or not isinstance(num_segments, (int, np.integer))
            or num_segments < 1):
        raise ValueError(f"num_segments must be an integer >= 1, got {num_segments!r}")
    real = (jnp.ones(runs.shape, bool) if padding_mask is None
            else jnp.asarray(padding_mask, bool))
    if not isinstance(runs, jax.core.Tracer) and not isinstance(real, jax.core.Tracer):
        present_runs = np.asarray(jnp.where(real, runs, -1))
        if present_runs.size and int(present_runs.max()) + 1 > num_segments:
            raise ValueError(f"num_segments={num_segments} but a row holds "
                             f"{int(present_runs.max()) + 1} segments; their logits would be "
                             f"dropped")
    member = (runs[:, :, None] == jnp.arange(num_segments)[None, None, :]) & real[:, :, None]
    present = member.any(axis=1)  # [B, S]
    if pooling == "mean":
        w = member.astype(hidden.dtype)
        total = jnp.einsum("bts,btd->bsd", w, hidden)
        return total / jnp.maximum(w.sum(1), 1.0)[..., None]
    length = runs.shape[1]
    if pooling == "cls":
        idx = jnp.argmax(member, axis=1)
    elif pooling == "last":
        idx = length - 1 - jnp.argmax(member[:, ::-1], axis=1)
    else:
        raise ValueError(f"pooling must be 'cls', 'mean' or 'last', got {pooling!r}")
    out = jnp.take_along_axis(hidden, idx[..., None], axis=1)
    return jnp.where(present[..., None], out, 0)


def count_segments(segment_ids: jax.Array, padding_mask: jax.Array | None = None) -> int:
    """Largest number of segments holding a real token in any row (concrete ids only)."""
    if isinstance(segment_ids, jax.core.Tracer):
        raise ValueError("num_segments must be given when segment_ids are traced (under jit)")
    runs = segment_runs(segment_ids)
    if padding_mask is not None:
        runs = jnp.where(jnp.asarray(padding_mask, bool), runs, -1)
    return int(jnp.max(runs)) + 1 if runs.size else 0
