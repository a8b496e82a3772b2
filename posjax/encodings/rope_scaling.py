"""RoPE context-extension variants: position interpolation, NTK-aware base scaling, YaRN and
Llama 3.1 frequency scaling (spec encodings.md §4, parameter names after HF
``modeling_rope_utils.py``).

With s = ``factor`` and L = ``original_max_len`` (the training length):

* ``rope_linear`` (Chen et al., arXiv 2306.15595): positions p -> p / s.
* ``rope_ntk`` (NTK-aware, community proposal 2023): base' = base * s^(d_rot / (d_rot - 2));
  ``dynamic=True`` uses s_eff = max(1, s * L_cur / L - (s - 1)) with L_cur = max position + 1
  (HF "dynamic").
* ``rope_yarn`` (Peng et al., arXiv 2309.00071): lambda_k = 2 pi / theta_k, rho_k = L / lambda_k,
  gamma_k = clip((rho_k - alpha) / (beta - alpha), 0, 1),
  theta'_k = (1 - gamma_k) theta_k / s + gamma_k theta_k; q and k are multiplied by
  0.1 ln s + 1 (so logits scale by its square); alpha = 1, beta = 32.
* ``rope_llama3`` (Llama 3.1 release): the same ramp on rho_k with (f_low, f_high) = (1, 4):
  keep theta_k when lambda_k < L / f_high, theta_k / s when lambda_k > L / f_low, interpolate
  linearly in L / lambda_k between; defaults s = 8, L = 8192, base 5e5.
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext
from posjax.encodings.registry import register
from posjax.encodings.rope import RoPE, RoPEOptions, apply_rope, rope_frequencies, rotary_dim


def ntk_base(base: float, factor: float, rot_dim: int) -> float | jax.Array:
    """NTK-aware base ``base * factor^(d_rot / (d_rot - 2))`` (factor may be traced)."""
    if rot_dim <= 2:
        raise ValueError(f"NTK scaling needs rot_dim > 2, got {rot_dim}")
    return base * factor ** (rot_dim / (rot_dim - 2))


def ramp_frequencies(theta: jax.Array, factor: float, original_max_len: float, low: float,
                     high: float) -> jax.Array:
    """``theta'_k = (1 - g_k) theta_k / s + g_k theta_k`` with g_k = clip((L/lambda_k - low) /
    (high - low), 0, 1) and lambda_k = 2 pi / theta_k (YaRN: low=alpha, high=beta; Llama 3.1:
    low=f_low, high=f_high). Zero frequencies stay zero."""
    if high <= low:
        raise ValueError(f"ramp needs high > low, got low={low}, high={high}")
    theta = jnp.asarray(theta, jnp.float32)
    rotations = original_max_len * theta / (2.0 * math.pi)  # L / lambda_k
    g = jnp.clip((rotations - low) / (high - low), 0.0, 1.0)
    return (1.0 - g) * theta / factor + g * theta


def yarn_attention_factor(factor: float) -> float:
    """YaRN's q/k multiplier 0.1 ln s + 1 (1 for s <= 1)."""
    return 1.0 if factor <= 1.0 else 0.1 * math.log(factor) + 1.0


@dataclasses.dataclass(frozen=True)
class LinearScalingOptions(RoPEOptions):
    """RoPE options plus ``factor`` s (positions are divided by s)."""

    factor: float = 2.0

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if self.factor <= 0:
            raise ValueError(f"RoPE scaling factor must be > 0, got {self.factor}")


@dataclasses.dataclass(frozen=True)
class NTKScalingOptions(LinearScalingOptions):
    """RoPE options plus ``factor``; ``dynamic`` rescales by the current length (needs
    ``original_max_len``, default the model's max_len)."""

    dynamic: bool = False
    original_max_len: int | None = None


@dataclasses.dataclass(frozen=True)
class YarnScalingOptions(LinearScalingOptions):
    """RoPE options plus ``factor``, ``original_max_len`` L (default: the model's max_len),
    ramp bounds ``alpha``/``beta`` and ``attention_factor`` (None: 0.1 ln s + 1)."""

    original_max_len: int | None = None
    alpha: float = 1.0
    beta: float = 32.0
    attention_factor: float | None = None

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if self.beta <= self.alpha:
            raise ValueError(f"YaRN needs beta > alpha, got alpha={self.alpha}, beta={self.beta}")


@dataclasses.dataclass(frozen=True)
class Llama3ScalingOptions(LinearScalingOptions):
    """RoPE options with Llama 3.1 defaults: base 5e5, factor 8, ``low_freq_factor`` 1,
    ``high_freq_factor`` 4, ``original_max_len`` 8192."""

    base: float = 500000.0
    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_len: int | None = 8192

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if self.high_freq_factor <= self.low_freq_factor:
            raise ValueError("Llama 3 scaling needs high_freq_factor > low_freq_factor")


