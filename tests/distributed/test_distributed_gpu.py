"""GPU checks (``pytest -m gpu``, run by ``benchmarks/gpu_check.sh``); skipped without a GPU.

cuDNN fused attention must agree with XLA attention (jax's and posjax's default einsum path),
with and without an ALiBi / T5 bias,
forward and backward, in bfloat16; and a bf16 training step of a BERT-shaped encoder must be
finite and must not fall back from cuDNN. Tolerances are bf16 ones: both kernels round q, k, v
and the output to bf16 (8 mantissa bits, relative step 2^-8 = 3.9e-3) but accumulate in float32.
"""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(jax.default_backend() != "gpu", reason="needs a GPU")]

BF16_TOL = 2e-2  # a few bf16 ulps of O(1) attention outputs


def _inputs(B=2, T=128, H=4, D=64, seed=0):
    ks = jax.random.split(jax.random.key(seed), 3)
    return tuple(jax.random.normal(k, (B, T, H, D), jnp.bfloat16) for k in ks)


def _bias(kind: str, H: int, T: int):
    from posjax.encodings import alibi_bias, t5_bucket

    pos = jnp.arange(T)
    if kind == "alibi":
        return alibi_bias(H, pos, pos)[None]
    table = 0.5 * jax.random.normal(jax.random.key(1), (32, H))
    buckets = t5_bucket(pos[None, :] - pos[:, None])
    return jnp.moveaxis(table[buckets], -1, 0)[None]


@pytest.mark.parametrize("kind", ["none", "alibi", "t5"])
def test_cudnn_matches_xla_forward_and_backward(kind):
    from posjax.models import attention as attn

    q, k, v = _inputs()
    bias = None if kind == "none" else _bias(kind, q.shape[2], q.shape[1])
    assert attn.cudnn_unsupported(q, k, bias, None, 0.125) is None

    def loss(q, k, v, impl):
        if impl == "posjax_xla":  # the default path of SelfAttention (two einsums)
            out = attn.xla_attention(q, k, v, bias=bias, mask=None, scale=0.125)
        else:
            out = attn.dot_product_attention(q, k, v, bias=bias, mask=None, scale=0.125,
                                             implementation=impl)
        return jnp.sum(out.astype(jnp.float32) ** 2), out

    def run(impl):
        return jax.jit(jax.value_and_grad(lambda *a: loss(*a, impl), argnums=(0, 1, 2),
                                          has_aux=True))(q, k, v)

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no fallback allowed here
        (_, out_c), g_c = run("cudnn")
    for impl in ("xla", "posjax_xla"):
        (_, out_x), g_x = run(impl)
        np.testing.assert_allclose(np.asarray(out_c, np.float32), np.asarray(out_x, np.float32),
                                   atol=BF16_TOL, rtol=BF16_TOL)
        for a, b in zip(g_c, g_x):
            scale = float(jnp.max(jnp.abs(b.astype(jnp.float32))))
            np.testing.assert_allclose(np.asarray(a, np.float32) / scale,
                                       np.asarray(b, np.float32) / scale, atol=BF16_TOL)


@pytest.mark.parametrize("pe", ["none", "alibi", "t5"])
def test_bf16_cudnn_training_step_is_finite(pe):
    from posjax.models import LanguageModel, TransformerConfig
    from posjax.training import TrainConfig, make_optimizer, make_train_step

    cfg = TransformerConfig(vocab_size=512, num_layers=2, d_model=256, num_heads=4, d_ff=1024,
                            max_len=128, pe=pe, dtype="bfloat16", attention_impl="cudnn")
    model = LanguageModel(cfg, rngs=nnx.Rngs(0))

    def loss_fn(m, batch, key):
        logits = m(batch["tokens"])
        return optax.softmax_cross_entropy_with_integer_labels(
            logits, batch["tokens"]).mean(), {}

    tx = make_optimizer(TrainConfig(learning_rate=1e-3))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    step = make_train_step(graphdef, loss_fn, tx, 0)
    batch = {"tokens": jax.random.randint(jax.random.key(0), (8, 128), 0, 512)}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # cuDNN must take these shapes
        _, _, loss, _, finite = step(params, rest, tx.init(params), batch, jnp.int32(0))
    assert bool(finite) and np.isfinite(float(loss))


def test_sharded_hellinger_on_gpu_matches_single_device_path():
    from posjax import distributed as dist
    from posjax.geometry import hellinger_matrix

    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.full(4096, 0.1), 256).astype(np.float32)
    P[7] = P[3]
    D0 = hellinger_matrix(P)
    D1 = dist.sharded_hellinger_matrix(P)
    assert float(jnp.max(jnp.abs(D0 - D1))) <= 2e-6


def test_hellinger_on_gpu_is_full_float32_not_tf32():
    """The Gram GEMM runs at HIGHEST precision: on an NVIDIA GPU the default float32 matmul
    rounds its inputs to TF32 (10 mantissa bits; a simulated TF32 Gram gives errors of 1.8e-5
    here); the result must stay within float32 rounding (4e-7 on a CPU) of a float64 one."""
    from posjax.geometry import hellinger_matrix

    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.full(4096, 0.1), 384)
    D = np.asarray(hellinger_matrix(P.astype(np.float32)), np.float64)
    S = np.sqrt(P)
    ref = np.sqrt(np.maximum(2.0 - 2.0 * (S @ S.T), 0.0))
    np.fill_diagonal(ref, 0.0)
    assert np.max(np.abs(D - ref)) <= 2e-6
