"""``mla``: the decoupled rotary path of Multi-head Latent Attention (DeepSeek-V2, arXiv 2405.04434),
as studied in arXiv 2505.13027.

MLA-style decoupled RoPE (DeepSeek-V2, arXiv 2405.04434): a content path without
position (NoPE) in parallel with a small rotary path,

    logit_h(i, j) = ([q_C,h; R_i q_R,h] . [k_C,h; R_j k_R]) / sqrt(d_h + d_R),

with a per-head ``q_R`` (``shared_query_rope=True`` shares it across heads, as the original
code does) and one ``k_R`` shared by all heads. It is a ``rotate`` hook that *widens* q and k
from d_h to d_h + d_R dims (the attention zero-pads v to match, so the head output keeps d_h
dims, and the default ``attention_scale`` of the widened q is 1/sqrt(d_h + d_R)).
Interpretation (docs/interpretations.md): the hook sees the projected ``q, k [B, T, H, d_h]`` of all heads, so the
rotary inputs are ``q_R = W_QR vec(q) + b`` and ``k_R = W_KR vec(k) + b``: with the square
full-rank W_Q, W_K of the model this spans exactly DeepSeek's ``W_QR h`` and ``W_KR h``
(a reparametrisation; training dynamics can differ). DeepSeek's low-rank key/value
compression (d_c) is not modelled: content keys and values are full rank.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register
from posjax.encodings.rope import apply_rope, rope_frequencies, rope_table_pair
from posjax.encodings.rope_plus_abs import PAPER_A


def decoupled_rope(q_content: jax.Array, k_content: jax.Array, q_rope: jax.Array,
                   k_rope: jax.Array, q_pos: jax.Array, k_pos: jax.Array, *,
                   base: float = 10000.0, interleaved: bool = True,
                   tables: tuple | None = None) -> tuple[jax.Array, jax.Array]:
    """Widened queries and keys of decoupled (MLA-style) RoPE.

    Returns ``q' = [q_C; R_i q_R]`` and ``k' = [k_C; R_j k_R]`` (``[B, T, H, d_h + d_R]``), so that
    ``q'_i . k'_j = q_C . k_C + q_R^T R_{j-i} k_R``: the content term carries no position and the
    rotary term depends on positions only through ``j - i`` (DeepSeek-V2, arXiv 2405.04434).

    Args:
      q_content, k_content: ``[B, T, H, d_h]`` content queries and keys.
      q_rope: ``[B, Tq, H or 1, d_R]`` rotary queries (per head, or one shared by all heads).
      k_rope: ``[B, Tk, H or 1, d_R]`` rotary keys (one shared by all heads in DeepSeek).
      q_pos, k_pos: ``[T]`` or ``[B, T]`` positions.
      base, interleaved: RoPE frequency base and pairing convention.
      tables: optional ``(q_tables, k_tables)`` of
        :func:`posjax.encodings.rope.rope_table_pair` at these positions and base.
    """
    heads = q_content.shape[-2]
    q_tab, k_tab = (None, None) if tables is None else tables
    qr = apply_rope(q_rope, q_pos, base=base, interleaved=interleaved, tables=q_tab)
    kr = apply_rope(k_rope, k_pos, base=base, interleaved=interleaved, tables=k_tab)
    qr = jnp.broadcast_to(qr, (*qr.shape[:-2], heads, qr.shape[-1])).astype(q_content.dtype)
    kr = jnp.broadcast_to(kr, (*kr.shape[:-2], heads, kr.shape[-1])).astype(k_content.dtype)
    return jnp.concatenate([q_content, qr], -1), jnp.concatenate([k_content, kr], -1)


@dataclasses.dataclass(frozen=True)
class MLAOptions:
    """Options of the ``mla`` PE (arXiv 2505.13027).

    Attributes:
      rope_dim: d_R, width of the rotary path per head (default 16).
      base: RoPE base of the rotary path.
      interleaved: RoPE pairing of the rotary path (arXiv 2505.13027: interleaved).
      shared_query_rope: one q_R for all heads (the original code, part of ``faithful_mla``)
        instead of DeepSeek's per-head q_R (standard default).
    """

    rope_dim: int = 16
    base: float = 10000.0
    interleaved: bool = True
    shared_query_rope: bool = False

    def validate(self, ctx: PEContext) -> None:
        if self.rope_dim <= 0 or self.rope_dim % 2:
            raise ValueError(f"mla rope_dim must be a positive even number, got {self.rope_dim}")
        if self.base <= 1.0:
            raise ValueError(f"mla base must be > 1, got {self.base}")


@register("mla", options=MLAOptions,
          paper=f"decoupled RoPE of DeepSeek-V2 (arXiv 2405.04434), as studied in {PAPER_A}")
class MLA(PositionalEncoding):
    """Decoupled rotary path of MLA (hook ``rotate``, widening q and k; one copy per layer).

    Parameters: ``q_rope: H*d_h -> H*d_R`` (``d_R`` when shared) and ``k_rope: H*d_h -> d_R``.
    Relative: the logits depend on positions only through ``j - i``.
    """

    is_relative = True

    def __init__(self, options: MLAOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("mla", "num_heads", "head_dim")
        width = ctx.num_heads * ctx.head_dim
        q_heads = 1 if options.shared_query_rope else ctx.num_heads
        self.q_rope = nnx.Linear(width, q_heads * options.rope_dim, rngs=rngs)
        self.k_rope = nnx.Linear(width, options.rope_dim, rngs=rngs)

    @property
    def per_layer(self) -> bool:
        return True

    def prepare(self, q_pos, k_pos):
        """The rotary path's ``(q_tables, k_tables)`` (:func:`rope_table_pair`)."""
        o = self.options
        return rope_table_pair(q_pos, k_pos, rope_frequencies(o.rope_dim, o.base, np.float64))

    def rotate(self, q, k, q_pos, k_pos):
        return self.rotate_prepared(q, k, q_pos, k_pos, self.prepare(q_pos, k_pos))

    def rotate_prepared(self, q, k, q_pos, k_pos, prepared):
        d_r = self.options.rope_dim
        q_r = self.q_rope(q.reshape(*q.shape[:-2], -1))
        k_r = self.k_rope(k.reshape(*k.shape[:-2], -1))
        o = self.options
        return decoupled_rope(q, k, q_r.reshape(*q_r.shape[:-1], -1, d_r), k_r[..., None, :],
                              q_pos, k_pos, base=o.base, interleaved=o.interleaved,
                              tables=prepared)
