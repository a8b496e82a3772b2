"""Map a Hugging Face model config's RoPE settings to a posjax PE.

:func:`rope_from_hf_config` reads ``rope_theta``, ``head_dim`` (else ``hidden_size /
num_attention_heads``), ``partial_rotary_factor``, ``max_position_embeddings`` and the scaling
dictionary (``rope_parameters`` in recent configs, ``rope_scaling`` in older ones) and returns the
registry name and options of the posjax PE with the same inverse frequencies (``pe.frequencies()``)
and q/k attention factor (``pe.magnitude()``). All use the half-split pairing of these checkpoints.

| rope type | posjax PE | source of the formula |
|---|---|---|
| default | ``rope`` | Su et al., arXiv 2104.09864 |
| linear | ``rope_linear`` | Chen et al., arXiv 2306.15595 |
| dynamic | ``rope_ntk`` (``dynamic=True``) | NTK-aware scaling, dynamic form |
| yarn | ``rope_yarn`` (index ramp) | Peng et al., arXiv 2309.00071, and the YaRN code |
| longrope | ``longrope`` | Ding et al., arXiv 2402.13753 |
| llama3 | ``rope_llama3`` | Llama 3.1 release |
| proportional | ``rope_proportional`` | low-frequency pairs unrotated |

An ``mrope_section`` in the block makes it M-RoPE: ``mrope`` (default) or ``mrope_yarn`` (yarn).
"""
from __future__ import annotations

from typing import Any

ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional")


def _rope_block(config: dict[str, Any]) -> dict[str, Any]:
    """``rope_parameters`` and ``rope_scaling`` as one dict: a config holding both (e.g.
    ``rope_parameters`` with ``rope_theta`` only next to a linear ``rope_scaling``) gets their
    union, ``type`` read as ``rope_type``; a key the two set to different values is an error
    (never one block silently shadowing the other)."""
    blocks = {}
    for key in ("rope_parameters", "rope_scaling"):
        value = config.get(key)
        if value is None or value == {}:
            continue
        if not isinstance(value, dict):
            raise ValueError(f"config field {key!r} must be a dict, got {type(value).__name__}")
        blocks[key] = value
    if len(blocks) < 2:
        return dict(next(iter(blocks.values()), {}))
    new, old = blocks["rope_parameters"], blocks["rope_scaling"]
    if any(isinstance(v, dict) for v in (*new.values(), *old.values())):
        if new != old:
            raise ValueError("config has both rope_parameters and rope_scaling, with per-layer-"
                             "type settings that differ; keep one")
        return dict(new)
    norm = lambda d: {("rope_type" if k == "type" else k): v for k, v in d.items()}
    a, b = norm(new), norm(old)
    clash = sorted(k for k in set(a) & set(b) if a[k] != b[k])
    if clash:
        raise ValueError(f"config has both rope_parameters and rope_scaling and they disagree on "
                         f"{', '.join(f'{k} ({a[k]!r} vs {b[k]!r})' for k in clash)}; keep one")
    return {**b, **a}


def _scaling_dict(config: dict[str, Any], layer_type: str | None) -> dict[str, Any]:
    params = _rope_block(config)
    nested = {k: v for k, v in params.items() if isinstance(v, dict)}
    if nested:
        if layer_type is None:
            raise ValueError(f"this config has one RoPE setting per layer type "
                             f"({', '.join(sorted(nested))}); pass layer_type=")
        if layer_type not in nested:
            raise ValueError(f"unknown layer_type {layer_type!r}; the config has "
                             f"{', '.join(sorted(nested))}")
        params = nested[layer_type]
    return dict(params)


def rope_head_dim(config: dict[str, Any]) -> int:
    """The attention head dim of a Hugging Face config (``head_dim``, else hidden / heads)."""
    head_dim = config.get("head_dim")
    if head_dim:
        return int(head_dim)
    try:
        return int(config["hidden_size"]) // int(config["num_attention_heads"])
    except KeyError as e:
        raise ValueError(f"config has no head_dim and no {e.args[0]} to derive it from") from None


def rope_from_hf_config(config: dict[str, Any], *, layer_type: str | None = None
                        ) -> tuple[str, dict[str, Any]]:
    """The posjax PE (name, options) of a Hugging Face config's rotary embedding; an
    ``mrope_section`` (Qwen2-VL, Qwen2.5-VL; ``mrope_interleaved``: Qwen3-VL) gives ``mrope``
    (default type) or ``mrope_yarn`` (yarn type), otherwise see :func:`_rope_1d`."""
    params = _scaling_dict(config, layer_type)
    if "mrope_section" not in params:
        return _rope_1d(config, layer_type=layer_type)
    sections = tuple(int(v) for v in params.pop("mrope_section"))
    layout = "interleaved" if params.pop("mrope_interleaved", False) else "block"
    if params.get("rope_type", params.get("type")) == "mrope":  # Qwen2-VL's legacy name
        params.pop("type", None)
        params["rope_type"] = "default"
    key = "rope_parameters" if config.get("rope_parameters") else "rope_scaling"
    flat = {k: v for k, v in config.items() if k not in ("rope_parameters", "rope_scaling")}
    name, options = _rope_1d({**flat, key: params})
    options.update(sections=sections, section_layout=layout)
    if name == "rope":
        return "mrope", options
    if name == "rope_yarn":
        options.pop("ramp", None)
        mscale, mscale_all_dim = options.pop("mscale", None), options.pop("mscale_all_dim", None)
        if mscale and mscale_all_dim and "attention_factor" not in options:
            from math import log
            yarn = lambda m: 1.0 if options["factor"] <= 1 else 0.1 * m * log(options["factor"]) + 1
            options["attention_factor"] = yarn(mscale) / yarn(mscale_all_dim)
        return "mrope_yarn", options
    raise ValueError(f"M-RoPE (mrope_section) with RoPE type {params.get('rope_type')!r} is not "
                     "supported; supported: default, yarn")


