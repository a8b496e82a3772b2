"""posjax.pretrained.to_hf_rope_config: export -> rope_from_hf_config gives the same PE (same
frequencies and attention factor) for every rotary PE with a Hugging Face rope_type, and the rope
blocks of published configs survive import -> export unchanged."""
import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

import posjax.encodings as pe
from posjax.pretrained import rope_from_hf_config, rope_head_dim, to_hf_rope_config
from posjax.pretrained.rope_export import OPTION_DEFAULTS

SHORT = [1.0, 1.02, 1.05, 1.1, 1.2, 1.3, 1.5, 1.7]
LONG = [1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.2, 4.0]
HEAD_DIM, MAX_POS = 16, 8192
CASES = [
    ("rope", {}),
    ("rope", {"base": 5e5, "rotary_fraction": 0.5}),
    ("rope_linear", {"factor": 4.0}),
    ("rope_ntk", {"dynamic": True, "factor": 4.0, "original_max_len": MAX_POS}),
    ("rope_yarn", {"factor": 4.0, "original_max_len": 2048}),
    ("rope_yarn", {"factor": 8.0, "original_max_len": 2048, "alpha": 2.0, "beta": 16.0,
                   "truncate": False, "mscale": 1.0, "mscale_all_dim": 0.5,
                   "rotary_fraction": 0.5}),
    ("rope_yarn", {"factor": 4.0, "original_max_len": 2048, "attention_factor": 1.3}),
    ("longrope", {"short_factor": tuple(SHORT), "long_factor": tuple(LONG),
                  "original_max_len": 2048}),
    ("longrope", {"short_factor": tuple(SHORT), "long_factor": tuple(LONG),
                  "original_max_len": 2048, "factor": 16.0, "attention_factor": 1.1}),
    ("rope_llama3", {}),
    ("rope_llama3", {"factor": 16.0, "low_freq_factor": 2.0, "high_freq_factor": 8.0,
                     "original_max_len": 1024, "base": 10000.0}),
    ("rope_proportional", {"proportion": 0.25}),
    ("rope_proportional", {"proportion": 0.5, "factor": 2.0}),
    ("mrope", {"sections": (2, 3, 3)}),
    ("mrope", {"section_layout": "interleaved", "base": 1e6}),
    ("mrope_yarn", {"factor": 4.0, "original_max_len": 2048, "sections": (4, 2, 2),
                    "section_layout": "interleaved"}),
]


def _pe(name, options):
    return pe.make(name, head_dim=HEAD_DIM, max_len=MAX_POS, **options)


def _readout(p, long=False):
    """(frequencies, attention factor) of a rotary PE; LongRoPE/dynamic NTK at a long length."""
    k_pos = jnp.arange(2 * MAX_POS if long else 16)[None]
    theta = np.asarray(p.position_frequencies(k_pos), np.float64)
    return theta, (p.magnitude() if hasattr(p, "magnitude") else 1.0)


def test_option_defaults_mirror_the_registry():
    for name, defaults in OPTION_DEFAULTS.items():
        fields = {f.name: f.default for f in dataclasses.fields(pe.info(name).options)}
        assert defaults == fields, name


