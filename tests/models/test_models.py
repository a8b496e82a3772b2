"""Model-level behaviour: every PE plugs in; necessity (Theorem 1); relative shift invariance."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe
from posjax.models import Classifier, LanguageModel, Transformer, TransformerConfig

BASE = dict(vocab_size=40, num_layers=2, d_model=32, num_heads=4, d_ff=64, max_len=16)  # square max_len: 2-D PEs infer a 4x4 grid


def _tokens(batch=3, length=12, seed=1):
    return jax.random.randint(jax.random.key(seed), (batch, length), 0, BASE["vocab_size"])


# one small block is enough for the per-PE checks (one compile per registered PE)
SMALL = {**BASE, "num_layers": 1, "d_model": 16, "num_heads": 2, "d_ff": 32}


@pytest.fixture(scope="module")
def classifiers():
    """One mean-pooled encoder classifier per registered PE."""
    out = {}
    for name in pe.names():
        cfg = TransformerConfig(pe=name, **SMALL)
        out[name] = nnx.jit(lambda m, t: m(t)), Classifier(cfg, 3, pooling="mean", rngs=nnx.Rngs(0))
    return out


@pytest.mark.parametrize("name", pe.names())
def test_every_registered_pe_builds_a_model_with_finite_logits(classifiers, name):
    fn, model = classifiers[name]
    logits = fn(model, _tokens())
    assert logits.shape == (3, 3)
    assert bool(jnp.all(jnp.isfinite(logits)))


def test_nope_encoder_is_permutation_invariant(classifiers):
    fn, model = classifiers["none"]
    t = _tokens()
    perm = jax.random.permutation(jax.random.key(3), t.shape[1])
    np.testing.assert_allclose(fn(model, t[:, perm]), fn(model, t), atol=1e-5)


@pytest.mark.parametrize("name", [n for n in pe.names() if pe.info(n).hooks])
def test_any_positional_encoding_breaks_permutation_invariance(classifiers, name):
    fn, model = classifiers[name]
    t = _tokens()
    # not a reversal: a symmetric relative bias (ALiBi) is invariant to reversing the order
    perm = jax.random.permutation(jax.random.key(3), t.shape[1])
    assert float(jnp.abs(fn(model, t[:, perm]) - fn(model, t)).max()) > 1e-4


@pytest.mark.parametrize("name", ["rope", "alibi", "t5", "none"])
def test_relative_encoders_are_shift_invariant(name):
    cfg = TransformerConfig(pe=name, **BASE)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    t = _tokens()
    pos = jnp.arange(t.shape[1])
    ref = model(t, positions=pos)
    for s in (5, 48):
        np.testing.assert_allclose(model(t, positions=pos + s), ref, atol=2e-5)


def test_absolute_encoder_is_not_shift_invariant():
    model = Transformer(TransformerConfig(pe="sinusoidal", **BASE), rngs=nnx.Rngs(0))
    t, pos = _tokens(), jnp.arange(12)
    assert float(jnp.abs(model(t, positions=pos + 5) - model(t, positions=pos)).max()) > 1e-3


def test_too_long_input_for_table_pe_raises_and_relative_pe_accepts_any_length():
    t = _tokens(length=BASE["max_len"] + 6)
    learned = Transformer(TransformerConfig(pe="learned", **BASE), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"sequence length 22 exceeds the 16 positions.*'learned'"):
        learned(t)
    rope = Transformer(TransformerConfig(pe="rope", **BASE), rngs=nnx.Rngs(0))
    assert rope(t).shape == (3, 22, 32)


def test_attention_weights_masks_and_head_mask():
    cfg = TransformerConfig(pe="alibi", causal=True, **BASE)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    t = _tokens()
    pad = jnp.ones(t.shape, bool).at[:, -3:].set(False)
    hidden, w = model(t, padding_mask=pad, return_attention=True)
    assert w.shape == (2, 3, 4, 12, 12)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
    assert float(jnp.abs(jnp.triu(w, k=1)).max()) == 0.0          # causal: no future keys
    assert float(jnp.abs(w[..., -3:]).max()) == 0.0               # padded keys ignored
    np.testing.assert_allclose(model(t, padding_mask=pad), hidden, atol=1e-5)  # fused == explicit
    ones = jnp.ones((2, 4))
    np.testing.assert_allclose(model(t, head_mask=ones), model(t), atol=1e-6)
    ablated = model(t, head_mask=ones.at[0, 1].set(0.0))
    assert float(jnp.abs(ablated - model(t)).max()) > 1e-4
    with pytest.raises(ValueError, match="head_mask must have shape"):
        model(t, head_mask=jnp.ones((3, 4)))


def test_heads_and_config_validation():
    cfg = TransformerConfig(pe="rope", causal=True, **BASE)
    lm = LanguageModel(cfg, rngs=nnx.Rngs(0))
    assert lm(_tokens()).shape == (3, 12, BASE["vocab_size"])
    for pooling in ("cls", "mean", "last"):
        assert Classifier(cfg, 5, pooling=pooling, rngs=nnx.Rngs(0))(_tokens()).shape == (3, 5)
    with pytest.raises(ValueError, match="pooling"):
        Classifier(cfg, 5, pooling="max", rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="not divisible"):
        TransformerConfig(**{**BASE, "num_heads": 5})
    with pytest.raises(ValueError, match="unknown positional encoding"):
        Transformer(TransformerConfig(pe="nope-ish", **BASE), rngs=nnx.Rngs(0))


def test_post_norm_every_layer_pe_and_float_inputs():
    cfg = TransformerConfig(pe="learned", pe_every_layer=True, pre_norm=False, input_dim=5,
                            mlp_trailing_activation=True, **BASE)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    assert len(model.pes) == BASE["num_layers"]
    assert not np.allclose(model.layer_pe(0).embedding[...], model.layer_pe(1).embedding[...])
    x = jax.random.normal(jax.random.key(0), (2, 7, 5))
    assert model(x).shape == (2, 7, 32)


def test_dropout_is_random_in_training_and_off_in_eval():
    cfg = TransformerConfig(pe="sinusoidal", dropout=0.3, **BASE)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    t = _tokens()
    a = model(t, deterministic=False, rngs=nnx.Rngs(dropout=1))
    b = model(t, deterministic=False, rngs=nnx.Rngs(dropout=2))
    assert float(jnp.abs(a - b).max()) > 1e-3
    np.testing.assert_array_equal(model(t), model(t))


def test_every_layer_pe_can_share_one_table():
    cfg = TransformerConfig(pe="learned", pe_every_layer=True, share_pe_across_layers=True, **BASE)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    assert len(model.pes) == 1 and model.layer_pe(1) is model.layer_pe(0)
    once = Transformer(cfg.replace(pe_every_layer=False, share_pe_across_layers=False), rngs=nnx.Rngs(0))
    t = _tokens()
    # same parameters, but re-adding the table at block 1 changes the output
    assert float(jnp.abs(model(t) - once(t)).max()) > 1e-4


# --- the LM head's dtype (TransformerConfig.lm_head_dtype) ----------------------------------------
def test_lm_head_dtype_is_validated():
    with pytest.raises(ValueError, match="lm_head_dtype"):
        TransformerConfig(lm_head_dtype="bfloat16")


def test_lm_head_dtype_compute_vs_float32():
    """bf16 model: the "compute" head multiplies in bf16 (logits differ from the float32 head's
    by bf16 rounding only, and are cast to float32); a float32 model gets identical logits."""
    from posjax.models import LanguageModel

    tokens = _tokens()  # the sizes of the tests above: their float32 ops are compiled already
    for dtype in ("bfloat16", "float32"):
        out = {}
        for head in ("compute", "float32"):
            cfg = TransformerConfig(dtype=dtype, lm_head_dtype=head, **BASE)
            model = LanguageModel(cfg, rngs=nnx.Rngs(0))
            assert model.head.kernel[...].dtype == jnp.float32  # parameters stay float32
            out[head] = np.asarray(model(tokens))
            assert out[head].dtype == np.float32
        diff = np.abs(out["compute"] - out["float32"]).max()
        if dtype == "float32":
            assert diff == 0.0
        else:
            assert 0.0 < diff <= 0.05 * np.abs(out["float32"]).max()


# --- the XLA attention path and the flattened projections ------------------------------------------
@pytest.mark.parametrize("dtype,tol", [(jnp.float32, 1e-6), (jnp.bfloat16, 1e-2)])
def test_xla_attention_matches_jax_dot_product_attention(dtype, tol):
    """posjax's default attention (two einsums) is the function of jax's XLA implementation:
    with an ALiBi-like bias and a causal + padding mask, forward and gradients."""
    from posjax.models.attention import xla_attention

    B, T, H, D = 2, 12, 3, 8
    ks = jax.random.split(jax.random.key(3), 4)
    q, k, v = (jax.random.normal(kk, (B, T, H, D), dtype) for kk in ks[:3])
    bias = jax.random.normal(ks[3], (1, H, T, T), jnp.float32)
    mask = jnp.tril(jnp.ones((T, T), bool))[None, None] & (jnp.arange(T) < 10)[None, None, None]

    def forward_and_grads(fn):
        # one compiled program per implementation (not every eager op of the backward pass)
        loss = lambda q, k, v: jnp.sum(fn(q, k, v).astype(jnp.float32) ** 2)
        return jax.jit(lambda q, k, v: (fn(q, k, v), jax.grad(loss, argnums=(0, 1, 2))(q, k, v)))

    ours = lambda q, k, v: xla_attention(q, k, v, bias=bias, mask=mask, scale=0.3)
    ref = lambda q, k, v: jax.nn.dot_product_attention(q, k, v, bias=bias, mask=mask, scale=0.3,
                                                       implementation="xla")
    out_ours, g_ours = forward_and_grads(ours)(q, k, v)
    out_ref, g_ref = forward_and_grads(ref)(q, k, v)
    np.testing.assert_allclose(np.asarray(out_ours, np.float32),
                               np.asarray(out_ref, np.float32), atol=tol, rtol=tol)
    for a, b in zip(g_ours, g_ref):
        scale = float(jnp.max(jnp.abs(b.astype(jnp.float32))))
        np.testing.assert_allclose(np.asarray(a, np.float32) / scale,
                                   np.asarray(b, np.float32) / scale, atol=tol)


def test_dense_is_the_linear_layer_on_flattened_rows():
    from posjax.models.attention import dense

    layer = nnx.Linear(6, 5, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(0), (2, 3, 4, 6))
    np.testing.assert_allclose(np.asarray(dense(layer, x)), np.asarray(layer(x)), atol=1e-6)
    assert dense(layer, x).shape == (2, 3, 4, 5)
