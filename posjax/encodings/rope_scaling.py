"""RoPE context-extension variants: position interpolation, NTK-aware base scaling, YaRN and
Llama 3.1 frequency scaling (parameter names after HF
``modeling_rope_utils.py``).

With s = ``factor`` and L = ``original_max_len`` (the training length):

* ``rope_linear`` (Chen et al., arXiv 2306.15595): positions p -> p / s.
* ``rope_ntk`` (NTK-aware, community proposal 2023): base' = base * s^(d_rot / (d_rot - 2));
  ``dynamic=True`` uses s_eff = max(1, s * L_cur / L - (s - 1)) with L_cur = max position + 1
  (HF "dynamic").
* ``rope_yarn`` (Peng et al., arXiv 2309.00071): theta'_k = (1 - gamma_k) theta_k / s +
  gamma_k theta_k between two boundaries set by alpha = 1 and beta = 32 rotations over L; q and k
  are multiplied by 0.1 ln s + 1 (so logits scale by its square). ``ramp="index"`` (default) is
  the YaRN authors' code, which every YaRN checkpoint was trained with: the boundaries are the
  pair indices d(beta) (floored) and d(alpha) (ceiled), d(n) = d_rot ln(L / (2 pi n)) /
  (2 ln base), and gamma falls linearly in the pair index k between them.
  ``ramp="ratio"`` is the paper's Eq. (18)-(19): with rho_k = L / lambda_k,
  gamma_k = clip((rho_k - alpha) / (beta - alpha), 0, 1), linear in the wavelength ratio. The
  two agree outside the band and differ inside it.
* ``longrope`` (Ding et al., LongRoPE, arXiv 2402.13753): per-pair rescale factors
  lambda_k found by search, theta'_k = theta_k / lambda_k, one list ("short") up to the
  original length L and another ("long") beyond it; q and k are multiplied by
  sqrt(1 + ln s / ln L) with s = max_len / L (the release's attention factor).
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
from posjax.encodings.rope import RoPE, RoPEOptions, rope_frequencies, rotary_dim


def ntk_base(base: float, factor: float, rot_dim: int) -> float | jax.Array:
    """NTK-aware base ``base * factor^(d_rot / (d_rot - 2))`` (factor may be traced)."""
    if rot_dim <= 2:
        raise ValueError(f"NTK scaling needs rot_dim > 2, got {rot_dim}")
    return base * factor ** (rot_dim / (rot_dim - 2))


def ramp_frequencies(theta: jax.Array, factor: float, original_max_len: float, low: float,
                     high: float) -> jax.Array:
    """``theta'_k = (1 - g_k) theta_k / s + g_k theta_k`` with g_k = clip((L/lambda_k - low) /
    (high - low), 0, 1) and lambda_k = 2 pi / theta_k (YaRN: low=alpha, high=beta; Llama 3.1:
    low=f_low, high=f_high). Zero frequencies stay zero. ``high == low`` is the step
    g_k = [L/lambda_k > low] (Llama 4 Scout's published scaling, f_low = f_high = 1)."""
    if high < low:
        raise ValueError(f"ramp needs high >= low, got low={low}, high={high}")
    theta = jnp.asarray(theta, jnp.float32)
    rotations = original_max_len * theta / (2.0 * math.pi)  # L / lambda_k
    if high == low:
        g = (rotations > low).astype(theta.dtype)
    else:
        g = jnp.clip((rotations - low) / (high - low), 0.0, 1.0)
    return (1.0 - g) * theta / factor + g * theta


def yarn_attention_factor(factor: float, mscale: float = 1.0) -> float:
    """YaRN's q/k multiplier 0.1 m ln s + 1 (1 for s <= 1); m = ``mscale`` (1 in the paper)."""
    return 1.0 if factor <= 1.0 else 0.1 * mscale * math.log(factor) + 1.0


def yarn_correction_range(rot_dim: int, base: float, original_max_len: float, alpha: float,
                          beta: float, *, truncate: bool = True) -> tuple[float, float]:
    """Pair-index boundaries ``(low, high)`` of YaRN's index ramp (the YaRN authors' code).

    d(n) = d_rot ln(L / (2 pi n)) / (2 ln base) is the (fractional) pair index whose wavelength
    makes n rotations over L; low = d(beta) and high = d(alpha), floored/ceiled when
    ``truncate``, clipped to [0, d_rot - 1].
    """
    def index(n):
        return rot_dim * math.log(original_max_len / (n * 2.0 * math.pi)) / (2.0 * math.log(base))

    low, high = index(beta), index(alpha)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, rot_dim - 1)


