"""LieRE: Lie rotational position encodings (Ostmeier, Axelrod, Moseley, Chaudhari, Langlotz,
"LieRE: Lie Rotational Positional Encodings", arXiv 2406.10322, Sec. 3).

RoPE's block-diagonal rotation is replaced by a dense rotation from a learned Lie algebra element:
``R(p) = exp(p A)`` with ``A = M - M^T`` skew-symmetric (one generator per head, learned), and
queries/keys are rotated as ``q' = R(p_i) q``, ``k' = R(p_j) k``. For 1-D positions
``R(p_i)^T R(p_j) = exp((p_j - p_i) A)``, so LieRE is relative and norm-preserving. (With several
position axes the paper sums ``p_a A_a``; its generators need not commute, and that case is not
relative. posjax models pass 1-D positions.)

``init="rope"`` starts A at RoPE's interleaved block-diagonal generator (LieRE then equals RoPE
until trained); ``init="normal"`` draws the entries of M from ``N(0, init_std^2)``.

The exponentials go through one eigen-decomposition of each generator (see :func:`lie_rotate`).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register
from posjax.encodings.rope import rope_frequencies

INITS = ("rope", "normal")


def skew(m: jax.Array) -> jax.Array:
    """The skew-symmetric part ``(M - M^T) / 2`` of ``m [..., n, n]``."""
    return 0.5 * (m - jnp.swapaxes(m, -1, -2))


def rope_generator(dim: int, base: float = 10000.0) -> jax.Array:
    """``[dim, dim]`` skew generator with ``exp(p A)`` = RoPE (interleaved pairs) at position p."""
    theta = rope_frequencies(dim, base)
    blocks = jnp.zeros((dim // 2, 2, 2)).at[:, 1, 0].set(theta).at[:, 0, 1].set(-theta)
    return jax.scipy.linalg.block_diag(*blocks)


def lie_rotate(x: jax.Array, positions: jax.Array, generators: jax.Array) -> jax.Array:
    """``x' = exp(p A_h) x`` for ``x [..., seq, H, n]`` with skew ``generators [H, n, n]``.

    A generator of shape ``[H, nb, b, b]`` is block-diagonal: the head dims are cut into ``nb``
    consecutive blocks of ``b`` and block ``i`` is rotated by ``exp(p A_hi)`` (ComRoPE).

    The exponential goes through the eigen-decomposition of the Hermitian ``i A = V diag(w) V^H``
    (once per call, not per position): ``exp(p A) = V diag(e^{-i p w}) V^H``. The position enters
    only through the phases ``p w``, computed as accurately as RoPE's angles, which keeps the
    logits shift-invariant to float32 precision at large positions (scaling-and-squaring
    ``expm`` of ``p A`` loses about ``log2 |p A|`` bits there). The gradient of the
    decomposition is singular where two eigenvalues of one generator coincide.
    """
    dtype = jnp.promote_types(x.dtype, jnp.float32)
    cdtype = jnp.promote_types(dtype, jnp.complex64)
    A = jnp.asarray(generators, dtype)
    blocked = A.ndim == 4
    w, V = jnp.linalg.eigh(1j * A.astype(cdtype))  # [H, (nb,) n], [H, (nb,) n, n]
    pos = jnp.asarray(positions, dtype)[..., :, None, None]  # [..., seq, 1, 1]
    if blocked:
        pos = pos[..., None]
        xs = x.astype(dtype).reshape(*x.shape[:-1], A.shape[1], A.shape[2])
    else:
        xs = x.astype(dtype)
    y = jnp.einsum("...ji,...j->...i", V.conj(), xs.astype(cdtype))  # V^H x
    y = y * jnp.exp(-1j * (pos * w).astype(cdtype))
    out = jnp.einsum("...ij,...j->...i", V, y).real
    return out.reshape(x.shape).astype(x.dtype)


@dataclasses.dataclass(frozen=True)
class LieREOptions:
    """Options of LieRE (arXiv 2406.10322).

    Attributes:
      init: ``"rope"`` (start at RoPE's generator) or ``"normal"`` (random ``N(0, init_std^2)``).
      init_std: standard deviation of the random init.
      base: RoPE base of the ``"rope"`` init.
      learned: train the generators (False keeps them fixed).
    """

    init: str = "rope"
    init_std: float = 0.02
    base: float = 10000.0
    learned: bool = True

    def validate(self, ctx: PEContext) -> None:
        if self.init not in INITS:
            raise ValueError(f"LieRE init must be one of {INITS}, got {self.init!r}")
        if self.init_std < 0:
            raise ValueError(f"LieRE init_std must be >= 0, got {self.init_std}")
        if self.base <= 1.0:
            raise ValueError(f"LieRE base must be > 1, got {self.base}")
        if self.init == "rope" and ctx.head_dim is not None and ctx.head_dim % 2:
            raise ValueError(f"LieRE init='rope' needs an even head_dim, got {ctx.head_dim}")


@register("liere", options=LieREOptions,
          paper="Ostmeier et al., LieRE: Lie Rotational Positional Encodings, arXiv 2406.10322")
class LieRE(PositionalEncoding):
    """Dense learned rotation ``exp(p A_h)`` of q and k (hook ``rotate``); relative (1-D
    positions), norm-preserving."""

    is_relative = True

    def __init__(self, options: LieREOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require(self.name, "head_dim", "num_heads")
        M = self.initial_generators(rngs.params())
        self.generators = nnx.Param(M) if options.learned else nnx.Variable(M)

    def initial_generators(self, key: jax.Array) -> jax.Array:
        """``[H, d_h, d_h]`` initial M (its skew part is the generator)."""
        o, H, d = self.options, self.ctx.num_heads, self.ctx.head_dim
        if o.init == "rope":
            return jnp.broadcast_to(rope_generator(d, o.base), (H, d, d))
        return o.init_std * jax.random.normal(key, (H, d, d))

    def rotate(self, q, k, q_pos, k_pos):
        A = skew(self.generators[...])
        return lie_rotate(q, q_pos, A), lie_rotate(k, k_pos, A)
