"""posjax.models.TokenRegressor: a per-token linear head on the encoder's hidden states."""
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from posjax.models import TokenRegressor, TransformerConfig


def test_token_regressor_is_the_encoder_then_a_linear_map():
    cfg = TransformerConfig(input_dim=5, num_layers=1, d_model=8, num_heads=2, d_ff=8, max_len=7,
                            pe="none")
    model = TokenRegressor(cfg, 3, rngs=nnx.Rngs(0))
    x = jnp.asarray(np.random.default_rng(0).normal(size=(2, 7, 5)), jnp.float32)
    out = model(x, jnp.arange(7))
    assert out.shape == (2, 7, 3)
    hidden = np.asarray(model.transformer(x, positions=jnp.arange(7)))
    want = hidden @ np.asarray(model.head.kernel[...]) + np.asarray(model.head.bias[...])
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-5)
    # per token: changing token 0's features under NoPE + bidirectional changes every token,
    # but the head itself is applied token-wise (rows of the same hidden state give one output)
    with pytest.raises(ValueError, match="out_dim must be >= 1"):
        TokenRegressor(cfg, 0, rngs=nnx.Rngs(0))
