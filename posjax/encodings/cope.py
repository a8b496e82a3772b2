"""CoPE: contextual position encoding (Golovneva, Wang, Weston, Sukhbaatar, "Contextual Position
Encoding: Learning to Count What's Important", arXiv 2405.18719, Sec. 3).

Positions are counted by the model rather than by tokens. Each query decides, through a gate per
key, which previous tokens count:

    g_ij = sigmoid(a_ij),    p_ij = sum_{t = j}^{i} g_it,                (Eq. 3-4)

with ``a_ij`` the attention logit of the pair (scaled ``q_i . k_j``). The fractional position is
embedded by interpolating learned vectors ``e[0..P-1]`` (shared by the heads of a layer) and
enters through the query (Eq. 5-6):

    z_i[n] = q_i . e[n],   b_ij = (1 - w) z_i[floor p_ij] + w z_i[ceil p_ij],  w = p_ij - floor p_ij,
    a'_ij = a_ij + b_ij,

with ``p`` clamped to ``P - 1`` (the reference code's ``npos_max``). The paper initialises ``e``
at zero (CoPE then starts as NoPE); ``init_std`` draws it from ``N(0, init_std^2)`` instead, so a
freshly built model already depends on order. Bidirectional models count the gates of the
tokens between the two, ``[min(i, j), max(i, j)]``.

CoPE never reads positions (relative), and its sums run over the visible keys
(:func:`posjax.encodings.spans.span_sums`), so it decodes with a key/value cache and runs packed
rows.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register
from posjax.encodings.spans import span_sums


def cope_positions(logits: jax.Array, mask: jax.Array | None, *, causal: bool,
                   max_positions: int) -> jax.Array:
    """Contextual positions ``p_ij = sum of sigmoid(a_it)`` over visible t in ``[j, i]``,
    clamped to ``max_positions - 1``: ``[B, H, Tq, Tk]``."""
    gates = jax.nn.sigmoid(logits.astype(jnp.float32))
    p = span_sums(gates, mask, causal=causal, include_key=True)
    return jnp.minimum(p, max_positions - 1)


def cope_bias(q: jax.Array, embeddings: jax.Array, positions: jax.Array) -> jax.Array:
    """Interpolated ``q_i . e[p_ij]`` (Eq. 5-6): ``q [B, Tq, H, D]``, ``embeddings [P, D]``,
    ``positions [B, H, Tq, Tk]`` -> ``[B, H, Tq, Tk]``."""
    z = jnp.einsum("bqhd,nd->bhqn", q.astype(jnp.float32), embeddings.astype(jnp.float32))
    lo = jnp.floor(positions)
    w = positions - lo
    lo = lo.astype(jnp.int32)
    hi = jnp.minimum(lo + 1, embeddings.shape[0] - 1)
    z_lo = jnp.take_along_axis(z, lo, axis=-1)
    z_hi = jnp.take_along_axis(z, hi, axis=-1)
    return (1.0 - w) * z_lo + w * z_hi


@dataclasses.dataclass(frozen=True)
class CopeOptions:
    """Options of CoPE (arXiv 2405.18719).

    Attributes:
      max_positions: P, the number of position vectors (``npos_max``); None uses ``max_len``.
      init_std: standard deviation of the initial vectors (the paper: 0, i.e. zeros).
      per_layer: one set of vectors per layer (the paper's; False shares them).
      bidirectional: None follows the model (causal -> the paper's ``[j, i]``).
    """

    max_positions: int | None = None
    init_std: float = 0.02
    per_layer: bool = True
    bidirectional: bool | None = None

    def validate(self, ctx: PEContext) -> None:
        if self.max_positions is not None and self.max_positions < 2:
            raise ValueError(f"CoPE max_positions must be >= 2, got {self.max_positions}")
        if self.max_positions is None and ctx.max_len is None:
            raise ValueError("CoPE needs max_positions (or the model's max_len)")
        if self.init_std < 0:
            raise ValueError(f"CoPE init_std must be >= 0, got {self.init_std}")


@register("cope", options=CopeOptions,
          paper="Golovneva et al., Contextual Position Encoding (CoPE), arXiv 2405.18719")
class Cope(PositionalEncoding):
    """Gate-counted, interpolated position embeddings read by the query (hook ``logits``);
    relative (never reads positions)."""

    is_relative = True

    def __init__(self, options: CopeOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("cope", "head_dim")
        n = options.max_positions or max(ctx.max_len, 2)
        self.embeddings = nnx.Param(options.init_std * jax.random.normal(rngs.params(),
                                                                         (n, ctx.head_dim)))

    @property
    def causal(self) -> bool:
        b = self.options.bidirectional
        return self.ctx.causal if b is None else not b

    def logits(self, logits, q, k, q_pos, k_pos, mask):
        e = self.embeddings[...]
        p = cope_positions(logits, mask, causal=self.causal, max_positions=e.shape[0])
        return logits + cope_bias(q, e, p)
