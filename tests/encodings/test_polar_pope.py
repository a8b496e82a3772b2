"""Polar PoPE (arXiv 2509.10534): the logits equal sum_c softplus(q_c) softplus(k_c)
cos((t - s) theta_c + delta_c) (float64), relative, and the model trains a step."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.polar_pope import polar_embed, polar_frequencies
from _pe_checks import (assert_cache_and_packing, make, rotated_logits, shift_gap,
                        train_one_step)


def test_logits_match_the_polar_formula_in_float64():
    with jax.enable_x64(True):
        d, H = 6, 2
        q = np.asarray(jax.random.normal(jax.random.key(0), (1, 3, H, d), jnp.float64))
        k = np.asarray(jax.random.normal(jax.random.key(1), (1, 4, H, d), jnp.float64))
        delta = -np.abs(np.asarray(jax.random.normal(jax.random.key(2), (H, d), jnp.float64)))
        tq, tk = np.array([0.0, 5.0, 9.0]), np.array([1.0, 2.0, 3.0, 12.0])
        theta = polar_frequencies(d, dtype=jnp.float64)
        np.testing.assert_allclose(np.asarray(theta), 10000.0 ** (-np.arange(d) / d))
        qe = polar_embed(jnp.asarray(q), jnp.asarray(tq), theta=theta)
        ke = polar_embed(jnp.asarray(k), jnp.asarray(tk), theta=theta, phase_offset=jnp.asarray(delta))
        got = np.einsum("bqhd,bkhd->hqk", qe, ke)
        sp = lambda x: np.log1p(np.exp(x))
        th = np.asarray(theta)
        want = np.einsum("qhc,khc,hqkc->hqk", sp(q[0]), sp(k[0]),
                         np.cos((tq[:, None] - tk[None, :])[None, :, :, None] * th + delta[:, None, None, :]))
        np.testing.assert_allclose(got, want, atol=1e-10)


def test_relative_widened_and_scaled_by_the_head_dim():
    pe = make("polar_pope")
    assert pe.is_relative and pe.hook == "rotate"
    assert shift_gap(lambda p: rotated_logits(pe, p), jnp.arange(8)) < 1e-5
    q = jax.random.normal(jax.random.key(0), (1, 4, 2, 8))
    qr, kr = pe.rotate(q, q, jnp.arange(4)[None], jnp.arange(4)[None])
    assert qr.shape == (1, 4, 2, 16) and kr.shape == (1, 4, 2, 16)
    assert pe.attention_scale(16) == 8 ** -0.5
    # magnitudes come from content only: |q~_c| = softplus(q_c) at every position
    mag = np.hypot(np.asarray(qr[..., :8]), np.asarray(qr[..., 8:]))
    np.testing.assert_allclose(mag, np.asarray(jax.nn.softplus(q)), rtol=1e-5)


def test_phase_offset_is_clamped_to_minus_two_pi_zero():
    pe = make("polar_pope")
    pe.phase_offset[...] = jnp.full(pe.phase_offset[...].shape, 5.0)
    q = jax.random.normal(jax.random.key(0), (1, 3, 2, 8))
    a = pe.rotate(q, q, jnp.arange(3)[None], jnp.arange(3)[None])[1]
    b = make("polar_pope").rotate(q, q, jnp.arange(3)[None], jnp.arange(3)[None])[1]
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)  # clamped to 0


@pytest.mark.slow  # the registry test builds every PE into a model by default
def test_trains_a_step_in_a_model():
    before, after = train_one_step("polar_pope")
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
def test_cache_and_packing():
    assert_cache_and_packing("polar_pope")
