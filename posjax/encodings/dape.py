"""DAPE: data-adaptive positional encoding (Zheng, Gao, Shi, Yang, Xiong, Li, Li, "DAPE:
Data-Adaptive Positional Encoding for Length Extrapolation", NeurIPS 2024, arXiv 2405.14722,
Sec. 3).

A static relative bias ``B`` (ALiBi, KERPLE or FIRE in the paper) is refined per query-key pair
by a small MLP that sees the attention logits of every head together with the bias:

    A = Q K^T + B + f(Q K^T, B),    f: R^{2H} -> R^H,  f = Linear -> act -> Linear

(Eq. 3; ``f`` acts on the head axis of each (i, j) entry: the concatenation of the H content
logits and the H bias values). ``Q K^T`` is the scaled content logit the model adds ``B`` to.
Here ``B`` is ALiBi (``base="alibi"``, parameter-free) or KERPLE's logarithmic kernel
(``base="kerple_log"``, learned); the activation is a LeakyReLU by default. ``f`` is
initialised like any ``nnx.Linear`` (DAPE starts near its base bias plus a small refinement).

The bias hook gives ``B``; the contextual ``logits`` hook adds ``f``, elementwise in (i, j), so
DAPE decodes with a key/value cache and runs packed rows. ``B`` depends only on ``i - j`` and
``f`` on the content and ``B``: DAPE is shift-invariant (relative).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.alibi import alibi_bias, alibi_slopes
from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.kerple import kerple_log_bias
from posjax.encodings.registry import register

BASES = ("alibi", "kerple_log")
ACTIVATIONS = {"leaky_relu": jax.nn.leaky_relu, "gelu": jax.nn.gelu, "relu": jax.nn.relu}


@dataclasses.dataclass(frozen=True)
class DapeOptions:
    """Options of DAPE (arXiv 2405.14722).

    Attributes:
      base: the static bias B, ``"alibi"`` or ``"kerple_log"``.
      hidden: width of the MLP f (32).
      activation: ``"leaky_relu"`` (default), ``"gelu"`` or ``"relu"``.
      per_layer: one f (and B's parameters) per layer (the paper's; False shares them).
      bidirectional: None follows the model (B uses ``max(i - j, 0)`` when causal, else
        ``|i - j|``).
    """

    base: str = "alibi"
    hidden: int = 32
    activation: str = "leaky_relu"
    per_layer: bool = True
    bidirectional: bool | None = None

    def validate(self, ctx: PEContext) -> None:
        if self.base not in BASES:
            raise ValueError(f"DAPE base must be one of {BASES}, got {self.base!r}")
        if self.hidden <= 0:
            raise ValueError(f"DAPE hidden must be positive, got {self.hidden}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"DAPE activation must be one of {sorted(ACTIVATIONS)}, "
                             f"got {self.activation!r}")


@register("dape", options=DapeOptions,
          paper="Zheng et al., DAPE: Data-Adaptive Positional Encoding, arXiv 2405.14722")
class Dape(PositionalEncoding):
    """Static bias B plus an MLP of (content logits, B) over the heads (hooks ``bias`` and
    ``logits``); relative."""

    is_relative = True

    def __init__(self, options: DapeOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("dape", "num_heads")
        H = ctx.num_heads
        if options.base == "alibi":
            self.slopes = nnx.Variable(alibi_slopes(H))
        else:  # KERPLE-log's reference inits: r1 ~ U(0, 2), r2 ~ U(0, 1)
            k1, k2 = jax.random.split(rngs.params())
            self.r1 = nnx.Param(jax.random.uniform(k1, (H,), jnp.float32, 0.0, 2.0))
            self.r2 = nnx.Param(jax.random.uniform(k2, (H,), jnp.float32, 0.0, 1.0))
        self.mlp_in = nnx.Linear(2 * H, options.hidden, rngs=rngs)
        self.mlp_out = nnx.Linear(options.hidden, H, rngs=rngs)

    @property
    def causal(self) -> bool:
        b = self.options.bidirectional
        return self.ctx.causal if b is None else not b

    def bias(self, q_pos, k_pos):
        if self.options.base == "alibi":
            return alibi_bias(self.ctx.num_heads, q_pos, k_pos, causal=self.causal,
                              slopes=self.slopes[...])
        return kerple_log_bias(self.r1[...], self.r2[...], q_pos, k_pos, causal=self.causal)

    def refinement(self, content: jax.Array, bias: jax.Array) -> jax.Array:
        """``f(QK^T, B)``: ``[B, H, Tq, Tk]`` twice -> ``[B, H, Tq, Tk]``."""
        x = jnp.concatenate([content, jnp.broadcast_to(bias, content.shape)], axis=1)
        x = jnp.moveaxis(x, 1, -1)  # [B, Tq, Tk, 2H]
        h = ACTIVATIONS[self.options.activation](self.mlp_in(x))
        return jnp.moveaxis(self.mlp_out(h), -1, 1).astype(content.dtype)

    def logits(self, logits, q, k, q_pos, k_pos, mask):
        b = self.bias(q_pos, k_pos)
        b = b if b.ndim == 4 else b[None]
        return logits + self.refinement(logits - b, b)
