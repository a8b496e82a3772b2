"""PoPE (Aggarwal, arXiv 2405.04585): Legendre-polynomial PE against NumPy's Legendre series."""
import math

import jax.numpy as jnp
import numpy as np
import pytest
from numpy.polynomial import legendre as npleg

import posjax.encodings as pe_lib
from posjax.encodings import legendre, pope_table

from _pe_checks import make


def numpy_pope(pos, d, n, offset=0, orthonormal=False):
    """arXiv 2405.04585, Sec. 3: PE(p, k) = P_{k + offset}(x_p), x_p = 2p/(n - 1) - 1 on [-1, 1];
    "orthonormal" multiplies P_m by sqrt((2m + 1)/2). P_m from numpy.polynomial.legendre."""
    x = 2.0 * np.asarray(pos, np.float64) / (n - 1) - 1.0
    out = np.stack([npleg.legval(x, np.eye(d + offset)[m]) for m in range(offset, offset + d)], -1)
    if orthonormal:
        out = out * np.sqrt((2 * np.arange(offset, offset + d) + 1) / 2.0)
    return out


@pytest.mark.parametrize("opts", [{}, dict(degree_offset=1, normalization="orthonormal", scale=0.5)])
def test_table_matches_the_legendre_polynomials(opts):
    pe = make("pope", d_model=8, max_len=12, **opts)
    pos = np.arange(12)
    got = np.asarray(pe.embed(jnp.zeros((1, 12, 8)), jnp.asarray(pos)[None]))[0]
    want = opts.get("scale", 1.0) * numpy_pope(pos, 8, 12, opts.get("degree_offset", 0),
                                                 opts.get("normalization") == "orthonormal")
    np.testing.assert_allclose(got, want, atol=2e-5)
    with pytest.raises(ValueError):
        pe.embed(jnp.zeros((1, 13, 8)), jnp.arange(13)[None])  # outside [-1, 1]


def test_legendre_recurrence_matches_numpy():
    x = np.linspace(-1, 1, 11)
    ours = np.asarray(legendre(jnp.asarray(x, jnp.float32), 12))
    for n in range(12):
        ref = np.polynomial.legendre.legval(x, np.eye(12)[n])
        np.testing.assert_allclose(ours[:, n], ref, atol=2e-5)


def test_pope_table_map_and_normalisation():
    t = np.asarray(pope_table(jnp.array([0, 4, 8]), 4, num_positions=9))
    # x = -1, 0, 1: P_0 = 1, P_1 = x, P_2 = (3x^2 - 1)/2, P_3 = (5x^3 - 3x)/2
    np.testing.assert_allclose(t, [[1, -1, 1, -1], [1, 0, -0.5, 0], [1, 1, 1, 1]], atol=1e-6)
    o = np.asarray(pope_table(jnp.array([8]), 3, num_positions=9, degree_offset=1,
                              normalization="orthonormal"))
    np.testing.assert_allclose(o[0], [math.sqrt(1.5), math.sqrt(2.5), math.sqrt(3.5)], rtol=1e-6)
    pope = pe_lib.make("pope", d_model=4, max_len=9)
    with pytest.raises(ValueError, match="positions"):
        pope.embed(jnp.zeros((1, 3, 4)), jnp.array([[0, 5, 9]]))
