"""PoPE (Aggarwal, arXiv 2405.04585): Legendre-polynomial PE against NumPy's Legendre series."""
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.polynomial import legendre as npleg

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
