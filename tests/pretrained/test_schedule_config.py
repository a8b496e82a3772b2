"""schedule_from_hf_config: the per-layer schedules of published configs, and the presets.

Each test parses a fragment of a published config (the fields that decide the schedule, copied
from the model's ``config.json`` / the transformers config defaults it relies on) and compares
the per-layer RoPE frequencies and masks with an independent NumPy transcription, written here,
of the Hugging Face reference function named in the test.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from posjax import encodings as pe_lib
from posjax.models import TransformerConfig
from posjax.models import schedules as S
from posjax.pretrained.schedule_config import schedule_from_hf_config


RTOL = 2e-6  # scaled RoPE frequencies are float32


# --- NumPy transcriptions of transformers' reference functions ---------------------------------
def hf_default_inv_freq(base, dim):
    """modeling_rope_utils._compute_default_rope_parameters."""
    return 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


def hf_linear_inv_freq(base, dim, factor):
    """modeling_rope_utils._compute_linear_scaling_rope_parameters."""
    return hf_default_inv_freq(base, dim) / factor


def hf_llama3_inv_freq(base, dim, factor, low, high, old_ctx):
    """modeling_rope_utils._compute_llama3_parameters."""
    inv = hf_default_inv_freq(base, dim)
    low_wl, high_wl = old_ctx / low, old_ctx / high
    wavelen = 2 * math.pi / inv
    out = np.where(wavelen > low_wl, inv / factor, inv)
    with np.errstate(divide="ignore", invalid="ignore"):  # low == high: never "medium"
        smooth = (old_ctx / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * out / factor + smooth * out
    medium = ~(wavelen < high_wl) & ~(wavelen > low_wl)
    return np.where(medium, smoothed, out)


def hf_yarn_inv_freq(base, dim, factor, old_ctx, beta_fast=32.0, beta_slow=1.0, truncate=True):
    """modeling_rope_utils._compute_yarn_parameters (inverse frequencies)."""
    def corr_dim(rot):
        return dim * math.log(old_ctx / (rot * 2 * math.pi)) / (2 * math.log(base))
    lo, hi = corr_dim(beta_fast), corr_dim(beta_slow)
    if truncate:
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, dim - 1)
    if lo == hi:
        hi += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - lo) / (hi - lo), 0, 1)
    pos = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    extra = 1 - ramp
    return (1 / (factor * pos)) * (1 - extra) + (1 / pos) * extra


def hf_sliding_causal(q, k, window):
    """masking_utils.sliding_window_overlay & causal_mask_function."""
    return (k[None, :] > q[:, None] - window) & (k[None, :] <= q[:, None])


def hf_chunked_causal(q, k, chunk):
    """masking_utils.chunked_overlay (no left padding) & causal_mask_function."""
    return (k[None, :] // chunk == q[:, None] // chunk) & (k[None, :] <= q[:, None])


def hf_modernbert_window(q, k, local_attention):
    """ModernBertModel._update_attention_mask: distance <= local_attention // 2."""
    return np.abs(q[:, None] - k[None, :]) <= local_attention // 2


# --- helpers ------------------------------------------------------------------------------------
def layer_freqs(fields, head_dim, layer):
    kind = TransformerConfig(d_model=head_dim * 2, num_heads=2, max_len=64, **{
        k: v for k, v in fields.items() if k != "num_layers"},
        num_layers=fields["num_layers"]).kinds[layer]
    spec = fields["layer_pe"][kind]
    if spec["pe"] == "none":
        return None
    pe = pe_lib.make(spec["pe"], head_dim=head_dim, num_heads=2, max_len=64, **spec["options"])
    return np.asarray(pe.frequencies(), np.float64)


def model_mask(fields, kind, q, k):
    cfg = TransformerConfig(d_model=8, num_heads=2, max_len=64, **fields)
    m = S.layer_kind_mask(kind, q, k, causal=cfg.causal, sliding_window=cfg.sliding_window,
                          attention_chunk_size=cfg.attention_chunk_size)
    if cfg.causal:
        m = S.and_masks(m, (k[None, :] <= q[:, None])[None, None])
    return np.asarray(m)[0, 0]


def positions_around(span):
    p = np.array([0, 1, span - 2, span - 1, span, span + 1, 2 * span - 1, 2 * span, 2 * span + 3])
    return p, p


# --- Llama 4 (Llama-4-Scout-17B-16E text_config) ------------------------------------------------
LLAMA4 = {"model_type": "llama4_text", "num_hidden_layers": 48, "hidden_size": 5120,
          "num_attention_heads": 40, "head_dim": 128, "attention_chunk_size": 8192,
          "no_rope_layers": [], "no_rope_layer_interval": 4, "attn_temperature_tuning": True,
          "floor_scale": 8192, "attn_scale": 0.1, "rope_theta": 500000.0,
          "max_position_embeddings": 10485760,
          "rope_scaling": {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0,
                           "high_freq_factor": 1.0, "original_max_position_embeddings": 8192}}


