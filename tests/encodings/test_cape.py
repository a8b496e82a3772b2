"""CAPE (Likhomanenko et al., arXiv 2106.03143): evaluation mode is the sinusoid of the positions,
training mode the sinusoid of lambda (x + Delta + eps), both against NumPy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe_lib
from posjax.encodings import cape_positions, sinusoidal_at

from _pe_checks import make

POS = jnp.arange(7)


def numpy_sinusoid(pos, d, base=10000.0):
    """Interleaved sin/cos of arXiv 1706.03762 Sec. 3.5 at continuous positions ``[..., T]``."""
    w = base ** (-2.0 * np.arange(d // 2) / d)
    ang = np.asarray(pos, np.float64)[..., None] * w
    out = np.empty(ang.shape[:-1] + (d,))
    out[..., 0::2], out[..., 1::2] = np.sin(ang), np.cos(ang)
    return out


def test_eval_mode_is_the_sinusoid():
    pe = make("cape", d_model=8)
    pos = np.arange(10)
    got = np.asarray(pe.embed(jnp.zeros((1, 10, 8)), jnp.asarray(pos)[None]))
    np.testing.assert_allclose(got[0], numpy_sinusoid(pos, 8), atol=2e-6)


def test_training_mode_encodes_augmented_positions_within_the_paper_ranges():
    """arXiv 2106.03143, Sec. 3: x' = lambda (x + Delta + eps), |Delta| <= Delta_max,
    |eps| <= eps_max, |ln lambda| <= ln lambda_max; one Delta, lambda per sequence."""
    pe = make("cape", d_model=16, max_global_shift=3.0, max_local_shift=0.5, max_global_scaling=1.1)
    pos = np.arange(12)
    x = jnp.zeros((2, 12, 16))
    got = np.asarray(pe.embed(x, jnp.asarray(pos)[None], deterministic=False, rngs=nnx.Rngs(dropout=4)))
    # recover x' per token: coarse from the slowest pair (no wrap), refined with the pair at w = 1
    coarse = np.arctan2(got[..., 14], got[..., 15]) / 10000.0 ** (-14 / 16)
    fine = np.arctan2(got[..., 0], got[..., 1])
    xp = coarse + (fine - coarse + np.pi) % (2 * np.pi) - np.pi
    np.testing.assert_allclose(got, numpy_sinusoid(xp, 16), atol=2e-5)
    lams = np.exp(np.linspace(-np.log(1.1), np.log(1.1), 4001))
    for row in xp:  # some lambda in range leaves residuals Delta + eps_i within the ranges
        assert not np.allclose(row, pos, atol=1e-2)
        resid = row[None] / lams[:, None] - pos[None]           # [lambdas, T] = Delta + eps_i
        fits = (np.ptp(resid, axis=1) <= 2 * 0.5 + 1e-3) & (np.abs(resid).max(axis=1) <= 3.5 + 1e-3)
        assert fits.any()


def test_cape_eval_mode_is_plain_sinusoidal():
    cape = pe_lib.make("cape", d_model=8)
    sin = pe_lib.make("sinusoidal", d_model=8)
    x = jax.random.normal(jax.random.key(0), (2, 7, 8))
    np.testing.assert_array_equal(np.asarray(cape.embed(x, POS[None])), np.asarray(sin.embed(x, POS[None])))


def test_cape_training_augmentation_is_seeded_and_bounded():
    cape = pe_lib.make("cape", d_model=8)
    x = jnp.zeros((3, 7, 8))
    a = cape.embed(x, POS[None], deterministic=False, rngs=nnx.Rngs(dropout=1))
    b = cape.embed(x, POS[None], deterministic=False, rngs=nnx.Rngs(dropout=1))
    c = cape.embed(x, POS[None], deterministic=False, rngs=nnx.Rngs(dropout=2))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert float(jnp.abs(a - c).max()) > 1e-3
    pos = np.asarray(cape_positions(jax.random.key(3), POS[None].astype(jnp.float32), 500,
                                    max_global_shift=5.0, max_local_shift=1.0,
                                    max_global_scaling=1.03))
    dev = pos - np.arange(7)
    assert np.abs(dev).max() <= 1.03 * (6 + 5 + 1) - 6 + 1e-4
    assert np.abs(dev).max() > 4.0  # the global shift is really applied
    with pytest.raises(ValueError, match="rngs"):
        cape.embed(x, POS[None], deterministic=False)


def test_sinusoidal_reference_used_by_cape():
    np.testing.assert_allclose(np.asarray(sinusoidal_at(jnp.array([1.0]), 4))[0],
                               [0.841471, 0.540302, 0.010000, 0.999950], atol=1e-6)
