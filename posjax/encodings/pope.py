"""PoPE: Legendre-polynomial position encoding (Aggarwal, "PoPE: Legendre Orthogonal
Polynomials Based Position Encoding for Large Language Models", arXiv 2405.04585). Not the
polar-coordinate "PoPE" of x-transformers (arXiv 2509.10534).

An additive absolute PE: PE(p, k) = P_{k + degree_offset}(x_p), where x_p maps positions affinely
onto [-1, 1] and the Legendre polynomials come from the Bonnet recurrence

  (n + 1) P_{n+1}(x) = (2n + 1) x P_n(x) - n P_{n-1}(x),  P_0 = 1,  P_1 = x.

The order-to-dimension assignment, the normalisation and the position map are to confirm from the
paper; each is an option.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding, check_table_length
from posjax.encodings.registry import register


def legendre(x: jax.Array, num: int) -> jax.Array:
    """``[..., num]`` = (P_0(x), ..., P_{num-1}(x)) by the Bonnet recurrence (a ``lax.scan``)."""
    if num <= 0:
        raise ValueError(f"legendre needs num >= 1, got {num}")
    x = jnp.asarray(x)
    p0 = jnp.ones_like(x)
    if num == 1:
        return p0[..., None]

    def step(carry, n):
        prev, cur = carry
        nxt = ((2.0 * n + 1.0) * x * cur - n * prev) / (n + 1.0)
        return (cur, nxt), nxt

    ns = jnp.arange(1, num - 1, dtype=x.dtype)
    _, rest = jax.lax.scan(step, (p0, x), ns)  # [num - 2, ...]
    return jnp.concatenate([p0[..., None], x[..., None], jnp.moveaxis(rest, 0, -1)], axis=-1)


def pope_table(positions: jax.Array, dim: int, *, num_positions: int, degree_offset: int = 0,
               normalization: str = "none") -> jax.Array:
    """PoPE vectors ``[..., dim]`` at ``positions``.

    Args:
      positions: integer or float positions in [0, num_positions - 1].
      dim: embedding width; dimension k holds degree ``k + degree_offset``.
      num_positions: the position range mapped onto [-1, 1] by x_p = 2p / (n - 1) - 1.
      degree_offset: lowest degree used (0 keeps the constant P_0).
      normalization: "none" (|P_n| <= 1 on [-1, 1]) or "orthonormal" (times sqrt((2n + 1) / 2),
        orthonormal in L2[-1, 1]).
    """
    span = max(num_positions - 1, 1)
    x = 2.0 * jnp.asarray(positions, jnp.float32) / span - 1.0
    values = legendre(x, dim + degree_offset)[..., degree_offset:]
    if normalization == "orthonormal":
        n = jnp.arange(degree_offset, degree_offset + dim, dtype=jnp.float32)
        values = values * jnp.sqrt((2.0 * n + 1.0) / 2.0)
    elif normalization != "none":
        raise ValueError(f"PoPE normalization must be 'none' or 'orthonormal', got {normalization!r}")
    return values


@dataclasses.dataclass(frozen=True)
class PopeOptions:
    """Options of PoPE (arXiv 2405.04585).

    Attributes:
      num_positions: the position range mapped onto [-1, 1] (default: the model's max_len);
        positions outside it raise (Legendre polynomials explode outside [-1, 1]).
      degree_offset: degree of dimension 0.
      normalization: "none" or "orthonormal".
      scale: multiplies the table.
    """

    num_positions: int | None = None
    degree_offset: int = 0
    normalization: str = "none"
    scale: float = 1.0

    def validate(self, ctx: PEContext) -> None:
        if self.num_positions is not None and self.num_positions <= 0:
            raise ValueError(f"PoPE num_positions must be positive, got {self.num_positions}")
        if self.degree_offset < 0:
            raise ValueError(f"PoPE degree_offset must be >= 0, got {self.degree_offset}")
        if self.normalization not in ("none", "orthonormal"):
            raise ValueError(f"PoPE normalization must be 'none' or 'orthonormal', got "
                             f"{self.normalization!r}")


@register("pope", options=PopeOptions,
          paper="Aggarwal, PoPE: Legendre Orthogonal Polynomials Based Position Encoding, "
                "arXiv 2405.04585")
class Pope(PositionalEncoding):
    """Fixed Legendre-polynomial vectors added to the input embeddings (hook ``embed``);
    absolute, no parameters."""

    is_relative = False

    def __init__(self, options: PopeOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("pope", "d_model")
        if options.num_positions is None and ctx.max_len is None:
            raise ValueError("PE 'pope' needs max_len (or the option num_positions)")

    @property
    def max_positions(self) -> int:
        return int(self.options.num_positions or self.ctx.max_len)

    def table(self, positions):
        o = self.options
        return o.scale * pope_table(positions, self.ctx.d_model, num_positions=self.max_positions,
                                    degree_offset=o.degree_offset, normalization=o.normalization)

    def embed(self, x, positions, *, deterministic=True, rngs=None):
        check_table_length(self.name, jnp.asarray(positions), self.max_positions)
        return x + self.table(positions).astype(x.dtype)
