"""Sandwich (arXiv 2212.10356, Sec. 5): float64 recomputation, relative, zero at distance 0, and
the model trains a step with it."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.sandwich import sandwich_bias, sandwich_ratios
from _pe_checks import assert_cache_and_packing, make, shift_gap, train_one_step


def numpy_sandwich(i, j, dim, ratios, base=10000.0):
    """b_h(i, j) = sum_{k=1}^{d'/2} cos((i - j) / (r_h base^(2k/d'))) - d'/2, float64 loops."""
    out = np.zeros((len(ratios), len(i), len(j)))
    for h, r in enumerate(ratios):
        for a, pi in enumerate(i):
            for b, pj in enumerate(j):
                out[h, a, b] = sum(np.cos((pi - pj) / (r * base ** (2 * k / dim)))
                                   for k in range(1, dim // 2 + 1)) - dim / 2
    return out


def test_matches_a_float64_recomputation():
    with jax.enable_x64(True):
        i, j = np.array([0.0, 3.0, 7.0, 20.0]), np.array([1.0, 2.0, 11.0])
        ratios = np.asarray(sandwich_ratios(4), np.float64)
        np.testing.assert_allclose(ratios, [2.0, 4.0, 6.0, 8.0])
        got = sandwich_bias(jnp.asarray(i), jnp.asarray(j), dim=16, ratios=jnp.asarray(ratios))
        np.testing.assert_allclose(np.asarray(got), numpy_sandwich(i, j, 16, ratios), atol=1e-10)


def test_golden_one_head_distance_one():
    # d' = 4: cos(1/100) + cos(1/10000) - 2, r = 1
    b = sandwich_bias(jnp.array([1.0]), jnp.array([0.0]), dim=4)
    np.testing.assert_allclose(float(b[0, 0, 0]), np.cos(0.01) + np.cos(1e-4) - 2.0, atol=1e-7)


def test_relative_zero_on_the_diagonal_and_non_positive():
    pe = make("sandwich", dim=32)
    assert pe.is_relative and pe.hook == "bias"
    pos = jnp.arange(10)
    assert shift_gap(lambda p: pe.bias(p, p), pos) < 1e-5
    b = np.asarray(pe.bias(pos, pos))
    assert b.shape == (2, 10, 10)
    np.testing.assert_allclose(np.diagonal(b, axis1=1, axis2=2), 0.0, atol=1e-6)
    assert b.max() <= 1e-6
    # near the diagonal the bias decreases with distance (the ALiBi-like regime)
    assert np.all(np.diff(b[:, 9, :][:, ::-1], axis=-1)[:, :5] < 0)


def test_heads_differ_only_with_compression():
    pos = jnp.arange(6)
    assert float(jnp.abs(jnp.diff(make("sandwich").bias(pos, pos), axis=0)).max()) > 1e-3
    assert float(jnp.abs(jnp.diff(make("sandwich", compress="none").bias(pos, pos), axis=0)).max()) == 0


@pytest.mark.parametrize("bad", [{"dim": 7}, {"compress": "x"}, {"base": 1.0}])
def test_bad_options(bad):
    with pytest.raises(ValueError):
        make("sandwich", **bad)


@pytest.mark.slow  # the registry test builds every PE into a model by default
def test_trains_a_step_in_a_model():
    before, after = train_one_step("sandwich")
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
def test_cache_and_packing():
    assert_cache_and_packing("sandwich")