class _ScaledRoPE(RoPE):
    """RoPE with rescaled frequencies, positions and q/k magnitudes."""

    position_scale: float = 1.0

    def magnitude(self) -> float:
        """Factor multiplying q and k (YaRN's 0.1 ln s + 1; 1 otherwise)."""
        return 1.0

    def original_len(self) -> float:
        L = getattr(self.options, "original_max_len", None) or self.ctx.max_len
        if L is None:
            raise ValueError(f"PE '{self.name}' needs original_max_len (or the model's max_len)")
        return float(L)

    def _apply_with(self, x, positions, freqs):
        o = self.options
        out = apply_rope(x, positions, rotary_fraction=o.rotary_fraction,
                         interleaved=o.interleaved, frequencies=freqs,
                         position_scale=self.position_scale)
        if o.num_rotary_heads is None:
            return out
        heads = jnp.arange(x.shape[-2]) < o.num_rotary_heads
        return jnp.where(heads[:, None], out, x)

    def rotate(self, q, k, q_pos, k_pos):
        freqs = self.frequencies()
        q, k = self._apply_with(q, q_pos, freqs), self._apply_with(k, k_pos, freqs)
        m = self.magnitude()
        if m != 1.0:
            q, k = q * jnp.asarray(m, q.dtype), k * jnp.asarray(m, k.dtype)
        return q, k


@register("rope_linear", options=LinearScalingOptions,
          paper="Chen et al., Position Interpolation, arXiv 2306.15595")
class RoPELinear(_ScaledRoPE):
    """RoPE at positions p / s (hook ``rotate``); relative."""

    def __init__(self, options: LinearScalingOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx, rngs=rngs)
        self.position_scale = 1.0 / options.factor


@register("rope_ntk", options=NTKScalingOptions,
          paper="NTK-aware RoPE scaling (community proposal, 2023); dynamic: HF transformers")
class RoPENTK(_ScaledRoPE):
    """RoPE with base' = base s^(d_rot/(d_rot-2)) (hook ``rotate``); relative (the dynamic form
    depends on the current length, hence is relative only at a fixed length)."""

    def _rot(self) -> int:
        return rotary_dim(self.ctx.head_dim, self.options.rotary_fraction)

    def frequencies(self, factor: float | jax.Array | None = None) -> jax.Array:
        rot = self._rot()
        s = self.options.factor if factor is None else factor
        k = jnp.arange(rot // 2, dtype=jnp.float32)
        return ntk_base(self.options.base, jnp.asarray(s, jnp.float32), rot) ** (-2.0 * k / rot)

    def kv_cache_unsupported(self) -> str | None:
        if self.options.dynamic:
            return ("dynamic NTK rescales every key by the current length, so keys cached at "
                    "shorter lengths differ from a full recompute")
        return None

    def packing_unsupported(self) -> str | None:
        if self.options.dynamic:
            return ("dynamic NTK rescales by the longest position in the row, not the length of "
                    "each segment")
        return None

    def rotate(self, q, k, q_pos, k_pos):
        if not self.options.dynamic:
            return super().rotate(q, k, q_pos, k_pos)
        s, L = self.options.factor, self.original_len()
        cur = jnp.max(jnp.asarray(k_pos, jnp.float32)) + 1.0
        s_eff = jnp.maximum(1.0, s * cur / L - (s - 1.0))
        freqs = self.frequencies(s_eff)
        return self._apply_with(q, q_pos, freqs), self._apply_with(k, k_pos, freqs)


@register("rope_yarn", options=YarnScalingOptions,
          paper="Peng et al., YaRN, arXiv 2309.00071")
class RoPEYarn(_ScaledRoPE):
    """RoPE with YaRN's ramped frequencies and q/k magnitude factor (hook ``rotate``); relative."""

    def frequencies(self) -> jax.Array:
        o = self.options
        theta = rope_frequencies(rotary_dim(self.ctx.head_dim, o.rotary_fraction), o.base)
        return ramp_frequencies(theta, o.factor, self.original_len(), o.alpha, o.beta)

    def magnitude(self) -> float:
        o = self.options
        return yarn_attention_factor(o.factor) if o.attention_factor is None else o.attention_factor


@register("rope_llama3", options=Llama3ScalingOptions,
          paper="Llama 3.1 RoPE scaling (Meta, 2024); HF transformers modeling_rope_utils")
class RoPELlama3(_ScaledRoPE):
    """RoPE with Llama 3.1's piecewise frequency scaling (hook ``rotate``); relative."""

    def frequencies(self) -> jax.Array:
        o = self.options
        theta = rope_frequencies(rotary_dim(self.ctx.head_dim, o.rotary_fraction), o.base)
        return ramp_frequencies(theta, o.factor, self.original_len(), o.low_freq_factor,
                                o.high_freq_factor)
