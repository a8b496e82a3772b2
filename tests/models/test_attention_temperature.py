"""Llama 4's attention temperature: queries at position p scaled by
log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1 (HF Llama4TextAttention.forward)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from posjax.models import Transformer, TransformerConfig
from posjax.models.schedules import attention_temperature


@pytest.mark.parametrize("floor_scale,attn_scale", [(8192.0, 0.1), (4.0, 0.5)])
def test_closed_form_around_multiples_of_floor_scale(floor_scale, attn_scale):
    fs = int(floor_scale)
    p = np.array([0, 1] + [k * fs + d for k in range(1, 6) for d in (-2, -1, 0, 1)])
    got = np.asarray(attention_temperature(p, floor_scale=floor_scale, attn_scale=attn_scale))
    want = [math.log(math.floor((q + 1) / floor_scale) + 1) * attn_scale + 1 for q in p]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # 1 until p + 1 reaches floor_scale, then a step at every multiple of it
    assert got[0] == got[1] == 1.0
    steps = got[2:].reshape(5, 4)
    assert (steps[:, 1] > steps[:, 0]).all() and (steps[:, 3] == steps[:, 2]).all()
    np.testing.assert_array_equal(steps[:, 1], steps[:, 2])


def test_model_scales_the_queries_of_nope_layers_only():
    """Attention weights with the temperature = softmax(s_q * log(weights without it)) on a
    NoPE layer (the logits scaled by s_q), and unchanged on a RoPE layer."""
    common = dict(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_len=64,
                  causal=True, layer_types=("full",))
    temp = {"floor_scale": 4.0, "attn_scale": 0.5}
    tokens = jax.random.randint(jax.random.key(0), (1, 14), 0, 16)
    weights = {}
    for name, pe in (("nope", "none"), ("rope", "rope")):
        for on in (False, True):
            cfg = TransformerConfig(layer_pe={"full": pe}, **common,
                                    attention_temperature=temp if on else None)
            if on:
                assert cfg.temperature_layers() == ((pe == "none"),)
            body = Transformer(cfg, rngs=nnx.Rngs(0))
            weights[name, on] = np.asarray(body(tokens, return_attention=True)[1][0, 0],
                                           np.float64)
    np.testing.assert_array_equal(weights["rope", True], weights["rope", False])
    s = np.asarray(attention_temperature(np.arange(14), **temp), np.float64)
    base = weights["nope", False]
    with np.errstate(divide="ignore"):
        logits = np.where(base > 0, s[None, :, None] * np.log(base), -np.inf)
    want = np.exp(logits - logits.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    np.testing.assert_allclose(weights["nope", True], want, atol=2e-6)
    assert np.abs(weights["nope", True] - base).max() > 1e-3  # it does act (p >= 3)


def test_layer_kinds_choose_the_scaled_layers():
    cfg = TransformerConfig(num_layers=4, layer_types=("chunked", "full"), attention_chunk_size=4,
                            layer_pe={"chunked": "rope", "full": "none"}, causal=True,
                            attention_temperature={"layer_kinds": ("chunked",)})
    assert cfg.temperature_layers() == (True, False, True, False)
    assert cfg.attention_temperature["floor_scale"] == 8192.0
    with pytest.raises(ValueError, match="floor_scale must be > 0"):
        TransformerConfig(attention_temperature={"floor_scale": 0})
