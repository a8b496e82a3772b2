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
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext
from posjax.encodings.registry import register
from posjax.encodings.rope import RoPE, RoPEOptions, rope_frequencies, rotary_dim, rotate_pairs


def mrope_sections(num_pairs: int, sections: tuple[int, ...] | None = None) -> tuple[int, int, int]:
    """Pairs per component ``(t, h, w)``; default ``h = w = floor(3 P / 8)``, ``t = P - h - w``."""
    if sections is None:
        hw = (3 * num_pairs) // 8
        return (num_pairs - 2 * hw, hw, hw)
    sections = tuple(int(s) for s in sections)
    if len(sections) != 3 or min(sections) < 0 or sum(sections) != num_pairs:
        raise ValueError(f"M-RoPE sections must be 3 non-negative ints summing to the {num_pairs} "
                         f"rotary pairs, got {sections}")
    return sections  # type: ignore[return-value]


def mrope_angles(positions: jax.Array, theta: jax.Array, sections: tuple[int, int, int]
                 ) -> jax.Array:
    """Angles ``[..., seq, P]``: pair k in section s gets ``positions[..., s] * theta_k``.

    Args:
      positions: ``[seq]`` or ``[batch, seq]`` (text: the same value for all components) or
        ``[batch, seq, 3]``.
      theta: ``[P]`` frequencies.
      sections: pairs per component, summing to P.
    """
    pos = jnp.asarray(positions, theta.dtype)
    if pos.ndim < 3:  # text positions [seq] or [batch, seq]: one value for all components
        pos = jnp.stack([pos] * 3, axis=-1)
    component = jnp.repeat(jnp.arange(3), jnp.asarray(sections), total_repeat_length=theta.shape[0])
    return jnp.take(pos, component, axis=-1) * theta


def apply_mrope(x: jax.Array, positions: jax.Array, *, theta: jax.Array,
                sections: tuple[int, int, int], interleaved: bool = False) -> jax.Array:
    """Rotate the first ``2 P`` dims of ``x [..., seq, heads, d_h]`` by :func:`mrope_angles`."""
    rot = 2 * theta.shape[0]
    angles = mrope_angles(positions, theta, sections)[..., :, None, :]  # [..., seq, 1, P]
    out = rotate_pairs(x[..., :rot], angles, interleaved=interleaved)
    return out if rot == x.shape[-1] else jnp.concatenate([out, x[..., rot:]], axis=-1)


@dataclasses.dataclass(frozen=True)
class MRoPEOptions(RoPEOptions):
    """Options of M-RoPE: RoPE's plus ``sections``, the (t, h, w) pair counts (None: Qwen2-VL's
    1/4, 3/8, 3/8 split). ``num_rotary_heads`` is not supported."""

    sections: tuple[int, int, int] | None = None

    def __post_init__(self):
        if self.sections is not None:
            object.__setattr__(self, "sections", tuple(self.sections))

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if self.num_rotary_heads is not None:
            raise ValueError("M-RoPE does not support num_rotary_heads")
        if ctx.head_dim is not None:
            mrope_sections(rotary_dim(ctx.head_dim, self.rotary_fraction) // 2, self.sections)


@register("mrope", options=MRoPEOptions,
          paper="Wang et al., Qwen2-VL (M-RoPE), arXiv 2409.12191")
class MRoPE(RoPE):
    """RoPE over (t, h, w) positions split by frequency section (hook ``rotate``); relative.
    Text positions ``[..., seq]`` give RoPE exactly."""

    def __init__(self, options: MRoPEOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx, rngs=rngs)
        self.sections = mrope_sections(self.frequencies().shape[0], options.sections)

    def rotate(self, q, k, q_pos, k_pos):  # its own angles: no shared rope_tables to prepare
        return self._apply(q, q_pos), self._apply(k, k_pos)

    def _apply(self, x, positions):
        o = self.options
        dtype = jnp.promote_types(x.dtype, jnp.float32)
        theta = rope_frequencies(rotary_dim(x.shape[-1], o.rotary_fraction), o.base, dtype)
        return apply_mrope(x, positions, theta=theta, sections=self.sections,
                           interleaved=o.interleaved)
