"""Write a posjax rotary PE back as a Hugging Face ``rope_parameters`` block.

:func:`to_hf_rope_config` is the inverse of :func:`posjax.pretrained.rope_from_hf_config`: it
writes the keys that ``transformers`` (``modeling_rope_utils.py``, the ``_validate_<type>_rope_
parameters`` checks of ``RotaryEmbeddingConfigMixin``) requires or accepts for that ``rope_type``,
with ``rope_theta`` inside the block (the ``rope_parameters`` layout), so that reading it back
gives the same inverse frequencies and attention factor. Optional keys are written only when they
differ from the value HF assumes when the key is absent (YaRN's ``beta_fast`` 32, ``beta_slow``
1, ``truncate`` True; LongRoPE's ``factor`` when it is ``max_position_embeddings /
original_max_position_embeddings``), so a published block survives import -> export unchanged.

| posjax PE | rope_type | keys written (besides rope_type, rope_theta, partial_rotary_factor != 1) |
|---|---|---|
| ``rope`` | default | -- |
| ``rope_linear`` | linear | factor |
| ``rope_ntk`` (``dynamic=True``) | dynamic | factor (and ``max_position_embeddings`` = the original length, outside the block) |
| ``rope_yarn`` (index ramp) | yarn | factor, original_max_position_embeddings; beta_fast, beta_slow, truncate, attention_factor, mscale, mscale_all_dim when set |
| ``longrope`` | longrope | short_factor, long_factor, original_max_position_embeddings; factor, attention_factor when set |
| ``rope_llama3`` | llama3 | factor, low_freq_factor, high_freq_factor, original_max_position_embeddings |
| ``rope_proportional`` | proportional | partial_rotary_factor = proportion; factor when != 1 |
| ``mrope`` / ``mrope_yarn`` | default / yarn | those of rope / rope_yarn plus mrope_section (and mrope_interleaved: true for Qwen3-VL's layout) |

PEs with no HF ``rope_type`` (static NTK, YaRN's ratio ramp, interleaved pairs, partial-head
RoPE, any non-RoPE PE) raise ValueError naming the option.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

# posjax's option defaults of the PEs written here (posjax.pretrained may not import
# posjax.encodings; tests/pretrained/test_rope_export.py checks these against the registry).
_ROPE = {"base": 10000.0, "rotary_fraction": 1.0, "interleaved": False, "num_rotary_heads": None}
OPTION_DEFAULTS: dict[str, dict[str, Any]] = {
    "rope": dict(_ROPE),
    "rope_linear": {**_ROPE, "factor": 2.0},
    "rope_ntk": {**_ROPE, "factor": 2.0, "dynamic": False, "original_max_len": None},
    "rope_yarn": {**_ROPE, "factor": 2.0, "original_max_len": None, "alpha": 1.0, "beta": 32.0,
                  "attention_factor": None, "ramp": "index", "truncate": True, "mscale": None,
                  "mscale_all_dim": None},
    "longrope": {**_ROPE, "short_factor": (), "long_factor": (), "original_max_len": None,
                 "factor": None, "attention_factor": None},
    "rope_llama3": {**_ROPE, "base": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0, "original_max_len": 8192},
    "rope_proportional": {**_ROPE, "factor": 1.0, "proportion": 1.0},
}
_MROPE = {**_ROPE, "sections": None, "section_layout": "block"}
OPTION_DEFAULTS.update({
    "mrope": dict(_MROPE),
    "mrope_yarn": {**_MROPE, "factor": 2.0, "original_max_len": None, "alpha": 1.0, "beta": 32.0,
                   "truncate": True, "attention_factor": None},
})


def _mrope_sections(o: dict[str, Any], head_dim: int | None) -> list[int]:
    """The (t, h, w) pair counts, defaulted as posjax's mrope_sections does."""
    if o["sections"] is not None:
        return [int(v) for v in o["sections"]]
    if head_dim is None:
        raise ValueError("M-RoPE with sections=None (the default split) needs head_dim= to "
                         "write mrope_section")
    pairs = 2 * int(o["rotary_fraction"] * head_dim // 2) // 2
    hw = (3 * pairs) // 8 if o["section_layout"] == "block" else (5 * pairs) // 16
    return [pairs - 2 * hw, hw, hw]


def _num(v):
    """An int-valued float stays as the float HF configs write (8.0), ints stay ints."""
    return float(v) if isinstance(v, float) else v


def to_hf_rope_config(pe_name: str, options: Mapping[str, Any] | Any | None = None, *,
                      max_position_embeddings: int | None = None,
                      head_dim: int | None = None) -> dict[str, Any]:
    """The Hugging Face config fields of the posjax rotary PE ``pe_name`` with ``options``.

    Args:
      pe_name: a registered rotary PE (see the module table).
      options: its options (a dict of fields, missing ones at their defaults, or the options
        dataclass itself, e.g. ``pe.options``).
      max_position_embeddings: the model's length, written to the config (and used as the
        original length where the options leave it to the model's ``max_len``).
      head_dim: the attention head dim (only needed for M-RoPE's default sections).

    Returns:
      ``{"rope_parameters": {...}}`` plus ``"max_position_embeddings"`` when it is known; merge
      it into a ``config.json`` (with ``head_dim``) and :func:`rope_from_hf_config` reads back
      the same PE.

    Raises:
      ValueError: a PE or option with no Hugging Face ``rope_type`` (named), or a missing length.
    """
    if pe_name not in OPTION_DEFAULTS:
        raise ValueError(f"PE {pe_name!r} has no Hugging Face rope_type; exportable: "
                         f"{', '.join(OPTION_DEFAULTS)}")
    if options is not None and dataclasses.is_dataclass(options):
        options = dataclasses.asdict(options)
    given = dict(options or {})
    unknown = sorted(set(given) - set(OPTION_DEFAULTS[pe_name]))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for PE {pe_name!r}")
    o = {**OPTION_DEFAULTS[pe_name], **given}
    if pe_name in ("mrope", "mrope_yarn"):  # the 1-D block plus HF's mrope keys
        one_d = {k: v for k, v in o.items() if k not in ("sections", "section_layout")}
        out = to_hf_rope_config("rope" if pe_name == "mrope" else "rope_yarn", one_d,
                                max_position_embeddings=max_position_embeddings)
        out["rope_parameters"]["mrope_section"] = _mrope_sections(o, head_dim)
        if o["section_layout"] == "interleaved":
            out["rope_parameters"]["mrope_interleaved"] = True
        return out
    if o["interleaved"]:
        raise ValueError(f"{pe_name}: interleaved=True (RoFormer pairs) has no Hugging Face "
                         "rope_parameters; HF checkpoints rotate half-split pairs")
    if o["num_rotary_heads"] is not None:
        raise ValueError(f"{pe_name}: num_rotary_heads (partial-head RoPE) has no Hugging Face "
                         "rope_parameters")
    params: dict[str, Any] = {}
    out: dict[str, Any] = {}
    if max_position_embeddings is not None:
        out["max_position_embeddings"] = int(max_position_embeddings)

    def original():
        L = o.get("original_max_len") or max_position_embeddings
        if L is None:
            raise ValueError(f"{pe_name}: original_max_len is None (the model's max_len); pass "
                             "max_position_embeddings=")
        return int(L)

    def head(rope_type):
        params.update(rope_type=rope_type, rope_theta=float(o["base"]))
        if o["rotary_fraction"] != 1.0:
            params["partial_rotary_factor"] = float(o["rotary_fraction"])

    if pe_name == "rope":
        head("default")
    elif pe_name == "rope_linear":
        head("linear")
        params["factor"] = _num(o["factor"])
    elif pe_name == "rope_ntk":
        if not o["dynamic"]:
            raise ValueError("rope_ntk with dynamic=False (static NTK-aware base) has no Hugging "
                             "Face rope_type; HF's 'dynamic' is dynamic=True")
        head("dynamic")
        params["factor"] = _num(o["factor"])
        L = original()
        if max_position_embeddings is not None and int(max_position_embeddings) != L:
            raise ValueError(f"rope_ntk: HF's dynamic scaling takes max_position_embeddings as the "
                             f"original length, but original_max_len={L} != "
                             f"max_position_embeddings={max_position_embeddings}")
        out["max_position_embeddings"] = L
    elif pe_name == "rope_yarn":
        if o["ramp"] != "index":
            raise ValueError(f"rope_yarn ramp={o['ramp']!r} has no Hugging Face rope_type (HF's "
                             "'yarn' is the YaRN code's index ramp)")
        head("yarn")
        params.update(factor=_num(o["factor"]), original_max_position_embeddings=original())
        if o["beta"] != 32.0:
            params["beta_fast"] = _num(o["beta"])
        if o["alpha"] != 1.0:
            params["beta_slow"] = _num(o["alpha"])
        if not o["truncate"]:
            params["truncate"] = False
        for key in ("attention_factor", "mscale", "mscale_all_dim"):
            if o[key] is not None:
                params[key] = _num(o[key])
    elif pe_name == "longrope":
        if not o["short_factor"] or not o["long_factor"]:
            raise ValueError("longrope: HF needs explicit short_factor and long_factor lists "
                             "(one value per rotated pair)")
        head("longrope")
        L = original()
        params.update(short_factor=[_num(v) for v in o["short_factor"]],
                      long_factor=[_num(v) for v in o["long_factor"]],
                      original_max_position_embeddings=L)
        derived = (None if max_position_embeddings is None
                   else int(max_position_embeddings) / L)
        if o["factor"] is not None and o["factor"] != derived:
            params["factor"] = _num(o["factor"])
        elif o["factor"] is None and derived is None:
            raise ValueError("longrope: factor is None (max_len / original length); pass "
                             "max_position_embeddings=")
        if o["attention_factor"] is not None:
            params["attention_factor"] = _num(o["attention_factor"])
    elif pe_name == "rope_llama3":
        head("llama3")
        params.update(factor=_num(o["factor"]), low_freq_factor=_num(o["low_freq_factor"]),
                      high_freq_factor=_num(o["high_freq_factor"]),
                      original_max_position_embeddings=original())
    else:  # rope_proportional
        if o["rotary_fraction"] != 1.0:
            raise ValueError("rope_proportional keeps rotary_fraction=1 (use proportion)")
        head("proportional")
        params["partial_rotary_factor"] = float(o["proportion"])
        if o["factor"] != 1.0:
            params["factor"] = _num(o["factor"])
    out["rope_parameters"] = params
    return out
