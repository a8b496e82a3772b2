"""Chunked cross-entropy equals the dense loss in values and gradients; the model option."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from posjax.models import LanguageModel, TransformerConfig
from posjax.models.chunked_ce import chunked_cross_entropy, dense_cross_entropy


def _data(N=203, d=24, V=517, dtype=jnp.float32, seed=0):
    rng = np.random.default_rng(seed)
    h = jnp.asarray(rng.standard_normal((N, d)), dtype)
    W = jnp.asarray(0.4 * rng.standard_normal((d, V)), dtype)
    b = jnp.asarray(0.2 * rng.standard_normal(V), jnp.float32)
    y = jnp.asarray(rng.integers(0, V, N), jnp.int32)
    w = jnp.asarray(rng.random(N), jnp.float32)  # a non-uniform upstream gradient
    return h, W, b, y, w


def _rel(a, b):
    return float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b)))


@pytest.mark.parametrize("chunk", [1, 64, 203, 1000])
@pytest.mark.parametrize("with_bias", [True, False])
def test_loss_and_grads_equal_dense(chunk, with_bias):
    h, W, b, y, w = _data()
    b = b if with_bias else None

    def total(fn, **kw):
        return lambda h, W, b: jnp.sum(w * fn(h, W, y, bias=b, **kw))

    l0 = dense_cross_entropy(h, W, y, bias=b)
    l1 = jax.jit(lambda h, W, b: chunked_cross_entropy(h, W, y, bias=b, chunk_size=chunk))(h, W, b)
    # independent reference: optax on explicit logits
    ref = optax.softmax_cross_entropy_with_integer_labels(h @ W + (0 if b is None else b), y)
    assert _rel(l0, ref) <= 1e-6 and l1.shape == (203,) and l1.dtype == jnp.float32
    assert _rel(l1, l0) <= 1e-5
    args = (0, 1, 2) if with_bias else (0, 1)
    g0 = jax.grad(total(dense_cross_entropy), argnums=args)(h, W, b)
    g1 = jax.jit(jax.grad(total(chunked_cross_entropy, chunk_size=chunk), argnums=args))(h, W, b)
    for a, c in zip(g1, g0):
        assert a.shape == c.shape and _rel(a, c) <= 1e-5


def test_bfloat16_hidden_keeps_float32_loss():
    h, W, b, y, _ = _data(dtype=jnp.bfloat16)
    l1 = chunked_cross_entropy(h, W, y, bias=b, chunk_size=50)
    assert l1.dtype == jnp.float32 and _rel(l1, dense_cross_entropy(h, W, y, bias=b)) <= 1e-5
    gh = jax.grad(lambda h: chunked_cross_entropy(h, W, y, chunk_size=50).sum())(h)
    assert gh.dtype == jnp.bfloat16 and bool(jnp.all(jnp.isfinite(gh.astype(jnp.float32))))


def test_bad_input():
    h, W, b, y, _ = _data()
    with pytest.raises(ValueError, match="labels must be in"):
        chunked_cross_entropy(h, W, y.at[0].set(517))
    with pytest.raises(ValueError, match="labels must have shape"):
        chunked_cross_entropy(h, W, y[:5])
    with pytest.raises(ValueError, match="weight"):
        chunked_cross_entropy(h, W.T, y)
    with pytest.raises(ValueError, match="chunk_size"):
        chunked_cross_entropy(h, W, y, chunk_size=0)
    with pytest.raises(ValueError, match="integers"):
        chunked_cross_entropy(h, W, y.astype(jnp.float32))


def test_chunked_never_holds_the_logits():
    """Compiled temporary memory of loss + gradients: the chunked loss stays below the size of
    one [N, V] float32 logits array; the dense loss (the control) exceeds it."""
    N, d, V = 4096, 64, 8192
    shapes = (jax.ShapeDtypeStruct((N, d), jnp.float32), jax.ShapeDtypeStruct((d, V), jnp.float32),
              jax.ShapeDtypeStruct((N,), jnp.int32))
    logits_bytes = N * V * 4
    temp = {}
    for name, fn in (("dense", dense_cross_entropy),
                     ("chunked", lambda h, W, y: chunked_cross_entropy(h, W, y, chunk_size=512))):
        f = jax.jit(jax.value_and_grad(lambda h, W, y: fn(h, W, y).mean(), argnums=(0, 1)))
        temp[name] = f.lower(*shapes).compile().memory_analysis().temp_size_in_bytes
    assert temp["dense"] >= logits_bytes
    assert temp["chunked"] < logits_bytes / 2


@pytest.mark.parametrize("tie", [False, True])
def test_language_model_option(tie):
    kw = dict(vocab_size=300, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_len=12)
    rng = np.random.default_rng(0)
    tok = jnp.asarray(rng.integers(0, 300, (3, 12)), jnp.int32)
    tgt = jnp.asarray(rng.integers(0, 300, (3, 12)), jnp.int32)
    out = {}
    for chunked in (False, True):
        m = LanguageModel(TransformerConfig(**kw, chunked_lm_loss=chunked), tie_embeddings=tie,
                          rngs=nnx.Rngs(0))
        graphdef, params, rest = nnx.split(m, nnx.Param, ...)

        def f(p):
            return nnx.merge(graphdef, p, rest).loss(tok, tgt, chunk_size=7).mean()

        out[chunked] = jax.jit(jax.value_and_grad(f))(params)
        if not chunked:  # the dense branch is the logits of __call__
            logits = m(tok)
            ref = optax.softmax_cross_entropy_with_integer_labels(logits, tgt).mean()
            assert abs(float(out[False][0]) - float(ref)) <= 1e-6
    assert abs(float(out[True][0]) - float(out[False][0])) <= 1e-5 * abs(float(out[False][0]))
    for a, c in zip(jax.tree.leaves(out[True][1]), jax.tree.leaves(out[False][1])):
        assert float(jnp.max(jnp.abs(a - c))) <= 1e-5 * max(float(jnp.max(jnp.abs(c))), 1e-3)


def test_config_default_and_validation():
    assert TransformerConfig(vocab_size=100).chunked_lm_loss is None
    with pytest.raises(ValueError, match="chunked_lm_loss"):
        TransformerConfig(chunked_lm_loss="yes")
