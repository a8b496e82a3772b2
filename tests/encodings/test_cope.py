"""CoPE (arXiv 2405.18719): contextual positions and the interpolated bias against a NumPy loop,
gates that are all 1 count tokens, relative, causal, cache and packing."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.cope import cope_bias, cope_positions
from _pe_checks import (assert_cache_and_packing, causal_outputs_ignore_the_future, make,
                        train_one_step)


def test_positions_and_bias_match_a_numpy_loop():
    T, D, P = 6, 4, 5
    a = np.asarray(jax.random.normal(jax.random.key(0), (1, 1, T, T)))
    q = np.asarray(jax.random.normal(jax.random.key(1), (1, T, 1, D)))
    e = np.asarray(jax.random.normal(jax.random.key(2), (P, D)))
    mask = np.tril(np.ones((T, T), bool))
    p = np.asarray(cope_positions(jnp.asarray(a), jnp.asarray(mask)[None, None], causal=True,
                                  max_positions=P))
    b = np.asarray(cope_bias(jnp.asarray(q), jnp.asarray(e), jnp.asarray(p)))
    g = 1.0 / (1.0 + np.exp(-a[0, 0]))
    for i in range(T):
        for j in range(i + 1):
            pij = min(g[i, j:i + 1].sum(), P - 1)
            np.testing.assert_allclose(p[0, 0, i, j], pij, rtol=1e-5)
            lo = int(np.floor(pij))
            w = pij - lo
            z = e @ q[0, i, 0]
            want = (1 - w) * z[lo] + w * z[min(lo + 1, P - 1)]
            np.testing.assert_allclose(b[0, 0, i, j], want, rtol=1e-4, atol=1e-5)


def test_open_gates_count_tokens():
    big = jnp.full((1, 1, 5, 5), 30.0)  # sigmoid = 1: p_ij = i - j + 1
    mask = jnp.tril(jnp.ones((5, 5), bool))[None, None]
    p = np.asarray(cope_positions(big, mask, causal=True, max_positions=64))[0, 0]
    i, j = np.meshgrid(np.arange(5), np.arange(5), indexing="ij")
    np.testing.assert_allclose(p[i >= j], (i - j + 1)[i >= j], atol=1e-5)
    bidir = np.asarray(cope_positions(big, None, causal=False, max_positions=64))[0, 0]
    np.testing.assert_allclose(bidir, np.abs(i - j) + 1, atol=1e-5)


def test_relative_and_bad_options():
    pe = make("cope", causal=True)
    assert pe.is_relative and pe.hook == "logits"
    with pytest.raises(ValueError, match="max_positions"):
        make("cope", max_positions=1)


def test_causal_and_trains_a_step_in_a_model():
    causal_outputs_ignore_the_future("cope")
    before, after = train_one_step("cope")
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
def test_cache_and_packing():
    assert_cache_and_packing("cope")
