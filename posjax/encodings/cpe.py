"""CPE / PEG: conditional positional encoding by a positional encoding generator (Chu et al.,
"Conditional Positional Encodings for Vision Transformers", arXiv 2102.10882).

After block ``peg_after`` the residual stream X gets X + F(X), with F a depthwise convolution with
zero padding: k x k over the patch grid (2-D, ``grid=(H, W)``) or k over the sequence (the 1-D
variant for text). Leading tokens (a class token) bypass it. Zero padding lets the model infer
absolute position near the borders; away from them the map is translation-equivariant.

In a causal model the 1-D convolution is causal (left padding k - 1), so no token sees the future.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register


def depthwise_conv1d(x: jax.Array, kernel: jax.Array, bias: jax.Array, *, causal: bool,
                     segment_ids: jax.Array | None = None) -> jax.Array:
    """Depthwise 1-D convolution with zero padding.

    Args:
      x: ``[B, T, C]``.
      kernel: ``[k, C]`` (one filter per channel).
      bias: ``[C]``.
      causal: pad ``k - 1`` zeros on the left (output t sees inputs t-k+1..t); otherwise pad
        ``(k - 1) / 2`` on both sides (k odd), output t sees t-(k-1)/2..t+(k-1)/2.
      segment_ids: optional ``[B, T]`` ids of contiguous segments (packed rows): an input of
        another segment counts as zero padding, so each segment is convolved as if alone.

    Returns:
      ``[B, T, C]``: ``y[t, c] = bias[c] + sum_u kernel[u, c] * x_pad[t + u, c]``.
    """
    k = kernel.shape[0]
    pad = (k - 1, 0) if causal else ((k - 1) // 2, (k - 1) // 2)
    if segment_ids is not None:  # one shifted copy per tap (k is small), cross-segment taps zeroed
        seg = jnp.asarray(segment_ids)
        xs = jnp.pad(x, ((0, 0), pad, (0, 0)))
        ss = jnp.pad(seg, ((0, 0), pad), constant_values=-1)
        n = x.shape[1]
        y = sum(kernel[u].astype(x.dtype) * jnp.where((ss[:, u:u + n] == seg)[..., None],
                                                       xs[:, u:u + n], 0)
                for u in range(k))
        return y + bias.astype(x.dtype)
    y = jax.lax.conv_general_dilated(
        x, kernel[:, None, :].astype(x.dtype), window_strides=(1,), padding=(pad,),
        dimension_numbers=("NWC", "WIO", "NWC"), feature_group_count=x.shape[-1])
    return y + bias.astype(x.dtype)


def depthwise_conv2d(x: jax.Array, kernel: jax.Array, bias: jax.Array, grid: tuple[int, int]
                     ) -> jax.Array:
    """Depthwise k x k convolution of ``x [B, H*W, C]`` laid out row-major on ``grid = (H, W)``,
    zero padding ``(k - 1) / 2``; ``kernel [k, k, C]``; returns ``[B, H*W, C]``."""
    b, n, c = x.shape
    h, w = grid
    if n != h * w:
        raise ValueError(f"CPE grid {grid} holds {h * w} tokens, got {n}")
    k = kernel.shape[0]
    p = (k - 1) // 2
    y = jax.lax.conv_general_dilated(
        x.reshape(b, h, w, c), kernel[:, :, None, :].astype(x.dtype), window_strides=(1, 1),
        padding=((p, p), (p, p)), dimension_numbers=("NHWC", "HWIO", "NHWC"),
        feature_group_count=c)
    return (y + bias.astype(x.dtype)).reshape(b, n, c)


@dataclasses.dataclass(frozen=True)
class CpeOptions:
    """Options of CPE/PEG (spec encodings.md §12).

    Attributes:
      kernel_size: k (3); odd for the non-causal (centred) convolution.
      peg_after: index of the block after which the PEG acts (0: after the first block).
      skip_tokens: leading tokens (class token) that bypass the PEG.
      grid: ``(H, W)`` for the 2-D PEG over patch tokens; None for the 1-D variant.
      causal_conv: None follows the model (causal models get the causal 1-D convolution).
      init_std: std of the normal kernel init (None: 1/sqrt(fan_in), fan_in = k or k*k).
    """

    kernel_size: int = 3
    peg_after: int = 0
    skip_tokens: int = 0
    grid: tuple[int, int] | None = None
    causal_conv: bool | None = None
    init_std: float | None = None

    def __post_init__(self):
        if self.grid is not None:  # lists (from JSON) become a hashable tuple
            object.__setattr__(self, "grid", tuple(self.grid))

    def validate(self, ctx: PEContext) -> None:
        causal = ctx.causal if self.causal_conv is None else self.causal_conv
        if self.kernel_size < 1:
            raise ValueError(f"CPE kernel_size must be >= 1, got {self.kernel_size}")
        if not causal and self.kernel_size % 2 == 0:
            raise ValueError(f"CPE kernel_size must be odd for a centred conv, got {self.kernel_size}")
        if not 0 <= self.peg_after < ctx.num_layers:
            raise ValueError(f"CPE peg_after={self.peg_after} is outside the "
                             f"{ctx.num_layers} layers")
        if self.skip_tokens < 0:
            raise ValueError(f"CPE skip_tokens must be >= 0, got {self.skip_tokens}")
        if self.grid is not None:
            if len(self.grid) != 2 or min(self.grid) < 1:
                raise ValueError(f"CPE grid must be (H, W) with positive sizes, got {self.grid!r}")
            if causal:
                raise ValueError("the 2-D CPE is not causal; use grid=None in a causal model")


@register("cpe", options=CpeOptions,
          paper="Chu et al., Conditional Positional Encodings for Vision Transformers, "
                "arXiv 2102.10882")
class Cpe(PositionalEncoding):
    """Depthwise-conv positional generator after one block (hook ``module``); not relative
    (equivariant only away from the zero-padded borders). Positions are not used: the
    convolution acts on sequence (or grid) order."""

    hook = "module"
    is_relative = False
    supports_kv_cache = False
    kv_cache_reason = ("its convolution mixes each token with its neighbours in the residual "
                       "stream after block peg_after, which a key/value cache does not hold")

    def __init__(self, options: CpeOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("cpe", "d_model")
        k, c = options.kernel_size, ctx.d_model
        shape = (k, c) if options.grid is None else (k, k, c)
        fan_in = k if options.grid is None else k * k
        std = options.init_std if options.init_std is not None else fan_in ** -0.5
        self.kernel = nnx.Param(std * jax.random.normal(rngs.params(), shape, jnp.float32))
        self.conv_bias = nnx.Param(jnp.zeros((c,), jnp.float32))

    @property
    def causal(self) -> bool:
        c = self.options.causal_conv
        return self.ctx.causal if c is None else c

    def packing_unsupported(self) -> str | None:
        if self.options.grid is not None:
            return "the 2-D convolution runs over one patch grid per row"
        if self.options.skip_tokens:
            return "skip_tokens exempts the leading tokens of the row, not of each segment"
        return None

    def generate(self, x: jax.Array, segment_ids: jax.Array | None = None) -> jax.Array:
        """``X + F(X)`` on ``x [B, T, d]``, leading ``skip_tokens`` passed through; with
        ``segment_ids [B, T]`` each segment is convolved alone (1-D only)."""
        s = self.options.skip_tokens
        head, body = x[:, :s], x[:, s:]
        if self.options.grid is None:
            f = depthwise_conv1d(body, self.kernel[...], self.conv_bias[...], causal=self.causal,
                                 segment_ids=segment_ids)
        else:
            f = depthwise_conv2d(body, self.kernel[...], self.conv_bias[...],
                                 tuple(self.options.grid))
        return jnp.concatenate([head, body + f], axis=1)

    def block_output(self, x, positions, layer, *, deterministic=True, rngs=None,
                     segment_ids=None):
        del positions, deterministic, rngs
        return self.generate(x, segment_ids) if layer == self.options.peg_after else x
