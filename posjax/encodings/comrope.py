"""ComRoPE: rotary position embedding with trainable commuting angle matrices (Yu, Zhang, Zhang,
Zhang, Wang, "ComRoPE: Scalable and Robust Rotary Position Embedding Parameterized by Trainable
Commuting Angle Matrices", CVPR 2025, arXiv 2506.03737, Sec. 3).

The rotation is ``R(x) = exp(sum_a x_a A_a)`` with trainable skew-symmetric angle matrices that
commute pairwise, which is exactly what makes ``R(x)^T R(y) = R(y - x)`` (the RoPE equation). The
paper's two commuting families are block-diagonal with blocks of size ``b``: ComRoPE-AP (axis
partition: each block belongs to one axis) and ComRoPE-LD (linear dependence: ``A_a = s_a A``).
For the 1-D positions of sequence models both reduce to one block-diagonal generator
``A = blockdiag(A_1, ..., A_{d/b})`` per head (trainable, skew), so

    q' = blockdiag(exp(p A_1), ..., exp(p A_{d/b})) q,

relative and norm-preserving; ``b = 2`` is RoPE with learned frequencies. The dense case
``b = d_h`` is LieRE's 1-D rotation (:mod:`posjax.encodings.liere`, whose :func:`lie_rotate` this
module reuses). Blocks are initialised ``N(0, init_std^2)``.
"""
from __future__ import annotations

import dataclasses

import jax
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.liere import lie_rotate, skew
from posjax.encodings.registry import register


@dataclasses.dataclass(frozen=True)
class ComRoPEOptions:
    """Options of ComRoPE (arXiv 2506.03737).

    Attributes:
      block_size: b, the size of each commuting block (must divide head_dim; 8 here).
      init_std: standard deviation of the block entries at init.
      learned: train the angle matrices (False keeps them fixed).
    """

    block_size: int = 8
    init_std: float = 0.5
    learned: bool = True

    def validate(self, ctx: PEContext) -> None:
        if self.block_size < 2:
            raise ValueError(f"ComRoPE block_size must be >= 2, got {self.block_size}")
        if ctx.head_dim is not None and ctx.head_dim % self.block_size:
            raise ValueError(f"ComRoPE block_size={self.block_size} must divide "
                             f"head_dim={ctx.head_dim}")
        if self.init_std < 0:
            raise ValueError(f"ComRoPE init_std must be >= 0, got {self.init_std}")


@register("comrope", options=ComRoPEOptions,
          paper="Yu et al., ComRoPE: Trainable Commuting Angle Matrices, arXiv 2506.03737")
class ComRoPE(PositionalEncoding):
    """Block-diagonal learned rotation ``exp(p A)`` (hook ``rotate``); relative, norm-preserving."""

    is_relative = True

    def __init__(self, options: ComRoPEOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("comrope", "head_dim", "num_heads")
        b = options.block_size
        shape = (ctx.num_heads, ctx.head_dim // b, b, b)
        M = options.init_std * jax.random.normal(rngs.params(), shape)
        self.angle_matrices = nnx.Param(M) if options.learned else nnx.Variable(M)

    def rotate(self, q, k, q_pos, k_pos):
        A = skew(self.angle_matrices[...])
        return lie_rotate(q, q_pos, A), lie_rotate(k, k_pos, A)
