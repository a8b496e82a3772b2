"""LieRE (Ostmeier et al., arXiv 2406.10322): the rotation exp(p A) of a learned skew generator
against a float64 eigen-decomposition exponential; its RoPE init is RoPE; relative and
norm-preserving. (Split from test_liere_comrope_string.py.)"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.liere import lie_rotate, skew
from _np_refs import np_rotate
from _pe_checks import (assert_cache_and_packing, make, rotated_logits, shift_gap,
                        train_one_step)

RANDOM = {"init": "normal", "init_std": 0.3}


def _expm64(a):
    """exp(a) of a real skew matrix through the eigen-decomposition of the Hermitian i a."""
    w, v = np.linalg.eigh(1j * a)
    return (v @ np.diag(np.exp(-1j * w)) @ v.conj().T).real


@pytest.mark.parametrize("name", ["liere"])  # as in the family file this was split from
def test_relative_and_norm_preserving(name):
    pe = make(name, **RANDOM)
    assert pe.is_relative and pe.hook == "rotate"
    assert shift_gap(lambda p: rotated_logits(pe, p), jnp.arange(8)) < 2e-5
    q = jax.random.normal(jax.random.key(3), (2, 6, 2, 8))
    pos = jnp.arange(6)[None] * 7
    qr, _ = pe.rotate(q, q, pos, pos)
    np.testing.assert_allclose(np.linalg.norm(qr, axis=-1), np.linalg.norm(q, axis=-1), rtol=1e-5)


def test_liere_matches_a_float64_exponential():
    with jax.enable_x64(True):
        M = np.asarray(jax.random.normal(jax.random.key(0), (2, 6, 6), jnp.float64))
        A = 0.5 * (M - np.swapaxes(M, -1, -2))
        x = np.asarray(jax.random.normal(jax.random.key(1), (1, 3, 2, 6), jnp.float64))
        pos = np.array([[0.0, 1.5, 4.0]])
        got = np.asarray(lie_rotate(jnp.asarray(x), jnp.asarray(pos), skew(jnp.asarray(M))))
        want = np.stack([np.stack([_expm64(p * A[h]) @ x[0, t, h] for h in range(2)])
                         for t, p in enumerate(pos[0])])[None]
        np.testing.assert_allclose(got, want, atol=1e-9)


def numpy_rope(x, pos, base=10000.0):
    """RoFormer's rotation (arXiv 2104.09864, Sec. 3.4.2), interleaved pairs, float64."""
    theta = base ** (-2.0 * np.arange(x.shape[-1] // 2) / x.shape[-1])
    return np_rotate(x, pos[..., :, None, None] * theta, interleaved=True)


def test_rope_init_is_rope():
    """arXiv 2406.10322, Sec. 3: LieRE with the block-diagonal RoPE generator is RoPE."""
    q = np.asarray(jax.random.normal(jax.random.key(0), (1, 5, 2, 8)), np.float64)
    pos = np.arange(5)[None] * 3
    got = make("liere").rotate(jnp.asarray(q, jnp.float32), jnp.asarray(q, jnp.float32),
                               jnp.asarray(pos), jnp.asarray(pos))[0]
    np.testing.assert_allclose(np.asarray(got), numpy_rope(q, pos), atol=2e-5)


@pytest.mark.slow  # the registry test builds every PE into a model by default
def test_trains_a_step_in_a_model():
    before, after = train_one_step("liere")
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
def test_cache_and_packing():
    assert_cache_and_packing("liere", **RANDOM)