def index_ramp_frequencies(theta: jax.Array, factor: float, low: float, high: float) -> jax.Array:
    """``theta'_k = g_k theta_k / s + (1 - g_k) theta_k`` with g_k = clip((k - low) /
    (high - low), 0, 1) linear in the pair index k (YaRN authors' code; ``high == low`` is
    widened by 0.001 as there)."""
    theta = jnp.asarray(theta, jnp.float32)
    if high == low:
        high = high + 0.001
    g = jnp.clip((jnp.arange(theta.shape[0], dtype=jnp.float32) - low) / (high - low), 0.0, 1.0)
    return theta / factor * g + theta * (1.0 - g)


def longrope_attention_factor(factor: float, original_max_len: float) -> float:
    """LongRoPE's q/k multiplier sqrt(1 + ln s / ln L) (1 for s <= 1)."""
    if factor <= 1.0:
        return 1.0
    return math.sqrt(1.0 + math.log(factor) / math.log(original_max_len))


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
    ramp bounds ``alpha``/``beta`` (rotations over L), ``ramp`` ("index": the YaRN code's
    pair-index ramp, default; "ratio": the paper's wavelength-ratio ramp), ``truncate`` (index
    ramp: floor/ceil its boundaries) and ``attention_factor`` (None: 0.1 m ln s + 1, divided by
    the same with ``mscale_all_dim`` when both ``mscale`` and ``mscale_all_dim`` are set)."""

    original_max_len: int | None = None
    alpha: float = 1.0
    beta: float = 32.0
    attention_factor: float | None = None
    ramp: str = "index"
    truncate: bool = True
    mscale: float | None = None
    mscale_all_dim: float | None = None

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if self.beta <= self.alpha:
            raise ValueError(f"YaRN needs beta > alpha, got alpha={self.alpha}, beta={self.beta}")
        if self.ramp not in ("index", "ratio"):
            raise ValueError(f"YaRN ramp must be 'index' or 'ratio', got {self.ramp!r}")


@dataclasses.dataclass(frozen=True)
class LongRoPEOptions(RoPEOptions):
    """RoPE options plus LongRoPE's per-pair rescale factors ``short_factor`` and
    ``long_factor`` (``d_rot / 2`` values each; used up to / beyond ``original_max_len``; empty:
    all 1, no rescaling),
    ``original_max_len`` L (default: the model's max_len), ``factor`` s (None: max_len / L) and
    ``attention_factor`` (None: sqrt(1 + ln s / ln L))."""

    short_factor: tuple[float, ...] = ()
    long_factor: tuple[float, ...] = ()
    original_max_len: int | None = None
    factor: float | None = None
    attention_factor: float | None = None

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if ctx.head_dim is not None:
            half = rotary_dim(ctx.head_dim, self.rotary_fraction) // 2
            for name in ("short_factor", "long_factor"):
                if getattr(self, name) and len(getattr(self, name)) != half:
                    raise ValueError(f"longrope {name} has {len(getattr(self, name))} values, "
                                     f"needs {half} (one per rotated pair)")
        if any(v <= 0 for v in (*self.short_factor, *self.long_factor)):
            raise ValueError("longrope rescale factors must be > 0")
        if self.factor is not None and self.factor <= 0:
            raise ValueError(f"longrope factor must be > 0, got {self.factor}")


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
        if self.high_freq_factor < self.low_freq_factor:
            raise ValueError("Llama 3 scaling needs high_freq_factor >= low_freq_factor")


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

    def rotate_prepared(self, q, k, q_pos, k_pos, prepared):
        q, k = super().rotate_prepared(q, k, q_pos, k_pos, prepared)
        m = self.magnitude()
        if m != 1.0:
            q, k = q * jnp.asarray(m, q.dtype), k * jnp.asarray(m, k.dtype)
        return q, k


@register("rope_linear", options=LinearScalingOptions,
          paper="Chen et al., Position Interpolation, arXiv 2306.15595")
class RoPELinear(_ScaledRoPE):
    """RoPE at positions p / s (hook ``rotate``); relative. Realised as frequencies theta_k / s
    (the same angles p theta_k / s)."""

    def frequencies(self) -> jax.Array:
        return super().frequencies() / self.options.factor


@register("rope_ntk", options=NTKScalingOptions,
          paper="NTK-aware RoPE scaling (community proposal, 2023); dynamic: HF transformers")
class RoPENTK(_ScaledRoPE):
    """RoPE with base' = base s^(d_rot/(d_rot-2)) (hook ``rotate``); relative (the dynamic form
    depends on the current length, hence is relative only at a fixed length)."""

    def _rot(self) -> int:
        return rotary_dim(self.ctx.head_dim, self.options.rotary_fraction)

    def frequencies(self, factor: float | jax.Array | None = None) -> jax.Array:
        """Frequencies at NTK factor ``factor``; default the option ``factor``, or 1 (plain
        RoPE, the frequencies up to the original length) when ``dynamic``."""
        rot = self._rot()
        if factor is None:
            factor = 1.0 if self.options.dynamic else self.options.factor
        s = factor
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

    def position_frequencies(self, k_pos):
        if not self.options.dynamic:
            return self.frequencies()
        s, L = self.options.factor, self.original_len()
        cur = jnp.max(jnp.asarray(k_pos, jnp.float32)) + 1.0
        return self.frequencies(jnp.maximum(1.0, s * cur / L - (s - 1.0)))


@register("rope_yarn", options=YarnScalingOptions,
          paper="Peng et al., YaRN, arXiv 2309.00071")
class RoPEYarn(_ScaledRoPE):
    """RoPE with YaRN's ramped frequencies and q/k magnitude factor (hook ``rotate``); relative."""

    def frequencies(self) -> jax.Array:
        o = self.options
        rot = rotary_dim(self.ctx.head_dim, o.rotary_fraction)
        theta = rope_frequencies(rot, o.base)
        if o.ramp == "ratio":
            return ramp_frequencies(theta, o.factor, self.original_len(), o.alpha, o.beta)
        low, high = yarn_correction_range(rot, o.base, self.original_len(), o.alpha, o.beta,
                                          truncate=o.truncate)
        return index_ramp_frequencies(theta, o.factor, low, high)

    def magnitude(self) -> float:
        o = self.options
        if o.attention_factor is not None:
            return o.attention_factor
        if o.mscale and o.mscale_all_dim:
            return (yarn_attention_factor(o.factor, o.mscale)
                    / yarn_attention_factor(o.factor, o.mscale_all_dim))
        return yarn_attention_factor(o.factor)


