"""Forgetting Transformer (FoX): softmax attention with a data-dependent forget gate (Lin,
Nikishin, He, Courville, "Forgetting Transformer: Softmax Attention with a Forget Gate", ICLR
2025, arXiv 2503.02130, Sec. 2).

Every token t emits a scalar forget gate per head, ``f_t = sigmoid(w^T x_t + b)``, and the
attention logits get the down-weighting bias

    D_ij = sum_{l = j+1}^{i} log f_l        (j <= i),

so a key fades by the product of the gates of the tokens that followed it (a data-dependent
ALiBi: constant gates ``f = e^{-m}`` give ALiBi's ``-m (i - j)``). FoX uses no other PE.

Where the gate reads from. posjax's contextual ``logits`` hook sees the queries and keys (that is
what the key/value cache holds), not the residual stream, so here the gate of token t reads the
head's key: ``f_t = sigmoid(w_h^T k_t + b_h)`` with ``k_t = W_K x_t`` (a linear gate of x_t whose
weight lies in the row space of the head's key projection). Bidirectional models use the gates
of the tokens between the two positions on either side, ``(min(i, j), max(i, j)]``.

The bias does not read positions, so FoX is shift-invariant (relative), and it sums only over
visible keys (:func:`posjax.encodings.spans.span_sums`), which gives key/value-cache decoding and
packed rows.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register
from posjax.encodings.spans import span_sums


def fox_log_gates(k: jax.Array, weight: jax.Array, bias: jax.Array) -> jax.Array:
    """``log f_t = log sigmoid(w_h . k_t + b_h)``: ``k [B, T, H, D] -> [B, H, T]`` (float32)."""
    z = jnp.einsum("bthd,hd->bht", k.astype(jnp.float32), weight.astype(jnp.float32))
    return jax.nn.log_sigmoid(z + bias.astype(jnp.float32)[:, None])


def fox_bias(log_gates: jax.Array, mask: jax.Array | None, *, causal: bool,
             num_queries: int) -> jax.Array:
    """``D_ij = sum over visible l in (j, i] of log f_l``: ``[B, H, T] -> [B, H, Tq, Tk]``."""
    values = jnp.broadcast_to(log_gates[..., None, :], (*log_gates.shape[:-1], num_queries,
                                                           log_gates.shape[-1]))
    return span_sums(values, mask, causal=causal, include_key=False)


@dataclasses.dataclass(frozen=True)
class FoxOptions:
    """Options of the Forgetting Transformer's gate (arXiv 2503.02130).

    Attributes:
      bias_init: initial gate bias b (``sigmoid(b)`` is the initial forget gate; 0 gives 1/2
        before the key term).
      per_layer: one gate per layer (the paper's; False shares one across layers).
      bidirectional: None follows the model (causal -> the paper's ``(j, i]``).
    """

    bias_init: float = 0.0
    per_layer: bool = True
    bidirectional: bool | None = None


@register("fox", options=FoxOptions,
          paper="Lin et al., Forgetting Transformer (FoX), arXiv 2503.02130")
class Fox(PositionalEncoding):
    """Cumulative log forget gates as a logit bias (hook ``logits``); relative."""

    is_relative = True

    def __init__(self, options: FoxOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("fox", "num_heads", "head_dim")
        init = jax.nn.initializers.normal(ctx.head_dim ** -0.5)
        self.gate_weight = nnx.Param(init(rngs.params(), (ctx.num_heads, ctx.head_dim)))
        self.gate_bias = nnx.Param(jnp.full((ctx.num_heads,), options.bias_init, jnp.float32))

    @property
    def causal(self) -> bool:
        b = self.options.bidirectional
        return self.ctx.causal if b is None else not b

    def logits(self, logits, q, k, q_pos, k_pos, mask):
        log_f = fox_log_gates(k, self.gate_weight[...], self.gate_bias[...])
        return logits + fox_bias(log_f, mask, causal=self.causal, num_queries=logits.shape[-2])
