"""Per-layer attention schedules: which layers attend fully, in a sliding window or in chunks,
and the pure mask and query-temperature functions they use.

A schedule is ``TransformerConfig.layer_types`` (a pattern of "full" / "sliding" / "chunked",
repeated to ``num_layers``), with ``sliding_window``, ``attention_chunk_size``, a PE per layer
type (``layer_pe``) and Llama 4's attention temperature (``attention_temperature``).

Every mask is a function of **positions** ``[B, Tq]``, ``[B, Tk]`` (not of slot indices), so a
packed row, whose positions restart at every segment, gets each segment's own windows and chunk
boundaries, and a key/value cache that stores its slots' positions gets the same mask as a full
forward pass. Masks are boolean ``[B, 1, Tq, Tk]`` (True = attend) and compose with the causal,
padding and segment masks by ``&``:

- sliding, causal: ``0 <= q - k < window`` (Hugging Face ``masking_utils.sliding_window_overlay``
  with ``causal_mask_function``; Mistral, Gemma 2/3, Olmo 3, GPT-OSS);
- sliding, bidirectional: ``|q - k| <= window // 2`` (ModernBERT, arXiv 2412.13663,
  ``ModernBertModel._update_attention_mask``);
- chunked: ``q // chunk == k // chunk`` (Llama 4, ``masking_utils.chunked_overlay``).

Attention temperature (Llama 4's NoPE layers; cf. Scalable-Softmax, arXiv 2501.19399) scales the
queries at position ``p`` by ``log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1``.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from posjax.encodings.base import batch_positions

LAYER_KINDS = ("full", "sliding", "chunked")
#: Hugging Face ``layer_types`` names -> posjax layer kinds.
HF_LAYER_KINDS = {"full_attention": "full", "sliding_attention": "sliding",
                  "chunked_attention": "chunked"}




def sliding_window_mask(q_positions: jax.Array, k_positions: jax.Array, window: int, *,
                        causal: bool) -> jax.Array:
    """Sliding-window mask ``[B, 1, Tq, Tk]`` from positions ``[B or 1, Tq]``, ``[B or 1, Tk]``.

    Causal: key k is visible to query q when ``q - window < k <= q`` (``window`` keys, the query's
    own included). Bidirectional: when ``|q - k| <= window // 2`` (ModernBERT's local layers).
    """
    if window < 1:
        raise ValueError(f"sliding window must be >= 1, got {window}")
    d = batch_positions(q_positions)[:, :, None] - batch_positions(k_positions)[:, None, :]
    ok = ((d >= 0) & (d < window)) if causal else (jnp.abs(d) <= window // 2)
    return ok[:, None]


def chunked_mask(q_positions: jax.Array, k_positions: jax.Array, chunk: int, *,
                 causal: bool) -> jax.Array:
    """Chunked-attention mask ``[B, 1, Tq, Tk]``: query and key in the same chunk of ``chunk``
    positions (``q // chunk == k // chunk``; with ``causal`` also ``k <= q``)."""
    if chunk < 1:
        raise ValueError(f"attention chunk size must be >= 1, got {chunk}")
    q, k = batch_positions(q_positions)[:, :, None], batch_positions(k_positions)[:, None, :]
    ok = (q // chunk) == (k // chunk)
    if causal:
        ok = ok & (k <= q)
    return ok[:, None]


def layer_kind_mask(kind: str, q_positions: jax.Array, k_positions: jax.Array, *, causal: bool,
                    sliding_window: int | None = None,
                    attention_chunk_size: int | None = None) -> jax.Array | None:
    """The mask a layer of ``kind`` adds to the causal/padding/segment mask (None for "full")."""
    if kind == "full":
        return None
    if kind == "sliding":
        return sliding_window_mask(q_positions, k_positions, sliding_window, causal=causal)
    if kind == "chunked":
        return chunked_mask(q_positions, k_positions, attention_chunk_size, causal=causal)
    raise ValueError(f"unknown layer kind {kind!r}; kinds: {', '.join(LAYER_KINDS)}")


def and_masks(*masks: jax.Array | None) -> jax.Array | None:
    """The intersection of boolean masks (None entries are "attend everywhere")."""
    out = None
    for m in masks:
        if m is not None:
            out = m if out is None else out & m
    return out


def attention_temperature(positions: jax.Array, *, floor_scale: float = 8192.0,
                          attn_scale: float = 0.1) -> jax.Array:
    """Llama 4's query scale ``log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1`` at
    positions ``p`` (any shape; float32). 1 for ``p < floor_scale - 1``."""
    p = jnp.asarray(positions, jnp.float32)
    return jnp.log(jnp.floor((p + 1.0) / floor_scale) + 1.0) * attn_scale + 1.0


def expand_layer_types(layer_types: tuple[str, ...], num_layers: int) -> tuple[str, ...]:
    """``layer_types`` repeated (and cut) to ``num_layers`` entries."""
    if not layer_types:
        raise ValueError("layer_types must name at least one layer kind")
    if len(layer_types) > num_layers:
        raise ValueError(f"layer_types has {len(layer_types)} entries for {num_layers} layers")
    reps = -(-num_layers // len(layer_types))
    return tuple(layer_types * reps)[:num_layers]


def ring_size(kind: str, *, sliding_window: int | None, attention_chunk_size: int | None) -> int:
    """Slots of the key/value ring buffer of a windowed layer: the window (``sliding``) or the
    chunk (``chunked``): every key a later query can see."""
    return sliding_window if kind == "sliding" else attention_chunk_size


# --- presets: the published schedules ----------------------------------------------------------
def _rope(base: float, **extra: Any) -> dict[str, Any]:
    return {"pe": "rope", "options": {"base": float(base), **extra}}


#: Published per-layer schedules as ``TransformerConfig`` fields (``sliding_window`` /
#: ``attention_chunk_size`` at the models' values; :func:`preset_config` can rescale them for
#: toy models). Sources (Hugging Face transformers): ``Llama4TextConfig`` /
#: ``Llama4TextAttention``; ``Gemma3TextConfig``; ``ModernBertConfig`` / ``ModernBertAttention``;
#: ``Olmo3Config``; arXiv 2501.18795 (RNoPE-SWA). Each is tested against a NumPy
#: transcription of its reference (tests/models/test_schedule_presets.py).
PRESETS: dict[str, dict[str, Any]] = {
    # every 4th layer NoPE + full attention (+ temperature tuning), the rest RoPE + chunks of 8192
    "llama4_irope": dict(
        layer_types=("chunked", "chunked", "chunked", "full"), attention_chunk_size=8192,
        layer_pe={"chunked": _rope(500000.0), "full": {"pe": "none", "options": {}}},
        attention_temperature={"floor_scale": 8192.0, "attn_scale": 0.1}, causal=True),
    # five local layers (window 1024, base 1e4) then one global layer (base 1e6)
    "gemma3": dict(
        layer_types=("sliding",) * 5 + ("full",), sliding_window=1024,
        layer_pe={"sliding": _rope(10000.0), "full": _rope(1000000.0)}, causal=True),
    # encoder: a global layer (base 160k) every third layer, the others a 128-token window (1e4)
    "modernbert": dict(
        layer_types=("full", "sliding", "sliding"), sliding_window=128,
        layer_pe={"full": _rope(160000.0), "sliding": _rope(10000.0)}, causal=False),
    # RoPE on sliding-window layers, NoPE on the full layers (3:1)
    "rnope_swa": dict(
        layer_types=("sliding", "sliding", "sliding", "full"), sliding_window=4096,
        layer_pe={"sliding": _rope(10000.0), "full": {"pe": "none", "options": {}}},
        causal=True),
    # three sliding (window 4096) then one full layer; YaRN on the full layers only
    "olmo3": dict(
        layer_types=("sliding", "sliding", "sliding", "full"), sliding_window=4096,
        layer_pe={"sliding": _rope(500000.0),
                  "full": {"pe": "rope_yarn", "options": {"base": 500000.0, "factor": 8.0,
                                                          "original_max_len": 8192}}},
        causal=True),
}


#: Where each preset's values come from (checked by tests/pretrained/test_schedule_config.py).
PRESET_SOURCES = {
    "llama4_irope": "Llama 4 iRoPE: HF Llama4TextConfig / Llama4TextAttention (Llama-4-Scout config)",
    "gemma3": "Gemma 3: HF Gemma3TextConfig (gemma-3-4b-it config; global RoPE also scaled x8 there)",
    "modernbert": "ModernBERT, arXiv 2412.13663: HF ModernBertConfig / ModernBertAttention",
    "rnope_swa": "RNoPE-SWA, arXiv 2501.18795 (RoPE + window, NoPE + full; the 3:1 ratio, "
                 "window and base are this preset's choice, not read from the paper)",
    "olmo3": "Olmo 3: HF Olmo3Config (Olmo-3-7B config; YaRN on full layers only)",
}


def preset_config(name: str, *, span: int | None = None) -> dict[str, Any]:
    """The ``TransformerConfig`` fields of schedule preset ``name`` (a fresh dict). ``span``
    replaces its window / chunk size (toy models: a span below the training length)."""
    if name not in PRESETS:
        raise ValueError(f"unknown schedule preset {name!r}; presets: {', '.join(PRESETS)}")
    fields = {k: (dict(v) if isinstance(v, dict) else v) for k, v in PRESETS[name].items()}
    if span is not None:
        for key in ("sliding_window", "attention_chunk_size"):
            if key in fields:
                fields[key] = int(span)
        temp = fields.get("attention_temperature")
        if temp:
            fields["attention_temperature"] = {**temp, "floor_scale": float(span)}
    return fields
