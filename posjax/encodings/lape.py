"""LaPE: layer-adaptive position embedding (Yu et al., "LaPE: Layer-adaptive Position Embedding
for Vision Transformers with Independent Layer Normalization", arXiv 2212.05262; first titled
"Position Embedding Needs an Independent Layer Normalization").

Each layer l has its own LayerNorm of the PE, and the attention input of block l is

  LN_x^(l)(x^(l)) + LN_p^(l)(p),

where LN_x^(l) is the block's own pre-attention LayerNorm, so the position signal reaches every
layer with its own affine parameters. LaPE wraps any additive PE (``base_pe``), whose table p
is not added to the input embeddings (unless ``add_at_input``).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding, check_table_length
from posjax.encodings.registry import info, make, register


@dataclasses.dataclass(frozen=True)
class LapeOptions:
    """Options of LaPE (spec encodings.md §14).

    Attributes:
      base_pe: registry name of the additive PE whose table is delivered (hook ``embed``).
      base_options: options of that PE.
      add_at_input: also add p to the input embeddings (the exact residual routing of the paper,
        and the "progressive" delivery of its journal version, are to confirm; default False).
      epsilon: LayerNorm epsilon.
    """

    base_pe: str = "learned"
    base_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    add_at_input: bool = False
    epsilon: float = 1e-6

    def __hash__(self):  # base_options is a dict: hash a frozen copy (model graphs are cache keys)
        return hash((self.base_pe, tuple(sorted((k, repr(v)) for k, v in self.base_options.items())),
                     self.add_at_input, self.epsilon))

    def validate(self, ctx: PEContext) -> None:
        entry = info(self.base_pe)
        if entry.hook != "embed":
            raise ValueError(f"LaPE wraps an additive PE (hook 'embed'); '{self.base_pe}' has "
                             f"hook '{entry.hook}'")


@register("lape", options=LapeOptions,
          paper="Yu et al., LaPE: Layer-adaptive Position Embedding, arXiv 2212.05262")
class Lape(PositionalEncoding):
    """Per-layer LayerNorm of an additive PE added to each block's attention input (hook
    ``module``); inherits absolute/relative from the base PE (all additive PEs are absolute)."""

    hook = "module"
    is_relative = False

    def __init__(self, options: LapeOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("lape", "d_model")
        self.base = make(options.base_pe, d_model=ctx.d_model, num_heads=ctx.num_heads,
                         head_dim=ctx.head_dim, max_len=ctx.max_len, num_layers=ctx.num_layers,
                         causal=ctx.causal, rngs=rngs, **options.base_options)
        self.norms = nnx.List([nnx.LayerNorm(ctx.d_model, epsilon=options.epsilon, rngs=rngs)
                               for _ in range(ctx.num_layers)])

    @property
    def max_positions(self) -> int | None:
        return self.base.max_positions

    def table(self, positions):
        """The base PE's table ``[n, d]`` (before the per-layer LayerNorms)."""
        return self.base.table(positions)

    def layer_table(self, positions, layer: int):
        """``LN_p^(layer)(p(positions))``."""
        if self.max_positions is not None:
            check_table_length(self.name, jnp.asarray(positions), self.max_positions)
        return self.norms[layer](self.table(positions))

    def embed(self, x, positions, *, deterministic=True, rngs=None):
        if not self.options.add_at_input:
            return x
        return self.base.embed(x, positions, deterministic=deterministic, rngs=rngs)

    def attention_input(self, h, positions, layer, *, segment_ids=None):
        del segment_ids  # per-token: packing needs nothing more
        h = h + self.layer_table(positions, layer).astype(h.dtype)
        return h, h