def _rope_1d(config: dict[str, Any], *, layer_type: str | None = None
             ) -> tuple[str, dict[str, Any]]:
    """The posjax PE (name, options) of a Hugging Face config's (1-D) rotary embedding.

    Args:
      config: the parsed ``config.json`` of a RoPE model (Llama, Mistral, Qwen, Phi-3, ...).
      layer_type: for configs with one RoPE setting per layer type (e.g. "full_attention").

    Returns:
      ``(pe_name, pe_options)``; build it with ``posjax.encodings.make(pe_name,
      head_dim=rope_head_dim(config), max_len=config["max_position_embeddings"], **pe_options)``.

    Raises:
      ValueError: an unknown rope type (never silently plain RoPE), or a missing field.
    """
    params = _scaling_dict(config, layer_type)
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in ROPE_TYPES:
        raise ValueError(f"unsupported RoPE type {rope_type!r}; supported: {', '.join(ROPE_TYPES)}")
    base = float(params.get("rope_theta", config.get("rope_theta", 10000.0)))
    fraction = float(params.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0)))
    head_dim = rope_head_dim(config)
    max_pos = config.get("max_position_embeddings")
    options: dict[str, Any] = {"base": base, "interleaved": False}

    def need(key):
        if params.get(key) is None:
            raise ValueError(f"RoPE type {rope_type!r} needs {key!r} in rope_parameters")
        return params[key]

    def original():
        # a top-level original_max_position_embeddings (Phi-3) takes priority over the dict's
        value = (config.get("original_max_position_embeddings")
                 or params.get("original_max_position_embeddings") or max_pos)
        if value is None:
            raise ValueError(f"RoPE type {rope_type!r} needs original_max_position_embeddings "
                             f"or max_position_embeddings")
        return int(value)

    if rope_type == "proportional":
        options.update(proportion=fraction, factor=float(params.get("factor") or 1.0))
        return "rope_proportional", options
    if fraction != 1.0:
        dim = int(head_dim * fraction)
        if dim % 2 or dim != 2 * int(fraction * head_dim // 2):
            raise ValueError(f"partial_rotary_factor={fraction} gives an odd rotary dim {dim} "
                             f"for head_dim={head_dim}")
        options["rotary_fraction"] = fraction
    if rope_type == "default":
        return "rope", options
    if rope_type == "linear":
        options["factor"] = float(need("factor"))
        return "rope_linear", options
    if rope_type == "dynamic":
        if max_pos is None:
            raise ValueError("RoPE type 'dynamic' needs max_position_embeddings")
        options.update(factor=float(need("factor")), dynamic=True, original_max_len=int(max_pos))
        return "rope_ntk", options
    if rope_type == "llama3":
        options.update(factor=float(need("factor")), low_freq_factor=float(need("low_freq_factor")),
                       high_freq_factor=float(need("high_freq_factor")),
                       original_max_len=original())
        return "rope_llama3", options
    L = original()
    factor = params.get("factor")
    if factor is None:  # derived as max / original, which needs both (never a silent 1.0)
        if max_pos is None or not (config.get("original_max_position_embeddings")
                                   or params.get("original_max_position_embeddings")):
            raise ValueError(f"RoPE type {rope_type!r} needs 'factor' in rope_parameters (or "
                             f"original_max_position_embeddings and max_position_embeddings to "
                             f"derive it)")
        factor = max_pos / L
    if rope_type == "yarn":
        options.update(factor=float(factor), original_max_len=L, ramp="index",
                       alpha=float(params.get("beta_slow") or 1.0),
                       beta=float(params.get("beta_fast") or 32.0),
                       truncate=bool(params.get("truncate", True)))
        for key in ("attention_factor", "mscale", "mscale_all_dim"):
            if params.get(key) is not None:
                options[key] = float(params[key])
        return "rope_yarn", options
    # longrope
    options.update(short_factor=tuple(float(v) for v in need("short_factor")),
                   long_factor=tuple(float(v) for v in need("long_factor")),
                   original_max_len=L, factor=float(factor))
    if params.get("attention_factor") is not None:
        options["attention_factor"] = float(params["attention_factor"])
    return "longrope", options
