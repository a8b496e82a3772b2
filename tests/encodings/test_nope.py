"""NoPE: without a PE a bidirectional encoder is permutation-equivariant (Theorem 1 of arXiv
2604.05217); causal NoPE (Kazemnejad et al., arXiv 2305.19466) keeps only the mask's signal."""
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax.models import LanguageModel, TransformerConfig
from _pe_checks import make


def test_every_hook_is_the_identity():
    pe = make("none")
    assert pe.hooks == frozenset()
    x = jnp.asarray(np.random.default_rng(0).standard_normal((1, 5, 16)), jnp.float32)
    np.testing.assert_array_equal(np.asarray(pe.embed(x, jnp.arange(5)[None])), np.asarray(x))


def test_bidirectional_model_is_permutation_equivariant():
    """Theorem 1 of arXiv 2604.05217: permuting the tokens permutes the outputs."""
    tokens = jnp.array([[3, 1, 4, 1, 5, 9, 2, 6]])
    perm = np.array([5, 2, 7, 0, 3, 1, 6, 4])
    cfg = TransformerConfig(vocab_size=10, num_layers=1, d_model=16, num_heads=2, d_ff=16,
                            max_len=8, pe="none", causal=False)
    model = LanguageModel(cfg, rngs=nnx.Rngs(0))
    out, out_p = np.asarray(model(tokens)), np.asarray(model(tokens[:, perm]))
    np.testing.assert_allclose(out[:, perm], out_p, atol=1e-5)
    assert np.abs(out[:, perm] - out).max() > 1e-3  # the outputs do depend on the tokens
