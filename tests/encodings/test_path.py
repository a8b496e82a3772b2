"""PaTH (arXiv 2505.16381): scores equal q_i^T H_i ... H_{j+1} k_j built from explicit matrices
(float64 NumPy), the transforms are Householder-like (beta in (0, 2), unit w), relative, causal,
cache and packing."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.path import path_scores, path_vectors
from _pe_checks import (assert_cache_and_packing, causal_outputs_ignore_the_future, make,
                        train_one_step)


def _numpy_scores(q, k, w, beta, causal):
    T, D = q.shape[0], q.shape[1]
    Hm = [np.eye(D) - beta[t] * np.outer(w[t], w[t]) for t in range(T)]
    out = np.zeros((T, T))
    for i in range(T):
        for j in range(T):
            P = np.eye(D)
            if j <= i:
                for s in range(i, j, -1):  # H_i H_{i-1} ... H_{j+1}
                    P = P @ Hm[s]
            elif not causal:
                for s in range(i + 1, j + 1):  # H_{i+1} ... H_j
                    P = P @ Hm[s]
            out[i, j] = q[i] @ P @ k[j]
    return out


def test_scores_match_explicit_householder_products():
    T, D = 5, 4
    keys = jax.random.split(jax.random.key(0), 4)
    q = jax.random.normal(keys[0], (1, T, 1, D))
    k = jax.random.normal(keys[1], (1, T, 1, D))
    w = jax.random.normal(keys[2], (1, 1, T, D))
    w = w / jnp.linalg.norm(w, axis=-1, keepdims=True)
    beta = 2 * jax.nn.sigmoid(jax.random.normal(keys[3], (1, 1, T)))
    args = [np.asarray(a, np.float64) for a in (q[0, :, 0], k[0, :, 0], w[0, 0], beta[0, 0])]
    tril = np.tril(np.ones((T, T), bool))
    got = np.asarray(path_scores(q, k, w, beta, jnp.asarray(tril)[None, None], causal=True))[0, 0]
    np.testing.assert_allclose(got[tril], _numpy_scores(*args, True)[tril], rtol=1e-4, atol=1e-5)
    got = np.asarray(path_scores(q, k, w, beta, None, causal=False))[0, 0]
    np.testing.assert_allclose(got, _numpy_scores(*args, False), rtol=1e-4, atol=1e-5)


def test_transform_parameters_and_flags():
    pe = make("path", causal=True)
    assert pe.is_relative and pe.hook == "logits"
    k = jax.random.normal(jax.random.key(1), (2, 6, 2, 8))
    w, beta = path_vectors(k, pe.w_proj[...], pe.beta_weight[...], pe.beta_bias[...])
    np.testing.assert_allclose(np.linalg.norm(w, axis=-1), 1.0, rtol=1e-5)
    assert float(beta.min()) > 0 and float(beta.max()) < 2
    # with beta -> 0 (identity transforms) PaTH adds nothing to the logits
    none = make("path", causal=True, beta_bias_init=-40.0)
    none.beta_weight[...] = jnp.zeros_like(none.beta_weight[...])
    logits = jnp.zeros((2, 2, 6, 6))
    out = none.logits(logits, k, k, None, None, jnp.tril(jnp.ones((6, 6), bool))[None, None])
    assert float(jnp.abs(out).max()) < 1e-5


def test_causal_and_trains_a_step_in_a_model():
    causal_outputs_ignore_the_future("path")
    before, after = train_one_step("path")
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
def test_cache_and_packing():
    assert_cache_and_packing("path")
