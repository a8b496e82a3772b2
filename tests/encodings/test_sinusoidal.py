"""Sinusoidal PE (Vaswani et al., arXiv 1706.03762, Sec. 3.5): float64 NumPy transcription."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings import sinusoidal_at
from _pe_checks import make


def numpy_sinusoid(pos, d, base=10000.0, layout="interleaved", spacing="2k/d"):
    """arXiv 1706.03762, Sec. 3.5: PE(p, 2k) = sin(p / base^(2k/d)), PE(p, 2k+1) = cos(...);
    "block" puts the sines first; spacing "k/(d/2-1)" uses exponent k / (d/2 - 1)."""
    out = np.zeros((len(pos), d))
    for a, p in enumerate(pos):
        for k in range(d // 2):
            expo = 2 * k / d if spacing == "2k/d" else k / (d // 2 - 1)
            w = base ** (-expo)
            if layout == "interleaved":
                out[a, 2 * k], out[a, 2 * k + 1] = np.sin(p * w), np.cos(p * w)
            else:
                out[a, k], out[a, d // 2 + k] = np.sin(p * w), np.cos(p * w)
    return out


@pytest.mark.parametrize("layout,spacing", [("interleaved", "2k/d"), ("block", "2k/d"),
                                            ("interleaved", "k/(d/2-1)")])
def test_float64_matches_the_paper_formula(layout, spacing):
    pos = np.array([0.0, 1.0, 2.5, 7.0, 15.0, 100.0])
    with jax.enable_x64(True):
        got = sinusoidal_at(jnp.asarray(pos), 12, 100.0, layout=layout, freq_spacing=spacing,
                            dtype=jnp.float64)
        assert got.dtype == jnp.float64
        np.testing.assert_allclose(np.asarray(got), numpy_sinusoid(pos, 12, 100.0, layout, spacing),
                                   atol=1e-12)


def test_embed_adds_scale_times_the_table():
    pe = make("sinusoidal", d_model=8, scale=0.5)
    x = np.random.default_rng(0).standard_normal((2, 6, 8))
    got = np.asarray(pe.embed(jnp.asarray(x, jnp.float32), jnp.arange(6)[None]))
    np.testing.assert_allclose(got, x + 0.5 * numpy_sinusoid(np.arange(6), 8), atol=1e-6)
