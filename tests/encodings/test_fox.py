"""Forgetting Transformer gate (arXiv 2503.02130): D_ij = sum_{l=j+1}^{i} log f_l against a
NumPy loop, constant gates give ALiBi, never attends to the future, relative, cache and packing."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.alibi import alibi_bias
from posjax.encodings.fox import fox_bias
from _pe_checks import (assert_cache_and_packing, causal_outputs_ignore_the_future, make,
                        train_one_step)


def test_bias_matches_a_numpy_loop_causal_and_bidirectional():
    logf = np.log(np.asarray(jax.nn.sigmoid(jax.random.normal(jax.random.key(0), (1, 2, 6)))))
    tril = np.tril(np.ones((6, 6), bool))
    for causal in (True, False):
        mask = jnp.asarray(tril)[None, None] if causal else None
        got = np.asarray(fox_bias(jnp.asarray(logf), mask, causal=causal, num_queries=6))
        want = np.zeros((1, 2, 6, 6))
        for h in range(2):
            for i in range(6):
                for j in range(6):
                    lo, hi = min(i, j), max(i, j)
                    want[0, h, i, j] = logf[0, h, lo + 1:hi + 1].sum()
        if causal:  # entries above the diagonal are masked by the model
            np.testing.assert_allclose(got[..., tril], want[..., tril], atol=1e-5)
        else:
            np.testing.assert_allclose(got, want, atol=1e-5)


def test_masked_keys_are_not_counted():
    logf = jnp.log(jnp.full((1, 1, 5), 0.5))
    mask = jnp.tril(jnp.ones((5, 5), bool))[None, None] & jnp.array([1, 1, 0, 1, 1], bool)
    got = fox_bias(logf, mask, causal=True, num_queries=5)
    # query 4, key 0: visible keys in (0, 4] are 1, 3, 4 -> 3 log(1/2)
    np.testing.assert_allclose(float(got[0, 0, 4, 0]), 3 * np.log(0.5), rtol=1e-6)


def test_constant_gates_give_alibi():
    m = jnp.array([0.5, 0.125])
    logf = jnp.broadcast_to(-m[None, :, None], (1, 2, 7))
    mask = jnp.tril(jnp.ones((7, 7), bool))[None, None]
    got = np.asarray(fox_bias(logf, mask, causal=True, num_queries=7))
    want = np.asarray(alibi_bias(2, jnp.arange(7), jnp.arange(7), causal=True, slopes=m))[None]
    tril = np.tril(np.ones((7, 7), bool))
    np.testing.assert_allclose(got[..., tril], want[..., tril], atol=1e-6)


def test_relative_hook_and_gates_are_at_most_one():
    pe = make("fox", causal=True)
    assert pe.is_relative and pe.hook == "logits"
    k = jax.random.normal(jax.random.key(1), (1, 6, 2, 8))
    logits = jnp.zeros((1, 2, 6, 6))
    mask = jnp.tril(jnp.ones((6, 6), bool))[None, None]
    out = np.asarray(pe.logits(logits, k, k, jnp.arange(6)[None], jnp.arange(6)[None], mask))
    tril = np.tril(np.ones((6, 6), bool))
    assert np.all(out[..., tril] <= 1e-7)
    assert np.all(np.diff(out[0, :, 5, :6], axis=-1) >= -1e-6)  # older keys fade more


def test_causal_and_trains_a_step_in_a_model():
    causal_outputs_ignore_the_future("fox")
    before, after = train_one_step("fox")
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
def test_cache_and_packing():
    assert_cache_and_packing("fox")
