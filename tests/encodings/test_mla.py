"""MLA-style decoupled RoPE (DeepSeek-V2, arXiv 2405.04434, as studied in arXiv 2505.13027):
the widened q/k logit formula in float64 NumPy, shapes and sharing, relative, and the model's two
attention paths. (Split from test_rope_plus_abs_mla.py.)"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe
from posjax.encodings.mla import MLA, decoupled_rope
from posjax.models import Classifier, TransformerConfig
from _pe_checks import constant_qk, constant_qk_logits, forward_at

enable_x64 = jax.enable_x64
CFG = dict(vocab_size=40, num_layers=2, d_model=32, num_heads=4, d_ff=64, max_len=24)


def test_registered_with_hooks_and_flags():
    assert pe.info("mla").hooks == {"rotate"} and pe.info("mla").relative
    assert "2505.13027" in pe.info("mla").paper


def test_decoupled_rope_logit_formula_and_relative_property():
    rng = np.random.default_rng(2)
    qc, kc = rng.normal(size=(2, 1, 9, 3, 4))
    qr, kr = rng.normal(size=(1, 9, 3, 6)), rng.normal(size=(1, 9, 1, 6))
    pos = np.arange(9)
    with enable_x64():
        widen = jax.jit(decoupled_rope)
        q2, k2 = (np.asarray(a) for a in widen(qc, kc, qr, kr, pos, pos))
        shifted = [[np.asarray(a) for a in widen(qc, kc, qr, kr, pos + s, pos + s)]
                   for s in (5, 36)]
    assert q2.dtype == np.float64 and q2.shape == k2.shape == (1, 9, 3, 10)
    logits = np.einsum("bqhd,bkhd->bhqk", q2, k2)
    # content part untouched; rotary part = q_R^T R_{j-i} k_R (pairs (2t, 2t+1))
    theta = 10000.0 ** (-2 * np.arange(3) / 6)
    i, j, h = 2, 7, 1
    rot = np.zeros((6, 6))
    for t, th in enumerate(theta):
        c, s = np.cos((j - i) * th), np.sin((j - i) * th)
        rot[2 * t:2 * t + 2, 2 * t:2 * t + 2] = [[c, -s], [s, c]]
    expect = qc[0, i, h] @ kc[0, j, h] + qr[0, i, h] @ rot @ kr[0, j, 0]
    assert abs(logits[0, h, i, j] - expect) < 1e-10
    for q3, k3 in shifted:
        np.testing.assert_allclose(np.einsum("bqhd,bkhd->bhqk", q3, k3), logits, atol=1e-10)


def test_mla_shapes_parameters_and_relative_property():
    m = pe.make("mla", d_model=32, num_heads=4, rope_dim=6)
    assert isinstance(m, MLA) and m.per_layer
    assert m.q_rope.kernel.shape == (32, 24) and m.k_rope.kernel.shape == (32, 6)
    shared = pe.make("mla", d_model=32, num_heads=4, rope_dim=6, shared_query_rope=True)
    assert shared.q_rope.kernel.shape == (32, 6)
    q, k = constant_qk(0, 8)
    qr, kr = nnx.jit(lambda m, q, k, p: m.rotate(q, k, p, p))(m, q, k, jnp.arange(8)[None])
    assert qr.shape == kr.shape == (1, 8, 4, 14)
    np.testing.assert_array_equal(np.asarray(qr[..., :8]), np.asarray(q))
    # k_R is shared by all heads
    np.testing.assert_allclose(np.asarray(kr[:, :, 0, 8:]), np.asarray(kr[:, :, 3, 8:]))
    assert m.attention_scale(qr.shape[-1]) == pytest.approx(14 ** -0.5)
    base = constant_qk_logits(m, jnp.arange(8))
    for shift in (5, 32):
        np.testing.assert_allclose(constant_qk_logits(m, jnp.arange(8) + shift), base, atol=1e-5)
    with pytest.raises(ValueError, match="rope_dim"):
        pe.make("mla", d_model=32, num_heads=4, rope_dim=5)


def test_mla_model_fast_and_explicit_attention_paths_agree_and_depend_on_order():
    cfg = TransformerConfig(pe="mla", pe_options={"rope_dim": 8}, **CFG)
    model = Classifier(cfg, 5, "mean", rngs=nnx.Rngs(0))
    assert len(model.transformer.pes) == 2  # one rotary path per layer
    t = jax.random.randint(jax.random.key(3), (2, 12), 0, 40)
    pos = jnp.arange(12)
    fast = forward_at(model, t, pos)
    slow, weights = forward_at(model, t, pos, weights=True)
    assert fast.shape == (2, 5) and weights.shape == (2, 2, 4, 12, 12)
    np.testing.assert_allclose(np.asarray(fast), np.asarray(slow), atol=1e-5)
    perm = jax.random.permutation(jax.random.key(4), 12)
    assert float(jnp.abs(forward_at(model, t[:, perm], pos) - fast).max()) > 1e-4
    np.testing.assert_allclose(np.asarray(forward_at(model, t, pos + 7)), np.asarray(fast),
                               atol=2e-5)
