"""Bias-hook catalogue entries: KERPLE, FIRE, HyPE, TUPE."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe_lib
from posjax.encodings import (alibi_slopes, fire_inputs, hype_augment, hype_bias, kerple_log_bias,
                              kerple_power_bias)

POS = jnp.arange(6)


def test_kerple_formulas_and_clamping():
    r1, r2 = jnp.array([1.5, 0.001]), jnp.array([0.5, 3.0])
    b = np.asarray(kerple_log_bias(r1, r2, POS, POS, causal=True))
    # head 0: -1.5 log(1 + 0.5 (i - j)); head 1: r1 clamped to 0.01
    assert b[0, 5, 1] == pytest.approx(-1.5 * math.log(1 + 0.5 * 4), rel=1e-6)
    assert b[1, 5, 1] == pytest.approx(-0.01 * math.log(1 + 3.0 * 4), rel=1e-6)
    assert np.all(b[:, 1, 3] == 0)  # future keys: distance 0 (masked in a causal model)
    p = np.asarray(kerple_power_bias(r1, r2, POS, POS, causal=False))
    assert p[0, 1, 4] == pytest.approx(-1.5 * 3 ** 0.5, rel=1e-6)   # bidirectional |i - j|
    assert p[1, 5, 2] == pytest.approx(-0.01 * 3 ** 2.0, rel=1e-6)  # r2 clamped to 2
    assert np.all(np.diagonal(p, axis1=1, axis2=2) == 0)


def test_kerple_power_gradient_is_finite_at_zero_distance():
    g = jax.grad(lambda r2: kerple_power_bias(jnp.ones(2), r2, POS, POS).sum())(jnp.array([0.5, 1.0]))
    assert bool(jnp.isfinite(g).all())


@pytest.mark.parametrize("name,lo1,hi1,lo2,hi2", [("kerple_log", 0, 2, 0, 1),
                                                   ("kerple_power", 0, 1, 0, 2)])
def test_kerple_reference_inits(name, lo1, hi1, lo2, hi2):
    pe = pe_lib.make(name, num_heads=64, causal=True, rngs=nnx.Rngs(0))
    r1, r2 = np.asarray(pe.r1[...]), np.asarray(pe.r2[...])
    assert lo1 <= r1.min() and r1.max() <= hi1 and r1.max() > (hi1 + lo1) / 2
    assert lo2 <= r2.min() and r2.max() <= hi2 and r2.max() > (hi2 + lo2) / 2
    assert pe.per_layer  # one set per layer, as the reference code


def test_fire_normaliser_switches_at_the_threshold():
    x = np.asarray(fire_inputs(jnp.array([3.0, 20.0]), jnp.array([0.0]), c=0.1, threshold=10.0))
    psi = lambda v: math.log(0.1 * v + 1)
    assert x[0, 0] == pytest.approx(psi(3) / (psi(10) + 1e-6), rel=1e-6)   # i < L: psi(L)
    assert x[1, 0] == pytest.approx(psi(20) / (psi(20) + 1e-6), rel=1e-6)  # i >= L: psi(i)


def test_fire_bias_shape_and_learned_parameters():
    fire = pe_lib.make("fire", num_heads=3, causal=True, rngs=nnx.Rngs(0))
    assert fire.bias(POS, POS).shape == (3, 6, 6)
    assert fire.bias(POS[None].repeat(2, 0), POS[None].repeat(2, 0)).shape == (2, 3, 6, 6)
    names = {"/".join(map(str, p)) for p, _ in nnx.to_flat_state(nnx.state(fire, nnx.Param))}
    assert {"c", "threshold_mult"} <= names
    assert float(fire.threshold()) == pytest.approx(512.0)


def test_hype_augmentation_equals_the_materialised_bias():
    tau, mu = jnp.array([0.7, 2.0]), jnp.array([-0.05, 0.03])
    d_h = 8
    q = jax.random.normal(jax.random.key(0), (1, 6, 2, d_h))
    k = jax.random.normal(jax.random.key(1), (1, 6, 2, d_h))
    qa, ka = hype_augment(q, k, POS[None], POS[None], tau, mu, center=3.0)
    aug = jnp.einsum("bqhd,bkhd->bhqk", qa, ka) / math.sqrt(d_h)
    plain = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d_h)
    np.testing.assert_allclose(np.asarray(aug - plain), np.asarray(hype_bias(tau, mu, POS, POS))[None],
                               atol=1e-5)


def test_hype_starts_alibi_like():
    hype = pe_lib.make("hype", num_heads=4, causal=True)
    alibi = pe_lib.make("alibi", num_heads=4, causal=True)
    b, a = np.asarray(hype.bias(POS, POS)), np.asarray(alibi.bias(POS, POS))
    past = np.tril(np.ones((6, 6), bool))
    np.testing.assert_allclose(b[:, past], a[:, past], rtol=2e-3, atol=1e-6)  # sinh(x) ~ x
    assert np.all(np.abs(b[:, past]) >= np.abs(a[:, past]) - 1e-6)           # sinh(x) >= x
    np.testing.assert_allclose(np.asarray(hype.tau[...] * -hype.mu[...]), np.asarray(alibi_slopes(4)),
                               rtol=1e-6)


def test_tupe_position_term_and_cls_reset():
    tupe = pe_lib.make("tupe", d_model=8, num_heads=2, max_len=10, untie_cls=True, init_std=1.0,
                       rngs=nnx.Rngs(0))
    tupe.theta1[...] = jnp.array([3.0, 4.0])
    tupe.theta2[...] = jnp.array([-1.0, -2.0])
    b = np.asarray(tupe.bias(POS, POS))
    p = np.asarray(tupe.projected_rows(POS))
    np.testing.assert_allclose(p.std(-1), 1.0, rtol=1e-3)  # LayerNorm of the table rows
    uq, uk = np.asarray(tupe.u_q[...]), np.asarray(tupe.u_k[...])
    expect = np.einsum("qhe,khe->hqk", np.einsum("qd,dhe->qhe", p, uq),
                       np.einsum("kd,dhe->khe", p, uk)) / math.sqrt(2 * 4)
    np.testing.assert_allclose(b[:, 1:, 1:], expect[:, 1:, 1:], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b[:, 0, :], [[3.0] * 6, [4.0] * 6])        # [CLS] query row
    np.testing.assert_allclose(b[:, 1:, 0], [[-1.0] * 5, [-2.0] * 5])     # [CLS] key column
    assert tupe.attention_scale(4) == pytest.approx(1 / math.sqrt(8))
    with pytest.raises(ValueError, match="max_len"):
        tupe.bias(jnp.arange(12), jnp.arange(12))


def test_tupe_r_adds_a_relative_bucket_bias():
    a = pe_lib.make("tupe", d_model=8, num_heads=2, max_len=10, causal=True, rngs=nnx.Rngs(0))
    r = pe_lib.make("tupe", d_model=8, num_heads=2, max_len=10, causal=True, variant="R",
                    rngs=nnx.Rngs(0))
    extra = np.asarray(r.bias(POS, POS) - a.bias(POS, POS))
    # Toeplitz: constant along every diagonal
    for off in range(-5, 6):
        diag = np.diagonal(extra, offset=off, axis1=1, axis2=2)
        np.testing.assert_allclose(diag, diag[:, :1].repeat(diag.shape[1], 1), atol=1e-6)
