"""STRING of An et al. ("Why Does the Effective Context Length of LLMs Fall Short?", arXiv
2410.18745, Sec. 4): ShifTed Rotary position embeddING, an inference-time remapping of the
relative positions of a RoPE model (registered as ``string_shift``; unrelated to Cayley-STRING,
``cayley_string``, arXiv 2502.02562).

The paper's diagnosis: large relative distances are rare in pre-training (a left-skewed position
frequency), so a model's positions near its training length L are under-trained. STRING drops
the largest ``S`` distances and shifts the well-trained ones onto them (Sec. 4.1, the shifted
position matrix): with ``d = i - j`` the distance of query i to key j,

    d' = d              if d < S          (the diagonal band keeps its positions)
    d' = d - S + W      if d >= S         (shifted by the offset S, plus a local window W)

so distances in [S, L) are read as [W, L - S + W), and the largest distance used is L - 1 - S
+ W. The paper's defaults are S = L / 3 and W = 128 (W <= S). Realised here as in Sec. 4.2 (its
FlashAttention form): RoPE logits with the query at position i on the band, and at position
i - S + W beyond it, selected per (query, key) pair (hook ``logits``; keys are rotated at their
own positions). Interpretation for bidirectional attention (the paper is causal only): the map
is applied to |d| with d's sign, d' = sign(d) (|d| - S + W) for |d| >= S, which keeps the logit
a function of d alone (relative). The released code multiplies q and k by 0.1 ln 2 + 1, as YaRN
does; here that is ``attention_factor`` (default 1, the paper's equations).

It needs no parameters and can be switched on in a model trained with ``pe="rope"`` (same
weights, same ``base`` / ``interleaved``): :func:`string_shift_distances` is the position matrix.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding, batch_positions
from posjax.encodings.registry import register
from posjax.encodings.rope import apply_rope, rope_frequencies, rope_tables, rotary_dim


def string_shift_distances(q_pos, k_pos, shift: int, window: int):
    """STRING's shifted relative-position matrix ``d' [..., Tq, Tk]`` (arXiv 2410.18745, Sec.
    4.1): ``d = q_pos_i - k_pos_j``; ``d`` where ``|d| < shift``, else ``sign(d) (|d| - shift +
    window)``. Works on NumPy or JAX arrays ``[..., T]``."""
    xp = jnp if isinstance(q_pos, jax.Array) or isinstance(k_pos, jax.Array) else np
    d = xp.asarray(q_pos)[..., :, None] - xp.asarray(k_pos)[..., None, :]
    return xp.where(xp.abs(d) < shift, d, xp.sign(d) * (xp.abs(d) - shift + window))


@dataclasses.dataclass(frozen=True)
class StringShiftOptions:
    """Options of STRING (An et al., arXiv 2410.18745).

    Attributes:
      base, interleaved, rotary_fraction: those of the RoPE model it is applied to.
      shift: the offset S (distances >= S are shifted); None: floor(max_len / 3), the paper's
        default S = L / 3.
      window: the local window W <= S; None: min(128, S // 2) (the paper's W = 128 at L >= 256).
      attention_factor: multiplies q and k (so the logits by its square); 1 in the paper's
        equations, 0.1 ln 2 + 1 in the released code.
    """

    base: float = 10000.0
    interleaved: bool = False
    rotary_fraction: float = 1.0
    shift: int | None = None
    window: int | None = None
    attention_factor: float = 1.0

    def validate(self, ctx: PEContext) -> None:
        if self.base <= 1.0:
            raise ValueError(f"string_shift base must be > 1, got {self.base}")
        if ctx.head_dim is not None:
            rotary_dim(ctx.head_dim, self.rotary_fraction)
        if self.shift is None and ctx.max_len is None:
            raise ValueError("string_shift needs shift= (the offset S) or the model's max_len")
        if self.shift is not None and self.shift < 1:
            raise ValueError(f"string_shift shift must be >= 1, got {self.shift}")
        if self.window is not None:
            s = self.shift if self.shift is not None else (ctx.max_len or 0) // 3
            if not 0 <= self.window <= s:
                raise ValueError(f"string_shift window must be in [0, shift={s}], got "
                                 f"{self.window}")
        if self.attention_factor <= 0:
            raise ValueError(f"string_shift attention_factor must be > 0, got "
                             f"{self.attention_factor}")


@register("string_shift", options=StringShiftOptions,
          paper="An et al., STRING (shifted RoPE at inference), arXiv 2410.18745")
class StringShift(PositionalEncoding):
    """RoPE logits at STRING's shifted relative positions (hook ``logits``); relative."""

    is_relative = True
    probe_options = {"shift": 3, "window": 1}

    def __init__(self, options: StringShiftOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("string_shift", "head_dim")
        self.shift = int(options.shift if options.shift is not None else max(1, ctx.max_len // 3))
        self.window = int(options.window if options.window is not None
                          else min(128, self.shift // 2))

    def logits(self, logits, q, k, q_pos, k_pos, mask):
        del mask
        o = self.options
        rot = rotary_dim(q.shape[-1], o.rotary_fraction)
        theta = rope_frequencies(rot, o.base, np.float64)
        dtype = jnp.promote_types(q.dtype, jnp.float32)
        q_pos, k_pos = batch_positions(q_pos), batch_positions(k_pos)
        off = self.shift - self.window

        def rope(x, pos):
            tables = rope_tables(pos, theta, dtype=dtype)
            return apply_rope(x.astype(dtype), None, rotary_fraction=o.rotary_fraction,
                              interleaved=o.interleaved, tables=tables)

        kr = rope(k, k_pos)
        scale = self.attention_scale(q.shape[-1]) * o.attention_factor ** 2

        def dots(p):
            return jnp.einsum("bqhd,bkhd->bhqk", rope(q, p), kr) * scale

        d = (jnp.asarray(q_pos)[..., :, None] - jnp.asarray(k_pos)[..., None, :])[:, None]
        out = jnp.where(d >= self.shift, dots(q_pos - off), dots(q_pos))
        if not self.ctx.causal:  # keys ahead of the query (bidirectional): the mirrored shift
            out = jnp.where(d <= -self.shift, dots(q_pos + off), out)
        return out.astype(logits.dtype)