def test_llama4_irope():
    """Llama4TextConfig.__init__ (no_rope_layers[i] = int((i + 1) % interval != 0)),
    Llama4TextDecoderLayer (chunked attention on RoPE layers), _compute_llama3_parameters,
    chunked_overlay; temperature on the NoPE layers (Llama4TextAttention.forward)."""
    fields = schedule_from_hf_config(LLAMA4)
    rope = [int((i + 1) % 4 != 0) for i in range(48)]
    assert fields["layer_types"] == tuple("chunked" if r else "full" for r in rope)
    assert fields["attention_chunk_size"] == 8192
    assert fields["attention_temperature"] == {"floor_scale": 8192.0, "attn_scale": 0.1}
    want = hf_llama3_inv_freq(500000.0, 128, 16.0, 1.0, 1.0, 8192)
    for layer in (0, 1, 2, 3, 7):
        got = layer_freqs(fields, 128, layer)
        if rope[layer]:
            np.testing.assert_allclose(got, want, rtol=RTOL)
        else:
            assert got is None
    cfg = TransformerConfig(d_model=256, num_heads=2, max_len=64, **fields)
    assert cfg.temperature_layers() == tuple(not r for r in rope)
    q, k = positions_around(8192)
    np.testing.assert_array_equal(model_mask(fields, "chunked", q, k), hf_chunked_causal(q, k, 8192))
    # the preset is this schedule (its RoPE without the long-context scaling)
    preset = S.PRESETS["llama4_irope"]
    assert preset["layer_types"] == fields["layer_types"][:4]
    assert preset["attention_chunk_size"] == 8192
    assert preset["layer_pe"]["full"]["pe"] == "none"
    assert preset["layer_pe"]["chunked"]["options"]["base"] == LLAMA4["rope_theta"]


# --- Gemma 3 (gemma-3-4b-it text_config) ----------------------------------------------------------
GEMMA3 = {"model_type": "gemma3_text", "num_hidden_layers": 34, "hidden_size": 2560,
          "num_attention_heads": 8, "head_dim": 256, "sliding_window": 1024,
          "sliding_window_pattern": 6, "rope_local_base_freq": 10000.0, "rope_theta": 1000000.0,
          "rope_scaling": {"rope_type": "linear", "factor": 8.0},
          "max_position_embeddings": 131072}
GEMMA3_NESTED = {k: v for k, v in GEMMA3.items() if k not in ("rope_scaling", "rope_theta",
                                                             "rope_local_base_freq",
                                                             "sliding_window_pattern")}
GEMMA3_NESTED.update(
    layer_types=["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(34)],
    rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0,
                                        "rope_theta": 1000000.0},
                     "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})


@pytest.mark.parametrize("config", [GEMMA3, GEMMA3_NESTED], ids=["flat", "nested"])
def test_gemma3(config):
    """Gemma3TextConfig (layer i sliding iff (i + 1) % 6), Gemma3RotaryEmbedding (global:
    _compute_linear_scaling_rope_parameters at rope_theta; local: default at
    rope_local_base_freq), sliding_window_overlay."""
    fields = schedule_from_hf_config(config)
    kinds = tuple("sliding" if (i + 1) % 6 else "full" for i in range(34))
    assert fields["layer_types"] == kinds and fields["sliding_window"] == 1024
    for layer in (0, 4, 5, 11, 33):
        want = (hf_default_inv_freq(1e4, 256) if kinds[layer] == "sliding"
                else hf_linear_inv_freq(1e6, 256, 8.0))
        np.testing.assert_allclose(layer_freqs(fields, 256, layer), want, rtol=RTOL)
    q, k = positions_around(1024)
    np.testing.assert_array_equal(model_mask(fields, "sliding", q, k), hf_sliding_causal(q, k, 1024))
    preset = S.PRESETS["gemma3"]
    assert preset["layer_types"] == kinds[:6] and preset["sliding_window"] == 1024
    assert preset["layer_pe"]["sliding"]["options"]["base"] == 1e4
    assert preset["layer_pe"]["full"]["options"]["base"] == 1e6


# --- ModernBERT (ModernBERT-base) ---------------------------------------------------------------
MODERNBERT = {"model_type": "modernbert", "num_hidden_layers": 22, "hidden_size": 768,
              "num_attention_heads": 12, "global_attn_every_n_layers": 3, "local_attention": 128,
              "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
              "max_position_embeddings": 8192}


def test_modernbert():
    """ModernBertAttention.__init__ (local iff layer_id % global_attn_every_n_layers != 0;
    rope_theta local_rope_theta there, global_rope_theta otherwise) and
    ModernBertModel._update_attention_mask (|q - k| <= local_attention // 2)."""
    fields = schedule_from_hf_config(MODERNBERT)
    kinds = tuple("sliding" if i % 3 else "full" for i in range(22))
    assert fields["layer_types"] == kinds and fields["causal"] is False
    for layer in (0, 1, 2, 3, 21):
        base = 1e4 if kinds[layer] == "sliding" else 160000.0
        np.testing.assert_allclose(layer_freqs(fields, 64, layer), hf_default_inv_freq(base, 64),
                                   rtol=RTOL)
    q, k = positions_around(64)
    np.testing.assert_array_equal(model_mask(fields, "sliding", q, k),
                                  hf_modernbert_window(q, k, 128))
    preset = S.PRESETS["modernbert"]
    assert preset["layer_types"] == kinds[:3] and preset["sliding_window"] == 128
    assert preset["causal"] is False
    assert {k: v["options"]["base"] for k, v in preset["layer_pe"].items()} == {
        "full": 160000.0, "sliding": 1e4}


# --- Olmo 3 (Olmo-3-7B) -------------------------------------------------------------------------
OLMO3 = {"model_type": "olmo3", "num_hidden_layers": 32, "hidden_size": 4096,
         "num_attention_heads": 32, "sliding_window": 4096, "rope_theta": 500000.0,
         "max_position_embeddings": 65536,
         "layer_types": ["sliding_attention" if (i + 1) % 4 else "full_attention"
                         for i in range(32)],
         "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "attention_factor": 1.2079441541679836,
                          "beta_fast": 32.0, "beta_slow": 1.0,
                          "original_max_position_embeddings": 8192}}


