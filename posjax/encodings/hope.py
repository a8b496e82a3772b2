"""HoPE: high-frequency rotary position encoding (Chen, Lv, Luan, Wang, Liu, "HoPE: A Novel
Positional Encoding Without Long-Term Decay for Enhanced Context Awareness and Extrapolation",
ACL 2025, arXiv 2410.21216). Not the hyperbolic HoPE of arXiv 2509.05218.

A RoPE variant that keeps only the high-frequency rotary components; the low-frequency ones are
made position-independent (theta = 0: no rotation), which removes RoPE's long-term decay.

The cut-off is tied to the training length (to confirm from the paper). Two readings are exposed:

* ``cutoff="wavelength"`` (default): rotate pair k iff its wavelength 2 pi / theta_k is at most
  ``train_length`` (the pair completes a full turn within the training context);
* ``cutoff="pairs"``: rotate the first ``rotated_pairs`` (highest-frequency) pairs.
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


def hope_frequencies(rot_dim: int, base: float = 10000.0, *, train_length: float | None = None,
                     rotated_pairs: int | None = None) -> jax.Array:
    """RoPE frequencies ``[rot_dim // 2]`` with the low-frequency pairs set to 0.

    Exactly one of ``train_length`` (keep theta_k with 2 pi / theta_k <= train_length) and
    ``rotated_pairs`` (keep the first k pairs) must be given.
    """
    if (train_length is None) == (rotated_pairs is None):
        raise ValueError("HoPE needs exactly one of train_length and rotated_pairs")
    theta = rope_frequencies(rot_dim, base)
    if rotated_pairs is not None:
        if not 0 <= rotated_pairs <= rot_dim // 2:
            raise ValueError(f"HoPE rotated_pairs must be in [0, {rot_dim // 2}], got {rotated_pairs}")
        keep = jnp.arange(rot_dim // 2) < rotated_pairs
    else:
        if train_length <= 0:
            raise ValueError(f"HoPE train_length must be positive, got {train_length}")
        keep = 2.0 * math.pi / theta <= train_length
    return jnp.where(keep, theta, 0.0)


@dataclasses.dataclass(frozen=True)
class HopeOptions(RoPEOptions):
    """Options of HoPE (arXiv 2410.21216), on top of RoPE's.

    Attributes:
      cutoff: "wavelength" (default) or "pairs" (docs/interpretations.md).
      train_length: wavelength threshold; None uses the model's ``max_len``.
      rotated_pairs: number of rotated pairs for ``cutoff="pairs"``.
    """

    cutoff: str = "wavelength"
    train_length: int | None = None
    rotated_pairs: int | None = None

    def validate(self, ctx: PEContext) -> None:
        super().validate(ctx)
        if self.cutoff not in ("wavelength", "pairs"):
            raise ValueError(f"HoPE cutoff must be 'wavelength' or 'pairs', got {self.cutoff!r}")
        if self.cutoff == "pairs" and self.rotated_pairs is None:
            raise ValueError("HoPE cutoff='pairs' needs rotated_pairs")
        if self.cutoff == "wavelength" and self.train_length is None and ctx.max_len is None:
            raise ValueError("HoPE cutoff='wavelength' needs train_length (or the model's max_len)")
        if self.train_length is not None and self.train_length <= 0:
            raise ValueError(f"HoPE train_length must be positive, got {self.train_length}")


@register("hope", options=HopeOptions,
          paper="Chen et al., HoPE: Without Long-Term Decay, arXiv 2410.21216")
class HoPE(RoPE):
    """RoPE with only its high-frequency pairs rotated (hook ``rotate``); relative."""

    probe_options = {"train_length": 16}  # a short cutoff: some pairs unrotated at the probe

    def __init__(self, options: HopeOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx, rngs=rngs)

    def frequencies(self) -> jax.Array:
        o = self.options
        rot = rotary_dim(self.ctx.head_dim, o.rotary_fraction)
        if o.cutoff == "pairs":
            return hope_frequencies(rot, o.base, rotated_pairs=o.rotated_pairs)
        return hope_frequencies(rot, o.base, train_length=o.train_length or self.ctx.max_len)
