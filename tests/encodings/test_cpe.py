"""CPE / PEG (Chu et al., arXiv 2102.10882, Sec. 3.2): X + F(X) with F a zero-padded depthwise
convolution, against a NumPy loop."""
import jax.numpy as jnp
import numpy as np
import pytest

from _pe_checks import make


def numpy_peg_1d(x, kernel, bias, causal):
    """Sec. 3.2 of arXiv 2102.10882 (1-D form): y_t = x_t + b + sum_u w_u * x_{t+u-left},
    zeros outside the sequence; left = k - 1 (causal) or (k - 1)/2 (centred)."""
    b_, t_, c_ = x.shape
    k = kernel.shape[0]
    left = k - 1 if causal else (k - 1) // 2
    y = x + bias
    for t in range(t_):
        for u in range(k):
            s = t + u - left
            if 0 <= s < t_:
                y[:, t] += kernel[u] * x[:, s]
    return y


def numpy_peg_2d(x, kernel, bias, grid):
    """The 2-D PEG of arXiv 2102.10882 (Fig. 3): k x k depthwise conv over the H x W patch grid."""
    h, w = grid
    k = kernel.shape[0]
    p = (k - 1) // 2
    img = x.reshape(x.shape[0], h, w, -1)
    out = img + bias
    for i in range(h):
        for j in range(w):
            for a in range(k):
                for b in range(k):
                    ii, jj = i + a - p, j + b - p
                    if 0 <= ii < h and 0 <= jj < w:
                        out[:, i, j] += kernel[a, b] * img[:, ii, jj]
    return out.reshape(x.shape)


@pytest.mark.parametrize("causal", [True, False])
def test_1d_peg_matches_the_convolution(causal):
    pe = make("cpe", d_model=4, num_layers=2, causal=causal, peg_after=1, skip_tokens=1)
    x = np.random.default_rng(0).standard_normal((2, 9, 4))
    kernel = np.asarray(pe.kernel[...], np.float64)
    got = np.asarray(pe.block_output(jnp.asarray(x, jnp.float32), None, 1))
    want = x.copy()
    want[:, 1:] = numpy_peg_1d(x[:, 1:].copy(), kernel, 0.0, causal)  # the class token bypasses it
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(pe.block_output(jnp.asarray(x, jnp.float32), None, 0)),
                                  np.asarray(jnp.asarray(x, jnp.float32)))  # other blocks: identity


def test_2d_peg_matches_the_convolution():
    pe = make("cpe", d_model=4, grid=(3, 4), causal=False)
    x = np.random.default_rng(1).standard_normal((1, 12, 4))
    got = np.asarray(pe.block_output(jnp.asarray(x, jnp.float32), None, 0))
    np.testing.assert_allclose(got, numpy_peg_2d(x, np.asarray(pe.kernel[...], np.float64), 0.0, (3, 4)),
                               atol=1e-5)