def test_olmo3():
    """Olmo3Config.__post_init__ (sliding iff (i + 1) % 4 != 0), convert_rope_params_to_dict
    (rope_scaling -> full_attention only), _compute_yarn_parameters on the full layers."""
    fields = schedule_from_hf_config(OLMO3)
    kinds = tuple("sliding" if (i + 1) % 4 else "full" for i in range(32))
    assert fields["layer_types"] == kinds and fields["sliding_window"] == 4096
    yarn = hf_yarn_inv_freq(500000.0, 128, 8.0, 8192)
    for layer in (0, 2, 3, 31):
        want = hf_default_inv_freq(500000.0, 128) if kinds[layer] == "sliding" else yarn
        np.testing.assert_allclose(layer_freqs(fields, 128, layer), want, rtol=RTOL)
    q, k = positions_around(4096)
    np.testing.assert_array_equal(model_mask(fields, "sliding", q, k), hf_sliding_causal(q, k, 4096))
    preset = S.PRESETS["olmo3"]
    assert preset["layer_types"] == kinds[:4] and preset["sliding_window"] == 4096
    np.testing.assert_allclose(
        layer_freqs({**preset, "num_layers": 4}, 128, 3), yarn, rtol=RTOL)
    np.testing.assert_allclose(layer_freqs({**preset, "num_layers": 4}, 128, 0),
                               hf_default_inv_freq(500000.0, 128), rtol=RTOL)


# --- RNoPE-SWA (arXiv 2501.18795), in Hugging Face's vocabulary --------------------------------
RNOPE = {"model_type": "llama", "num_hidden_layers": 8, "hidden_size": 512,
         "num_attention_heads": 4, "rope_theta": 10000.0, "sliding_window": 4096,
         "layer_types": ["sliding_attention" if (i + 1) % 4 else "full_attention"
                         for i in range(8)],
         "no_rope_layers": [int((i + 1) % 4 != 0) for i in range(8)]}


def test_rnope_swa():
    """No published HF config: the schedule written with Llama4TextConfig's no_rope_layers rule
    and layer_types (RoPE + sliding window, NoPE + full attention, 3:1)."""
    fields = schedule_from_hf_config(RNOPE)
    assert fields["layer_types"] == ("sliding",) * 3 + ("full",) + ("sliding",) * 3 + ("full",)
    assert fields["layer_pe"]["full"]["pe"] == "none"
    np.testing.assert_allclose(layer_freqs(fields, 128, 0), hf_default_inv_freq(1e4, 128),
                               rtol=RTOL)
    q, k = positions_around(4096)
    np.testing.assert_array_equal(model_mask(fields, "sliding", q, k), hf_sliding_causal(q, k, 4096))
    preset = S.PRESETS["rnope_swa"]
    assert preset["layer_types"] == fields["layer_types"][:4]
    assert preset["layer_pe"] == {k: v for k, v in fields["layer_pe"].items()} | {
        "sliding": {"pe": "rope", "options": {"base": 1e4}}}


def test_single_pe_configs_read_as_one_kind_and_bad_lists_raise():
    fields = schedule_from_hf_config({"num_hidden_layers": 2, "hidden_size": 64,
                                      "num_attention_heads": 2, "rope_theta": 1e4})
    assert fields["layer_types"] == ("full", "full") and list(fields["layer_pe"]) == ["full"]
    with pytest.raises(ValueError, match="3 entries for 2 layers"):
        schedule_from_hf_config({"num_hidden_layers": 2, "hidden_size": 64,
                                 "num_attention_heads": 2,
                                 "layer_types": ["full_attention"] * 3})
    with pytest.raises(ValueError, match="unknown layer type"):
        schedule_from_hf_config({"num_hidden_layers": 1, "hidden_size": 64,
                                 "num_attention_heads": 2, "layer_types": ["local"]})
