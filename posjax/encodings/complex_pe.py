"""Complex-valued word/position embedding (Wang et al., "Encoding word order in complex
embeddings", ICLR 2020, arXiv 1912.12333).

Token w at position p gets, per complex dimension k, an amplitude, a frequency and a phase:

  f_k(w, p) = r_{w,k} * exp(i (omega_{w,k} p + phi_{w,k})),

so a shift by delta multiplies each coordinate by exp(i omega_{w,k} delta), a position-free
transform. posjax realises the complex vector of d/2 dims as the real vector [Re f | Im f] of
width d_model; the model's real dot products q.k of such stacks are the real readout
Re<q, k> of the Hermitian product.

Interpretation (recorded in the options): the ``embed`` hook receives token *embeddings* e_w, not
ids, so r, omega and phi are learned affine functions of e_w (r = e W_r, omega = e W_omega +
omega_0, phi = e W_phi), i.e. a rank-d factorisation of the paper's three V x d tables. omega_0
starts at sinusoidal frequencies, so at initialisation every token carries a common carrier.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding, batch_positions
from posjax.encodings.registry import register
from posjax.encodings.sinusoidal import sinusoidal_frequencies


def complex_embedding(amplitude: jax.Array, frequency: jax.Array, phase: jax.Array,
                      positions: jax.Array) -> jax.Array:
    """``[..., T, 2m]`` = [Re | Im] of ``amplitude * exp(i (frequency * p + phase))``.

    Args:
      amplitude, frequency, phase: ``[..., T, m]`` per-token values.
      positions: ``[..., T]`` positions p.
    """
    angle = frequency * jnp.asarray(positions, jnp.float32)[..., None] + phase
    return jnp.concatenate([amplitude * jnp.cos(angle), amplitude * jnp.sin(angle)], axis=-1)


@dataclasses.dataclass(frozen=True)
class ComplexOptions:
    """Options of the complex-valued PE (arXiv 1912.12333).

    Attributes:
      parametrisation: "projection" (r, omega, phi affine in the token embedding; the only one
        the ``embed`` hook allows, see the module docstring).
      readout: "re" -- real part of the Hermitian product, which is what real attention computes
        on [Re | Im] stacks. The paper's alternative |.| readout needs complex attention and is not
        available in the real-valued model.
      base: base of the initial carrier frequencies omega_0 = base^(-2k/m), m = d/2.
      init_std: std of W_omega and W_phi (W_r starts at the identity-like [I | 0] map).
    """

    parametrisation: str = "projection"
    readout: str = "re"
    base: float = 10000.0
    init_std: float = 0.02

    def validate(self, ctx: PEContext) -> None:
        if self.parametrisation != "projection":
            raise ValueError("complex PE parametrisation must be 'projection' (the embed hook sees "
                             f"embeddings, not token ids), got {self.parametrisation!r}")
        if self.readout != "re":
            raise ValueError(f"complex PE readout must be 're' in the real-valued model, got "
                             f"{self.readout!r}")
        if ctx.d_model is not None and ctx.d_model % 2:
            raise ValueError(f"complex PE needs an even d_model, got {ctx.d_model}")


@register("complex", options=ComplexOptions,
          paper="Wang et al., Encoding word order in complex embeddings, arXiv 1912.12333")
class ComplexPE(PositionalEncoding):
    """Replaces each token embedding by [Re | Im] of r exp(i(omega p + phi)) (hook ``embed``);
    absolute in the additive sense, a shift acts as a per-token phase rotation."""

    is_relative = False

    def __init__(self, options: ComplexOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("complex", "d_model")
        d = ctx.d_model
        m = d // 2
        k_w, k_p = jax.random.split(rngs.params())
        self.w_amplitude = nnx.Param(jnp.eye(d, m, dtype=jnp.float32))
        self.w_frequency = nnx.Param(options.init_std * jax.random.normal(k_w, (d, m), jnp.float32))
        self.w_phase = nnx.Param(options.init_std * jax.random.normal(k_p, (d, m), jnp.float32))
        self.base_frequency = nnx.Param(sinusoidal_frequencies(d, options.base))

    def components(self, x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Amplitude, frequency and phase ``[..., T, d/2]`` of token embeddings ``x [..., T, d]``."""
        x = x.astype(jnp.float32)
        return (x @ self.w_amplitude[...], x @ self.w_frequency[...] + self.base_frequency[...],
                x @ self.w_phase[...])

    def table(self, positions):
        """The carrier of a unit-amplitude token with zero embedding offset:
        ``[cos(omega_0 p) | sin(omega_0 p)]`` ``[n, d]`` (token-independent part, for geometry)."""
        angle = jnp.asarray(positions, jnp.float32)[..., None] * self.base_frequency[...]
        return jnp.concatenate([jnp.cos(angle), jnp.sin(angle)], axis=-1)

    def embed(self, x, positions, *, deterministic=True, rngs=None):
        pos = batch_positions(positions)
        r, w, phi = self.components(x)
        return complex_embedding(r, w, phi, pos).astype(x.dtype)
