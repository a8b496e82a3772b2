"""CPE / PEG (Chu et al., arXiv 2102.10882, Sec. 3.2): X + F(X) with F a zero-padded depthwise
convolution, against a NumPy loop."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe_lib
from posjax.encodings import depthwise_conv1d, depthwise_conv2d

from _pe_checks import make

POS = jnp.arange(7)


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


def test_depthwise_conv1d_formula_and_causality():
    x = jax.random.normal(jax.random.key(0), (1, 9, 3))
    kern = jax.random.normal(jax.random.key(1), (3, 3))
    bias = jnp.array([0.1, 0.2, 0.3])
    y = np.asarray(depthwise_conv1d(x, kern, bias, causal=False))
    xp = np.pad(np.asarray(x)[0], ((1, 1), (0, 0)))
    ref = np.stack([(xp[t:t + 3] * np.asarray(kern)).sum(0) for t in range(9)]) + np.asarray(bias)
    np.testing.assert_allclose(y[0], ref, atol=1e-5)
    yc = np.asarray(depthwise_conv1d(x, kern, bias, causal=True))
    x2 = x.at[:, 5:].set(7.0)
    np.testing.assert_allclose(np.asarray(depthwise_conv1d(x2, kern, bias, causal=True))[:, :5],
                               yc[:, :5], atol=0)


def test_cpe_is_shift_equivariant_for_interior_tokens():
    cpe = pe_lib.make("cpe", d_model=4, kernel_size=3, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(2), (1, 12, 4))
    s = 3
    y = np.asarray(cpe.generate(x))
    ys = np.asarray(cpe.generate(jnp.roll(x, s, axis=1)))
    # interior tokens (away from both zero-padded borders and the wrap-around) move with the shift
    np.testing.assert_allclose(ys[0, s + 1:11], y[0, 1:11 - s], atol=1e-6)
    # zero padding is an absolute cue: on a constant input the border tokens differ from the rest
    const = np.asarray(cpe.generate(jnp.ones((1, 6, 4))))[0]
    np.testing.assert_allclose(const[1:5], np.broadcast_to(const[1], (4, 4)), atol=1e-6)
    assert np.abs(const[0] - const[1]).max() > 1e-3 and np.abs(const[5] - const[1]).max() > 1e-3
    grid = pe_lib.make("cpe", d_model=4, grid=(3, 4), rngs=nnx.Rngs(0))
    assert grid.generate(x).shape == x.shape


def test_depthwise_conv2d_matches_a_direct_sum():
    x = jax.random.normal(jax.random.key(4), (1, 12, 2))
    kern = jax.random.normal(jax.random.key(5), (3, 3, 2))
    y = np.asarray(depthwise_conv2d(x, kern, jnp.zeros(2), (3, 4)))[0].reshape(3, 4, 2)
    xp = np.pad(np.asarray(x)[0].reshape(3, 4, 2), ((1, 1), (1, 1), (0, 0)))
    ref = np.array([[(xp[i:i + 3, j:j + 3] * np.asarray(kern)).sum((0, 1)) for j in range(4)]
                    for i in range(3)])
    np.testing.assert_allclose(y, ref, atol=1e-5)


def test_cpe_acts_only_after_its_block():
    cpe = pe_lib.make("cpe", d_model=4, num_layers=3, peg_after=1, skip_tokens=1, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(6), (1, 5, 4))
    np.testing.assert_array_equal(np.asarray(cpe.block_output(x, POS[None], 0)), np.asarray(x))
    out = np.asarray(cpe.block_output(x, POS[None], 1))
    np.testing.assert_array_equal(out[:, 0], np.asarray(x)[:, 0])  # class token bypasses
    assert np.abs(out[:, 1:] - np.asarray(x)[:, 1:]).max() > 1e-3
    with pytest.raises(ValueError, match="peg_after"):
        pe_lib.make("cpe", d_model=4, num_layers=2, peg_after=2)
