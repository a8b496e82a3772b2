"""Read a Hugging Face config's per-layer attention schedule into ``TransformerConfig`` fields.

:func:`schedule_from_hf_config` returns ``num_layers``, ``layer_types``, ``layer_pe`` (a PE per
layer kind, from :func:`posjax.pretrained.rope_from_hf_config`), ``sliding_window``,
``attention_chunk_size``, ``attention_temperature`` and ``causal`` (False for ModernBERT), as
``posjax.models.schedules`` defines them. What it reads, and the Hugging Face code it follows:

| fields | models | rule (transformers) |
|---|---|---|
| ``layer_types``, ``sliding_window`` | Gemma 3, Olmo 3, GPT-OSS, Qwen 3, ... | the list as given ("sliding_attention" / "full_attention" / "chunked_attention") |
| ``sliding_window_pattern`` | Gemma 3 (older configs) | layer i sliding iff ``(i + 1) % pattern != 0`` (``Gemma3TextConfig``) |
| ``no_rope_layers`` / ``no_rope_layer_interval``, ``attention_chunk_size`` | Llama 4, SmolLM3 | ``no_rope_layers[i] = int((i + 1) % interval != 0)`` (1 = RoPE); RoPE layers chunked when a chunk size is set, NoPE layers full (``Llama4TextConfig``) |
| ``attn_temperature_tuning``, ``floor_scale``, ``attn_scale`` | Llama 4 | on NoPE layers (``Llama4TextAttention.forward``) |
| ``global_attn_every_n_layers``, ``local_attention``, ``global_rope_theta``, ``local_rope_theta`` | ModernBERT | layer i global iff ``i % n == 0``; local window ``local_attention`` (``ModernBertAttention``) |
| ``rope_parameters`` nested per layer type | transformers >= 5 configs | each layer type's own RoPE |
| flat ``rope_scaling`` + ``rope_local_base_freq`` | Gemma 3, Olmo 3 | the scaling on full layers only; sliding layers plain RoPE (``Gemma3RotaryEmbedding``'s local copy, ``Olmo3Config.convert_rope_params_to_dict``) |

Other models with a flat RoPE setting and sliding layers (GPT-OSS: one ``GptOssRotaryEmbedding``
in ``GptOssModel`` shared by every layer; Mistral, Qwen 2/3) get the same PE on every layer.
"""
from __future__ import annotations

from typing import Any

from posjax.pretrained.rope_config import rope_from_hf_config

#: models whose flat ``rope_scaling`` applies to their full-attention layers only
FULL_ONLY_SCALING = ("gemma3", "gemma3_text", "olmo3")
_HF = {"full_attention": "full", "sliding_attention": "sliding", "chunked_attention": "chunked"}
_TO_HF = {v: k for k, v in _HF.items()}


def _text(config: dict[str, Any]) -> dict[str, Any]:
    return dict(config.get("text_config") or config)


def _num_layers(config: dict[str, Any]) -> int:
    try:
        return int(config["num_hidden_layers"])
    except KeyError:
        raise ValueError("config has no num_hidden_layers") from None


def _kinds(config: dict[str, Any], layers: int) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """Per layer: (attention kind, uses RoPE)."""
    rope = (True,) * layers
    if "no_rope_layers" in config or "no_rope_layer_interval" in config:
        flags = config.get("no_rope_layers") or [
            int((i + 1) % int(config.get("no_rope_layer_interval", 4)) != 0) for i in range(layers)]
        if len(flags) != layers:
            raise ValueError(f"no_rope_layers has {len(flags)} entries for {layers} layers")
        rope = tuple(bool(f) for f in flags)
    if config.get("layer_types"):
        types = list(config["layer_types"])
        bad = [t for t in types if t not in _HF]
        if bad:
            raise ValueError(f"unknown layer type {bad[0]!r}; known: {', '.join(_HF)}")
        if len(types) != layers:
            raise ValueError(f"layer_types has {len(types)} entries for {layers} layers")
        return tuple(_HF[t] for t in types), rope
    if "global_attn_every_n_layers" in config:  # ModernBERT
        n = int(config["global_attn_every_n_layers"])
        return tuple("full" if i % n == 0 else "sliding" for i in range(layers)), rope
    if config.get("attention_chunk_size"):  # Llama 4: RoPE layers chunked, NoPE layers full
        return tuple("chunked" if r else "full" for r in rope), rope
    if config.get("sliding_window_pattern"):
        p = int(config["sliding_window_pattern"])
        return tuple("sliding" if (i + 1) % p else "full" for i in range(layers)), rope
    return ("full",) * layers, rope


