"""Transformer encoder/decoder with a pluggable positional encoding (Flax NNX)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax import encodings
from posjax.encodings.base import PositionalEncoding, batch_positions
from posjax.input_checks import check_range
from posjax.models.attention import SelfAttention, broadcast_bias, dense, has_logits_hook
from posjax.models.config import TransformerConfig
from posjax.models.packing import check_segment_ids, segment_mask, segment_positions, segment_runs
from posjax.models.schedules import and_masks, attention_temperature, layer_kind_mask, ring_size

_ACT = {"gelu": jax.nn.gelu, "relu": jax.nn.relu, "silu": jax.nn.silu,
        "gelu_exact": lambda x: jax.nn.gelu(x, approximate=False)}


class MLP(nnx.Module):
    """Position-wise feed-forward block ``d -> d_ff -> d``."""

    def __init__(self, cfg: TransformerConfig, *, rngs: nnx.Rngs):
        self.up = nnx.Linear(cfg.d_model, cfg.d_ff, dtype=cfg.jnp_dtype, rngs=rngs)
        self.down = nnx.Linear(cfg.d_ff, cfg.d_model, dtype=cfg.jnp_dtype, rngs=rngs)
        self.act = _ACT[cfg.activation]
        self.trailing = cfg.mlp_trailing_activation

    def __call__(self, x):
        y = dense(self.down, self.act(dense(self.up, x)))
        return self.act(y) if self.trailing else y


class Block(nnx.Module):
    """One Transformer block (pre-LN or post-LN)."""

    def __init__(self, cfg: TransformerConfig, *, rngs: nnx.Rngs):
        self.pre_norm = cfg.pre_norm
        self.attn = SelfAttention(cfg.d_model, cfg.num_heads, attn_dropout=cfg.attn_dropout,
                                  dtype=cfg.jnp_dtype, implementation=cfg.attention_impl, rngs=rngs)
        self.mlp = MLP(cfg, rngs=rngs)
        self.norm1 = nnx.LayerNorm(cfg.d_model, epsilon=cfg.norm_eps, dtype=cfg.jnp_dtype, rngs=rngs)
        self.norm2 = nnx.LayerNorm(cfg.d_model, epsilon=cfg.norm_eps, dtype=cfg.jnp_dtype, rngs=rngs)
        self.drop = nnx.Dropout(cfg.dropout)

    def __call__(self, x, *, pe, positions, bias, mask, head_mask, kv, deterministic, rngs,
                 return_weights, layer=0, segment_ids=None, cache=None, cache_index=None,
                 k_positions=None, prepared=None, q_scale=None, ring_slots=None):
        """One block; with a layer ``cache`` the attention writes into it and the block returns
        ``(x, new_cache)`` instead of ``(x, weights)``."""
        def attend(h):
            qk, h = (pe.attention_input(h, positions, layer, segment_ids=segment_ids)
                     if "attention_input" in pe.hooks else (h, h))
            common = dict(pe=pe, positions=positions, bias=bias, mask=mask, head_mask=head_mask,
                          kv=kv, deterministic=deterministic, rngs=rngs, qk=qk,
                          k_positions=k_positions, prepared=prepared, q_scale=q_scale)
            if cache is not None:
                common["ring_slots"] = ring_slots
                return self.attn(h, cache=cache, cache_index=cache_index, **common)
            return self.attn(h, return_weights=True, **common) if return_weights else (
                self.attn(h, **common), None)

        if self.pre_norm:
            a, w = attend(self.norm1(x))
            x = x + self.drop(a, deterministic=deterministic, rngs=rngs)
            x = x + self.drop(self.mlp(self.norm2(x)), deterministic=deterministic, rngs=rngs)
        else:
            a, w = attend(x)
            x = self.norm1(x + self.drop(a, deterministic=deterministic, rngs=rngs))
            x = self.norm2(x + self.drop(self.mlp(x), deterministic=deterministic, rngs=rngs))
        return x, w


def make_mask(batch: int, length: int, *, causal: bool, padding_mask: jax.Array | None,
              segment_ids: jax.Array | None = None) -> jax.Array | None:
    """Boolean attention mask ``[B or 1, 1, T, T]`` (True = attend), or None for no mask.
    ``segment_ids [B, T]`` (packed rows) hides keys of other segments."""
    mask = None
    if causal:
        mask = jnp.tril(jnp.ones((length, length), bool))[None, None]
    if padding_mask is not None:
        pad = jnp.asarray(padding_mask, bool)
        if pad.shape != (batch, length):
            raise ValueError(f"padding_mask must have shape {(batch, length)}, got {pad.shape}")
        keys = pad[:, None, None, :]
        mask = keys if mask is None else mask & keys
    if segment_ids is not None:
        runs = segment_runs(segment_ids)
        same = segment_mask(runs, runs)
        mask = same if mask is None else mask & same
    return mask


def build_layer_pes(cfg: TransformerConfig, rngs: nnx.Rngs):
    """The PE modules of a Transformer: ``(pes, pe_of_layer, shared)``, where layer l uses
    ``pes[pe_of_layer[l]]``. Without ``layer_pe``: one PE for all layers, or one copy per layer
    (``per_layer`` options, ``pe_every_layer``). With it: one PE per layer kind (one per layer
    where its options say ``per_layer``)."""
    make = lambda name, options: encodings.make(
        name, d_model=cfg.d_model, num_heads=cfg.num_heads, max_len=cfg.max_len,
        num_layers=cfg.num_layers, causal=cfg.causal, rngs=rngs, **options)
    if cfg.layer_pe is None:
        first = make(cfg.pe, cfg.pe_options)
        shared = not (first.per_layer or (cfg.pe_every_layer and not cfg.share_pe_across_layers))
        pes = [first] + ([] if shared else [make(cfg.pe, cfg.pe_options)
                                            for _ in range(cfg.num_layers - 1)])
        index = (0,) * cfg.num_layers if shared else tuple(range(cfg.num_layers))
        return nnx.List(pes), index, shared
    pes, index, by_kind = [], [], {}
    for kind in cfg.kinds:
        if kind in by_kind and not pes[by_kind[kind]].per_layer:
            index.append(by_kind[kind])
            continue
        pes.append(make(*cfg.layer_pe_spec(kind)))
        by_kind[kind] = len(pes) - 1
        index.append(len(pes) - 1)
    return nnx.List(pes), tuple(index), len(pes) == 1


class Transformer(nnx.Module):
    """Transformer body: embeddings, the PE, ``num_layers`` blocks -> hidden ``[B, T, d_model]``.

    The PE plugs in through its hooks: ``embed`` once on the input embeddings (or at every block
    with ``pe_every_layer``), ``rotate`` on q/k and ``bias`` on the logits of every layer;
    ``attention_input`` gives each block's q/k and v projection inputs and ``block_output`` acts
    after each block (identities except for positional attention, LaPE and CPE). A PE
    whose options say ``per_layer`` (or ``pe_every_layer``) gets one independent copy per block.
    """

    def __init__(self, config: TransformerConfig, *, rngs: nnx.Rngs):
        self.config = config
        cfg = config
        if cfg.input_dim is None:
            self.embed = nnx.Embed(cfg.vocab_size, cfg.d_model,
                                   embedding_init=jax.nn.initializers.normal(cfg.embed_init_std),
                                   rngs=rngs)
        else:
            self.embed = nnx.Linear(cfg.input_dim, cfg.d_model, rngs=rngs)
        self.pes, self.pe_of_layer, self.shared_pe = build_layer_pes(cfg, rngs)
        self.blocks = nnx.List([Block(cfg, rngs=rngs) for _ in range(cfg.num_layers)])
        self.final_norm = (nnx.LayerNorm(cfg.d_model, epsilon=cfg.norm_eps, rngs=rngs)
                           if cfg.pre_norm else None)
        self.drop = nnx.Dropout(cfg.dropout)
        self.type_embed = (nnx.Embed(cfg.type_vocab_size, cfg.d_model, rngs=rngs,
                                     embedding_init=jax.nn.initializers.normal(cfg.embed_init_std))
                           if cfg.type_vocab_size else None)
        self.embed_norm = (nnx.LayerNorm(cfg.d_model, epsilon=cfg.norm_eps, dtype=cfg.jnp_dtype,
                                         rngs=rngs) if cfg.embed_norm else None)

    @property
    def pe(self) -> PositionalEncoding:
        """The (first layer's) positional encoding module."""
        return self.pes[0]

    def embed_tokens(self, tokens: jax.Array) -> jax.Array:
        """Token embeddings ``[B, T, d_model]`` of int ids ``[B, T]``.

        An id outside ``[0, vocab_size)`` raises ValueError when ``tokens`` is concrete; under
        ``jit`` it is recorded by :func:`posjax.input_checks.check_range` (the training loop and
        ``evaluate_classifier`` raise it with the step) and its embedding is a row of NaN, never
        another token's row (a negative id does not wrap).
        """
        vocab = self.config.vocab_size
        check_range(tokens, vocab, what="token id", limit_name="vocab_size")
        valid = (tokens >= 0) & (tokens < vocab)
        x = self.embed(jnp.where(valid, tokens, 0))
        return jnp.where(valid[..., None], x, jnp.nan)

    def layer_pe(self, layer: int) -> PositionalEncoding:
        return self.pes[self.pe_of_layer[layer]]

    def _views(self, positions, mask):
        """Per layer kind: (key positions, mask) of a full forward pass."""
        cfg = self.config
        return {kind: (positions, and_masks(mask, layer_kind_mask(
            kind, positions, positions, causal=cfg.causal, sliding_window=cfg.sliding_window,
            attention_chunk_size=cfg.attention_chunk_size))) for kind in set(cfg.kinds)}

    def __call__(self, tokens: jax.Array, *, positions: jax.Array | None = None,
                 padding_mask: jax.Array | None = None, deterministic: bool = True,
                 rngs: nnx.Rngs | None = None, head_mask: jax.Array | None = None,
                 return_attention: bool = False, segment_ids: jax.Array | None = None,
                 token_type_ids: jax.Array | None = None):
        """Args:
          tokens: int ``[B, T]`` token ids (or float ``[B, T, input_dim]`` features).
          positions: ``[T]`` or ``[B, T]`` positions; default ``arange(T)``, or positions that
            restart at every segment when ``segment_ids`` are given.
          padding_mask: bool ``[B, T]``, True on real tokens; padded keys are not attended.
          deterministic: disable dropout (and any train-time PE randomness).
          rngs: ``nnx.Rngs`` with a ``dropout`` stream when ``deterministic=False``.
          head_mask: ``[num_layers, num_heads]`` multipliers of each head's output (ablation).
          return_attention: also return attention weights ``[L, B, H, T, T]``.
          segment_ids: int ``[B, T]`` ids of packed segments (contiguous runs); attention never
            crosses segments (see ``posjax.models.packing``).
          token_type_ids: int ``[B, T]`` BERT token-type ids (config ``type_vocab_size`` > 0);
            default 0.

        Returns:
          hidden ``[B, T, d_model]`` (and the weights when requested).
        """
        cfg = self.config
        tokens = jnp.asarray(tokens)
        batch, length = tokens.shape[:2]
        if segment_ids is not None:
            segment_ids = check_segment_ids(segment_ids, batch, length)
            self.check_support("packing")
            if positions is None:
                positions = segment_positions(segment_ids)
        if positions is None:
            positions = np.arange(length, dtype=np.int32)
        # static positions stay on the host for the PEs' prepare (constant tables under jit)
        host = (positions.reshape(-1, positions.shape[-1])
                if isinstance(positions, np.ndarray) and positions.ndim in (1, 2) else None)
        positions = batch_positions(positions)
        if positions.shape[-1] != length:
            raise ValueError(f"positions have length {positions.shape[-1]} but tokens have {length}")
        if head_mask is not None:
            head_mask = jnp.asarray(head_mask)
            if head_mask.shape != (cfg.num_layers, cfg.num_heads):
                raise ValueError(f"head_mask must have shape {(cfg.num_layers, cfg.num_heads)}, "
                                 f"got {head_mask.shape}")
        mask = make_mask(batch, length, causal=cfg.causal, padding_mask=padding_mask,
                         segment_ids=segment_ids)
        x, weights = self._run(tokens, positions=positions, views=self._views(positions, mask),
                               segment_ids=segment_ids, head_mask=head_mask,
                               deterministic=deterministic, rngs=rngs,
                               return_attention=return_attention, token_type_ids=token_type_ids,
                               host_positions=host)
        return (x, jnp.stack(weights)) if return_attention else x

    def _run(self, tokens, *, positions, views, segment_ids, head_mask=None,
             deterministic=True, rngs=None, return_attention=False, cache=None,
             token_type_ids=None, host_positions=None, ring_slots=None):
        """Embeddings, PE hooks and blocks: hidden ``[B, T, d]`` and the per-layer weights (or,
        with ``cache``, the per-layer updated caches). Queries sit at ``positions``; ``views``
        maps each layer kind to its ``(k_positions, mask)`` (the keys' positions: the cache
        slots' while decoding). ``ring_slots`` (decoding) maps each windowed kind to the ring
        slots its new keys fill. ``host_positions`` (NumPy, the value of ``positions``) is what
        the PEs' ``prepare`` gets when the positions are static."""
        cfg = self.config
        x = (self.embed_tokens(tokens) if cfg.input_dim is None else dense(self.embed, tokens)
             ).astype(cfg.jnp_dtype)
        if self.type_embed is not None:
            types = (jnp.zeros(tokens.shape[:2], jnp.int32) if token_type_ids is None
                     else jnp.asarray(token_type_ids))
            x = x + self.type_embed(types).astype(cfg.jnp_dtype)
        if not cfg.pe_every_layer and "embed" in self.pe.hooks:
            x = self.pe.embed(x, positions, deterministic=deterministic, rngs=rngs)
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        x = self.drop(x, deterministic=deterministic, rngs=rngs)
        kv = x if cfg.kv_source == "embeddings" else None
        rot_pos = positions if host_positions is None else host_positions
        biases, prepared = {}, {}  # once per (PE module, layer kind) and forward
        temperature = cfg.attention_temperature
        q_scale = (attention_temperature(positions, floor_scale=temperature["floor_scale"],
                                         attn_scale=temperature["attn_scale"])
                   if temperature is not None else None)
        scaled = cfg.temperature_layers()
        extras = []
        for layer, (block, kind) in enumerate(zip(self.blocks, cfg.kinds)):
            index = self.pe_of_layer[layer]
            pe = self.pes[index]
            k_positions, mask = views[kind]
            if cfg.pe_every_layer and "embed" in pe.hooks:
                x = pe.embed(x, positions, deterministic=deterministic, rngs=rngs)
            if (index, kind) not in biases:
                biases[index, kind] = (broadcast_bias(pe.bias(positions, k_positions))
                                       if "bias" in pe.hooks else None)
            if index not in prepared:
                prepared[index] = (pe.prepare(rot_pos, rot_pos) if "rotate" in pe.hooks
                                   else None)
            layer_cache = None
            if cache is not None:
                layer_cache = dict(cache_index=cache["index"], cache=cache["layers"][layer],
                                   ring_slots=None if kind == "full" else ring_slots[kind])
            x, extra = block(x, pe=pe, positions=positions, bias=biases[index, kind], mask=mask,
                             head_mask=None if head_mask is None else head_mask[layer], kv=kv,
                             deterministic=deterministic, rngs=rngs,
                             return_weights=return_attention, layer=layer,
                             segment_ids=segment_ids, k_positions=k_positions,
                             prepared=prepared[index],
                             q_scale=q_scale if scaled[layer] else None,
                             **(layer_cache or {}))
            if "block_output" in pe.hooks:
                x = pe.block_output(x, positions, layer, deterministic=deterministic, rngs=rngs,
                                    segment_ids=segment_ids)
            extras.append(extra)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, extras

    # --- packing and decoding support --------------------------------------------------------
    def check_support(self, what: str) -> None:
        """Raise ValueError when a PE of this model cannot do ``what`` ("packing" or
        "kv_cache"), naming the PE and its reason."""
        for pe in self.pes:
            reason = (pe.packing_unsupported() if what == "packing"
                      else pe.kv_cache_unsupported())
            if reason:
                label = ("packed sequences (segment_ids)" if what == "packing"
                         else "incremental decoding with a key/value cache")
                raise ValueError(f"PE '{pe.name}' does not support {label}: {reason}")

    def _ring_sizes(self, size: int) -> dict[str, int]:
        """Ring-buffer slots of each windowed layer kind of this model (decoding)."""
        cfg = self.config
        has_full = "full" in cfg.kinds
        out = {}
        for kind in set(cfg.kinds) - {"full"}:
            span = ring_size(kind, sliding_window=cfg.sliding_window,
                             attention_chunk_size=cfg.attention_chunk_size)
            out[kind] = min(span, size) if has_full else span
        return out

    def init_cache(self, batch: int, size: int) -> dict:
        """An empty key/value cache of ``size`` slots for ``batch`` rows.

        Returns a pytree ``{"index": int32 [], "positions": int32 [B, S], "segment_ids":
        int32 [B, S], "layers": [{"key": [B, S, H, Dk], "value": [B, S, H, Dv]}, ...],
        "ring": {kind: {"positions", "segment_ids", "time": int32 [B, R]}}}``; keys are stored
        after the PE's ``rotate`` hook (``Dk`` is the width it returns). A "full" layer's
        buffer has ``S`` slots and never wraps; a windowed layer ("sliding" / "chunked",
        ``config.layer_types``) keeps a ring of ``R`` = window (or chunk) slots, which wraps by
        design (``time`` is each ring slot's stream index, -1 while empty). With no "full"
        layer, decoding may run past ``size``.
        """
        cfg = self.config
        if cfg.input_dim is not None:
            raise ValueError("decoding needs token inputs (config.input_dim must be None)")
        if not cfg.causal:
            raise ValueError("incremental decoding needs a causal model (config.causal=True)")
        if batch < 1 or size < 1:
            raise ValueError(f"init_cache needs batch >= 1 and size >= 1, got {batch}, {size}")
        self.check_support("kv_cache")
        for pe in self.pes:
            limit = pe.max_positions
            if limit is not None and size > limit:
                raise ValueError(f"a cache of {size} slots exceeds the {limit} positions of PE "
                                 f"'{pe.name}'")
        h, d = cfg.num_heads, cfg.head_dim
        dt = cfg.jnp_dtype
        rings = self._ring_sizes(size)
        layers = []
        for layer, kind in enumerate(cfg.kinds):
            pe = self.layer_pe(layer)
            if kind != "full" and has_logits_hook(pe):
                raise ValueError(f"PE '{pe.name}' does not support incremental decoding on a "
                                 f"{kind!r} layer: its contextual logits hook reads the keys in "
                                 f"slot order, which a ring buffer rotates")
            probe = jnp.zeros((batch, 1, h, d), dt)
            pos = jnp.zeros((1, 1), jnp.int32)
            k_shape = jax.eval_shape(lambda q, k: pe.rotate(q, k, pos, pos)[1], probe, probe)
            slots = size if kind == "full" else rings[kind]
            layers.append({"key": jnp.zeros((batch, slots, h, k_shape.shape[-1]), k_shape.dtype),
                           "value": jnp.zeros((batch, slots, h, d), dt)})
        ring = {kind: {"positions": jnp.zeros((batch, r), jnp.int32),
                       "segment_ids": jnp.zeros((batch, r), jnp.int32),
                       "time": jnp.full((batch, r), -1, jnp.int32)} for kind, r in rings.items()}
        return {"index": jnp.zeros((), jnp.int32),
                "positions": jnp.zeros((batch, size), jnp.int32),
                "segment_ids": jnp.zeros((batch, size), jnp.int32), "layers": layers,
                "ring": ring}

    def decode(self, tokens: jax.Array, cache: dict, *, positions: jax.Array | None = None,
               segment_ids: jax.Array | None = None) -> tuple[jax.Array, dict]:
        """Run new tokens ``[B, T]`` against a key/value cache (from :meth:`init_cache`).

        The new keys/values fill slots ``index .. index + T - 1``; query t attends to the slots
        up to its own that hold its segment (and, in a windowed layer, lie in its window or
        chunk). Positions default to ``index + arange(T)`` (explicit ones give offsets for
        left-padded or packed prompts); segment ids default to 0. The "full" layers' buffer
        never wraps: ``index + T`` must stay within its size. Past the end, a concrete
        ``index`` raises; a traced one (under jit) gives NaN hidden states and a
        :func:`posjax.input_checks.check_range` row ("cache slot"), never a write over valid
        slots. Windowed layers attend over their ring followed by the T new keys and keep the
        last ones (the ring wraps by design).

        Returns:
          ``(hidden [B, T, d_model], new_cache)``.

        Raises:
          ValueError: ``T`` larger than the cache, or (concrete index) ``index + T`` past its
            end, or a cache of another batch size.
        """
        cfg = self.config
        tokens = jnp.asarray(tokens)
        if tokens.ndim != 2:
            raise ValueError(f"decode needs tokens [B, T], got shape {tokens.shape}")
        batch, length = tokens.shape[:2]
        size = cache["positions"].shape[1]
        has_full = "full" in cfg.kinds
        if cache["positions"].shape[0] != batch:
            raise ValueError(f"the cache holds {cache['positions'].shape[0]} rows, tokens {batch}")
        if has_full and length > size:
            raise ValueError(f"decode got {length} tokens for a cache of {size} slots")
        index = cache["index"]
        last = jnp.asarray(index + length - 1)
        if has_full:
            if not isinstance(last, jax.core.Tracer) and int(last) >= size:
                raise ValueError(f"decode past the end of the cache: slots {int(index)}.."
                                 f"{int(last)} of a cache of {size} slots (the cache does not "
                                 f"wrap; make it larger with init_cache)")
            check_range(last, size, what="cache slot", limit_name="cache size")
        if positions is None:
            positions = index + jnp.arange(length, dtype=jnp.int32)
        positions = jnp.broadcast_to(batch_positions(positions), (batch, length)).astype(jnp.int32)
        segs = (jnp.zeros((batch, length), jnp.int32) if segment_ids is None
                else check_segment_ids(segment_ids, batch, length).astype(jnp.int32))
        views, ring_slots, new_ring = {}, {}, {}
        k_positions, k_segments = cache["positions"], cache["segment_ids"]
        if has_full:
            k_positions = jax.lax.dynamic_update_slice(cache["positions"], positions, (0, index))
            k_segments = jax.lax.dynamic_update_slice(cache["segment_ids"], segs, (0, index))
            slots = jnp.arange(size)
            causal = slots[None, :] <= (index + jnp.arange(length))[:, None]  # [T, S]
            same = segs[:, :, None] == k_segments[:, None, :]  # [B, T, S]
            views["full"] = (k_positions, (causal[None] & same)[:, None])
        q_time = jnp.broadcast_to(index + jnp.arange(length, dtype=jnp.int32), (batch, length))
        for kind, ring in cache["ring"].items():
            r = ring["time"].shape[1]
            m = min(length, r)
            k_time = jnp.concatenate([ring["time"], q_time], 1)
            k_pos = jnp.concatenate([ring["positions"], positions], 1)
            k_seg = jnp.concatenate([ring["segment_ids"], segs], 1)
            mask = ((k_time[:, None, :] >= 0) & (k_time[:, None, :] <= q_time[:, :, None])
                    & (segs[:, :, None] == k_seg[:, None, :]))[:, None]
            mask = mask & layer_kind_mask(kind, positions, k_pos, causal=True,
                                          sliding_window=cfg.sliding_window,
                                          attention_chunk_size=cfg.attention_chunk_size)
            views[kind] = (k_pos, mask)
            slots = (index + length - m + jnp.arange(m)) % r
            ring_slots[kind] = slots
            new_ring[kind] = {name: ring[name].at[:, slots].set(new[:, length - m:])
                              for name, new in (("positions", positions), ("segment_ids", segs),
                                                ("time", q_time))}
        x, layers = self._run(tokens, positions=positions, views=views, segment_ids=None,
                              cache=cache, ring_slots=ring_slots)
        new_cache = {"index": index + length, "positions": k_positions,
                     "segment_ids": k_segments, "layers": layers, "ring": new_ring}
        if has_full:  # traced overflow: NaN, not a value
            x = jnp.where(last < size, x, jnp.nan)
        return x, new_cache
