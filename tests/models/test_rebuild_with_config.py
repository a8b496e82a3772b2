"""posjax.models.rebuild_with_config: a new config over the same parameters."""
import jax
import numpy as np
import pytest
from flax import nnx

from posjax.models import LanguageModel, TransformerConfig, rebuild_with_config

CFG = TransformerConfig(vocab_size=13, d_model=16, num_heads=2, num_layers=2, d_ff=32,
                        max_len=8, pe="rope", causal=True)


def test_parameters_carried_over_and_outputs_follow_the_new_config():
    model = LanguageModel(CFG, rngs=nnx.Rngs(3))
    tokens = np.random.default_rng(0).integers(0, 13, (2, 8)).astype(np.int32)
    longer = rebuild_with_config(model, CFG.replace(max_len=32))
    # a parameter-free PE with a longer max_len: the same function on the first 8 positions
    np.testing.assert_array_equal(np.asarray(longer(tokens)), np.asarray(model(tokens)))
    ntk = rebuild_with_config(model, CFG.replace(pe="rope_ntk", pe_options={"factor": 4.0},
                                                 max_len=32))
    for a, b in zip(jax.tree.leaves(nnx.state(model, nnx.Param)),
                    jax.tree.leaves(nnx.state(ntk, nnx.Param))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert np.abs(np.asarray(ntk(tokens)) - np.asarray(model(tokens))).max() > 1e-3  # new PE
    assert model.config.pe == "rope" and ntk.config.pe == "rope_ntk"  # the original kept


def test_a_config_with_other_parameters_is_refused():
    model = LanguageModel(CFG, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="embedding"):  # names the table that would appear
        rebuild_with_config(model, CFG.replace(pe="learned"))
    with pytest.raises(ValueError, match="changes the parameters"):
        rebuild_with_config(model, CFG.replace(d_ff=64))


def test_a_scaling_with_another_frequency_base_is_refused():
    """rope_llama3's own default base (5e5) over a RoPE built at 1e4 would evaluate other
    frequencies than the trained ones; with the trained base given it rebuilds, and at
    factor 1 it is the trained function."""
    model = LanguageModel(CFG, rngs=nnx.Rngs(1))
    llama3 = CFG.replace(pe="rope_llama3", pe_options={"factor": 1.0, "original_max_len": 8})
    with pytest.raises(ValueError, match="base"):
        rebuild_with_config(model, llama3)
    same = rebuild_with_config(model, llama3.replace(
        pe_options={"factor": 1.0, "original_max_len": 8, "base": 10000.0}))
    tokens = np.random.default_rng(1).integers(0, 13, (2, 8)).astype(np.int32)
    np.testing.assert_allclose(np.asarray(same(tokens)), np.asarray(model(tokens)), atol=1e-5)
