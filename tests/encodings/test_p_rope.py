"""p-RoPE (arXiv 2410.06205): p = 1 is RoPE, p = 0 is the identity, the kept frequencies are
RoPE's highest ones, and it stays relative and norm-preserving."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.p_rope import p_rope_frequencies, p_rope_pairs
from posjax.encodings.rope import rope_frequencies
from _np_refs import np_rotate, random_qk
from _pe_checks import (assert_cache_and_packing, make, rotated_logits, shift_gap,
                        train_one_step)


def _qk(shape=(2, 9, 2, 8), seed=0):
    kq, kk = jax.random.split(jax.random.key(seed))
    return jax.random.normal(kq, shape), jax.random.normal(kk, shape)


def test_p_one_is_rope_and_p_zero_is_identity():
    q, k = _qk()
    pos = jnp.arange(9)[None]
    for interleaved in (False, True):
        rope = make("rope", interleaved=interleaved)
        p1 = make("p_rope", p=1.0, interleaved=interleaved)
        for a, b in zip(p1.rotate(q, k, pos, pos), rope.rotate(q, k, pos, pos)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    p0 = make("p_rope", p=0.0)
    np.testing.assert_array_equal(np.asarray(p0.rotate(q, k, pos, pos)[0]), np.asarray(q))


def test_frequencies_keep_the_highest_fraction():
    theta = np.asarray(rope_frequencies(16), np.float64)
    got = np.asarray(p_rope_frequencies(16, 0.75))
    assert p_rope_pairs(16, 0.75) == 6 and p_rope_pairs(16, 0.5) == 4 and p_rope_pairs(16, 0.3) == 2
    np.testing.assert_allclose(got[:6], theta[:6], rtol=1e-6)
    np.testing.assert_array_equal(got[6:], 0.0)
    # the unrotated half-split pairs (k, k + 8) for k >= 6 pass through unchanged
    q, k = _qk((1, 5, 1, 16))
    out = make("p_rope", p=0.75, head_dim=16, num_heads=1).rotate(q, k, jnp.arange(5)[None],
                                                                   jnp.arange(5)[None])[0]
    keep = np.r_[6:8, 14:16]
    np.testing.assert_array_equal(np.asarray(out)[..., keep], np.asarray(q)[..., keep])


@pytest.mark.parametrize("p,interleaved", [(0.75, False), (0.5, True), (0.3, False)])
def test_rotation_matches_a_numpy_transcription(p, interleaved):
    """arXiv 2410.06205, Sec. 6: keep the highest floor(p d/2) RoPE frequencies
    theta_k = base^(-2k/d), set the others to 0 (those pairs are not rotated)."""
    theta = 10000.0 ** (-2.0 * np.arange(8) / 16)
    theta[int(np.floor(p * 8 + 1e-9)):] = 0.0
    q, k = random_qk(8, 1, 6, 1, 16)
    pos = np.array([[0, 1, 5, 12, 40, 63]])
    pe = make("p_rope", p=p, interleaved=interleaved, head_dim=16, num_heads=1)
    qr, kr = pe.rotate(jnp.asarray(q, jnp.float32), jnp.asarray(k, jnp.float32), jnp.asarray(pos),
                       jnp.asarray(pos))
    ang = pos[..., None, None] * theta
    np.testing.assert_allclose(np.asarray(qr), np_rotate(q, ang, interleaved=interleaved), atol=2e-5)
    np.testing.assert_allclose(np.asarray(kr), np_rotate(k, ang, interleaved=interleaved), atol=2e-5)


def test_relative_and_norm_preserving():
    pe = make("p_rope", p=0.5)
    assert pe.is_relative and pe.hook == "rotate"
    assert shift_gap(lambda p: rotated_logits(pe, p), jnp.arange(8)) < 1e-5
    q, k = _qk()
    pos = jnp.arange(9)[None] * 13
    qr, _ = pe.rotate(q, k, pos, pos)
    np.testing.assert_allclose(np.linalg.norm(qr, axis=-1), np.linalg.norm(q, axis=-1), rtol=1e-5)


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_bad_p(p):
    with pytest.raises(ValueError, match="p-RoPE p"):
        make("p_rope", p=p)


@pytest.mark.slow  # the registry test builds every PE into a model by default
def test_trains_a_step_in_a_model():
    before, after = train_one_step("p_rope")
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
def test_cache_and_packing():
    assert_cache_and_packing("p_rope")
