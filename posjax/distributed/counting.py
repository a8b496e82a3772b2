"""Sharded counting of positional distributions: every device owns a block of positions.

:func:`sharded_positional_counts` streams the corpus in batches; each batch is replicated (token
ids are small) and every device scatter-adds only the tokens at its own positions
(``jax.shard_map``), so the full ``[n, V]`` count matrix never exists on one device.
:func:`sharded_positional_distributions` turns the counts into ``P`` with the plug-in estimator
and the options of :func:`posjax.geometry.positional_distributions` (docs/interpretations.md), with
the same numbers; its rows stay split for :func:`posjax.distributed.sharded_hellinger_matrix`.

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217 (positional distributions, Algorithm 1 step 1).
"""
from __future__ import annotations

import functools
from typing import Any, Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from posjax.distributed.geometry import _resolve, _row_spec
from posjax.geometry.distributions import _batches, resolve_positions, token_positions

__all__ = ["sharded_positional_counts", "sharded_positional_distributions"]


@functools.lru_cache(maxsize=64)
def _count_fn(mesh: Mesh, axes: tuple[str, ...], n: int, reindex: bool, drop_pad: bool,
              pad_id: int | None, specials: tuple[int, ...]):
    """Jitted ``(counts [H, n_pad, V] row-sharded, bad, tokens, lengths, half) -> same``."""
    ax = axes if len(axes) > 1 else axes[0]

    def local(counts, bad, tokens, lengths, half):
        _, r, V = counts.shape
        keep, pos, oov = token_positions(tokens, lengths, V, reindex=reindex, drop_pad=drop_pad,
                                         pad_id=pad_id, specials=specials)
        local_pos = pos - lax.axis_index(ax) * r
        mine = keep & (pos < n) & (local_pos >= 0) & (local_pos < r)
        rows = jnp.where(mine, local_pos, r)  # r is out of bounds: dropped
        tok = jnp.clip(tokens, 0, V - 1)
        counts = counts.at[half[:, None], rows, tok].add(mine.astype(counts.dtype), mode="drop")
        return counts, bad + jnp.sum(oov, dtype=jnp.int32)

    spec = _row_spec(axes, 3, lead=1)
    mapped = jax.shard_map(local, mesh=mesh,
                           in_specs=(spec, PartitionSpec(), PartitionSpec(), PartitionSpec(),
                                     PartitionSpec()),
                           out_specs=(spec, PartitionSpec()))
    return jax.jit(mapped, donate_argnums=(0,))


