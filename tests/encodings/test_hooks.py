"""The structural hooks (``attention_input``, ``block_output``) and the catalogue registry.

The golden numbers below were produced by the model code *before* the two structural hooks were
added (LanguageModel, vocab 11, 2 layers, d=16, 2 heads, d_ff=32, max_len=8, nnx.Rngs(3), the
tokens of ``TOKENS``): sum of the logits, sum of their squares, and logits[1, :, 0]. Existing PEs
must give the same outputs now.
"""
import dataclasses
import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe_lib
from posjax.encodings.base import HOOKS, PositionalEncoding
from posjax.models import LanguageModel, TransformerConfig

TOKENS = jnp.array([[1, 5, 2, 7, 3, 9], [4, 4, 0, 10, 2, 6]])
GOLDEN = {
    "none-0": [11.32236, 158.10887, 1.886088, 1.886088, -1.041434, 0.795619, 0.295771, -1.040463],
    "none-1": [25.39893, 169.27571, 1.070065, 1.070065, 0.602745, 1.203497, 0.827991, -0.053722],
    "sinusoidal-0": [-84.07187, 164.80797, 0.444715, 0.204627, -0.824408, -1.410721, -1.314948, -0.984252],
    "sinusoidal-1": [-50.43095, 145.41806, 2.172115, 1.837611, 1.131591, 0.062173, -1.01722, -1.14781],
    "learned-0": [23.25594, 138.92818, -0.402364, 0.134762, -0.182208, 0.014602, 0.041228, 0.162496],
    "learned-1": [39.55135, 146.84824, 0.12621, 0.400242, 0.503752, 0.284047, 0.41253, 0.644869],
    "rope-0": [11.27071, 166.30754, 0.395538, 0.370021, -0.603235, 0.952878, 1.145587, -0.464964],
    "rope-1": [26.21871, 173.18967, 1.070065, 1.070065, 0.590918, 1.169724, 1.604781, 0.042487],
    "alibi-0": [11.26203, 158.53305, 1.878721, 1.882912, -1.074277, 0.812489, 0.319514, -1.032598],
    "alibi-1": [25.35051, 169.17535, 1.070065, 1.070065, 0.573257, 1.196707, 0.831504, -0.116282],
    "t5-0": [17.77355, 116.15829, -0.596893, -0.618133, -0.594642, -0.781698, 0.622217, -0.615284],
    "t5-1": [19.05519, 131.37993, -0.321198, -0.321198, 0.03781, -1.21325, 0.870924, -0.624916],
}
CATALOGUE = ["xpos", "kerple_log", "kerple_power", "fire", "cape", "cpe", "tupe", "lape", "complex",
             "hope", "pope", "gridpe", "hype", "positional_attention", "rope_linear", "rope_ntk",
             "rope_yarn", "rope_llama3", "learned_interpolated"]


def tiny(pe, causal=True, **options):
    cfg = TransformerConfig(vocab_size=11, num_layers=2, d_model=16, num_heads=2, d_ff=32,
                            max_len=8, pe=pe, causal=causal, pe_options=options)
    return LanguageModel(cfg, rngs=nnx.Rngs(3))


@pytest.mark.parametrize("key", sorted(GOLDEN))
def test_existing_pes_outputs_unchanged_by_the_structural_hooks(key):
    pe, causal = key.split("-")
    logits = np.asarray(tiny(pe, causal=bool(int(causal)))(TOKENS), np.float64)
    got = [logits.sum(), (logits ** 2).sum(), *logits[1, :, 0]]
    np.testing.assert_allclose(got[:2], GOLDEN[key][:2], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got[2:], GOLDEN[key][2:], atol=1e-5)


def test_structural_hooks_default_to_identity():
    pe = pe_lib.make("rope", head_dim=4, num_heads=2)
    h = jnp.ones((1, 3, 8))
    qk, v = pe.attention_input(h, jnp.arange(3)[None], 0)
    assert qk is h and v is h
    assert pe.block_output(h, jnp.arange(3)[None], 1) is h
    assert PositionalEncoding.attention_input is type(pe).attention_input


def test_positional_attention_weights_ignore_the_input_values():
    model = tiny("positional_attention")
    other = TOKENS.at[:, 2:].set(jnp.array([8, 1, 9, 3]))
    _, wa = model(TOKENS, return_attention=True)
    _, wb = model(other, return_attention=True)
    np.testing.assert_allclose(np.asarray(wa), np.asarray(wb), atol=1e-6)
    # ... but the outputs do depend on them (values read the residual stream)
    assert float(jnp.abs(model(TOKENS) - model(other)).max()) > 1e-3
    # a standard PE's weights do change
    _, ra = tiny("rope")(TOKENS, return_attention=True)
    _, rb = tiny("rope")(other, return_attention=True)
    assert float(jnp.abs(ra - rb).max()) > 1e-3


def test_positional_attention_q_k_read_the_positional_matrix():
    model = tiny("positional_attention", causal=False)
    pe, attn = model.transformer.pe, model.transformer.blocks[0].attn
    pos = jnp.arange(6)[None]
    p = pe.table(pos)
    q = attn.query(p).reshape(1, 6, 2, 8)
    k = attn.key(p).reshape(1, 6, 2, 8)
    expect = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(8), -1)
    _, w = model(TOKENS, return_attention=True)
    np.testing.assert_allclose(np.asarray(w[0]), np.broadcast_to(np.asarray(expect), w[0].shape),
                               atol=1e-5)


