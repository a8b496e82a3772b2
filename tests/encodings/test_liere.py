"""LieRE (Ostmeier et al., arXiv 2406.10322): the rotation exp(p A) of a learned skew generator
against a float64 eigen-decomposition exponential; its RoPE init is RoPE; relative and
norm-preserving. (Split from test_liere_comrope_string.py.)"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.liere import lie_rotate, skew
from _np_refs import expm_skew64, np_rope
from _pe_checks import (assert_cache_and_packing, assert_relative_and_norm_preserving, make,
                        train_one_step)

RANDOM = {"init": "normal", "init_std": 0.3}


@pytest.mark.parametrize("name", ["liere"])  # as in the family file this was split from
def test_relative_and_norm_preserving(name):
    assert_relative_and_norm_preserving(make(name, **RANDOM))


def test_liere_matches_a_float64_exponential():
    with jax.enable_x64(True):
        M = np.asarray(jax.random.normal(jax.random.key(0), (2, 6, 6), jnp.float64))
        A = 0.5 * (M - np.swapaxes(M, -1, -2))
        x = np.asarray(jax.random.normal(jax.random.key(1), (1, 3, 2, 6), jnp.float64))
        pos = np.array([[0.0, 1.5, 4.0]])
        got = np.asarray(lie_rotate(jnp.asarray(x), jnp.asarray(pos), skew(jnp.asarray(M))))
        want = np.stack([np.stack([expm_skew64(p * A[h]) @ x[0, t, h] for h in range(2)])
                         for t, p in enumerate(pos[0])])[None]
        np.testing.assert_allclose(got, want, atol=1e-9)


def test_rope_init_is_rope():
    """arXiv 2406.10322, Sec. 3: LieRE with the block-diagonal RoPE generator is RoPE."""
    q = np.asarray(jax.random.normal(jax.random.key(0), (1, 5, 2, 8)), np.float64)
    pos = np.arange(5)[None] * 3
    got = make("liere").rotate(jnp.asarray(q, jnp.float32), jnp.asarray(q, jnp.float32),
                               jnp.asarray(pos), jnp.asarray(pos))[0]
    np.testing.assert_allclose(np.asarray(got), np_rope(q, pos), atol=2e-5)


@pytest.mark.slow  # the registry test builds every PE into a model by default
def test_trains_a_step_in_a_model():
    before, after = train_one_step("liere")
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
def test_cache_and_packing():
    assert_cache_and_packing("liere", **RANDOM)
