"""Perplexity as the evaluation context grows: token-level NLL by context length and by
position (the measurement of ALiBi, arXiv 2108.12409, Sec. 4; position interpolation, arXiv
2306.15595; YaRN, arXiv 2309.00071; the controlled comparison of arXiv 2409.12181).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

__all__ = ["perplexity_by_length", "token_nll"]


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _nll(graphdef, state, inputs, targets):
    return nnx.merge(graphdef, state).loss(inputs, targets)


def token_nll(model, inputs, targets) -> np.ndarray:
    """Per-token negative log-likelihood ``[B, T]`` (float32) of ``targets`` given ``inputs``
    under a causal posjax ``LanguageModel`` (its ``loss``), jitted."""
    graphdef, state = nnx.split(model)
    return np.asarray(_nll(graphdef, state, jnp.asarray(inputs, jnp.int32),
                           jnp.asarray(targets, jnp.int32)))


def _batched_nll(model, windows: np.ndarray, batch_size: int) -> np.ndarray:
    """NLL ``[W, L]`` of windows ``[W, L + 1]`` in equal batches (the last one padded by
    repeating its first row), so one compiled program serves every batch."""
    size = min(batch_size, len(windows))
    pad = (-len(windows)) % size
    padded = np.concatenate([windows, np.repeat(windows[:1], pad, axis=0)])
    graphdef, state = nnx.split(model)
    out = [np.asarray(_nll(graphdef, state, jnp.asarray(w[:, :-1], jnp.int32),
                           jnp.asarray(w[:, 1:], jnp.int32)))
           for w in padded.reshape(-1, size, windows.shape[1])]
    return np.concatenate(out)[:len(windows)]


def _windows(stream: np.ndarray, length: int, stride: int | None):
    """``(starts, first_scored)``: windows of ``length + 1`` tokens and, per window, the first
    target index that is scored (sliding mode scores each target once)."""
    total = stream.shape[-1]
    if stride is None:
        starts = np.arange(0, total - length, length)
        starts = starts[starts + length + 1 <= total]
        return starts, np.zeros(len(starts), int)
    starts = np.arange(0, total - length, stride)
    starts = starts[starts + length + 1 <= total]
    first = np.where(np.arange(len(starts)) == 0, 0, length - stride)
    return starts, first


def perplexity_by_length(model, tokens, lengths, *, stride: int | None = None,
                         batch_size: int = 16) -> dict:
    """Token-level NLL and perplexity of a causal LM at several evaluation context lengths.

    ``tokens [N, T]`` are ``N`` independent streams (one row: one contiguous stream). For each
    context length ``L``:

    * ``stride=None`` (non-overlapping): each row is cut into consecutive windows of ``L``
      predicted tokens (``L + 1`` tokens: input ``w[:-1]``, target ``w[1:]``, the window's last
      token starting the next one); every target is scored with the context of its window.
    * ``stride=s`` (sliding, ``1 <= s <= L``): windows of ``L + 1`` tokens start every ``s``
      tokens; the first window scores all its targets, the others only their last ``s``, so
      every target after the first window is scored with at least ``L - s`` tokens of context.

    Args:
      model: a causal posjax ``LanguageModel``.
      tokens: int ``[N, T]`` (or ``[T]``).
      lengths: context lengths ``L`` (each ``< T``).
      stride: None or the sliding stride.
      batch_size: windows per model call.

    Returns:
      ``{"lengths", "nll" [len], "perplexity" [len], "tokens_scored" [len],
      "nll_by_position": {L: [L] mean NLL of targets at window position j (NaN where none is
      scored)}}``.

    Raises:
      ValueError: a non-causal model, a length the streams cannot hold, a bad stride.
    """
    from posjax.models import LanguageModel
    if not isinstance(model, LanguageModel) or not model.config.causal:
        raise ValueError("perplexity_by_length needs a causal posjax LanguageModel")
    tokens = np.asarray(tokens)
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be integer [N, T], got {tokens.dtype} {tokens.shape}")
    if tokens.min() < 0 or tokens.max() >= model.config.vocab_size:
        raise ValueError(f"token ids span [{tokens.min()}, {tokens.max()}] outside the "
                         f"vocabulary [0, {model.config.vocab_size - 1}]")
    lengths = [int(L) for L in lengths]
    out = {"lengths": lengths, "nll": [], "perplexity": [], "tokens_scored": [],
           "nll_by_position": {}}
    for L in lengths:
        if L < 1 or L + 1 > tokens.shape[1]:
            raise ValueError(f"context length {L} needs streams of >= {L + 1} tokens; they have "
                             f"{tokens.shape[1]}")
        if stride is not None and not 1 <= stride <= L:
            raise ValueError(f"stride must be in [1, {L}] for context length {L}, got {stride}")
        starts, first = _windows(tokens, L, stride)
        idx = starts[:, None] + np.arange(L + 1)[None]                       # [W, L + 1]
        windows = tokens[:, idx].reshape(-1, L + 1)                         # [N * W, L + 1]
        first_all = np.tile(first, tokens.shape[0])
        nll = _batched_nll(model, windows, batch_size)
        scored = np.arange(L)[None] >= first_all[:, None]                  # [N * W, L]
        total = float(np.sum(nll * scored))
        count = int(scored.sum())
        mean = total / count
        with np.errstate(invalid="ignore"):
            by_pos = np.where(scored.any(0), (nll * scored).sum(0) / scored.sum(0), np.nan)
        out["nll"].append(mean)
        out["perplexity"].append(float(np.exp(mean)))
        out["tokens_scored"].append(count)
        out["nll_by_position"][L] = by_pos.tolist()
    return out
