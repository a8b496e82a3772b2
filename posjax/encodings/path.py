"""PaTH: position encoding via accumulating Householder transformations (Yang, Shen, Wen, Tan,
Mishra, Ren, Panda, Kim, "PaTH Attention: Position Encoding via Accumulating Householder
Transformations", arXiv 2505.16381, Sec. 2).

Every token t defines a data-dependent Householder-like matrix ``H_t = I - beta_t w_t w_t^T``
(``w_t`` unit norm, ``beta_t = 2 sigmoid(.)`` in (0, 2)), and the logit of query i on key j
transforms the pair by the product of the matrices of the tokens in between:

    a_ij = q_i^T H_i H_{i-1} ... H_{j+1} k_j      (j <= i; the empty product is I).

It replaces RoPE's fixed rotations ``R^{i-j}`` by a data-dependent product (the paper uses no
other PE). The logit is computed for every query by one scan over the keys from the last to the
first, carrying ``g = H_{j+1} ... H_i q_i`` (``H`` is symmetric), restricted to the visible keys
(a masked key contributes the identity). The paper reads ``w_t`` and ``beta_t`` from the token's
input through a low-rank projection, a short convolution and an L2 norm; posjax's contextual
``logits`` hook sees the queries and keys, so here they read the head's key: ``w_t =
normalise(W_h k_t)``, ``beta_t = 2 sigmoid(u_h . k_t + c_h)``. Bidirectional models use, for
``j > i``, ``q_i^T H_{i+1} ... H_j k_j`` (a second scan, from the first key to the last).

PaTH never reads positions (relative); being a masked scan over the cached keys in sequence order,
it decodes with a key/value cache and runs packed rows.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register


def path_vectors(k: jax.Array, w_proj: jax.Array, u: jax.Array, c: jax.Array
                 ) -> tuple[jax.Array, jax.Array]:
    """Householder directions ``w [B, H, T, D]`` (unit) and strengths ``beta [B, H, T]`` from
    keys ``k [B, T, H, D]``."""
    kf = k.astype(jnp.float32)
    w = jnp.einsum("bthd,hed->bhte", kf, w_proj.astype(jnp.float32))
    w = w * jax.lax.rsqrt(jnp.sum(w * w, axis=-1, keepdims=True) + 1e-12)
    beta = 2.0 * jax.nn.sigmoid(jnp.einsum("bthd,hd->bht", kf, u.astype(jnp.float32))
                                + c.astype(jnp.float32)[:, None])
    return w, beta


def path_scores(q: jax.Array, k: jax.Array, w: jax.Array, beta: jax.Array,
                mask: jax.Array | None, *, causal: bool) -> jax.Array:
    """PaTH scores ``q_i^T (prod of H between j and i) k_j``: ``[B, H, Tq, Tk]`` (unscaled).

    Args:
      q: ``[B, Tq, H, D]``; k: ``[B, Tk, H, D]``.
      w, beta: ``[B, H, Tk, D]`` and ``[B, H, Tk]`` (:func:`path_vectors`).
      mask: boolean ``[B or 1, 1 or H, Tq, Tk]`` (True: visible) or None (all visible).
      causal: only the ``j <= i`` product (the visible keys of query i end at i); otherwise
        ``Tq == Tk`` and ``j > i`` uses ``H_{i+1} ... H_j``.
    """
    B, Tq, H, D = q.shape
    Tk = k.shape[1]
    g0 = jnp.moveaxis(q.astype(jnp.float32), 1, 2)  # [B, H, Tq, D]
    kt = jnp.moveaxis(k.astype(jnp.float32), 1, 0)  # [Tk, B, H, D]
    wt, bt = jnp.moveaxis(w, 2, 0), jnp.moveaxis(beta, 2, 0)  # [Tk, B, H, D], [Tk, B, H]
    vis = jnp.ones((B, H, Tq, Tk), bool) if mask is None else jnp.broadcast_to(mask, (B, H, Tq, Tk))
    if not causal:
        if Tq != Tk:
            raise ValueError(f"bidirectional PaTH needs Tq == Tk, got {Tq} and {Tk}")
        below = jnp.arange(Tk)[None, :] <= jnp.arange(Tq)[:, None]  # j <= i
        vis_lo, vis_hi = vis & below, vis & ~below
    else:
        vis_lo = vis
    vt = jnp.moveaxis(vis_lo, -1, 0)  # [Tk, B, H, Tq]

    def householder(g, wj, bj, apply):
        coef = bj[..., None] * jnp.einsum("bhqd,bhd->bhq", g, wj)  # [B, H, Tq]
        return g - jnp.where(apply, coef, 0.0)[..., None] * wj[:, :, None, :]

    def down(g, xs):  # keys from the last to the first: score, then fold H_j in
        kj, wj, bj, aj = xs
        score = jnp.einsum("bhqd,bhd->bhq", g, kj)
        return householder(g, wj, bj, aj), score

    _, scores = jax.lax.scan(down, g0, (kt, wt, bt, vt), reverse=True)
    scores = jnp.moveaxis(scores, 0, -1)  # [B, H, Tq, Tk]
    if causal:
        return scores

    def up(g, xs):  # keys from the first to the last: fold H_j in (j > i), then score
        kj, wj, bj, aj = xs
        g = householder(g, wj, bj, aj)
        return g, jnp.einsum("bhqd,bhd->bhq", g, kj)

    _, after = jax.lax.scan(up, g0, (kt, wt, bt, jnp.moveaxis(vis_hi, -1, 0)))
    below = jnp.arange(Tk)[None, :] <= jnp.arange(Tq)[:, None]
    return jnp.where(below, scores, jnp.moveaxis(after, 0, -1))


@dataclasses.dataclass(frozen=True)
class PathOptions:
    """Options of PaTH (arXiv 2505.16381).

    Attributes:
      beta_bias_init: initial ``c`` of ``beta = 2 sigmoid(u . k + c)`` (0: beta starts near 1).
      per_layer: one set of transform parameters per layer (the paper's; False shares them).
      bidirectional: None follows the model.
    """

    beta_bias_init: float = 0.0
    per_layer: bool = True
    bidirectional: bool | None = None


@register("path", options=PathOptions,
          paper="Yang et al., PaTH Attention: Accumulating Householder Transformations, arXiv 2505.16381")
class Path(PositionalEncoding):
    """Data-dependent Householder products between query and key (hook ``logits``); relative
    (never reads positions)."""

    is_relative = True

    def __init__(self, options: PathOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("path", "num_heads", "head_dim")
        H, D = ctx.num_heads, ctx.head_dim
        kw, ku = jax.random.split(rngs.params())
        self.w_proj = nnx.Param(jax.random.normal(kw, (H, D, D)) * D ** -0.5)
        self.beta_weight = nnx.Param(jax.random.normal(ku, (H, D)) * D ** -0.5)
        self.beta_bias = nnx.Param(jnp.full((H,), options.beta_bias_init, jnp.float32))

    @property
    def causal(self) -> bool:
        b = self.options.bidirectional
        return self.ctx.causal if b is None else not b

    def logits(self, logits, q, k, q_pos, k_pos, mask):
        w, beta = path_vectors(k, self.w_proj[...], self.beta_weight[...], self.beta_bias[...])
        scores = path_scores(q, k, w, beta, mask, causal=self.causal)
        plain = jnp.einsum("bqhd,bkhd->bhqk", q.astype(jnp.float32), k.astype(jnp.float32))
        scale = self.attention_scale(q.shape[-1])
        return logits + (scale * (scores - plain)).astype(logits.dtype)
