"""ALiBi (Press et al., arXiv 2108.12409): slopes and bias against a NumPy transcription."""
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings import alibi_slopes
from _pe_checks import make


def numpy_slopes(h):
    """arXiv 2108.12409, Sec. 3: geometric slopes starting at 2^(-8/H) with ratio 2^(-8/H) for a
    power-of-two H; otherwise those of the closest lower power of two c, then every other slope
    of 2c (the paper's footnote / reference code)."""
    geo = lambda n: [(2.0 ** (-8.0 / n)) ** (i + 1) for i in range(n)]
    c = 1
    while 2 * c <= h:
        c *= 2
    return np.array(geo(c) + geo(2 * c)[0::2][: h - c])


@pytest.mark.parametrize("h,first", [(8, [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]),
                                     (4, [1 / 4, 1 / 16, 1 / 64, 1 / 256])])
def test_slopes_are_the_papers_geometric_sequence(h, first):
    np.testing.assert_allclose(numpy_slopes(h), first)
    np.testing.assert_allclose(alibi_slopes(h, dtype=np.float64), first, rtol=1e-15)


@pytest.mark.parametrize("h", [3, 6, 12])
def test_non_power_of_two_slopes(h):
    np.testing.assert_allclose(alibi_slopes(h, dtype=np.float64), numpy_slopes(h), rtol=1e-15)


@pytest.mark.parametrize("causal", [True, False])
def test_bias_is_minus_slope_times_distance(causal):
    """arXiv 2108.12409, Sec. 3: softmax(q_i K^T + m [-(i-1), ..., -1, 0]); the encoder form
    uses |i - j|."""
    pe = make("alibi", d_model=12, num_heads=6, causal=causal)
    i, j = np.array([0, 3, 7, 12]), np.array([0, 2, 5, 13, 15])
    d = i[:, None] - j[None, :]
    dist = np.maximum(d, 0) if causal else np.abs(d)
    want = -numpy_slopes(6)[:, None, None] * dist[None]
    np.testing.assert_allclose(np.asarray(pe.bias(jnp.asarray(i), jnp.asarray(j))), want, rtol=1e-6)
