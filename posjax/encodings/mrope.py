"""M-RoPE: multimodal rotary position embedding (Qwen2-VL, Wang et al., "Qwen2-VL: Enhancing
Vision-Language Model's Perception of the World at Any Resolution", arXiv 2409.12191, Sec. 2.1).

A position is a triple ``(t, h, w)`` (temporal, height, width). The ``d_rot / 2`` RoPE frequency
pairs are cut into three consecutive sections; pair k of section s is rotated by ``pos_s *
theta_k`` with RoPE's ``theta_k = base^(-2k/d_rot)``. Text tokens carry the same value in all
three components, which makes M-RoPE exactly RoPE. The default sections follow the released
Qwen2-VL configuration (16, 24, 24 of 64 pairs, i.e. 1/4, 3/8, 3/8), rounded for other widths.

Positions may be ``[seq]`` or ``[batch, seq]`` (text: one value used for all three components) or
``[batch, seq, 3]``.
Relative in each component: ``<R(p) q, R(p') k>`` depends on ``p' - p`` only.

``section_layout="interleaved"`` is Qwen3-VL's interleaved M-RoPE (HF ``modeling_qwen3_vl.py``,
``apply_interleaved_mrope``): instead of three consecutive blocks, pair k belongs to h when
``k % 3 == 1`` and ``k < 3 s_h``, to w when ``k % 3 == 2`` and ``k < 3 s_w``, and to t otherwise
(T H W T H W ... T T), so every component sees both high and low frequencies; default sections
(s_t, s_h, s_w) = (P - 2 floor(5P/16), floor(5P/16), floor(5P/16)), i.e. Qwen3-VL's (24, 20, 20)
of 64 pairs. ``mrope_yarn`` is M-RoPE with YaRN-scaled frequencies and attention factor (as
vLLM's M-RoPE with a YaRN ``rope_scaling``). Position layouts of multimodal prompts (text, image
grids, video with time alignment, audio): :mod:`posjax.encodings.mrope_layout`.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax.encodings.base import PEContext
from posjax.encodings.registry import register
from posjax.encodings.rope import RoPE, RoPEOptions, rope_frequencies, rotary_dim, rotate_pairs
from posjax.encodings.rope_scaling import (index_ramp_frequencies, yarn_attention_factor,
                                           yarn_correction_range)

SECTION_LAYOUTS = ("block", "interleaved")


def mrope_sections(num_pairs: int, sections: tuple[int, ...] | None = None,
                   layout: str = "block") -> tuple[int, int, int]:
    """Pairs per component ``(t, h, w)``; default ``h = w = floor(3 P / 8)`` (Qwen2-VL, block)
    or ``floor(5 P / 16)`` (Qwen3-VL, interleaved), ``t = P - h - w``."""
    if layout not in SECTION_LAYOUTS:
        raise ValueError(f"M-RoPE section_layout must be one of {SECTION_LAYOUTS}, got {layout!r}")
    if sections is None:
        hw = (3 * num_pairs) // 8 if layout == "block" else (5 * num_pairs) // 16
        return (num_pairs - 2 * hw, hw, hw)
    sections = tuple(int(s) for s in sections)
    if len(sections) != 3 or min(sections) < 0 or sum(sections) != num_pairs:
        raise ValueError(f"M-RoPE sections must be 3 non-negative ints summing to the {num_pairs} "
                         f"rotary pairs, got {sections}")
    if layout == "interleaved" and (3 * sections[1] > num_pairs + 1 or 3 * sections[2] > num_pairs):
        raise ValueError(f"interleaved M-RoPE sections {sections}: the h pairs 1, 4, ... and w "
                         f"pairs 2, 5, ... (3 s_h - 2 and 3 s_w - 1) must fit the {num_pairs} pairs")
    return sections  # type: ignore[return-value]


def mrope_components(num_pairs: int, sections: tuple[int, int, int], layout: str = "block"
                     ) -> np.ndarray:
    """``[P]`` component (0 = t, 1 = h, 2 = w) of each rotary pair: consecutive blocks, or
    Qwen3-VL's interleaving (h at k = 1, 4, ... < 3 s_h; w at k = 2, 5, ... < 3 s_w; t else)."""
    sections = mrope_sections(num_pairs, sections, layout)
    if layout == "block":
        return np.repeat(np.arange(3), sections)
    comp = np.zeros(num_pairs, np.int64)
    comp[1:3 * sections[1]:3] = 1
    comp[2:3 * sections[2]:3] = 2
    return comp


def mrope_angles(positions: jax.Array, theta: jax.Array, sections: tuple[int, int, int],
                 layout: str = "block") -> jax.Array:
    """Angles ``[..., seq, P]``: pair k of component c gets ``positions[..., c] * theta_k``.

    Args:
      positions: ``[seq]`` or ``[batch, seq]`` (text: the same value for all components) or
        ``[batch, seq, 3]``.
      theta: ``[P]`` frequencies.
      sections: pairs per component, summing to P.
      layout: "block" (Qwen2-VL) or "interleaved" (Qwen3-VL), see :func:`mrope_components`.
    """
    pos = jnp.asarray(positions, theta.dtype)
    if pos.ndim < 3:  # text positions [seq] or [batch, seq]: one value for all components
        pos = jnp.stack([pos] * 3, axis=-1)
    component = jnp.asarray(mrope_components(theta.shape[0], sections, layout))
    return jnp.take(pos, component, axis=-1) * theta


