"""Positional attention (Back de Luca, Giapitzakis, Yang, Velickovic, Fountoulakis, "Positional
Attention: Expressivity and Learnability of Algorithmic Computation", ICML 2025,
arXiv 2410.01686).

The attention weights come from positions only; the values carry the input:

  A^(l,h) = softmax( (P W_Q^(l,h)) (P W_K^(l,h))^T ),   output = A X W_V^(l,h),

with the same fixed positional matrix P at every layer. posjax realises it with the
``attention_input`` hook: the q/k projections of every block read P (broadcast over the batch)
instead of the residual stream; the v projection still reads the residual stream.
"""
from __future__ import annotations

import dataclasses

import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding, check_table_length
from posjax.encodings.learned import init_table
from posjax.encodings.registry import register
from posjax.encodings.sinusoidal import sinusoidal_at


@dataclasses.dataclass(frozen=True)
class PositionalAttentionOptions:
    """Options of positional attention (spec encodings.md §20).

    Attributes:
      encoding: P: "sinusoidal" (fixed, default, any position), "onehot" (fixed rows of the
        identity, needs max_len <= d_model) or "learned" (a trained table, normal init).
      base: sinusoid base.
      init_std: std of the learned table.
    """

    encoding: str = "sinusoidal"
    base: float = 10000.0
    init_std: float = 0.02

    def validate(self, ctx: PEContext) -> None:
        if self.encoding not in ("sinusoidal", "onehot", "learned"):
            raise ValueError("positional attention encoding must be 'sinusoidal', 'onehot' or "
                             f"'learned', got {self.encoding!r}")
        if self.encoding == "onehot" and ctx.max_len is not None and ctx.d_model is not None \
                and ctx.max_len > ctx.d_model:
            raise ValueError(f"one-hot positional attention needs max_len <= d_model, got "
                             f"max_len={ctx.max_len}, d_model={ctx.d_model}")


@register("positional_attention", options=PositionalAttentionOptions,
          paper="Back de Luca et al., Positional Attention, arXiv 2410.01686")
class PositionalAttention(PositionalEncoding):
    """q and k from a fixed positional matrix P, v from the input (hook ``attention``).

    Relative iff P's projected Gram is Toeplitz; with the default sinusoidal P and learned
    W_Q, W_K it is not, so ``is_relative`` is False.
    """

    hook = "attention"
    is_relative = False

    def __init__(self, options: PositionalAttentionOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("positional_attention", "d_model")
        if options.encoding in ("onehot", "learned"):
            if ctx.max_len is None:
                raise ValueError(f"positional attention with encoding={options.encoding!r} needs "
                                 "max_len")
            if options.encoding == "learned":
                self.embedding = nnx.Param(init_table(rngs.params(), ctx.max_len, ctx.d_model,
                                                      "normal", std=options.init_std))
            else:
                self.embedding = nnx.Variable(jnp.eye(ctx.max_len, ctx.d_model, dtype=jnp.float32))

    @property
    def max_positions(self) -> int | None:
        return None if self.options.encoding == "sinusoidal" else int(self.embedding.shape[0])

    def table(self, positions):
        """P at ``positions``: ``[..., d_model]``."""
        if self.options.encoding == "sinusoidal":
            return sinusoidal_at(positions, self.ctx.d_model, self.options.base)
        return jnp.take(self.embedding[...], jnp.asarray(positions), axis=0)

    def attention_input(self, h, positions, layer, *, segment_ids=None):
        del layer, segment_ids  # per-token: packing needs nothing more
        if self.max_positions is not None:
            check_table_length(self.name, jnp.asarray(positions), self.max_positions)
        p = jnp.broadcast_to(self.table(positions).astype(h.dtype), h.shape)
        return p, h
