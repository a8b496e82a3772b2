"""Positional attention (Back de Luca et al., arXiv 2410.01686): q/k read the positional matrix
P, v the input; P against NumPy (the weights softmax((P W_Q)(P W_K)^T) in a model: test_hooks)."""
import jax.numpy as jnp
import numpy as np
import pytest

from _pe_checks import make


def numpy_sinusoid(pos, d, base=10000.0):
    """The interleaved sinusoid of arXiv 1706.03762, Sec. 3.5 (the default P)."""
    w = base ** (-2.0 * np.arange(d // 2) / d)
    out = np.empty((len(pos), d))
    out[:, 0::2], out[:, 1::2] = np.sin(pos[:, None] * w), np.cos(pos[:, None] * w)
    return out


@pytest.mark.parametrize("encoding", ["sinusoidal", "onehot"])
def test_qk_input_is_p_and_v_input_is_the_stream(encoding):
    """arXiv 2410.01686, Sec. 3: A = softmax((P W_Q)(P W_K)^T), output A X W_V, the same P at
    every layer."""
    pe = make("positional_attention", d_model=16, max_len=12, encoding=encoding)
    h = np.random.default_rng(0).standard_normal((2, 10, 16))
    pos = np.arange(10)
    want_p = numpy_sinusoid(pos, 16) if encoding == "sinusoidal" else np.eye(12, 16)[pos]
    for layer in (0, 3):
        qk, v = pe.attention_input(jnp.asarray(h, jnp.float32), jnp.asarray(pos)[None], layer)
        np.testing.assert_allclose(np.asarray(qk), np.broadcast_to(want_p, h.shape), atol=1e-6)
        np.testing.assert_allclose(np.asarray(v), h, atol=1e-6)
