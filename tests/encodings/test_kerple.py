"""KERPLE (Chi et al., arXiv 2205.09921): NumPy transcription of both kernels."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe_lib
from posjax.encodings import kerple_log_bias, kerple_power_bias

from _pe_checks import make

POS = jnp.arange(6)


def numpy_kerple(r1, r2, i, j, variant, causal=True):
    """arXiv 2205.09921, Sec. 3 (the logarithmic and power kernels): log variant -r1 log(1 + r2 |m - n|), power
    variant -r1 |m - n|^r2 (0 < r2 <= 2); r1, r2 clamped below at 0.01 (and r2 <= 2), the
    distance max(i - j, 0) in a decoder."""
    r1 = np.maximum(r1, 0.01)
    r2 = np.clip(r2, 0.01, 2.0) if variant == "power" else np.maximum(r2, 0.01)
    out = np.zeros((len(r1), len(i), len(j)))
    for h in range(len(r1)):
        for a, pi in enumerate(i):
            for b, pj in enumerate(j):
                dist = max(pi - pj, 0) if causal else abs(pi - pj)
                out[h, a, b] = (-r1[h] * np.log(1 + r2[h] * dist) if variant == "log"
                                else -r1[h] * dist ** r2[h])
    return out


@pytest.mark.parametrize("variant", ["log", "power"])
@pytest.mark.parametrize("causal", [True, False])
def test_bias_matches_the_kernel(variant, causal):
    pe = make(f"kerple_{variant}", d_model=12, num_heads=3, causal=True, bidirectional=not causal)
    r1, r2 = np.asarray(pe.r1[...], np.float64), np.asarray(pe.r2[...], np.float64)
    i, j = np.array([0, 2, 5, 11]), np.array([0, 1, 4, 9, 12])
    got = np.asarray(pe.bias(jnp.asarray(i), jnp.asarray(j)))
    np.testing.assert_allclose(got, numpy_kerple(r1, r2, i, j, variant, causal), rtol=1e-5, atol=1e-6)


def test_clamping_follows_the_reference():
    from posjax.encodings import kerple_power_bias
    r1, r2 = np.array([0.001, 1.0]), np.array([3.0, 0.0])
    i = np.arange(5)
    got = np.asarray(kerple_power_bias(jnp.asarray(r1), jnp.asarray(r2), jnp.asarray(i), jnp.asarray(i)))
    np.testing.assert_allclose(got, numpy_kerple(r1, r2, i, i, "power"), rtol=1e-5, atol=1e-7)


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
