"""CAPE: continuous augmented positional embeddings (Likhomanenko et al., "CAPE: Encoding
Relative Positions with Continuous Augmented Positional Embeddings", arXiv 2106.03143).

A sinusoidal embedding of continuous positions x_i that are randomly perturbed during training:

  x'_i = lambda * (x_i + Delta + eps_i),   Delta ~ U[-Delta_max, Delta_max],
  eps_i ~ U[-eps_max, eps_max],             ln(lambda) ~ U[-ln(lambda_max), ln(lambda_max)],

with one Delta and lambda per sequence and one eps per token. In evaluation (deterministic) mode
nothing is perturbed and CAPE equals the plain sinusoidal PE.
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding, batch_positions
from posjax.encodings.registry import register
from posjax.encodings.sinusoidal import sinusoidal_at


def cape_positions(key: jax.Array, positions: jax.Array, batch: int, *, max_global_shift: float,
                   max_local_shift: float, max_global_scaling: float) -> jax.Array:
    """Augmented continuous positions ``[batch, seq]`` from ``positions [1 or batch, seq]``.

    Order of operations: global shift, local shift, then global scaling (the reference code's).
    """
    pos = jnp.broadcast_to(jnp.asarray(positions, jnp.float32), (batch, positions.shape[-1]))
    k_shift, k_local, k_scale = jax.random.split(key, 3)
    delta = jax.random.uniform(k_shift, (batch, 1), jnp.float32, -max_global_shift,
                               max_global_shift)
    eps = jax.random.uniform(k_local, pos.shape, jnp.float32, -max_local_shift, max_local_shift)
    log_max = math.log(max_global_scaling)
    log_lam = jax.random.uniform(k_scale, (batch, 1), jnp.float32, -log_max, log_max)
    return jnp.exp(log_lam) * (pos + delta + eps)


@dataclasses.dataclass(frozen=True)
class CapeOptions:
    """Options of CAPE (spec encodings.md §11); text defaults of ``gcambara/cape``.

    Attributes:
      max_global_shift: Delta_max (5).
      max_local_shift: eps_max (1); eps ~ U[-eps_max, eps_max] (the exact range convention of
        the paper is to confirm).
      max_global_scaling: lambda_max (1.03).
      center: subtract the mean position of each sequence before encoding (optional centring).
      base, layout, freq_spacing: the sinusoid (see ``sinusoidal``).
    """

    max_global_shift: float = 5.0
    max_local_shift: float = 1.0
    max_global_scaling: float = 1.03
    center: bool = False
    base: float = 10000.0
    layout: str = "interleaved"
    freq_spacing: str = "2k/d"

    def validate(self, ctx: PEContext) -> None:
        if self.max_global_shift < 0 or self.max_local_shift < 0:
            raise ValueError("CAPE shifts must be >= 0")
        if self.max_global_scaling < 1.0:
            raise ValueError(f"CAPE max_global_scaling must be >= 1, got {self.max_global_scaling}")
        if self.layout not in ("interleaved", "block"):
            raise ValueError(f"CAPE layout must be 'interleaved' or 'block', got {self.layout!r}")
        if ctx.d_model is not None and ctx.d_model % 2:
            raise ValueError(f"CAPE needs an even d_model, got {ctx.d_model}")


@register("cape", options=CapeOptions,
          paper="Likhomanenko et al., CAPE, arXiv 2106.03143")
class Cape(PositionalEncoding):
    """Sinusoidal PE of augmented continuous positions (hook ``embed``); absolute.

    Training mode (``deterministic=False``) draws the augmentation from the ``dropout`` stream of
    ``rngs`` (the stream the training loop provides).
    """

    hook = "embed"
    is_relative = False

    def __init__(self, options: CapeOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("cape", "d_model")

    def kv_cache_unsupported(self) -> str | None:
        if self.options.center:
            return "center=True subtracts the mean position of the whole sequence, which grows"
        return None

    def packing_unsupported(self) -> str | None:
        if self.options.center:
            return "center=True subtracts the mean position of the whole row, not of each segment"
        return None

    def _centred(self, positions: jax.Array) -> jax.Array:
        pos = jnp.asarray(positions, jnp.float32)
        if self.options.center:
            pos = pos - jnp.mean(pos, axis=-1, keepdims=True)
        return pos

    def _encode(self, positions: jax.Array) -> jax.Array:
        o = self.options
        return sinusoidal_at(positions, self.ctx.d_model, o.base, layout=o.layout,
                             freq_spacing=o.freq_spacing)

    def table(self, positions):
        """Evaluation-mode vectors ``[n, d]`` (centred when ``center``), i.e. the sinusoid."""
        return self._encode(self._centred(positions))

    def embed(self, x, positions, *, deterministic=True, rngs=None):
        pos = self._centred(batch_positions(positions))
        if not deterministic:
            if rngs is None:
                raise ValueError("CAPE needs rngs (a 'dropout' stream) when deterministic=False")
            o = self.options
            pos = cape_positions(rngs.dropout(), pos, x.shape[0],
                                 max_global_shift=o.max_global_shift,
                                 max_local_shift=o.max_local_shift,
                                 max_global_scaling=o.max_global_scaling)
        return x + self._encode(pos).astype(x.dtype)
