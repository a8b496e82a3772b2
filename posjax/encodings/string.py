"""Cayley-STRING (registered as ``cayley_string``; ``string`` is a deprecated alias): separable translationally invariant position encodings (Schenck, Reid, Jacob, Bewley,
Ainslie, Rendleman, Jain, Sharma, Dubey, Wahid, Singh, Wagner, Ding, Fu, Byravan, Varley, Gritsenko,
Minderer, Kalashnikov, Tompson, Sindhwani, Choromanski, "Learning the RoPEs: Better 2D and 3D
Position Encodings with STRING", ICML 2025, arXiv 2502.02562, Sec. 3).

STRING is the family ``R(r) = exp(sum_a r_a L_a)`` of commuting skew-symmetric generators. Every
such family is RoPE in a rotated basis (the paper's Theorem 3.2), which gives the efficient form
used here, Cayley-STRING:

    R(p) = P RoPE(p) P^T,   P = (I - S)(I + S)^{-1}  (the Cayley transform, orthogonal),

with ``S`` a learned skew-symmetric ``[d_h, d_h]`` matrix (one per head). Then ``<R(p_i) q,
R(p_j) k> = q^T P RoPE(p_j - p_i) P^T k``: relative and norm-preserving. ``S`` starts at 0, so
STRING starts as RoPE (the interleaved pairing of RoFormer) and learns the basis.

Not to be confused with STRING of An et al. (arXiv 2410.18745), an inference-time shift of
well-trained relative positions: ``string_shift`` (:mod:`posjax.encodings.string_shift`).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.liere import skew
from posjax.encodings.registry import register, register_alias
from posjax.encodings.rope import apply_rope, rope_frequencies, rope_table_pair


def cayley(s: jax.Array) -> jax.Array:
    """Orthogonal ``(I - S)(I + S)^{-1}`` of skew ``s [..., n, n]`` (``I + S`` is invertible)."""
    eye = jnp.eye(s.shape[-1], dtype=s.dtype)
    # (I - S)(I + S)^{-1} = ((I + S)^{-T} (I - S)^T)^T = ((I - S)^{-1} (I + S))^T for skew S
    return jnp.swapaxes(jnp.linalg.solve(eye - s, eye + s), -1, -2)


@dataclasses.dataclass(frozen=True)
class StringOptions:
    """Options of Cayley-STRING (arXiv 2502.02562).

    Attributes:
      base: RoPE base of the rotations in the learned basis.
      init_std: standard deviation of the initial S (0: start at RoPE).
      learned: train S (False keeps it fixed).
    """

    base: float = 10000.0
    init_std: float = 0.0
    learned: bool = True

    def validate(self, ctx: PEContext) -> None:
        if self.base <= 1.0:
            raise ValueError(f"STRING base must be > 1, got {self.base}")
        if self.init_std < 0:
            raise ValueError(f"STRING init_std must be >= 0, got {self.init_std}")
        if ctx.head_dim is not None and ctx.head_dim % 2:
            raise ValueError(f"STRING needs an even head_dim, got {ctx.head_dim}")


@register("cayley_string", options=StringOptions,
          paper="Schenck et al., Learning the RoPEs (STRING), arXiv 2502.02562")
class String(PositionalEncoding):
    """RoPE in a learned orthogonal basis, ``P RoPE(p) P^T`` (hook ``rotate``); relative,
    norm-preserving."""

    is_relative = True

    def __init__(self, options: StringOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("cayley_string", "head_dim", "num_heads")
        shape = (ctx.num_heads, ctx.head_dim, ctx.head_dim)
        S = options.init_std * jax.random.normal(rngs.params(), shape)
        self.skew_param = nnx.Param(S) if options.learned else nnx.Variable(S)

    def basis(self) -> jax.Array:
        """The orthogonal ``P [H, d_h, d_h]``."""
        return cayley(skew(self.skew_param[...]))

    def _apply(self, x, tables, P):
        dtype = jnp.promote_types(x.dtype, jnp.float32)
        P = P.astype(dtype)
        y = jnp.einsum("hji,...hj->...hi", P, x.astype(dtype))  # P^T x
        y = apply_rope(y, None, interleaved=True, tables=tables)
        return jnp.einsum("hij,...hj->...hi", P, y).astype(x.dtype)  # P RoPE(p) P^T x

    def prepare(self, q_pos, k_pos):
        """RoPE's ``(q_tables, k_tables)`` over the whole head (:func:`rope_table_pair`)."""
        theta = rope_frequencies(self.ctx.head_dim, self.options.base, np.float64)
        return rope_table_pair(q_pos, k_pos, theta)

    def rotate(self, q, k, q_pos, k_pos):
        return self.rotate_prepared(q, k, q_pos, k_pos, self.prepare(q_pos, k_pos))

    def rotate_prepared(self, q, k, q_pos, k_pos, prepared):
        P = self.basis()
        return self._apply(q, prepared[0], P), self._apply(k, prepared[1], P)


register_alias("string", "cayley_string",
               "two papers call their PE STRING: Schenck et al., arXiv 2502.02562 is "
               "'cayley_string', An et al., arXiv 2410.18745 is 'string_shift'")
