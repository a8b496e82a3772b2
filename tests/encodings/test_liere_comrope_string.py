"""The learned-rotation family: LieRE (arXiv 2406.10322), ComRoPE (arXiv 2506.03737) and
Cayley-STRING (arXiv 2502.02562). Each is relative and norm-preserving; LieRE's RoPE init and
STRING's S = 0 are RoPE; ComRoPE only mixes dims within a block; float64 recomputations with
scipy-free matrix exponentials (eigen-decomposition) and the explicit Cayley transform."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.liere import lie_rotate, skew
from posjax.encodings.string import cayley
from _pe_checks import (assert_cache_and_packing, make, rotated_logits, shift_gap,
                        train_one_step)

NAMES = ("liere", "comrope", "cayley_string")
RANDOM = {"liere": {"init": "normal", "init_std": 0.3}, "comrope": {"block_size": 4},
          "cayley_string": {"init_std": 0.3}}


def _expm64(a):
    """exp(a) of a real skew matrix through the eigen-decomposition of the Hermitian i a."""
    w, v = np.linalg.eigh(1j * a)
    return (v @ np.diag(np.exp(-1j * w)) @ v.conj().T).real


@pytest.mark.parametrize("name", NAMES)
def test_relative_and_norm_preserving(name):
    pe = make(name, **RANDOM[name])
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


def test_liere_rope_init_and_string_at_zero_are_rope():
    q = jax.random.normal(jax.random.key(0), (1, 5, 2, 8))
    pos = jnp.arange(5)[None] * 3
    want = make("rope", interleaved=True).rotate(q, q, pos, pos)[0]
    for name in ("liere", "cayley_string"):
        got = make(name).rotate(q, q, pos, pos)[0]
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-5)


def test_comrope_mixes_dims_only_within_blocks():
    pe = make("comrope", block_size=4)
    x = jnp.zeros((1, 1, 2, 8)).at[..., 1].set(1.0)  # a unit vector in block 0
    out = np.asarray(pe.rotate(x, x, jnp.array([[5]]), jnp.array([[5]]))[0])
    assert np.abs(out[..., :4]).max() > 0.1 and np.abs(out[..., 4:]).max() == 0.0
    with pytest.raises(ValueError, match="divide"):
        make("comrope", block_size=3)


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


@pytest.mark.slow  # the registry test builds every PE into a model by default
@pytest.mark.parametrize("name", NAMES)
def test_trains_a_step_in_a_model(name):
    before, after = train_one_step(name)
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
@pytest.mark.parametrize("name", NAMES)
def test_cache_and_packing(name):
    assert_cache_and_packing(name, **RANDOM[name])
