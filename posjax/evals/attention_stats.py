"""Attention diagnostics per layer and head, as functions of the context length: attention
entropy, mean attention distance, the mass on position 0 (the attention sink; Xiao et al.,
arXiv 2309.17453) and the local-vs-global split of the mass.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

__all__ = ["attention_diagnostics", "attention_statistics"]


def attention_statistics(weights, *, local_window: int = 8) -> dict:
    """Statistics of attention weights ``[L, B, H, Tq, Tk]`` (query ``i`` at position ``i``).

    Returns:
      ``{"entropy", "distance", "sink", "local"}``, each ``[L, H]``: the mean over batch and
      query positions of ``-sum_j a_ij log a_ij``, ``sum_j a_ij |i - j|``, ``a_i0`` and
      ``sum_{|i - j| <= local_window} a_ij`` (the global mass is ``1 - local``).
    """
    a = jnp.asarray(weights, jnp.float32)
    if a.ndim != 5:
        raise ValueError(f"attention weights must be [layers, batch, heads, Tq, Tk], got {a.shape}")
    tq, tk = a.shape[-2:]
    dist = jnp.abs(jnp.arange(tq)[:, None] - jnp.arange(tk)[None]).astype(jnp.float32)
    ent = -jnp.sum(jnp.where(a > 0, a * jnp.log(jnp.where(a > 0, a, 1.0)), 0.0), -1)
    mean = lambda x: jnp.mean(x, axis=(1, 3))                              # noqa: E731
    return {"entropy": np.asarray(mean(ent)),
            "distance": np.asarray(mean(jnp.sum(a * dist, -1))),
            "sink": np.asarray(mean(a[..., 0])),
            "local": np.asarray(mean(jnp.sum(a * (dist <= local_window), -1)))}


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _weights(graphdef, state, tokens):
    return nnx.merge(graphdef, state)(tokens, return_attention=True)[1]


def attention_diagnostics(model, tokens, *, lengths=None, local_window: int = 8) -> dict:
    """Attention statistics of a posjax ``LanguageModel`` (or ``Classifier``) on ``tokens``.

    Args:
      model: any posjax model whose call takes ``return_attention=True``.
      tokens: int ``[B, T]``.
      lengths: prefix lengths to evaluate (default ``[T]``); the statistics at length ``l`` use
        ``tokens[:, :l]``.
      local_window: the distance counted as local.

    Returns:
      ``{"lengths": [...], l: {"entropy", "distance", "sink", "local"} ([layers, heads]
      arrays, :func:`attention_statistics`)}``.
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be integer [B, T], got {tokens.dtype} {tokens.shape}")
    lengths = [tokens.shape[1]] if lengths is None else [int(l) for l in lengths]
    bad = [l for l in lengths if not 1 <= l <= tokens.shape[1]]
    if bad:
        raise ValueError(f"lengths {bad} are outside [1, {tokens.shape[1]}]")
    graphdef, state = nnx.split(model)
    out = {"lengths": lengths}
    for l in lengths:
        w = _weights(graphdef, state, jnp.asarray(tokens[:, :l], jnp.int32))
        out[l] = attention_statistics(w, local_window=local_window)
    return out
