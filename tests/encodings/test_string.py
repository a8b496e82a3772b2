"""Cayley-STRING (Schenck et al., arXiv 2502.02562): P = (I - S)(I + S)^(-1) against NumPy,
logits q^T P R_(j-i) P^T k (RoPE in the learned basis), S = 0 is RoPE; relative and
norm-preserving. (Split from test_liere_comrope_string.py.)"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.string import cayley
from _np_refs import np_rope
from _pe_checks import (assert_cache_and_packing, assert_relative_and_norm_preserving, make,
                        train_one_step)

RANDOM = {"init_std": 0.3}


@pytest.mark.parametrize("name", ["cayley_string"])  # as in the family file this was split from
def test_relative_and_norm_preserving(name):
    assert_relative_and_norm_preserving(make(name, **RANDOM))


def test_cayley_is_the_orthogonal_transform():
    with jax.enable_x64(True):
        M = np.asarray(jax.random.normal(jax.random.key(0), (5, 5), jnp.float64))
        S = 0.5 * (M - M.T)
        P = np.asarray(cayley(jnp.asarray(S)))
        np.testing.assert_allclose(P, (np.eye(5) - S) @ np.linalg.inv(np.eye(5) + S), atol=1e-12)
        np.testing.assert_allclose(P @ P.T, np.eye(5), atol=1e-12)


def test_string_logits_are_rope_in_the_learned_basis():
    with jax.enable_x64(True):
        pe = make("cayley_string", init_std=0.4)
        P = np.asarray(pe.basis(), np.float64)[0]
        q = np.asarray(jax.random.normal(jax.random.key(5), (8,), jnp.float64))
        k = np.asarray(jax.random.normal(jax.random.key(6), (8,), jnp.float64))
        qs = jnp.broadcast_to(jnp.asarray(q), (1, 1, 2, 8))
        ks = jnp.broadcast_to(jnp.asarray(k), (1, 1, 2, 8))
        qr, _ = pe.rotate(qs, qs, jnp.array([[2.0]]), jnp.array([[2.0]]))
        _, kr = pe.rotate(ks, ks, jnp.array([[9.0]]), jnp.array([[9.0]]))
        theta = 10000.0 ** (-np.arange(4) * 2 / 8)
        R = np.zeros((8, 8))  # RoPE(7), interleaved
        for i, t in enumerate(theta):
            c, s = np.cos(7 * t), np.sin(7 * t)
            R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, -s], [s, c]]
        want = q @ P @ R @ P.T @ k
        assert abs(float(jnp.vdot(qr[0, 0, 0], kr[0, 0, 0])) - want) < 1e-5  # float32 parameters


def test_zero_generator_is_rope():
    """S = 0 (the init) gives P = I: STRING is RoPE (arXiv 2502.02562, Sec. 3)."""
    q = np.asarray(jax.random.normal(jax.random.key(0), (1, 5, 2, 8)), np.float64)
    pos = np.arange(5)[None] * 3
    got = make("cayley_string").rotate(jnp.asarray(q, jnp.float32), jnp.asarray(q, jnp.float32),
                                       jnp.asarray(pos), jnp.asarray(pos))[0]
    np.testing.assert_allclose(np.asarray(got), np_rope(q, pos), atol=2e-5)


@pytest.mark.slow  # the registry test builds every PE into a model by default
def test_trains_a_step_in_a_model():
    before, after = train_one_step("cayley_string")
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
def test_cache_and_packing():
    assert_cache_and_packing("cayley_string", **RANDOM)