@pytest.mark.parametrize("name,options", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_export_then_import_gives_the_same_frequencies_and_attention_factor(name, options):
    cfg = {"head_dim": HEAD_DIM, "max_position_embeddings": MAX_POS,
           **to_hf_rope_config(name, options, max_position_embeddings=MAX_POS, head_dim=HEAD_DIM)}
    back, back_opts = rope_from_hf_config(cfg)
    assert back == name
    a = _pe(name, options)
    b = pe.make(back, head_dim=rope_head_dim(cfg), max_len=cfg["max_position_embeddings"],
                **back_opts)
    if name.startswith("mrope"):
        assert a.sections == b.sections and a.options.section_layout == b.options.section_layout
    for long in (False, True):
        (ta, ma), (tb, mb) = _readout(a, long), _readout(b, long)
        np.testing.assert_array_equal(ta, tb)
        assert ma == mb
    # the exported dict uses HF's rope_parameters keys for that type only
    allowed = {"rope_type", "rope_theta", "partial_rotary_factor", "factor",
               "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow",
               "mscale", "mscale_all_dim", "truncate", "short_factor", "long_factor",
               "low_freq_factor", "high_freq_factor", "mrope_section", "mrope_interleaved"}
    assert set(cfg["rope_parameters"]) <= allowed


# Published rope blocks (config.json of the model id), with HF's rope_parameters standardisation:
# "type" -> "rope_type", and the top-level rope_theta / original_max_position_embeddings /
# partial_rotary_factor moved into the block.
PUBLISHED = {
    "meta-llama/Llama-3.1-8B": {
        "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"}},
    "Qwen/Qwen2.5-7B-Instruct": {  # the YaRN block its model card adds for 128K
        "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768,
                         "type": "yarn"}},
    "microsoft/Phi-4-mini-instruct": {  # model_type phi3, LongRoPE
        "hidden_size": 3072, "num_attention_heads": 24, "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096, "partial_rotary_factor": 0.75,
        "rope_theta": 10000.0,
        "rope_scaling": {
            "long_factor": [1, 1.118320672, 1.250641126, 1.398617824, 1.564103225, 1.74916897,
                            1.956131817, 2.187582649, 2.446418898, 2.735880826, 3.059592084,
                            3.421605075, 3.826451687, 4.279200023, 4.785517845, 5.351743533,
                            5.984965424, 6.693110555, 7.485043894, 8.370679318, 9.36110372,
                            10.4687158, 11.70738129, 13.09260651, 14.64173252, 16.37415215,
                            18.31155283, 20.47818807, 22.90118105, 25.61086418, 28.64115884,
                            32.03, 32.1, 32.13, 32.23, 32.6, 32.61, 32.64, 32.66, 32.7, 32.71,
                            32.93, 32.97, 33.28, 33.49, 33.5, 44.16, 47.77],
            "short_factor": [1.0] * 48, "type": "longrope"}},
    "Qwen/Qwen3-VL-8B-Instruct": {  # text_config: interleaved M-RoPE
        "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128,
        "max_position_embeddings": 262144, "rope_theta": 5000000,
        "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20],
                         "rope_type": "default"}},
    "Qwen3.5 (model card, YaRN for long context)": {  # text_config; M-RoPE + YaRN
        "head_dim": 256,
        "max_position_embeddings": 262144,
        "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10],
                            "rope_type": "yarn", "rope_theta": 10000000,
                            "partial_rotary_factor": 0.25, "factor": 4.0,
                            "original_max_position_embeddings": 262144}},
}


def _standardised(cfg):
    block = dict(cfg.get("rope_scaling") or cfg["rope_parameters"])
    block["rope_type"] = block.pop("type", block.get("rope_type"))
    block["rope_theta"] = cfg.get("rope_theta", block.get("rope_theta"))
    for key in ("original_max_position_embeddings", "partial_rotary_factor"):
        if key in cfg:
            block[key] = cfg[key]
    return block


@pytest.mark.parametrize("model_id", sorted(PUBLISHED))
def test_published_rope_blocks_survive_import_then_export(model_id):
    cfg = PUBLISHED[model_id]
    name, options = rope_from_hf_config(cfg)
    out = to_hf_rope_config(name, options, max_position_embeddings=cfg["max_position_embeddings"])
    assert out["rope_parameters"] == _standardised(cfg)
    assert out["max_position_embeddings"] == cfg["max_position_embeddings"]
    # and the re-imported PE is the same PE
    again = rope_from_hf_config({**cfg, "rope_scaling": None, **out})
    assert again == (name, options)


@pytest.mark.parametrize("name,options,match", [
    ("rope_ntk", {"factor": 2.0}, "dynamic=False"),
    ("rope_yarn", {"ramp": "ratio", "original_max_len": 64}, "ramp='ratio'"),
    ("rope", {"interleaved": True}, "interleaved=True"),
    ("rope", {"num_rotary_heads": 1}, "num_rotary_heads"),
    ("alibi", {}, "no Hugging Face rope_type"),
    ("rope_yarn", {}, "pass max_position_embeddings"),
    ("rope", {"bsae": 2.0}, "unknown option"),
])
def test_pes_without_a_hf_rope_type_refuse(name, options, match):
    with pytest.raises(ValueError, match=match):
        to_hf_rope_config(name, options)
