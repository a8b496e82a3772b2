"""Multi-head self-attention with the three PE hooks (embed happens outside; rotate and bias here).

The fast path is ``jax.nn.dot_product_attention`` (so a fused cuDNN kernel can be selected on
GPU); an explicit softmax path is used when attention weights are requested or when dropout on
the attention weights is active. Both compute the same function.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PositionalEncoding


def attention_weights(q: jax.Array, k: jax.Array, *, scale: float, bias: jax.Array | None,
                      mask: jax.Array | None) -> jax.Array:
    """Softmax attention weights ``[B, H, Tq, Tk]`` from ``q [B, Tq, H, D]``, ``k [B, Tk, H, D]``."""
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) * scale
    if bias is not None:
        logits = logits + bias.astype(jnp.float32)
    if mask is not None:
        logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
    return jax.nn.softmax(logits, axis=-1)


def broadcast_bias(bias: jax.Array | None) -> jax.Array | None:
    """Bring a PE bias ``[H, Tq, Tk]`` or ``[B, H, Tq, Tk]`` to rank 4."""
    if bias is None or bias.ndim == 4:
        return bias
    if bias.ndim == 3:
        return bias[None]
    raise ValueError(f"a PE bias must be [H, Tq, Tk] or [B, H, Tq, Tk], got shape {bias.shape}")


class SelfAttention(nnx.Module):
    """Multi-head self-attention ``[B, T, d] -> [B, T, d]`` with PE hooks and a head mask."""

    def __init__(self, d_model: int, num_heads: int, *, attn_dropout: float = 0.0,
                 dtype=jnp.float32, implementation: str | None = None, rngs: nnx.Rngs):
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.dtype = dtype
        self.implementation = implementation
        self.query = nnx.Linear(d_model, d_model, dtype=dtype, rngs=rngs)
        self.key = nnx.Linear(d_model, d_model, dtype=dtype, rngs=rngs)
        self.value = nnx.Linear(d_model, d_model, dtype=dtype, rngs=rngs)
        self.out = nnx.Linear(d_model, d_model, dtype=dtype, rngs=rngs)
        self.dropout = nnx.Dropout(attn_dropout)
        self.attn_dropout = attn_dropout

    def _heads(self, x: jax.Array) -> jax.Array:
        return x.reshape(*x.shape[:-1], self.num_heads, self.head_dim)

    def __call__(self, x: jax.Array, *, pe: PositionalEncoding, positions: jax.Array,
                 bias: jax.Array | None = None, mask: jax.Array | None = None,
                 head_mask: jax.Array | None = None, kv: jax.Array | None = None,
                 deterministic: bool = True, rngs: nnx.Rngs | None = None,
                 return_weights: bool = False):
        """Args:
          x: ``[B, T, d]`` inputs (queries; also keys/values unless ``kv`` is given).
          pe: the layer's PE; its ``rotate`` hook is applied to q and k.
          positions: ``[B or 1, T]`` positions.
          bias: ``[B or 1, H, T, T]`` additive logit bias (from the PE's ``bias`` hook).
          mask: boolean ``[B or 1, 1, T, T]``; False entries are not attended.
          head_mask: ``[H]`` multipliers of each head's output before the output projection.
          kv: optional ``[B, T, d]`` source of keys and values.
          return_weights: also return the ``[B, H, T, T]`` attention weights.
        """
        src = x if kv is None else kv
        q, k, v = self._heads(self.query(x)), self._heads(self.key(src)), self._heads(self.value(src))
        q, k = pe.rotate(q, k, positions, positions)
        scale = pe.attention_scale(q.shape[-1])
        use_dropout = self.attn_dropout > 0.0 and not deterministic
        weights = None
        if return_weights or use_dropout:
            weights = attention_weights(q, k, scale=scale, bias=bias, mask=mask)
            probs = self.dropout(weights, deterministic=deterministic, rngs=rngs)
            out = jnp.einsum("bhqk,bkhd->bqhd", probs.astype(v.dtype), v)
        else:
            out = jax.nn.dot_product_attention(
                q, k, v, bias=None if bias is None else bias.astype(q.dtype), mask=mask,
                scale=scale, implementation=self.implementation)
        if head_mask is not None:
            out = out * head_mask.astype(out.dtype)[:, None]
        out = self.out(out.reshape(*out.shape[:-2], -1))
        return (out, weights) if return_weights else out
