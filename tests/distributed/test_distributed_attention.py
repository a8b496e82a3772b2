"""Attention implementation choice: the cuDNN -> XLA fallback (CPU) and the bf16 option."""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from posjax.encodings import alibi_bias
from posjax.models import LanguageModel, TransformerConfig
from posjax.models import attention as attn

F32_TOL = 1e-6  # identical XLA kernels: only the warning path differs


@pytest.fixture(autouse=True)
def fresh_warnings():
    attn._FALLBACK_WARNED.clear()
    attn._cudnn_compiles.cache_clear()
    yield
    attn._FALLBACK_WARNED.clear()


def _qkv(dtype=jnp.float32, T=8, H=2, D=8):
    rng = np.random.default_rng(0)
    return tuple(jnp.asarray(rng.standard_normal((2, T, H, D)), dtype) for _ in range(3))


def test_cudnn_without_gpu_falls_back_once_with_bias():
    q, k, v = _qkv()
    bias = alibi_bias(2, jnp.arange(8), jnp.arange(8))[None]
    ref = attn.dot_product_attention(q, k, v, bias=bias, mask=None, scale=0.35,
                                     implementation="xla")
    with pytest.warns(RuntimeWarning, match="no GPU backend.*falling back to 'xla'"):
        out = attn.dot_product_attention(q, k, v, bias=bias, mask=None, scale=0.35,
                                         implementation="cudnn")
    np.testing.assert_allclose(out, ref, atol=F32_TOL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second call is silent
        out2 = jax.jit(lambda q: attn.dot_product_attention(
            q, k, v, bias=bias, mask=None, scale=0.35, implementation="cudnn"))(q)
    np.testing.assert_allclose(out2, ref, atol=F32_TOL)


def test_unsupported_reasons(monkeypatch):
    q, k, _ = _qkv()
    assert "no GPU backend" in attn.cudnn_unsupported(q, k, None, None, 1.0)
    monkeypatch.setattr(attn.jax, "default_backend", lambda: "gpu")
    assert "dtype float32" in attn.cudnn_unsupported(q, k, None, None, 1.0)
    qb, kb, _ = _qkv(jnp.bfloat16, D=12)
    assert "head dim 12" in attn.cudnn_unsupported(qb, kb, None, None, 1.0)
    qb, kb, _ = _qkv(jnp.bfloat16)
    bad_bias = jnp.zeros((1, 2, 8, 4), jnp.bfloat16)
    assert "bias shape" in attn.cudnn_unsupported(qb, kb, bad_bias, None, 1.0)


def test_kernel_build_failure_falls_back(monkeypatch):
    """When the probe compile fails (as it does here: no cuDNN) the reason names the error."""
    monkeypatch.setattr(attn.jax, "default_backend", lambda: "gpu")
    q, k, v = _qkv(jnp.bfloat16)
    reason = attn.cudnn_unsupported(q, k, None, None, 1.0)
    assert reason is not None and "cuDNN" in reason
    with pytest.warns(RuntimeWarning, match="falling back"):
        out = attn.dot_product_attention(q, k, v, bias=None, mask=None, scale=1.0,
                                         implementation="cudnn")
    ref = jax.nn.dot_product_attention(q, k, v, scale=1.0, implementation="xla")
    np.testing.assert_array_equal(np.asarray(out, np.float32), np.asarray(ref, np.float32))


@pytest.mark.parametrize("pe", ["alibi", "t5"])
def test_model_with_cudnn_config_matches_xla(pe):
    cfg = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=8, pe=pe)
    tokens = jnp.arange(16).reshape(2, 8) % 16
    run = nnx.jit(lambda m, t: m(t))
    ref = run(LanguageModel(cfg.replace(attention_impl="xla"), rngs=nnx.Rngs(0)), tokens)
    with pytest.warns(RuntimeWarning, match="falling back"):
        out = run(LanguageModel(cfg.replace(attention_impl="cudnn"), rngs=nnx.Rngs(0)), tokens)
    np.testing.assert_allclose(out, ref, atol=F32_TOL)


def test_bf16_bias_stays_float32_on_the_xla_path():
    """In bf16 the XLA path adds the PE bias in float32 (its logits are float32)."""
    q, k, v = _qkv(jnp.bfloat16, T=64)
    bias = alibi_bias(2, jnp.arange(64), jnp.arange(64))[None]  # up to -31.5: not exact in bf16
    run = jax.jit(lambda q, k, v, b: attn.dot_product_attention(
        q, k, v, bias=b, mask=None, scale=0.35, implementation="xla"))
    out = run(q, k, v, bias)
    exact = run(q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32), bias)
    rounded = jax.nn.dot_product_attention(q, k, v, bias=bias.astype(jnp.bfloat16), scale=0.35)
    err = float(jnp.max(jnp.abs(out.astype(jnp.float32) - exact)))
    assert out.dtype == jnp.bfloat16
    assert err <= float(jnp.max(jnp.abs(rounded.astype(jnp.float32) - exact)))


def test_bf16_gradients_are_finite_with_float32_master_weights():
    """dtype="bfloat16": bf16 compute, float32 parameters and gradients, finite values (the full
    optimiser step in bf16 is the GPU test ``test_bf16_cudnn_training_step_is_finite``)."""
    cfg = TransformerConfig(vocab_size=32, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=16, pe="alibi", dtype="bfloat16")
    graphdef, params, rest = nnx.split(LanguageModel(cfg, rngs=nnx.Rngs(0)), nnx.Param, ...)
    tokens = jnp.arange(64).reshape(4, 16) % 32

    def loss(p):
        logits = nnx.merge(graphdef, p, rest)(tokens)
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens).mean()

    value, grads = jax.jit(jax.value_and_grad(loss))(params)
    assert np.isfinite(float(value))
    leaves = jax.tree.leaves(grads)
    assert all(g.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(g))) for g in leaves)
    assert max(float(jnp.max(jnp.abs(g))) for g in leaves) > 0