@register("rope_llama3", options=Llama3ScalingOptions,
          paper="Llama 3.1 RoPE scaling (Meta, 2024); HF transformers modeling_rope_utils")
class RoPELlama3(_ScaledRoPE):
    """RoPE with Llama 3.1's piecewise frequency scaling (hook ``rotate``); relative."""

    def frequencies(self) -> jax.Array:
        o = self.options
        theta = rope_frequencies(rotary_dim(self.ctx.head_dim, o.rotary_fraction), o.base)
        return ramp_frequencies(theta, o.factor, self.original_len(), o.low_freq_factor,
                                o.high_freq_factor)


@register("longrope", options=LongRoPEOptions,
          paper="Ding et al., LongRoPE, arXiv 2402.13753")
class LongRoPE(_ScaledRoPE):
    """RoPE with LongRoPE's searched per-pair rescaling (hook ``rotate``): theta_k / lambda_k
    with the short factors while the sequence fits the original length L and the long ones
    beyond it, q and k times the attention factor. Relative at a fixed length."""

    def _scale(self) -> float:
        o = self.options
        if o.factor is not None:
            return float(o.factor)
        if self.ctx.max_len is None:
            return 1.0
        return self.ctx.max_len / self.original_len()

    def frequencies(self, long: bool = False) -> jax.Array:
        """``[d_rot / 2]`` frequencies theta_k / lambda_k with the long (beyond L) or short
        factors."""
        o = self.options
        theta = rope_frequencies(rotary_dim(self.ctx.head_dim, o.rotary_fraction), o.base)
        factors = o.long_factor if long else o.short_factor
        return theta / jnp.asarray(factors, jnp.float32) if factors else theta

    def magnitude(self) -> float:
        o = self.options
        if o.attention_factor is not None:
            return o.attention_factor
        return longrope_attention_factor(self._scale(), self.original_len())

    def position_frequencies(self, k_pos):
        length = jnp.max(jnp.asarray(k_pos, jnp.float32)) + 1.0
        return jnp.where(length > self.original_len(), self.frequencies(True),
                         self.frequencies(False))


@dataclasses.dataclass(frozen=True)
class ProportionalOptions(LinearScalingOptions):
    """RoPE options plus ``proportion`` p and ``factor`` s: the first floor(p d_h / 2) pairs
    rotate with theta_k = base^(-2k / d_h) / s (exponent over the full head dim), the other
    pairs do not rotate; pairs span the whole head (``rotary_fraction`` must stay 1)."""

    factor: float = 1.0
    proportion: float = 1.0

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if not 0.0 <= self.proportion <= 1.0:
            raise ValueError(f"proportion must be in [0, 1], got {self.proportion}")
        if self.rotary_fraction != 1.0:
            raise ValueError("rope_proportional keeps rotary_fraction=1 (use proportion)")


@register("rope_proportional", options=ProportionalOptions,
          paper="proportional RoPE of Hugging Face transformers (rope_type 'proportional'); "
                "RoPE: Su et al., arXiv 2104.09864")
class RoPEProportional(_ScaledRoPE):
    """RoPE whose low-frequency pairs are left unrotated (hook ``rotate``); relative."""

    def frequencies(self) -> jax.Array:
        o = self.options
        head = self.ctx.head_dim
        rotated = int(o.proportion * head // 2)
        theta = rope_frequencies(head, o.base)
        return jnp.where(jnp.arange(head // 2) < rotated, theta, 0.0) / o.factor
