"""TUPE: transformer with untied positional encoding (Ke, He, Liu, "Rethinking Positional
Encoding in Language Pre-training", arXiv 2006.15595).

The PE is not added to the input. Each logit is the content term plus a position-only term:

  alpha_ij = (1/sqrt(2d)) (x_i W^Q)(x_j W^K)^T
             + reset_theta( (1/sqrt(2d)) (p_i U^Q)(p_j U^K)^T [+ b_{j-i} (TUPE-R)], i, j )

with p a learned table shared across heads, U^Q, U^K per head and shared across layers (the
positional term is computed once per forward and reused by every layer: a ``bias`` hook), and
the optional [CLS] reset: theta_1 (per head) on the row of the [CLS] query, theta_2 on the column
of the [CLS] key for the other queries.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding, check_table_length
from posjax.encodings.registry import register
from posjax.encodings.t5 import t5_bucket


def tupe_position_logits(p_q: jax.Array, p_k: jax.Array, u_q: jax.Array, u_k: jax.Array,
                         scale: float) -> jax.Array:
    """Position-only logits ``scale * (p_i U^Q_h)(p_j U^K_h)^T``.

    Args:
      p_q: ``[..., Tq, d]`` table rows at the query positions.
      p_k: ``[..., Tk, d]`` rows at the key positions.
      u_q, u_k: ``[d, H, d_h]`` per-head projections.
      scale: 1/sqrt(2 d_h) by default.

    Returns:
      ``[..., H, Tq, Tk]``.
    """
    qh = jnp.einsum("...td,dhe->...hte", p_q, u_q)
    kh = jnp.einsum("...td,dhe->...hte", p_k, u_k)
    return scale * jnp.einsum("...hqe,...hke->...hqk", qh, kh)


def cls_reset(logits: jax.Array, q_pos: jax.Array, k_pos: jax.Array, theta1: jax.Array,
              theta2: jax.Array, cls_position: int = 0) -> jax.Array:
    """Untie [CLS]: ``[..., H, Tq, Tk]`` entries with query at ``cls_position`` become theta1_h;
    entries with key at ``cls_position`` (and a non-[CLS] query) become theta2_h."""
    qc = (jnp.asarray(q_pos) == cls_position)[..., None, :, None]
    kc = (jnp.asarray(k_pos) == cls_position)[..., None, None, :]
    t1 = theta1[:, None, None]
    t2 = theta2[:, None, None]
    return jnp.where(qc, t1, jnp.where(kc, t2, logits))


@dataclasses.dataclass(frozen=True)
class TupeOptions:
    """Options of TUPE (arXiv 2006.15595).

    Attributes:
      variant: "A" (absolute, default) or "R" (adds a T5-style bucketed relative bias b_{j-i}).
      untie_cls: apply the [CLS] reset with learned theta_1, theta_2 per head; the [CLS] token is
        the one at ``cls_position``.
      scale_dim: d of 1/sqrt(2d): "head" (d_h, the per-head dim as in multi-head code, default) or
        "model" (d_model) [interpretation].
      num_positions: table rows (default: the model's max_len).
      init_std: std of the table init (0.02).
      pos_layernorm: apply a LayerNorm to the table rows before U^Q, U^K (True: as the TUPE
        reference implementation does, so the positional term starts at O(1); to confirm from
        the paper, whose equations omit it).
      num_buckets, max_distance: T5 buckets of TUPE-R (32, 128).
      bidirectional: None follows the model (for the TUPE-R buckets).
    """

    variant: str = "A"
    untie_cls: bool = False
    cls_position: int = 0
    scale_dim: str = "head"
    num_positions: int | None = None
    init_std: float = 0.02
    pos_layernorm: bool = True
    num_buckets: int = 32
    max_distance: int = 128
    bidirectional: bool | None = None

    def validate(self, ctx: PEContext) -> None:
        if self.variant not in ("A", "R"):
            raise ValueError(f"TUPE variant must be 'A' or 'R', got {self.variant!r}")
        if self.scale_dim not in ("head", "model"):
            raise ValueError(f"TUPE scale_dim must be 'head' or 'model', got {self.scale_dim!r}")
        if self.num_positions is not None and self.num_positions <= 0:
            raise ValueError(f"TUPE num_positions must be positive, got {self.num_positions}")
        if self.init_std < 0:
            raise ValueError(f"TUPE init_std must be >= 0, got {self.init_std}")


@register("tupe", options=TupeOptions,
          paper="Ke, He, Liu, Rethinking Positional Encoding in Language Pre-training (TUPE), "
                "arXiv 2006.15595")
class Tupe(PositionalEncoding):
    """Untied position-only logit term from its own projections of a learned table (hook
    ``bias``, shared across layers); absolute (TUPE-A) or partly relative (TUPE-R)."""

    is_relative = False
    probe_options = {"init_std": 1.0}  # a visible position term at a 16-wide probe

    def __init__(self, options: TupeOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("tupe", "d_model", "num_heads", "head_dim")
        n = options.num_positions or ctx.max_len
        if n is None:
            raise ValueError("PE 'tupe' needs max_len (or the option num_positions)")
        d, h, e = ctx.d_model, ctx.num_heads, ctx.head_dim
        kt, kq, kk, kb = jax.random.split(rngs.params(), 4)
        self.embedding = nnx.Param(options.init_std * jax.random.normal(kt, (n, d), jnp.float32))
        init = jax.nn.initializers.lecun_normal(in_axis=0, out_axis=(1, 2))
        self.u_q = nnx.Param(init(kq, (d, h, e), jnp.float32))
        self.u_k = nnx.Param(init(kk, (d, h, e), jnp.float32))
        self.pos_norm = nnx.LayerNorm(d, rngs=rngs) if options.pos_layernorm else None
        if options.untie_cls:
            self.theta1 = nnx.Param(jnp.zeros((h,), jnp.float32))
            self.theta2 = nnx.Param(jnp.zeros((h,), jnp.float32))
        if options.variant == "R":
            self.bucket_table = nnx.Param(options.init_std * jax.random.normal(
                kb, (options.num_buckets, h), jnp.float32))

    @property
    def max_positions(self) -> int:
        return int(self.embedding.shape[0])

    @property
    def scale(self) -> float:
        d = self.ctx.head_dim if self.options.scale_dim == "head" else self.ctx.d_model
        return float(2 * d) ** -0.5

    def attention_scale(self, head_dim: int) -> float:
        """The content term is scaled by 1/sqrt(2d) too."""
        del head_dim
        return self.scale

    def table(self, positions):
        """The learned rows ``p_i`` ``[..., d]`` (before the optional LayerNorm)."""
        return jnp.take(self.embedding[...], jnp.asarray(positions), axis=0)

    def projected_rows(self, positions):
        """The rows that meet U^Q, U^K: ``LN(p_i)`` with ``pos_layernorm``, else ``p_i``."""
        rows = self.table(positions)
        return rows if self.pos_norm is None else self.pos_norm(rows)

    def bias(self, q_pos, k_pos):
        o = self.options
        for pos in (q_pos, k_pos):
            check_table_length(self.name, jnp.asarray(pos), self.max_positions)
        b = tupe_position_logits(self.projected_rows(q_pos), self.projected_rows(k_pos),
                                 self.u_q[...], self.u_k[...], self.scale)
        if o.variant == "R":
            bidir = (not self.ctx.causal) if o.bidirectional is None else o.bidirectional
            rel = jnp.asarray(k_pos)[..., None, :] - jnp.asarray(q_pos)[..., :, None]
            buckets = t5_bucket(rel, bidirectional=bidir, num_buckets=o.num_buckets,
                                max_distance=o.max_distance)
            b = b + jnp.moveaxis(jnp.take(self.bucket_table[...], buckets, axis=0), -1, -3)
        if o.untie_cls:
            b = cls_reset(b, q_pos, k_pos, self.theta1[...], self.theta2[...], o.cls_position)
        return b
