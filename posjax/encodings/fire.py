"""FIRE: functional interpolation for relative positions (Li et al., "Functional Interpolation
for Relative Positions Improves Long Context Transformers", arXiv 2310.04418).

b_h(i, j) = f_theta( psi(i - j) / psi(max(L, i)) )_h  for keys j <= i,
psi(x) = log(c x + 1),  L = |l * L0|,

with learned c (init 0.1), learned threshold multiplier l (init 1, L0 = 512 fixed) and a small MLP
f_theta: 1 -> 32 (ReLU) -> H. The normaliser makes the bias depend on the query position once
i >= L ("progressive interpolation"), so FIRE is shift-invariant only while every query is below L.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register


def fire_inputs(q_positions: jax.Array, k_positions: jax.Array, *, c: jax.Array,
                threshold: jax.Array, causal: bool = True, eps: float = 1e-6) -> jax.Array:
    """The normalised MLP input ``psi(i - j) / (psi(max(L, i)) + eps)``: ``[..., Tq, Tk]``.

    Args:
      q_positions, k_positions: ``[T]`` or ``[B, T]`` (i, j).
      c: scalar > 0 of psi(x) = log(c x + 1).
      threshold: L (already |l * L0|).
      causal: distance ``max(i - j, 0)`` (future keys map to 0 and are masked); otherwise
        ``|i - j|`` (posjax extension for encoders).
      eps: added to the normaliser (reference implementations use 1e-6).
    """
    q = jnp.asarray(q_positions, jnp.float32)
    k = jnp.asarray(k_positions, jnp.float32)
    rel = q[..., :, None] - k[..., None, :]
    rel = jnp.maximum(rel, 0.0) if causal else jnp.abs(rel)
    psi = lambda x: jnp.log(c * x + 1.0)
    norm = psi(jnp.maximum(threshold, q))[..., :, None]
    return psi(rel) / (norm + eps)


@dataclasses.dataclass(frozen=True)
class FireOptions:
    """Options of FIRE (arXiv 2310.04418).

    Attributes:
      hidden: width of the MLP f_theta (32).
      c_init: initial c of psi (0.1).
      base_threshold: L0 (512); the learned multiplier starts at ``threshold_init`` (1).
      eps: normaliser epsilon (1e-6, reference implementations).
      per_layer: one FIRE module per attention layer (common code, default) or one shared; the
        paper's choice is to confirm.
      bidirectional: None follows the model; True uses |i - j| (posjax extension).
    """

    hidden: int = 32
    c_init: float = 0.1
    base_threshold: float = 512.0
    threshold_init: float = 1.0
    eps: float = 1e-6
    per_layer: bool = True
    bidirectional: bool | None = None

    def validate(self, ctx: PEContext) -> None:
        if self.hidden <= 0:
            raise ValueError(f"FIRE hidden must be positive, got {self.hidden}")
        if self.c_init <= 0:
            raise ValueError(f"FIRE c_init must be > 0, got {self.c_init}")
        if self.base_threshold <= 0 or self.threshold_init == 0:
            raise ValueError("FIRE base_threshold must be > 0 and threshold_init non-zero")
        if self.eps < 0:
            raise ValueError(f"FIRE eps must be >= 0, got {self.eps}")


@register("fire", options=FireOptions,
          paper="Li et al., Functional Interpolation for Relative Positions, arXiv 2310.04418")
class Fire(PositionalEncoding):
    """Learned MLP of the progressively normalised log-distance (hook ``bias``).

    ``is_relative`` is False: the bias is shift-invariant only while every query position is
    below the learned threshold L (see the module docstring).
    """

    is_relative = False
    probe_options = {"base_threshold": 4.0}  # L = 4 < 8 probed positions: normaliser active

    def __init__(self, options: FireOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("fire", "num_heads")
        self.c = nnx.Param(jnp.asarray(options.c_init, jnp.float32))
        self.threshold_mult = nnx.Param(jnp.asarray(options.threshold_init, jnp.float32))
        self.mlp_in = nnx.Linear(1, options.hidden, rngs=rngs)
        self.mlp_out = nnx.Linear(options.hidden, ctx.num_heads, rngs=rngs)

    @property
    def causal(self) -> bool:
        b = self.options.bidirectional
        return self.ctx.causal if b is None else not b

    def threshold(self) -> jax.Array:
        """L = |l * L0|."""
        return jnp.abs(self.threshold_mult[...] * self.options.base_threshold)

    def bias(self, q_pos, k_pos):
        # |c| keeps psi defined if training pushes c through 0 (the paper only says c is learned).
        x = fire_inputs(q_pos, k_pos, c=jnp.abs(self.c[...]), threshold=self.threshold(),
                        causal=self.causal, eps=self.options.eps)
        h = self.mlp_out(jax.nn.relu(self.mlp_in(x[..., None])))  # [..., Tq, Tk, H]
        return jnp.moveaxis(h, -1, -3)
