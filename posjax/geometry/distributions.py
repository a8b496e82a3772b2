"""Positional distributions ``P_i(w)`` estimated from a tokenised corpus (docs/interpretations.md).

The plug-in estimator: ``N_i`` is the number of sequences that have a (counted) token at
position ``i`` and ``P_i(w) = #{m : w_i^(m) = w} / N_i``. Counting is a scatter-add into a
``[n, V]`` (or ``[2, n, V]`` for split halves) integer array that lives on the default device;
the corpus is streamed in batches, so it never has to fit in memory at once.

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217 (positional distributions, Algorithm 1 step 1).
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Iterable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsparse

__all__ = ["positional_distributions", "counts_summary"]

_PAD_MODES = ("drop", "count")
_ON_EMPTY = ("error", "truncate")


def token_positions(tokens, lengths, vocab_size, *, reindex, drop_pad, pad_id, specials):
    """Which tokens of ``tokens [b, L]`` count, at which position, and which are out of range.

    Returns ``(keep [b, L], pos [b, L], oov [b, L])``: tokens inside the sequence length, not a
    stripped special (``reindex``: positions re-indexed over the kept tokens) and not a dropped
    pad; ``oov`` marks kept ids outside ``[0, vocab_size)`` (they are not kept).
    """
    col = jnp.arange(tokens.shape[1], dtype=jnp.int32)[None, :]
    keep = col < lengths[:, None]
    if reindex and specials:
        keep = keep & ~jnp.isin(tokens, jnp.asarray(specials, tokens.dtype))
    if drop_pad and pad_id is not None:
        keep = keep & (tokens != pad_id)
    pos = (jnp.cumsum(keep, axis=1, dtype=jnp.int32) - 1 if reindex
           else jnp.broadcast_to(col, tokens.shape))
    oov = keep & ((tokens < 0) | (tokens >= vocab_size))
    return keep & ~oov, pos, oov


@functools.partial(jax.jit, static_argnames=("reindex", "drop_pad", "pad_id", "specials"),
                   donate_argnums=(0,))
def _count_batch(counts, bad, tokens, lengths, half, *, reindex, drop_pad, pad_id, specials):
    """Scatter-add one batch ``tokens [b, L]`` into ``counts [H, n, V]``."""
    _, n, V = counts.shape
    keep, pos, oov = token_positions(tokens, lengths, V, reindex=reindex, drop_pad=drop_pad,
                                     pad_id=pad_id, specials=specials)
    pos = jnp.where(keep, pos, n)  # index n is out of bounds: dropped
    tok = jnp.clip(tokens, 0, V - 1)
    counts = counts.at[half[:, None], pos, tok].add(keep.astype(counts.dtype), mode="drop")
    return counts, bad + jnp.sum(oov, dtype=jnp.int32)


def _batches(tokens: Any, lengths: Any, batch_size: int
             ) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """Yield ``(tokens [b, L], lengths [b], real_rows)``; array input comes in blocks of one
    fixed ``b`` (the last block is padded with empty rows, so one compiled shape suffices)."""
    if isinstance(tokens, (np.ndarray, jax.Array)):
        arr = tokens if tokens.ndim == 2 else tokens.reshape(1, -1)
        lens = (np.full(arr.shape[0], arr.shape[1], np.int32) if lengths is None
                else np.asarray(lengths, np.int32).reshape(-1))
        if lens.shape[0] != arr.shape[0]:
            raise ValueError(f"lengths has {lens.shape[0]} entries but tokens has "
                             f"{arr.shape[0]} sequences")
        b = min(batch_size, max(arr.shape[0], 1))
        for s in range(0, arr.shape[0], b):
            chunk, clen = arr[s:s + b], lens[s:s + b]
            real = chunk.shape[0]
            if real < b:
                pad = b - real
                chunk = jnp.concatenate([_int_ids(chunk), jnp.zeros((pad, arr.shape[1]),
                                                                   jnp.int32)])
                clen = np.concatenate([clen, np.zeros(pad, np.int32)])
            yield chunk, clen, real
        return
    if lengths is not None:
        raise ValueError("lengths= is only accepted with an array of tokens; an iterable yields "
                         "(tokens, lengths) tuples instead")
    for item in tokens:
        if isinstance(item, tuple):
            tok, lens = item
            tok = np.asarray(tok) if not isinstance(tok, jax.Array) else tok
            lens = np.asarray(lens, np.int32).reshape(-1)
        else:
            tok = item if isinstance(item, jax.Array) else np.asarray(item)
            lens = None
        if tok.ndim == 1:
            tok = tok.reshape(1, -1)
        if tok.ndim != 2:
            raise ValueError(f"each batch must be [batch, seq_len] tokens, got shape {tok.shape}")
        if lens is None:
            lens = np.full(tok.shape[0], tok.shape[1], np.int32)
        if lens.shape[0] != tok.shape[0]:
            raise ValueError(f"a batch has {tok.shape[0]} sequences but {lens.shape[0]} lengths")
        yield tok, lens, tok.shape[0]


def _int_ids(tok: Any) -> jax.Array:
    """Token ids as an int32 device array (ValueError for non-integer input)."""
    if not jnp.issubdtype(tok.dtype, jnp.integer):
        raise ValueError(f"tokens must be integer ids, got dtype {tok.dtype}")
    return jnp.asarray(np.asarray(tok, np.int32) if isinstance(tok, np.ndarray)
                       else tok.astype(jnp.int32))


def counts_summary(counts: Any) -> dict[str, float]:
    """``{"min", "median", "max"}`` of the per-position sample counts ``N_i`` (results files)."""
    c = np.asarray(counts).reshape(-1)
    return {"min": float(c.min()), "median": float(np.median(c)), "max": float(c.max())}


def positional_distributions(
        tokens: Any, *, vocab_size: int, num_positions: int | None = None,
        pad_id: int | None = None, lengths: Any = None, keep_special: bool = True,
        special_ids: Iterable[int] = (), pad_mode: str = "drop", smoothing: float = 0.0,
        top_k: int | None = None, min_count: int = 1, on_empty: str = "error",
        split_half: bool = False, split_seed: int | None = None, batch_size: int = 1024,
        sparse: bool = False, return_info: bool = False, dtype: Any = None):
    """Estimate positional distributions ``P [n, V]`` and sample counts ``N [n]``.

    ``P_i(w) = (C_iw + alpha) / (N_i + alpha V)`` with ``C_iw`` the number of sequences whose
    token at position ``i`` is ``w`` and ``N_i = sum_w C_iw`` (docs/interpretations.md).

    Args:
      tokens: integer token ids, either one array ``[num_sequences, seq_len]`` (numpy or jax)
        or an iterable of batches, each ``[b, L]`` (``L`` may vary between batches), a single
        sequence ``[L]``, or a tuple ``(tokens [b, L], lengths [b])``.
      vocab_size: ``V``; a counted token outside ``[0, V)`` raises ValueError.
      num_positions: ``n``; None uses the last position that holds any token.
      pad_id: the padding id (None: no padding).
      lengths: ``[num_sequences]`` true lengths (array input only); tokens at or beyond a
        sequence's length are ignored.
      keep_special: True (default) counts special tokens like any other (so with BERT inputs
        ``P_0 = delta_[CLS]``); False strips ``special_ids`` and re-indexes content from 0.
      special_ids: the special ids stripped when ``keep_special=False``.
      pad_mode: ``"drop"`` (default: ``P_i`` is conditional on position ``i`` existing) or
        ``"count"`` (``pad_id`` is an ordinary token).
      smoothing: additive (Laplace) smoothing ``alpha >= 0``.
      top_k: keep the ``K`` most frequent tokens (over all kept positions, ties by id) plus one
        OTHER bucket as the last column; ``P`` is then ``[n, K + 1]``.
      min_count: positions with ``N_i < min_count`` are reported by ``on_empty``.
      on_empty: ``"error"`` (default) raises ValueError naming the positions with
        ``N_i < min_count`` (an empty position would otherwise be a row of NaN);
        ``"truncate"`` keeps the positions before the first such position and warns (this is
        how ``min_count`` "effectively sets n").
      split_half: also split the corpus by sequence into halves A and B (for
        ``debias="split_half"``); the outputs gain a leading axis of size 2.
      split_seed: None assigns sequences alternately (even index -> A); an int assigns them by
        a seeded coin flip.
      batch_size: sequences per device batch when ``tokens`` is one array.
      sparse: return ``P`` as a ``jax.experimental.sparse.BCOO`` (the counts are still dense
        on device while counting).
      return_info: also return a dict with the options, ``top_k_ids`` and a counts summary.
      dtype: floating dtype of ``P`` (default: the JAX default float).

    Returns:
      ``(P, counts)``: ``P [n, V']`` (``[2, n, V']`` with ``split_half``), rows summing to one,
      and integer ``counts [n]`` (``[2, n]``); plus ``info`` when ``return_info``.

    Raises:
      ValueError: bad options, out-of-vocabulary tokens, an empty corpus, or positions with too
        few samples under ``on_empty="error"``.
    """
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    if pad_mode not in _PAD_MODES:
        raise ValueError(f"pad_mode must be one of {_PAD_MODES}, got {pad_mode!r}")
    if on_empty not in _ON_EMPTY:
        raise ValueError(f"on_empty must be one of {_ON_EMPTY}, got {on_empty!r}")
    if smoothing < 0:
        raise ValueError(f"smoothing must be >= 0, got {smoothing}")
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    if top_k is not None and not 1 <= top_k < vocab_size:
        raise ValueError(f"top_k must be in [1, vocab_size), got {top_k}")
    if num_positions is not None and num_positions <= 0:
        raise ValueError(f"num_positions must be positive, got {num_positions}")
    if sparse and split_half:
        raise ValueError("sparse=True is not supported together with split_half=True")
    specials = tuple(sorted(int(s) for s in special_ids))
    if not keep_special and not specials:
        raise ValueError("keep_special=False needs special_ids (the ids to strip)")
    H = 2 if split_half else 1
    key = None if split_seed is None else jax.random.key(split_seed)

    counts = None
    bad = jnp.zeros((), jnp.int32)
    seen = 0
    for b_idx, (tok, lens, real) in enumerate(_batches(tokens, lengths, batch_size)):
        tok = _int_ids(tok)
        width = num_positions if num_positions is not None else tok.shape[1]
        if counts is None:
            counts = jnp.zeros((H, width, vocab_size), jnp.int32)
        elif counts.shape[1] < width:  # a longer batch arrived (num_positions=None)
            counts = jnp.pad(counts, ((0, 0), (0, width - counts.shape[1]), (0, 0)))
        b = tok.shape[0]
        if not split_half:
            half = jnp.zeros((b,), jnp.int32)
        elif key is None:
            half = jnp.asarray((seen + np.arange(b)) % 2, jnp.int32)
        else:
            half = jax.random.bernoulli(jax.random.fold_in(key, b_idx), 0.5, (b,)).astype(jnp.int32)
        seen += real
        counts, bad = _count_batch(counts, bad, tok, jnp.asarray(lens, jnp.int32), half,
                                   reindex=not keep_special, drop_pad=pad_mode == "drop",
                                   pad_id=pad_id, specials=specials)
    if counts is None:
        raise ValueError("the corpus is empty (no batches)")
    if int(bad):
        raise ValueError(f"{int(bad)} counted tokens are outside [0, vocab_size={vocab_size}); "
                         "check vocab_size, pad_id and special_ids")

    N = np.asarray(counts.sum(axis=2))  # [H, n]
    n = resolve_positions(N, num_positions, min_count=min_count, split_half=split_half,
                          on_empty=on_empty)
    C = counts[:, :n]
    top_ids = None
    if top_k is not None:
        freq = C.sum(axis=(0, 1))
        _, top_ids = jax.lax.top_k(freq, top_k)
        kept = jnp.take(C, top_ids, axis=2)
        other = C.sum(axis=2, keepdims=True) - kept.sum(axis=2, keepdims=True)
        C = jnp.concatenate([kept, other], axis=2)
    dtype = dtype or jnp.result_type(float)
    Cf = C.astype(dtype) + smoothing
    P = Cf / Cf.sum(axis=2, keepdims=True)
    Nn = jnp.asarray(N[:, :n])
    if not split_half:
        P, Nn = P[0], Nn[0]
        if sparse:
            P = jsparse.BCOO.fromdense(P)
    if not return_info:
        return P, Nn
    info = {
        "num_positions": n, "vocab_size": vocab_size, "columns": int(C.shape[2]),
        "keep_special": keep_special, "special_ids": list(specials), "pad_id": pad_id,
        "pad_mode": pad_mode, "smoothing": smoothing, "top_k": top_k, "min_count": min_count,
        "on_empty": on_empty, "split_half": split_half, "split_seed": split_seed,
        "top_k_ids": None if top_ids is None else np.asarray(top_ids).tolist(),
        "counts": counts_summary(N[:, :n].sum(axis=0)), "num_sequences": seen,
    }
    return P, Nn, info


def resolve_positions(N: np.ndarray, num_positions: int | None, *, min_count: int,
                      split_half: bool, on_empty: str, caller: str = "positional_distributions"
                      ) -> int:
    """Number of positions ``n`` to keep from per-half counts ``N [H, width]``.

    ``n`` is ``num_positions`` or the last position with any count; positions with fewer than
    ``min_count`` samples (or an empty half with ``split_half``) raise ValueError naming them
    (``on_empty="error"``) or truncate ``n`` before the first of them with a warning.
    """
    total = N.sum(axis=0)
    if num_positions is None:
        nonzero = np.flatnonzero(total > 0)
        if nonzero.size == 0:
            raise ValueError("no token was counted (all positions empty)")
        n = int(nonzero[-1]) + 1
    else:
        n = num_positions
    low = np.flatnonzero(total[:n] < min_count)
    if split_half:
        low = np.union1d(low, np.flatnonzero((N[:, :n] == 0).any(axis=0)))
    if low.size:
        listing = ", ".join(f"{i} (N={int(total[i])})" for i in low[:10])
        more = "..." if low.size > 10 else ""
        if on_empty == "error":
            raise ValueError(
                f"{low.size} positions have fewer than min_count={min_count} samples"
                f"{' (or an empty half)' if split_half else ''}: {listing}{more}; lower "
                "num_positions, or pass on_empty='truncate'")
        n = int(low[0])
        if n == 0:
            raise ValueError(f"position 0 has fewer than min_count={min_count} samples")
        warnings.warn(f"{caller}: truncated to n={n} positions (first position below "
                      f"min_count={min_count}: {listing}{more})", stacklevel=3)
    return n
