"""HoPE (Chen et al., arXiv 2410.21216): RoPE with the low-frequency pairs left unrotated,
against a NumPy rotation with the paper's cut-off."""
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings import hope_frequencies, rope_frequencies

from _np_refs import np_rotate, random_qk
from _pe_checks import make


def numpy_hope_theta(d, base, *, train_length=None, pairs=None):
    """arXiv 2410.21216, Sec. 3: keep theta_k = base^(-2k/d) only for the high-frequency pairs
    (a full turn 2 pi / theta_k within the training length, or the first ``pairs``); theta = 0
    (position-independent) for the others."""
    theta = base ** (-2.0 * np.arange(d // 2) / d)
    keep = (2 * np.pi / theta <= train_length) if pairs is None else (np.arange(d // 2) < pairs)
    return np.where(keep, theta, 0.0)


@pytest.mark.parametrize("opts", [dict(train_length=40), dict(cutoff="pairs", rotated_pairs=3)])
def test_rotate_matches_the_truncated_rope(opts):
    pe = make("hope", d_model=32, num_heads=2, base=100.0, **opts)  # head_dim 16: 8 pairs
    theta = numpy_hope_theta(16, 100.0, train_length=opts.get("train_length"),
                             pairs=opts.get("rotated_pairs"))
    assert 0 < np.count_nonzero(theta) < 8
    q, k = random_qk(1, 1, 7, 2, 16)
    pos = np.array([[0, 1, 4, 9, 17, 30, 63]])
    qr, kr = pe.rotate(jnp.asarray(q, jnp.float32), jnp.asarray(k, jnp.float32),
                       jnp.asarray(pos), jnp.asarray(pos))
    ang = pos[..., None, None] * theta
    np.testing.assert_allclose(np.asarray(qr), np_rotate(q, ang, interleaved=False), atol=2e-5)
    np.testing.assert_allclose(np.asarray(kr), np_rotate(k, ang, interleaved=False), atol=2e-5)


def test_hope_zeroes_low_frequencies():
    theta = np.asarray(rope_frequencies(16, 10000.0))
    by_wavelength = np.asarray(hope_frequencies(16, train_length=64))
    keep = 2 * np.pi / theta <= 64
    assert keep.any() and (~keep).any()
    np.testing.assert_array_equal(by_wavelength[keep], theta[keep])
    assert np.all(by_wavelength[~keep] == 0)
    by_pairs = np.asarray(hope_frequencies(16, rotated_pairs=3))
    np.testing.assert_array_equal(by_pairs[:3], theta[:3])
    assert np.all(by_pairs[3:] == 0)
    with pytest.raises(ValueError):
        hope_frequencies(16)