def _layer_rope(config: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    params = config.get("rope_parameters") or {}
    if isinstance(params, dict) and any(isinstance(v, dict) for v in params.values()):
        return rope_from_hf_config(config, layer_type=_TO_HF[kind])
    if "global_rope_theta" in config:  # ModernBERT
        theta = config["global_rope_theta"]
        if kind == "sliding" and config.get("local_rope_theta") is not None:
            theta = config["local_rope_theta"]
        return rope_from_hf_config({**config, "rope_theta": theta, "rope_scaling": None})
    if kind == "sliding" and config.get("model_type") in FULL_ONLY_SCALING:
        theta = config.get("rope_local_base_freq", config.get("rope_theta", 10000.0))
        flat = {k: v for k, v in config.items() if k not in ("rope_scaling", "rope_parameters")}
        return rope_from_hf_config({**flat, "rope_theta": theta})
    return rope_from_hf_config(config)


def schedule_from_hf_config(config: dict[str, Any]) -> dict[str, Any]:
    """``TransformerConfig`` fields of a Hugging Face config's per-layer schedule.

    Args:
      config: a parsed ``config.json`` (a multimodal one's ``text_config`` is used).

    Returns:
      ``{"num_layers", "layer_types", "layer_pe", "sliding_window", "attention_chunk_size",
      "attention_temperature", "causal"}`` (``causal`` False for ModernBERT, True otherwise), e.g.
      ``TransformerConfig(d_model=..., num_heads=..., **schedule_from_hf_config(cfg))``.

    Raises:
      ValueError: a ``layer_types`` / ``no_rope_layers`` list of the wrong length, an unknown
        layer type, or a RoPE setting ``rope_from_hf_config`` refuses.
    """
    config = _text(config)
    layers = _num_layers(config)
    kinds, rope = _kinds(config, layers)
    layer_pe: dict[str, Any] = {}
    for kind, uses_rope in zip(kinds, rope):
        name, options = ("none", {}) if not uses_rope else _layer_rope(config, kind)
        spec = {"pe": name, "options": options}
        if layer_pe.setdefault(kind, spec) != spec:
            raise ValueError(f"layers of kind {kind!r} have different PEs ({layer_pe[kind]['pe']}"
                             f" and {name}); posjax gives one PE per layer kind")
    out: dict[str, Any] = {"num_layers": layers, "layer_types": kinds, "layer_pe": layer_pe,
                           "sliding_window": None, "attention_chunk_size": None,
                           "attention_temperature": None}
    if "sliding" in kinds:
        window = config.get("sliding_window") or config.get("local_attention")
        if not window:
            raise ValueError("config has sliding layers but no sliding_window / local_attention")
        out["sliding_window"] = int(window)
    if "chunked" in kinds:
        out["attention_chunk_size"] = int(config["attention_chunk_size"])
    if config.get("attn_temperature_tuning"):
        out["attention_temperature"] = {"floor_scale": float(config.get("floor_scale", 8192)),
                                        "attn_scale": float(config.get("attn_scale", 0.1))}
    out["causal"] = "global_attn_every_n_layers" not in config  # ModernBERT: an encoder
    return out
