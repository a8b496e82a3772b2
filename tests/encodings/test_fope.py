"""FoPE (arXiv 2412.17739): sigma = 0 without clipping is RoPE, clipping zeroes the frequencies
whose period exceeds the training length, float64 recomputation of the Fourier-series pairs, and
the absolute (not relative) flag is observable."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.fope import apply_fope, fope_frequencies
from posjax.encodings.rope import rope_frequencies
from _pe_checks import (assert_cache_and_packing, make, rotated_logits, shift_gap,
                        train_one_step)


def test_sigma_zero_without_clipping_is_rope():
    q = jax.random.normal(jax.random.key(0), (2, 6, 2, 8))
    pos = jnp.arange(6)[None] * 3
    for interleaved in (False, True):
        f = make("fope", sigma=0.0, clip=False, interleaved=interleaved)
        r = make("rope", interleaved=interleaved)
        np.testing.assert_allclose(np.asarray(f.rotate(q, q, pos, pos)[0]),
                                   np.asarray(r.rotate(q, q, pos, pos)[0]), atol=2e-6)


def test_clipping_zeroes_under_trained_frequencies():
    theta = np.asarray(rope_frequencies(16), np.float64)
    got = np.asarray(fope_frequencies(16, train_length=64))
    keep = 2 * np.pi / theta <= 64
    assert keep.any() and (~keep).any()
    np.testing.assert_allclose(got[keep], theta[keep], rtol=1e-6)
    np.testing.assert_array_equal(got[~keep], 0.0)


def test_matches_a_float64_fourier_series():
    with jax.enable_x64(True):
        P, H = 4, 2
        x = np.asarray(jax.random.normal(jax.random.key(1), (1, 3, H, 2 * P), jnp.float64))
        A = np.asarray(jax.random.normal(jax.random.key(2), (H, P, P), jnp.float64))
        theta = np.array([1.0, 0.3, 0.05, 0.0])
        pos = np.array([[0.0, 2.0, 7.0]])
        got = np.asarray(apply_fope(jnp.asarray(x), jnp.asarray(pos), theta=jnp.asarray(theta),
                                    coefficients=jnp.asarray(A), interleaved=True))
        z = x[..., 0::2] + 1j * x[..., 1::2]  # [1, 3, H, P]
        c = np.einsum("hjk,sk->shj", A, np.exp(1j * pos[0][:, None] * theta))  # [3, H, P]
        want = np.zeros_like(x)
        want[..., 0::2], want[..., 1::2] = (z * c).real, (z * c).imag
        np.testing.assert_allclose(got, want, atol=1e-10)


def test_not_relative_with_cross_frequency_weights():
    pe = make("fope", sigma=0.5, clip=False)
    assert not pe.is_relative and pe.hook == "rotate"
    assert shift_gap(lambda p: rotated_logits(pe, p), jnp.arange(8)) > 1e-3
    rope_like = make("fope", sigma=0.0)  # clipped RoPE: still relative
    assert shift_gap(lambda p: rotated_logits(rope_like, p), jnp.arange(8)) < 1e-5


@pytest.mark.slow  # the registry test builds every PE into a model by default
def test_trains_a_step_in_a_model():
    before, after = train_one_step("fope", learned=True)
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
def test_cache_and_packing():
    assert_cache_and_packing("fope")
