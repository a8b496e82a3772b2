"""The positional-encoding contract: one base module, six hooks, one context.

Every PE in posjax is a :class:`PositionalEncoding` (a thin ``flax.nnx`` module around pure
functions) that acts on the model through one or more hooks, always with explicit integer (or
float) positions:

* ``embed(x, positions)``     -- added to the input embeddings (absolute PEs);
* ``rotate(q, k, q_pos, k_pos)`` -- a multiplicative transform of queries and keys (RoPE family);
* ``bias(q_pos, k_pos)``      -- an additive logit bias ``[H, Tq, Tk]`` (ALiBi, T5, ...);
* ``attention_input(h, positions, layer) -> (h_qk, h_v)`` -- the inputs of the q/k projections
  and of the v projection of block ``layer`` (``h`` is the block's attention input, i.e. after
  its pre-LayerNorm); default ``(h, h)`` (positional attention, LaPE);
* ``block_output(x, positions, layer, *, deterministic, rngs) -> x`` -- applied to the residual
  stream after block ``layer``; default identity (CPE);
* ``logits(logits, q, k, q_pos, k_pos, mask)`` -- a contextual hook on the attention logits, for
  PEs whose logit term depends on the queries and keys themselves (CoPE, FoX, PaTH, DAPE).

A rotary PE may split ``rotate`` in two: ``prepare(q_pos, k_pos)`` computes, once per forward,
what depends on positions only (RoPE's cos/sin tables), and ``rotate_prepared(q, k, q_pos,
k_pos, prepared)`` applies it; the model calls ``prepare`` once per PE module and passes its
result to every layer, so the layers and q and k share it. By default ``prepare`` returns None
and ``rotate_prepared`` is ``rotate``; a class that redefines ``rotate`` alone gets these
defaults back (its ``rotate`` keeps its meaning under a parent's ``prepare``).

The defaults are identities. A PE's ``hooks`` is the frozenset of the hook methods its class
actually overrides, derived when the class is defined (so it cannot disagree with the code; e.g.
``{"embed", "rotate"}`` for RoPE plus an absolute sinusoid); the model and the geometry adapters
call only those. ``is_relative`` states whether the PE is shift-invariant
(``b(i+s, j+s) = b(i, j)``; checked for every registered PE by the tests), and ``max_positions``
is the table size of a table-based PE (``None`` when any position is accepted).

Both structural hooks also receive ``segment_ids`` (packed rows). ``supports_kv_cache`` /
``supports_packing`` (with a reason) say whether the PE can decode incrementally and run packed
rows; docs/decoding_and_packing.md states what each hook may depend on for that to hold.
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping

import jax
import jax.numpy as jnp
from flax import nnx

# Hook methods a PE may override, in the order the model applies them; a name that the base
# class does not define is dropped below (so the tuple can list hooks added later).
HOOKS: tuple[str, ...] = ("embed", "attention_input", "rotate", "bias", "logits", "block_output")


def overridden_hooks(cls: type) -> frozenset[str]:
    """The hook methods of :data:`HOOKS` that ``cls`` (a PositionalEncoding subclass) overrides."""
    return frozenset(h for h in HOOKS if getattr(cls, h) is not getattr(PositionalEncoding, h))


def hook_label(hooks: frozenset[str]) -> str:
    """One printable label of a hook set: ``"none"``, ``"rotate"``, ``"embed+rotate"``..."""
    return "+".join(h for h in HOOKS if h in hooks) or "none"


@dataclasses.dataclass(frozen=True)
class PEContext:
    """What a PE may need to know about the model it is plugged into.

    Attributes:
      d_model: width of the residual stream (needed by additive PEs).
      num_heads: attention heads (needed by bias PEs with per-head parameters).
      head_dim: per-head width (needed by rotary PEs).
      max_len: longest sequence the model is built for (table size of absolute PEs).
      num_layers: number of Transformer blocks.
      causal: whether attention is causal (decoder) or bidirectional (encoder).
    """

    d_model: int | None = None
    num_heads: int | None = None
    head_dim: int | None = None
    max_len: int | None = None
    num_layers: int = 1
    causal: bool = False

    def require(self, pe_name: str, *fields: str) -> None:
        """Raise ValueError naming every missing context field that ``pe_name`` needs."""
        missing = [f for f in fields if getattr(self, f) is None]
        if missing:
            raise ValueError(
                f"PE '{pe_name}' needs {', '.join(missing)}; pass "
                + ", ".join(f"{m}=..." for m in missing)
                + " to posjax.encodings.make (a model passes them for you)"
            )


def batch_positions(positions: jax.Array) -> jax.Array:
    """Return positions as ``[batch or 1, seq]`` (a ``[seq]`` vector gets a leading 1)."""
    positions = jnp.asarray(positions)
    if positions.ndim == 1:
        return positions[None, :]
    if positions.ndim != 2:
        raise ValueError(f"positions must be [seq] or [batch, seq], got shape {positions.shape}")
    return positions


def check_table_length(name: str, positions: jax.Array, limit: int) -> None:
    """Raise ValueError when positions run past a table of ``limit`` rows.

    Concrete positions (not traced) are checked by value: their smallest and largest values
    must lie in the table, so an explicit position beyond it (or a negative one) is never
    wrapped or clamped silently, and a packed row longer than the table whose positions all fit
    is accepted. Traced positions (inside ``jit``) get a static length check (shape based) and
    :func:`posjax.input_checks.check_range`: the training loop and ``evaluate_classifier``
    report ``position 12 >= 'learned' table max_len 8`` with the step.
    """
    length = positions.shape[-1]
    traced = isinstance(positions, jax.core.Tracer)
    fits = (not traced and (not positions.size or (int(jnp.max(positions)) < limit
                                                   and int(jnp.min(positions)) >= 0)))
    if length > limit and not fits:
        raise ValueError(
            f"sequence length {length} exceeds the {limit} positions supported by the '{name}' PE "
            f"(its table has max_len={limit}); build the model with a larger max_len or use a "
            "relative PE"
        )
    if isinstance(positions, jax.core.Tracer):
        from posjax.input_checks import check_range

        check_range(positions, limit, what="position", limit_name=f"'{name}' table max_len")
        return
    top = int(jnp.max(positions)) if positions.size else 0
    low = int(jnp.min(positions)) if positions.size else 0
    if top >= limit or low < 0:
        raise ValueError(
            f"positions span [{low}, {top}] but the '{name}' PE table holds positions "
            f"0..{limit - 1} (max_len={limit})"
        )


class PositionalEncoding(nnx.Module):
    """Base class of every PE: identity hooks, metadata and the options it was built with.

    Subclasses override the hooks they use and set the class attribute ``is_relative``.
    ``hooks`` (the overridden hook methods) and ``hook`` (their printable label) are derived
    when the subclass is defined. ``self.options`` is the frozen config dataclass the PE was
    built from (its ``dataclasses.asdict`` is what results files record).
    """

    name: ClassVar[str] = "base"
    hooks: ClassVar[frozenset[str]] = frozenset()
    hook: ClassVar[str] = "none"
    is_relative: ClassVar[bool] = False
    # How the registry-driven tests probe ``is_relative`` (logits at positions p and p + s, with
    # d_model=16, 2 heads, max_len=64): options that make the position dependence visible at a
    # few positions, or the reason a position-shift probe cannot test this PE (empty: it can).
    probe_options: ClassVar[Mapping[str, Any]] = {}
    probe_unsupported: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.hooks = overridden_hooks(cls)
        cls.hook = hook_label(cls.hooks)
        if "rotate" in vars(cls) and "rotate_prepared" not in vars(cls):
            cls.rotate_prepared = PositionalEncoding.rotate_prepared  # rotate alone is the hook
            if "prepare" not in vars(cls):
                cls.prepare = PositionalEncoding.prepare
    # Decoding and packing support (docs/decoding_and_packing.md): a PE that cannot decode with a
    # key/value cache, or cannot run packed rows, sets the flag to False and says why.
    supports_kv_cache: ClassVar[bool] = True
    kv_cache_reason: ClassVar[str] = ""
    supports_packing: ClassVar[bool] = True
    packing_reason: ClassVar[str] = ""

    def __init__(self, options: Any, ctx: PEContext):
        self.options = options
        self.ctx = ctx

    @property
    def max_positions(self) -> int | None:
        """Largest number of positions this PE supports (None: any)."""
        return None

    @property
    def per_layer(self) -> bool:
        """Whether a model should build one independent copy of this PE per layer."""
        return bool(getattr(self.options, "per_layer", False))

    def attention_scale(self, head_dim: int) -> float:
        """Logit scale used with this PE (1/sqrt(d_h) unless the PE says otherwise)."""
        return float(head_dim) ** -0.5

    # --- the six hooks -------------------------------------------------------------------
    def embed(self, x: jax.Array, positions: jax.Array, *, deterministic: bool = True,
              rngs: nnx.Rngs | None = None) -> jax.Array:
        """Additive hook: ``x [B, T, d] -> x + p(positions)``. Identity by default."""
        del positions, deterministic, rngs
        return x

    def rotate(self, q: jax.Array, k: jax.Array, q_pos: jax.Array, k_pos: jax.Array
               ) -> tuple[jax.Array, jax.Array]:
        """Multiplicative hook on ``q, k [B, T, H, d_h]``. Identity by default."""
        del q_pos, k_pos
        return q, k

    def prepare(self, q_pos: jax.Array, k_pos: jax.Array) -> Any:
        """Position-only state of ``rotate`` (a pytree), computed once per forward and shared by
        every layer using this PE module; None by default. ``q_pos, k_pos`` ``[B or 1, T]``
        (NumPy arrays when the positions are static, e.g. the default ``arange(T)``)."""
        del q_pos, k_pos
        return None

    def rotate_prepared(self, q: jax.Array, k: jax.Array, q_pos: jax.Array, k_pos: jax.Array,
                        prepared: Any) -> tuple[jax.Array, jax.Array]:
        """``rotate`` given ``prepared = self.prepare(q_pos, k_pos)``; the same function as
        ``rotate(q, k, q_pos, k_pos)``. By default ``prepared`` is ignored."""
        del prepared
        return self.rotate(q, k, q_pos, k_pos)

    def bias(self, q_pos: jax.Array, k_pos: jax.Array) -> jax.Array | None:
        """Logit-bias hook: ``[H, Tq, Tk]`` (or ``[B, H, Tq, Tk]``), or None for no bias."""
        del q_pos, k_pos
        return None

    # --- structural hooks (kinds "attention" and "module"); identities by default -------------
    def attention_input(self, h: jax.Array, positions: jax.Array, layer: int, *,
                        segment_ids: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        """Inputs ``(h_qk, h_v)`` of the q/k and v projections of block ``layer``; ``(h, h)`` by
        default. ``h`` is ``[B, T, d]``, ``positions`` ``[B or 1, T]``; ``segment_ids``
        ``[B, T]`` (packed rows: one id per contiguous segment) or None."""
        del positions, layer, segment_ids
        return h, h

    def block_output(self, x: jax.Array, positions: jax.Array, layer: int, *,
                     deterministic: bool = True, rngs: nnx.Rngs | None = None,
                     segment_ids: jax.Array | None = None) -> jax.Array:
        """Residual stream ``x [B, T, d]`` after block ``layer``; identity by default.
        ``segment_ids`` as in :meth:`attention_input`: a PE that mixes tokens here must not mix
        tokens of different segments."""
        del positions, layer, deterministic, rngs, segment_ids
        return x

    def table(self, positions: jax.Array) -> jax.Array:
        """The additive vectors ``[n, d]`` at ``positions`` (embed PEs only)."""
        raise ValueError(f"PE '{self.name}' has no additive table (its hooks: {self.hook})")

    # --- decoding and packing (docs/decoding_and_packing.md) ---------------------------------
    def kv_cache_unsupported(self) -> str | None:
        """Why this PE, with its options, cannot decode incrementally with a key/value cache;
        None when it can. Override when support depends on the options."""
        if self.supports_kv_cache:
            return None
        return self.kv_cache_reason or "the PE declares no key/value-cache support"

    def packing_unsupported(self) -> str | None:
        """Why this PE, with its options, cannot run packed rows (``segment_ids``); None when it
        can. Override when support depends on the options."""
        if self.supports_packing:
            return None
        return self.packing_reason or "the PE declares no packed-sequence support"

    def logits(self, logits: jax.Array, q: jax.Array, k: jax.Array, q_pos: jax.Array,
               k_pos: jax.Array, mask: jax.Array | None) -> jax.Array:
        """Contextual hook on the attention logits; identity by default.

        Called after ``scale * q.k + bias`` and before masking and the softmax, for PEs whose
        logit term depends on the queries and keys themselves (contextual positions, gated
        cumulative sums, refinements of the logits).

        Args:
          logits: float32 ``[B, H, Tq, Tk]``.
          q: ``[B, Tq, H, D]`` queries after ``rotate``.
          k: ``[B, Tk, H, D]`` keys after ``rotate``; while decoding, every slot of the key/value
            cache (in sequence order; slots not yet written are masked out).
          q_pos, k_pos: ``[B or 1, Tq]`` and ``[B or 1, Tk]`` positions.
          mask: boolean ``[B or 1, 1, Tq, Tk]`` (True: key visible) combining the causal,
            padding, segment and cache-fill masks, or None when every key is visible. A sum over
            the keys between j and i must be restricted to ``mask``: segments are contiguous, so
            keys of other segments and unwritten cache slots are then never counted.

        Returns:
          ``[B, H, Tq, Tk]`` logits (entries where ``mask`` is False are discarded afterwards).
        """
        del q, k, q_pos, k_pos, mask
        return logits


HOOKS = tuple(h for h in HOOKS if callable(getattr(PositionalEncoding, h, None)))
