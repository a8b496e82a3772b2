"""posjax.analysis.pe_tables: the per-layer additive tables of a model, None without a table."""
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax.analysis.similarity import pe_tables
from posjax.models import Classifier, TransformerConfig


def test_pe_tables_per_layer_and_none():
    cfg = TransformerConfig(vocab_size=8, num_layers=3, d_model=8, num_heads=2, d_ff=8, max_len=6,
                            pe="learned", pe_options={"init": "normal", "std": 0.5},
                            pe_every_layer=True)
    model = Classifier(cfg, num_classes=2, rngs=nnx.Rngs(0))
    tables = pe_tables(model, jnp.arange(6))
    assert tables.shape == (3, 6, 8)
    # independent: the learned parameter of each layer's PE, read directly
    for i, pe in enumerate(model.transformer.pes):
        weights = [np.asarray(v) for v in jax_leaves(nnx.state(pe, nnx.Param))]
        assert any(w.shape[-1] == 8 and np.allclose(w[:6], tables[i]) for w in weights)
    assert not np.allclose(tables[0], tables[1])  # one table per layer
    rope = Classifier(TransformerConfig(vocab_size=8, num_layers=1, d_model=8, num_heads=2, d_ff=8,
                                        max_len=6, pe="rope"), num_classes=2, rngs=nnx.Rngs(0))
    assert pe_tables(rope, jnp.arange(6)) is None


def jax_leaves(state):
    import jax

    return jax.tree_util.tree_leaves(state)