def apply_mrope(x: jax.Array, positions: jax.Array, *, theta: jax.Array,
                sections: tuple[int, int, int], interleaved: bool = False,
                layout: str = "block") -> jax.Array:
    """Rotate the first ``2 P`` dims of ``x [..., seq, heads, d_h]`` by :func:`mrope_angles`
    (``interleaved``: the pairing of dims, as in RoPE; ``layout``: the assignment of pairs to
    t/h/w)."""
    rot = 2 * theta.shape[0]
    angles = mrope_angles(positions, theta, sections, layout)[..., :, None, :]  # [.., seq, 1, P]
    out = rotate_pairs(x[..., :rot], angles, interleaved=interleaved)
    return out if rot == x.shape[-1] else jnp.concatenate([out, x[..., rot:]], axis=-1)


@dataclasses.dataclass(frozen=True)
class MRoPEOptions(RoPEOptions):
    """Options of M-RoPE: RoPE's plus ``sections``, the (t, h, w) pair counts (None: Qwen2-VL's
    1/4, 3/8, 3/8 split, or Qwen3-VL's 24/20/20 of 64 when interleaved), and ``section_layout``
    ("block": Qwen2-VL's consecutive sections; "interleaved": Qwen3-VL's T H W T H W ...).
    ``num_rotary_heads`` is not supported."""

    sections: tuple[int, int, int] | None = None
    section_layout: str = "block"

    def __post_init__(self):
        if self.sections is not None:
            object.__setattr__(self, "sections", tuple(self.sections))

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if self.num_rotary_heads is not None:
            raise ValueError("M-RoPE does not support num_rotary_heads")
        if self.section_layout not in SECTION_LAYOUTS:
            raise ValueError(f"M-RoPE section_layout must be one of {SECTION_LAYOUTS}, got "
                             f"{self.section_layout!r}")
        if ctx.head_dim is not None:
            mrope_sections(rotary_dim(ctx.head_dim, self.rotary_fraction) // 2, self.sections,
                           self.section_layout)


@register("mrope", options=MRoPEOptions,
          paper="Wang et al., Qwen2-VL (M-RoPE), arXiv 2409.12191")
class MRoPE(RoPE):
    """RoPE over (t, h, w) positions split by frequency section (hook ``rotate``); relative.
    Text positions ``[..., seq]`` give RoPE exactly."""

    def __init__(self, options: MRoPEOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx, rngs=rngs)
        self.sections = mrope_sections(self.frequencies().shape[0], options.sections,
                                       options.section_layout)

    def magnitude(self) -> float:
        """Factor multiplying q and k (1; YaRN's for ``mrope_yarn``)."""
        return 1.0

    def rotate(self, q, k, q_pos, k_pos):  # its own angles: no shared rope_tables to prepare
        return self._apply(q, q_pos), self._apply(k, k_pos)

    def _apply(self, x, positions):
        o = self.options
        dtype = jnp.promote_types(x.dtype, jnp.float32)
        theta = jnp.asarray(self.frequencies(), dtype)
        out = apply_mrope(x, positions, theta=theta, sections=self.sections,
                          interleaved=o.interleaved, layout=o.section_layout)
        m = self.magnitude()
        return out if m == 1.0 else out * jnp.asarray(m, out.dtype)


@dataclasses.dataclass(frozen=True)
class MRoPEYarnOptions(MRoPEOptions):
    """M-RoPE options plus YaRN's (the index ramp of the YaRN code, as HF's ``yarn``):
    ``factor`` s, ``original_max_len`` L (None: the model's max_len), ``alpha`` / ``beta``
    (HF ``beta_slow`` / ``beta_fast``), ``truncate`` and ``attention_factor`` (None: 0.1 ln s +
    1)."""

    factor: float = 2.0
    original_max_len: int | None = None
    alpha: float = 1.0
    beta: float = 32.0
    truncate: bool = True
    attention_factor: float | None = None

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if self.factor <= 0:
            raise ValueError(f"mrope_yarn factor must be > 0, got {self.factor}")
        if self.beta <= self.alpha:
            raise ValueError(f"mrope_yarn needs beta > alpha, got alpha={self.alpha}, "
                             f"beta={self.beta}")
        if self.original_max_len is None and ctx.max_len is None and ctx.head_dim is not None:
            raise ValueError("mrope_yarn needs original_max_len (or the model's max_len)")


@register("mrope_yarn", options=MRoPEYarnOptions,
          paper="M-RoPE (Wang et al., arXiv 2409.12191) with YaRN scaling (Peng et al., "
                "arXiv 2309.00071), as vLLM's MRotaryEmbedding with rope_scaling yarn")
class MRoPEYarn(MRoPE):
    """M-RoPE whose frequencies and q/k factor are YaRN's (hook ``rotate``); relative."""

    def frequencies(self):
        o = self.options
        rot = rotary_dim(self.ctx.head_dim, o.rotary_fraction)
        L = o.original_max_len or self.ctx.max_len
        if L is None:
            raise ValueError("mrope_yarn needs original_max_len (or the model's max_len)")
        low, high = yarn_correction_range(rot, o.base, float(L), o.alpha, o.beta, truncate=o.truncate)
        with jax.ensure_compile_time_eval():  # constants (also when called under jit)
            theta = index_ramp_frequencies(rope_frequencies(rot, o.base), o.factor, low, high)
            return np.asarray(theta, np.float64)

    def magnitude(self) -> float:
        o = self.options
        return o.attention_factor if o.attention_factor is not None else \
            yarn_attention_factor(o.factor)