def test_lape_gives_each_layer_its_own_layernorm_of_the_pe():
    model = tiny("lape", base_options={"init": "normal", "std": 1.0})
    lape = model.transformer.pe
    assert len(lape.norms) == 2
    pos = jnp.arange(6)[None]
    h = jnp.zeros((2, 6, 16))
    lape.norms[1].scale[...] = 2.0 * jnp.ones(16)
    q0, v0 = lape.attention_input(h, pos, 0)
    q1, _ = lape.attention_input(h, pos, 1)
    np.testing.assert_allclose(np.asarray(q1), 2 * np.asarray(q0), atol=1e-5)
    np.testing.assert_array_equal(np.asarray(q0), np.asarray(v0))
    t = np.asarray(q0[0])
    np.testing.assert_allclose(t.mean(-1), 0.0, atol=1e-5)  # a LayerNorm of the table
    # the PE is not added at the input (option add_at_input=False)
    x = jnp.ones((1, 6, 16))
    assert lape.embed(x, pos) is x
    with pytest.raises(ValueError, match="additive"):
        pe_lib.make("lape", d_model=16, base_pe="rope")


def test_every_registered_pe_has_a_paper_and_valid_hooks():
    names = set(pe_lib.names())
    assert set(CATALOGUE) <= names
    for name in sorted(names):
        entry = pe_lib.info(name)
        assert entry.paper and entry.hooks <= set(HOOKS)
        assert "arXiv" in importlib.import_module(entry.module.__module__).__doc__  # cited
        assert dataclasses.is_dataclass(entry.options)


def test_every_pe_module_has_its_own_test_file_with_a_numpy_reference():
    """tests/encodings/test_<module>.py exists for every module that registers a PE, cites a
    paper and compares against NumPy (an independent computation, not only the shared checks)."""
    import pathlib
    here = pathlib.Path(__file__).parent
    missing, weak = [], []
    for module in sorted({pe_lib.info(n).module.__module__.rsplit(".", 1)[1] for n in pe_lib.names()}):
        path = here / f"test_{module}.py"
        if not path.exists():
            missing.append(path.name)
        elif not ("arXiv" in (text := path.read_text()) and "np.testing" in text):
            weak.append(path.name)
    assert not missing and not weak, (missing, weak)


def test_options_are_hashable_even_from_json_lists_and_dicts():
    # model graphs (hence PE options) are cache keys of the compiled train steps
    built = [pe_lib.make("lape", d_model=16, max_len=8, base_options={"init": "normal", "std": 1.0}),
             pe_lib.make("cpe", d_model=16, grid=[2, 4]),
             pe_lib.make("gridpe", head_dim=12, dims=2, grid=[2, 4]),
             pe_lib.make("kerple_log", num_heads=2, r1_init=[0.0, 1.0])]
    for pe in built:
        hash(pe.options)
    assert built[1].options.grid == (2, 4)
    ctx = pe_lib.PEContext(d_model=16, num_heads=2, head_dim=8, max_len=8, causal=True)
    for name in pe_lib.names():
        hash(pe_lib.build_options(name, {}, ctx))


def test_hooks_are_the_overridden_methods():
    class EmbedAndBias(PositionalEncoding):
        hook = "bias"  # a label written by hand is ignored: the overrides decide

        def embed(self, x, positions, *, deterministic=True, rngs=None):
            return x + 1.0

        def bias(self, q_pos, k_pos):
            return jnp.zeros((1, q_pos.shape[-1], k_pos.shape[-1]))

    class Inherits(EmbedAndBias):
        pass

    class Nothing(PositionalEncoding):
        hook = "rotate"

    assert EmbedAndBias.hooks == Inherits.hooks == frozenset({"embed", "bias"})
    assert EmbedAndBias.hook == "embed+bias"
    assert Nothing.hooks == frozenset() and Nothing.hook == "none"
    assert pe_lib.info("rope_plus_abs").hook == "embed+rotate"
    assert pe_lib.info("lape").hooks == {"embed", "attention_input"}
    assert pe_lib.info("cpe").hooks == {"block_output"}


@pytest.mark.parametrize("name,bad", [
    ("xpos", {"gamma": -1.0}), ("kerple_log", {"r1_init": (2.0, 1.0)}), ("fire", {"hidden": 0}),
    ("cape", {"max_global_scaling": 0.5}), ("cpe", {"kernel_size": 0}), ("tupe", {"variant": "B"}),
    ("lape", {"base_pe": "nope"}), ("complex", {"parametrisation": "table"}),
    ("hope", {"cutoff": "pairs"}), ("pope", {"normalization": "l2"}), ("gridpe", {"scale_ratio": 1.0}),
    ("hype", {"offset": "ij"}), ("positional_attention", {"encoding": "random"}),
    ("rope_linear", {"factor": 0.0}), ("rope_yarn", {"alpha": 40.0}),
    ("rope_llama3", {"high_freq_factor": 0.5}), ("learned_interpolated", {"beyond": "wrap"}),
    ("kerple_power", {"colour": 1}),
])
def test_invalid_options_raise_value_error(name, bad):
    with pytest.raises(ValueError):
        pe_lib.make(name, d_model=16, num_heads=2, max_len=8, causal=True, **bad)
