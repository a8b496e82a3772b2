"""Learned absolute PEs: a table added to the token embeddings.

* ``learned``: a trainable table (BERT/GPT practice; init-scale study: arXiv 2406.08272).
* ``random_fixed``: the same table drawn N(0, std^2) and never trained, the "lazy" limit of a
  learned PE (arXiv 2406.08272).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding, check_table_length
from posjax.encodings.registry import register
from posjax.encodings.sinusoidal import sinusoidal

INITS = ("normal", "uniform", "zeros", "sinusoidal", "xavier_uniform")


def init_table(key: jax.Array, num_positions: int, dim: int, init: str, *, std: float = 0.02,
               scale: float = 0.05, base: float = 10000.0) -> jax.Array:
    """Initial PE table ``[num_positions, dim]``.

    ``normal``: exact N(0, std^2) per entry; ``uniform``: U(-scale, scale); ``zeros``;
    ``sinusoidal``: the fixed sinusoid (then trained); ``xavier_uniform``: Glorot uniform.
    """
    shape = (num_positions, dim)
    if init == "normal":
        return std * jax.random.normal(key, shape, jnp.float32)
    if init == "uniform":
        return jax.random.uniform(key, shape, jnp.float32, -scale, scale)
    if init == "zeros":
        return jnp.zeros(shape, jnp.float32)
    if init == "sinusoidal":
        return sinusoidal(num_positions, dim, base)
    if init == "xavier_uniform":
        return jax.nn.initializers.xavier_uniform()(key, shape, jnp.float32)
    raise ValueError(f"learned PE init must be one of {INITS}, got {init!r}")


@dataclasses.dataclass(frozen=True)
class LearnedOptions:
    """Options of the learned absolute PE (arXiv 1706.03762, Sec. 3.5).

    ``num_positions`` defaults to the model's ``max_len``. ``per_layer=True`` gives every block
    its own table (arXiv 2406.08272, with the model's ``pe_every_layer``).
    """

    init: str = "normal"
    std: float = 0.02
    scale: float = 0.05
    num_positions: int | None = None
    per_layer: bool = False
    trainable: bool = True

    def validate(self, ctx: PEContext) -> None:
        if self.init not in INITS:
            raise ValueError(f"learned PE init must be one of {INITS}, got {self.init!r}")
        if self.std < 0:
            raise ValueError(f"learned PE std must be >= 0, got {self.std}")
        if self.scale < 0:
            raise ValueError(f"learned PE uniform scale must be >= 0, got {self.scale}")
        if self.num_positions is not None and self.num_positions <= 0:
            raise ValueError(f"learned PE num_positions must be positive, got {self.num_positions}")


@register("learned", options=LearnedOptions,
          paper="Devlin et al., BERT, arXiv 1810.04805; init study: arXiv 2406.08272")
class Learned(PositionalEncoding):
    """Trainable table ``[max_len, d_model]``; positions beyond it raise ValueError."""

    is_relative = False

    def __init__(self, options: LearnedOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        n = options.num_positions or ctx.max_len
        if n is None:
            raise ValueError(f"PE '{self.name}' needs max_len (or the option num_positions)")
        ctx.require(self.name, "d_model")
        value = init_table(rngs.params(), n, ctx.d_model, options.init, std=options.std,
                           scale=options.scale)
        self.embedding = nnx.Param(value) if options.trainable else nnx.Variable(value)

    @property
    def max_positions(self) -> int:
        return int(self.embedding.shape[0])

    def table(self, positions):
        """Rows ``[..., d]`` at ``positions``; a position outside ``0..max_positions - 1`` gives a
        row of NaN (never a wrapped or clamped row), which ``embed`` reports eagerly and the
        training loop reports under ``jit``."""
        positions = jnp.asarray(positions)
        valid = (positions >= 0) & (positions < self.max_positions)
        rows = jnp.take(self.embedding[...], jnp.where(valid, positions, 0), axis=0)
        return jnp.where(valid[..., None], rows, jnp.nan)

    def embed(self, x, positions, *, deterministic=True, rngs=None):
        check_table_length(self.name, positions, self.max_positions)
        return x + self.table(positions).astype(x.dtype)


@dataclasses.dataclass(frozen=True)
class RandomFixedOptions(LearnedOptions):
    """Options of the fixed random PE: the learned PE's table with entries N(0, std^2), never
    trained (``trainable=False``). ``num_positions`` defaults to the model's ``max_len``;
    ``per_layer`` draws one table per block."""

    std: float = 1.0
    trainable: bool = False


@register("random_fixed", options=RandomFixedOptions,
          paper="fixed random PE, the lazy-regime baseline of arXiv 2406.08272")
class RandomFixed(Learned):
    """A random table ``[max_len, d_model]`` held as a non-trainable ``nnx.Variable``."""