def sharded_positional_counts(
        tokens: Any, *, vocab_size: int, num_positions: int | None = None,
        mesh: Mesh | None = None, axis: str | Sequence[str] | None = None,
        pad_id: int | None = None, lengths: Any = None, keep_special: bool = True,
        special_ids: Iterable[int] = (), pad_mode: str = "drop", split_half: bool = False,
        split_seed: int | None = None, batch_size: int = 1024
        ) -> tuple[jax.Array, int]:
    """Count ``C[h, i, w]`` = sequences (of half ``h``) with token ``w`` at position ``i``.

    The counts live row-sharded on ``mesh``: device ``k`` of the row axis owns positions
    ``[k r, (k + 1) r)`` with ``r = n_pad / D``. Options mean what they mean in
    :func:`posjax.geometry.positional_distributions`.

    Args:
      tokens: ``[num_sequences, seq_len]`` integer ids (numpy or jax), or an iterable of batches
        ``[b, L]`` / ``(tokens [b, L], lengths [b])`` (then ``num_positions`` is required).
      vocab_size: ``V``; counted ids outside ``[0, V)`` raise ValueError.
      num_positions: ``n`` (None: ``seq_len`` of an array input).
      mesh: the mesh (default :func:`row_mesh` over every device).
      axis: mesh axis name(s) the rows are split over (default: all of them).
      pad_id, lengths, keep_special, special_ids, pad_mode, split_half, split_seed, batch_size:
        as in :func:`posjax.geometry.positional_distributions`.

    Returns:
      ``(counts, seen)``: int32 ``counts [H, n_pad, V]`` (``H = 2`` with ``split_half``, else 1)
      sharded by rows, and the number of sequences read.
    """
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    if pad_mode not in ("drop", "count"):
        raise ValueError(f"pad_mode must be 'drop' or 'count', got {pad_mode!r}")
    specials = tuple(sorted(int(s) for s in special_ids))
    if not keep_special and not specials:
        raise ValueError("keep_special=False needs special_ids (the ids to strip)")
    is_array = isinstance(tokens, (np.ndarray, jax.Array))
    if num_positions is None:
        if not is_array:
            raise ValueError("the sharded counter needs num_positions= when the corpus is an "
                             "iterable of batches (the row blocks are laid out before counting)")
        num_positions = int(np.shape(tokens)[-1])
    if num_positions <= 0:
        raise ValueError(f"num_positions must be positive, got {num_positions}")
    mesh, axes, D = _resolve(mesh, axis)
    n_pad = -(-num_positions // D) * D
    H = 2 if split_half else 1
    counts = jax.device_put(jnp.zeros((H, n_pad, vocab_size), jnp.int32),
                            NamedSharding(mesh, _row_spec(axes, 3, lead=1)))
    bad = jnp.zeros((), jnp.int32)
    step = _count_fn(mesh, axes, num_positions, not keep_special, pad_mode == "drop", pad_id,
                     specials)
    key = None if split_seed is None else jax.random.key(split_seed)
    seen = 0
    for b_idx, (tok, lens, real) in enumerate(_batches(tokens, lengths, batch_size)):
        if not np.issubdtype(tok.dtype, np.integer):
            raise ValueError(f"tokens must be integer ids, got dtype {tok.dtype}")
        b = tok.shape[0]
        if not split_half:
            half = np.zeros((b,), np.int32)
        elif key is None:
            half = ((seen + np.arange(b)) % 2).astype(np.int32)
        else:
            half = jax.random.bernoulli(jax.random.fold_in(key, b_idx), 0.5, (b,)).astype(jnp.int32)
        seen += real
        counts, bad = step(counts, bad, jnp.asarray(tok, jnp.int32), jnp.asarray(lens, jnp.int32),
                           jnp.asarray(half, jnp.int32))
    if seen == 0 and not is_array:
        raise ValueError("the corpus is empty (no batches)")
    if int(bad):
        raise ValueError(f"{int(bad)} counted tokens are outside [0, vocab_size={vocab_size}); "
                         "check vocab_size, pad_id and special_ids")
    return counts, seen


@functools.partial(jax.jit, static_argnames=("n", "top_k", "dtype", "sharding"))
def _to_probabilities(counts, smoothing, *, n, top_k, dtype, sharding):
    C = counts[:, :n]
    top_ids = None
    if top_k is not None:
        _, top_ids = lax.top_k(C.sum(axis=(0, 1)), top_k)
        kept = jnp.take(C, top_ids, axis=2)
        other = C.sum(axis=2, keepdims=True) - kept.sum(axis=2, keepdims=True)
        C = jnp.concatenate([kept, other], axis=2)
    Cf = C.astype(dtype) + smoothing
    P = Cf / Cf.sum(axis=2, keepdims=True)
    if sharding is not None:  # keep the rows split (possible when n is a multiple of D)
        P = lax.with_sharding_constraint(P, sharding)
    return P, top_ids


def sharded_positional_distributions(
        tokens: Any, *, vocab_size: int, num_positions: int | None = None,
        mesh: Mesh | None = None, axis: str | Sequence[str] | None = None,
        pad_id: int | None = None, lengths: Any = None, keep_special: bool = True,
        special_ids: Iterable[int] = (), pad_mode: str = "drop", smoothing: float = 0.0,
        top_k: int | None = None, min_count: int = 1, on_empty: str = "error",
        split_half: bool = False, split_seed: int | None = None, batch_size: int = 1024,
        return_info: bool = False, dtype: Any = None):
    """Positional distributions ``P [n, V]`` and counts ``N [n]``, sharded by rows.

    The same estimator, options and numbers as :func:`posjax.geometry.positional_distributions`
    (``P_i(w) = (C_iw + alpha) / (N_i + alpha V)``, docs/interpretations.md), computed with
    :func:`sharded_positional_counts`. ``sparse=True`` is not offered here (the rows are
    already spread over devices); ``num_positions`` is required for an iterable corpus.

    Returns:
      ``(P, N)`` (``[2, n, V']`` and ``[2, n]`` with ``split_half``), plus ``info`` when
      ``return_info``. ``P`` is a global ``jax.Array`` split by rows over the mesh when ``n`` is a
      multiple of the row-axis size (XLA picks a layout otherwise).
    """
    if on_empty not in ("error", "truncate"):
        raise ValueError(f"on_empty must be 'error' or 'truncate', got {on_empty!r}")
    if smoothing < 0:
        raise ValueError(f"smoothing must be >= 0, got {smoothing}")
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    if top_k is not None and not 1 <= top_k < vocab_size:
        raise ValueError(f"top_k must be in [1, vocab_size), got {top_k}")
    explicit_n = num_positions is not None
    counts, seen = sharded_positional_counts(
        tokens, vocab_size=vocab_size, num_positions=num_positions, mesh=mesh, axis=axis,
        pad_id=pad_id, lengths=lengths, keep_special=keep_special, special_ids=special_ids,
        pad_mode=pad_mode, split_half=split_half, split_seed=split_seed, batch_size=batch_size)
    N = np.asarray(jax.jit(lambda c: c.sum(axis=2))(counts))  # [H, n_pad]: small
    width = num_positions if explicit_n else int(np.shape(tokens)[-1])
    N = N[:, :width]
    n = resolve_positions(N, width if explicit_n else None, min_count=min_count,
                          split_half=split_half, on_empty=on_empty,
                          caller="sharded_positional_distributions")
    dtype = jnp.dtype(dtype or jnp.result_type(float))
    mesh_, axes, D = _resolve(mesh, axis)
    sharding = NamedSharding(mesh_, _row_spec(axes, 3, lead=1)) if n % D == 0 else None
    P, top_ids = _to_probabilities(counts, jnp.asarray(smoothing, dtype), n=n, top_k=top_k,
                                   dtype=dtype, sharding=sharding)
    Nn = jnp.asarray(N[:, :n])
    if not split_half:
        P, Nn = P[0], Nn[0]
    if not return_info:
        return P, Nn
    c = N[:, :n].sum(axis=0)
    info = {
        "num_positions": n, "vocab_size": vocab_size, "columns": int(P.shape[-1]),
        "keep_special": keep_special, "special_ids": sorted(int(s) for s in special_ids),
        "pad_id": pad_id, "pad_mode": pad_mode, "smoothing": smoothing, "top_k": top_k,
        "min_count": min_count, "on_empty": on_empty, "split_half": split_half,
        "split_seed": split_seed,
        "top_k_ids": None if top_ids is None else np.asarray(top_ids).tolist(),
        "counts": {"min": float(c.min()), "median": float(np.median(c)), "max": float(c.max())},
        "num_sequences": seen, "num_devices": D,
    }
    return P, Nn, info
