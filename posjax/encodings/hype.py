"""HyPE: hyperbolic positional biases (Angelotti, "HyPE: Attention with Hyperbolic Biases for
Relative Positional Encoding", arXiv 2310.19676).

B_h(i, j) = -tau_h sinh(mu_h (j - i)),  tau_h > 0, learnable tau and mu per head.

The paper realises B without materialising it, by appending two coordinates to q and k:
q_i gets sqrt(d_h) (-(tau/2) e^(-mu i), (tau/2) e^(mu i)) and k_j gets (e^(mu j), e^(-mu j)), whose
product after the 1/sqrt(d_h) logit scale is -tau sinh(mu (j - i)) (derived)
(:func:`hype_augment`). posjax's attention keeps q, k and v the same width, so the model uses the
equivalent materialised ``bias`` hook; the augmentation is exposed and tested as a pure function.
For small |mu| the bias is ~ tau mu (i - j): with mu < 0 it approximates ALiBi with slope -tau mu,
which is how it is initialised. The sign convention is to confirm from the paper (option
``offset``).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.alibi import alibi_slopes
from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register


def hype_bias(tau: jax.Array, mu: jax.Array, q_positions: jax.Array, k_positions: jax.Array, *,
              offset: str = "j-i") -> jax.Array:
    """``-tau_h sinh(mu_h r)`` with r = j - i (or i - j): ``[H, Tq, Tk]`` / ``[B, H, Tq, Tk]``."""
    q = jnp.asarray(q_positions, jnp.float32)
    k = jnp.asarray(k_positions, jnp.float32)
    r = k[..., None, :] - q[..., :, None]
    if offset == "i-j":
        r = -r
    elif offset != "j-i":
        raise ValueError(f"HyPE offset must be 'j-i' or 'i-j', got {offset!r}")
    tau = jnp.asarray(tau, jnp.float32)[:, None, None]
    mu = jnp.asarray(mu, jnp.float32)[:, None, None]
    return -tau * jnp.sinh(mu * r[..., None, :, :])


def hype_augment(q: jax.Array, k: jax.Array, q_positions: jax.Array, k_positions: jax.Array,
                 tau: jax.Array, mu: jax.Array, *, center: float = 0.0
                 ) -> tuple[jax.Array, jax.Array]:
    """Append the two HyPE coordinates to ``q [..., Tq, H, d_h]`` and ``k [..., Tk, H, d_h]``.

    Returns ``q' [..., Tq, H, d_h + 2]`` and ``k' [..., Tk, H, d_h + 2]`` such that
    ``q'_i . k'_j / sqrt(d_h) = q_i . k_j / sqrt(d_h) - tau sinh(mu (j - i))`` (offset j - i).
    Positions are shifted by ``center`` first (the product is unchanged; it avoids overflow).
    """
    d_h = q.shape[-1]
    pi = jnp.asarray(q_positions, jnp.float32)[..., :, None] - center  # [..., Tq, 1]
    pj = jnp.asarray(k_positions, jnp.float32)[..., :, None] - center
    tau = jnp.asarray(tau, jnp.float32)
    mu = jnp.asarray(mu, jnp.float32)
    s = jnp.sqrt(jnp.float32(d_h))
    qa = s * jnp.stack([-(tau / 2) * jnp.exp(-mu * pi), (tau / 2) * jnp.exp(mu * pi)], -1)
    ka = jnp.stack([jnp.exp(mu * pj), jnp.exp(-mu * pj)], -1)
    qa = jnp.broadcast_to(qa, (*q.shape[:-1], 2)).astype(q.dtype)
    ka = jnp.broadcast_to(ka, (*k.shape[:-1], 2)).astype(k.dtype)
    return jnp.concatenate([q, qa], -1), jnp.concatenate([k, ka], -1)


@dataclasses.dataclass(frozen=True)
class HypeOptions:
    """Options of HyPE (arXiv 2310.19676).

    Attributes:
      mu_init: |mu| at initialisation (mu_h = -mu_init, so the bias starts ALiBi-like).
      slopes: ALiBi slopes m_h that set tau_h = m_h / mu_init ("canonical" or "exp").
      learned: train tau and mu.
      offset: the sign convention of r in sinh(mu r): "j-i" (default) or "i-j".
      per_layer: one parameter set per layer (default False: shared like ALiBi).
    """

    mu_init: float = 0.02
    slopes: str = "canonical"
    learned: bool = True
    offset: str = "j-i"
    per_layer: bool = False

    def validate(self, ctx: PEContext) -> None:
        if self.mu_init <= 0:
            raise ValueError(f"HyPE mu_init must be > 0, got {self.mu_init}")
        if self.slopes not in ("canonical", "exp"):
            raise ValueError(f"HyPE slopes must be 'canonical' or 'exp', got {self.slopes!r}")
        if self.offset not in ("j-i", "i-j"):
            raise ValueError(f"HyPE offset must be 'j-i' or 'i-j', got {self.offset!r}")


@register("hype", options=HypeOptions,
          paper="Angelotti, HyPE: Attention with Hyperbolic Biases, arXiv 2310.19676")
class Hype(PositionalEncoding):
    """Hyperbolic-sine relative bias per head (hook ``bias``); relative."""

    is_relative = True

    def __init__(self, options: HypeOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("hype", "num_heads")
        m = alibi_slopes(ctx.num_heads, kind=options.slopes)
        mu = -options.mu_init * jnp.ones((ctx.num_heads,), jnp.float32)
        tau = m / options.mu_init
        if options.offset == "i-j":
            mu = -mu
        wrap = nnx.Param if options.learned else nnx.Variable
        self.tau, self.mu = wrap(tau), wrap(mu)

    @property
    def causal(self) -> bool:
        """Whether the model is causal (only keys j <= i are attended, where HyPE ~ ALiBi)."""
        return self.ctx.causal

    def bias(self, q_pos, k_pos):
        return hype_bias(self.tau[...], self.mu[...], q_pos, k_pos, offset=self.options.offset)
