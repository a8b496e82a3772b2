"""FoPE: Fourier position embedding (Hua, Jiang, Zhang, Ji, Liu, Qi, Wu, Zhou, "Fourier Position
Embedding: Enhancing Attention's Periodic Extension for Length Generalization", ICML 2025,
arXiv 2412.17739, Sec. 4).

RoPE multiplies the complex pair ``z_j = x_{a} + i x_{b}`` of pair j by ``e^{i n theta_j}``. FoPE
treats each pair as a Fourier series over all the frequencies of the head:

    z'_j(n) = z_j * c_j(n),   c_j(n) = sum_k A_jk e^{i n theta'_k},

with ``A = I + N`` (the dominant frequency with weight 1, the others with random weights
``N_jk ~ N(0, sigma^2)``, ``N_jj = 0``) and ``theta'`` RoPE's frequencies with the under-trained
ones clipped to 0: a frequency whose period ``2 pi / theta_k`` exceeds the training length never
completes a turn in training, and FoPE replaces it by the zero frequency (a constant). With
``sigma = 0`` and no clipping FoPE is RoPE. ``c_j`` is applied as ``|c_j|`` times a rotation by
``arg c_j``. The cross-frequency terms make the logits depend on absolute positions, so FoPE is
not relative, and ``|c_j| != 1`` makes it not norm-preserving.
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext
from posjax.encodings.registry import register
from posjax.encodings.rope import RoPE, RoPEOptions, rope_frequencies, rotary_dim, rotate_pairs


def fope_frequencies(rot_dim: int, base: float = 10000.0, *, train_length: float | None = None,
                     dtype=jnp.float32) -> jax.Array:
    """RoPE frequencies ``[rot_dim // 2]`` with those of period > ``train_length`` set to 0."""
    theta = rope_frequencies(rot_dim, base, dtype)
    if train_length is None:
        return theta
    if train_length <= 0:
        raise ValueError(f"FoPE train_length must be positive, got {train_length}")
    return jnp.where(2.0 * math.pi / theta <= train_length, theta, 0.0)


def apply_fope(x: jax.Array, positions: jax.Array, *, theta: jax.Array, coefficients: jax.Array,
               interleaved: bool = False) -> jax.Array:
    """Multiply the pairs of ``x [..., seq, H, d_h]`` by ``c_j(n) = sum_k A_hjk e^{i n theta_k}``.

    Args:
      x: queries or keys; the first ``2 P`` dims are transformed, the rest pass through.
      positions: ``[..., seq]`` positions n.
      theta: ``[P]`` frequencies (after clipping).
      coefficients: ``[H, P, P]`` (or ``[P, P]``) Fourier weights A.
      interleaved: pairing convention as in :func:`posjax.encodings.rope.rotate_pairs`.
    """
    dtype = jnp.promote_types(x.dtype, jnp.float32)
    P = theta.shape[0]
    ang = jnp.asarray(positions, dtype)[..., :, None] * theta.astype(dtype)  # [..., seq, P]
    A = jnp.asarray(coefficients, dtype)
    A = jnp.broadcast_to(A, (x.shape[-2], P, P)) if A.ndim == 2 else A
    re = jnp.einsum("hjk,...sk->...shj", A, jnp.cos(ang))  # [..., seq, H, P]
    im = jnp.einsum("hjk,...sk->...shj", A, jnp.sin(ang))
    mag, phase = jnp.hypot(re, im), jnp.arctan2(im, re)
    mag = jnp.repeat(mag, 2, axis=-1) if interleaved else jnp.concatenate([mag, mag], axis=-1)
    out = rotate_pairs(x[..., :2 * P], phase, interleaved=interleaved) * mag.astype(x.dtype)
    return out if 2 * P == x.shape[-1] else jnp.concatenate([out, x[..., 2 * P:]], axis=-1)


@dataclasses.dataclass(frozen=True)
class FoPEOptions(RoPEOptions):
    """Options of FoPE (arXiv 2412.17739), on top of RoPE's.

    Attributes:
      sigma: standard deviation of the non-dominant Fourier weights (0 gives RoPE's pairs).
      clip: clip the frequencies whose period exceeds ``train_length`` to 0.
      train_length: the clipping length; None uses the model's ``max_len``.
      learned: train the Fourier weights (False keeps the random draw fixed).
    """

    sigma: float = 0.3
    clip: bool = True
    train_length: int | None = None
    learned: bool = False

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if self.num_rotary_heads is not None:
            raise ValueError("FoPE does not support num_rotary_heads")
        if self.sigma < 0:
            raise ValueError(f"FoPE sigma must be >= 0, got {self.sigma}")
        if self.train_length is not None and self.train_length <= 0:
            raise ValueError(f"FoPE train_length must be positive, got {self.train_length}")
        if self.clip and self.train_length is None and ctx.max_len is None:
            raise ValueError("FoPE clip=True needs train_length (or the model's max_len)")


@register("fope", options=FoPEOptions,
          paper="Hua et al., Fourier Position Embedding (FoPE), arXiv 2412.17739")
class FoPE(RoPE):
    """RoPE whose pairs carry Fourier series of all head frequencies (hook ``rotate``); not
    relative (cross-frequency terms), not norm-preserving."""

    is_relative = False

    def __init__(self, options: FoPEOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx, rngs=rngs)
        ctx.require("fope", "num_heads")
        P = rotary_dim(ctx.head_dim, options.rotary_fraction) // 2
        noise = options.sigma * jax.random.normal(rngs.params(), (ctx.num_heads, P, P))
        A = jnp.eye(P) + noise * (1.0 - jnp.eye(P))
        self.coefficients = nnx.Param(A) if options.learned else nnx.Variable(A)

    def frequencies(self) -> jax.Array:
        o = self.options
        length = (o.train_length or self.ctx.max_len) if o.clip else None
        return fope_frequencies(rotary_dim(self.ctx.head_dim, o.rotary_fraction), o.base,
                                train_length=length)

    def rotate(self, q, k, q_pos, k_pos):  # its own angles: no shared rope_tables to prepare
        return self._apply(q, q_pos), self._apply(k, k_pos)

    def _apply(self, x, positions):
        return apply_fope(x, positions, theta=self.frequencies(),
                          coefficients=self.coefficients[...], interleaved=self.options.interleaved)
