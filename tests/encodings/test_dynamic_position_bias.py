"""Dynamic position bias (CrossFormer, arXiv 2108.00154): a NumPy recomputation of the MLP,
relative, defined at unseen distances, and trainable in a model."""
import jax.numpy as jnp
import numpy as np
import pytest

from _pe_checks import assert_cache_and_packing, make, shift_gap, train_one_step


def _numpy_mlp(pe, r):
    h = np.asarray(r, np.float64)[..., None]
    for layer, norm in zip(pe.layers, pe.norms):
        h = h @ np.asarray(layer.kernel[...], np.float64) + np.asarray(layer.bias[...], np.float64)
        mu, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
        h = (h - mu) / np.sqrt(var + norm.epsilon) * np.asarray(norm.scale[...]) + np.asarray(norm.bias[...])
        h = np.maximum(h, 0.0)
    return h @ np.asarray(pe.out.kernel[...], np.float64) + np.asarray(pe.out.bias[...], np.float64)


@pytest.mark.parametrize("log_distance", [False, True])
def test_matches_a_numpy_mlp_of_the_offset(log_distance):
    pe = make("dynamic_position_bias", log_distance=log_distance)
    qp, kp = jnp.array([0, 3, 9, 40]), jnp.array([1, 2, 30])
    r = np.asarray(qp)[:, None] - np.asarray(kp)[None, :]
    if log_distance:
        r = np.sign(r) * np.log1p(np.abs(r))
    want = np.moveaxis(_numpy_mlp(pe, r), -1, 0)
    np.testing.assert_allclose(np.asarray(pe.bias(qp, kp)), want, rtol=1e-4, atol=1e-5)


def test_relative_and_per_head():
    pe = make("dynamic_position_bias")
    assert pe.is_relative and pe.hook == "bias"
    assert shift_gap(lambda p: pe.bias(p, p), jnp.arange(10)) < 1e-5
    b = pe.bias(jnp.arange(6), jnp.arange(6))
    assert b.shape == (2, 6, 6)
    assert float(jnp.abs(b[0] - b[1]).max()) > 1e-4
    assert float(jnp.abs(b - jnp.swapaxes(b, -1, -2)).max()) > 1e-4  # direction-aware
    batched = pe.bias(jnp.arange(6)[None] + jnp.array([[0], [100]]), jnp.arange(6)[None] + jnp.array([[0], [100]]))
    assert batched.shape == (2, 2, 6, 6)
    np.testing.assert_allclose(np.asarray(batched[1]), np.asarray(b), atol=1e-5)


@pytest.mark.parametrize("bad", [{"depth": 0}, {"hidden": 0}])
def test_bad_options(bad):
    with pytest.raises(ValueError, match="dynamic_position_bias"):
        make("dynamic_position_bias", **bad)


@pytest.mark.slow  # the registry test builds every PE into a model by default
def test_trains_a_step_in_a_model():
    before, after = train_one_step("dynamic_position_bias")
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
def test_cache_and_packing():
    assert_cache_and_packing("dynamic_position_bias")
