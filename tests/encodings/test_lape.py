"""LaPE (Yu et al., arXiv 2212.05262): block l's attention input is LN_x(x) + LN_p^(l)(p), one
LayerNorm of the PE per layer, against NumPy."""
import jax.numpy as jnp
import numpy as np

from _np_refs import np_layernorm
from _pe_checks import make


def test_attention_input_adds_the_layers_own_layernorm_of_the_pe():
    """arXiv 2212.05262, Sec. 3 (independent LayerNorm of the PE): x_l' = LN_l(x_l) + LN'_l(p) (here h = LN_l(x_l) is given)."""
    pe = make("lape", d_model=8, num_layers=2, max_len=10)
    rng = np.random.default_rng(0)
    for layer in range(2):  # give each layer's norm its own affine parameters
        pe.norms[layer].scale.value = jnp.asarray(rng.uniform(0.5, 1.5, 8), jnp.float32)
        pe.norms[layer].bias.value = jnp.asarray(rng.normal(size=8), jnp.float32)
    table = np.asarray(pe.base.embedding[...], np.float64)
    h = rng.standard_normal((2, 6, 8))
    pos = np.arange(6)
    outs = []
    for layer in range(2):
        qk, v = pe.attention_input(jnp.asarray(h, jnp.float32), jnp.asarray(pos)[None], layer)
        n = pe.norms[layer]
        want = h + np_layernorm(table[pos], np.asarray(n.scale[...]), np.asarray(n.bias[...]))
        np.testing.assert_allclose(np.asarray(qk), want, atol=1e-4)
        np.testing.assert_array_equal(np.asarray(qk), np.asarray(v))
        outs.append(np.asarray(qk))
    assert np.abs(outs[0] - outs[1]).max() > 1e-2  # layer-adaptive: different per layer
    x = jnp.asarray(h, jnp.float32)
    np.testing.assert_array_equal(np.asarray(pe.embed(x, jnp.asarray(pos)[None])), np.asarray(x))
