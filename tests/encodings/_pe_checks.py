"""Shared checks for the per-PE test files: model build + one SGD step, causality, shift
invariance of position logits, and rotation norms."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import posjax.encodings as pe_lib
from posjax.models import LanguageModel, TransformerConfig

CTX = dict(d_model=16, num_heads=2, max_len=64, num_layers=1)


def train_one_step(name: str, *, causal: bool = True, **options) -> tuple[float, float]:
    """Build a tiny LanguageModel with PE ``name``, take one Adam step on next-token loss.

    Returns (loss before, loss after the step on the same batch); both finite.
    """
    cfg = TransformerConfig(vocab_size=13, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=16, pe=name, causal=causal, pe_options=options)
    model = LanguageModel(cfg, rngs=nnx.Rngs(0))
    tokens = jax.random.randint(jax.random.key(0), (2, 10), 0, 13)
    opt = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    def loss_fn(m):
        logits = m(tokens[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()

    @nnx.jit
    def step(m, o):
        loss, grads = nnx.value_and_grad(loss_fn)(m)
        o.update(m, grads)
        finite = jnp.all(jnp.asarray([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)]))
        return loss, finite

    before, finite = step(model, opt)
    assert bool(finite)
    after = nnx.jit(loss_fn)(model)
    assert np.isfinite(float(before)) and np.isfinite(float(after))
    return float(before), float(after)


def causal_outputs_ignore_the_future(name: str, **options) -> None:
    """A causal LanguageModel's logits at t < 6 do not change when tokens >= 6 change."""
    cfg = TransformerConfig(vocab_size=11, num_layers=2, d_model=16, num_heads=2, d_ff=16,
                            max_len=12, pe=name, causal=True, pe_options=options)
    model = LanguageModel(cfg, rngs=nnx.Rngs(0))
    tokens = jnp.array([[1, 5, 2, 7, 3, 9, 4, 4, 6, 8]])
    a, b = model(tokens), model(tokens.at[:, 6:].set(10))
    np.testing.assert_array_equal(np.asarray(a[:, :6]), np.asarray(b[:, :6]))
    assert float(jnp.abs(a[:, 6:] - b[:, 6:]).max()) > 1e-4


def rotated_logits(pe, pos, *, dtype=jnp.float32, seed=7) -> jax.Array:
    """``[H, T, T]`` logits ``<R_i q, R_j k>`` of fixed random q, k (same vector at every position)."""
    h, d = pe.ctx.num_heads, pe.ctx.head_dim
    kq, kk = jax.random.split(jax.random.key(seed))
    q = jax.random.normal(kq, (1, 1, h, d), dtype)
    k = jax.random.normal(kk, (1, 1, h, d), dtype)
    n = len(pos)
    q, k = jnp.broadcast_to(q, (1, n, h, d)), jnp.broadcast_to(k, (1, n, h, d))
    qr, kr = pe.rotate(q, k, pos[None], pos[None])
    return jnp.einsum("bqhd,bkhd->hqk", qr, kr)


def shift_gap(fn, pos, shifts=(5, 37)) -> float:
    """Largest ``|fn(pos + s) - fn(pos)|`` over the shifts."""
    base = np.asarray(fn(pos))
    return max(float(np.abs(np.asarray(fn(pos + s)) - base).max()) for s in shifts)


def make(name: str, **kw):
    ctx = {**CTX, **{k: kw.pop(k) for k in list(kw) if k in ("d_model", "num_heads", "max_len",
                                                               "num_layers", "causal", "head_dim")}}
    return pe_lib.make(name, rngs=nnx.Rngs(1), **ctx, **kw)


def _lm(name: str, causal: bool, options: dict) -> LanguageModel:
    cfg = TransformerConfig(vocab_size=13, num_layers=2, d_model=16, num_heads=2, d_ff=32,
                            max_len=16, pe=name, causal=causal, pe_options=options)
    return LanguageModel(cfg, rngs=nnx.Rngs(0))


def cached_decoding_gap(name: str, **options) -> float:
    """Max |logits of cached decoding (4-token prompt, then 1 token at a time) - full pass|."""
    model = _lm(name, True, options)
    tokens = jax.random.randint(jax.random.key(1), (2, 9), 0, 13)
    full = model(tokens)
    cache = model.init_cache(2, 12)
    out, cache = model.decode(tokens[:, :4], cache)
    steps = [out]
    for t in range(4, 9):
        out, cache = model.decode(tokens[:, t:t + 1], cache)
        steps.append(out)
    return float(jnp.abs(jnp.concatenate(steps, axis=1) - full).max())


def packing_gap(name: str, *, causal: bool, **options) -> float:
    """Max |logits of a packed row (segments 4, 3, 5) - each segment run alone|."""
    model = _lm(name, causal, options)
    tokens = jax.random.randint(jax.random.key(2), (1, 12), 0, 13)
    seg = jnp.array([[0] * 4 + [1] * 3 + [2] * 5])
    packed = model(tokens, segment_ids=seg)
    gaps = []
    for lo, hi in ((0, 4), (4, 7), (7, 12)):
        alone = model(tokens[:, lo:hi])
        gaps.append(float(jnp.abs(packed[:, lo:hi] - alone).max()))
    return max(gaps)


def assert_cache_and_packing(name: str, **options) -> None:
    """Cached decoding equals the full pass and packed rows equal their segments (1e-5),
    causal and bidirectional."""
    assert cached_decoding_gap(name, **options) < 1e-5
    assert packing_gap(name, causal=True, **options) < 1e-5
    assert packing_gap(name, causal=False, **options) < 1e-5


def assert_relative_and_norm_preserving(pe) -> None:
    """A rotary PE's logits depend on i - j only and its rotation keeps every vector's norm."""
    assert pe.is_relative and pe.hook == "rotate"
    assert shift_gap(lambda p: rotated_logits(pe, p), jnp.arange(8)) < 2e-5
    q = jax.random.normal(jax.random.key(3), (2, 6, 2, 8))
    pos = jnp.arange(6)[None] * 7
    qr, _ = pe.rotate(q, q, pos, pos)
    np.testing.assert_allclose(np.linalg.norm(qr, axis=-1), np.linalg.norm(q, axis=-1), rtol=1e-5)


def constant_qk(key: int, length: int, heads: int = 4, dim: int = 8):
    """``(q, k)`` of shape ``[1, length, heads, dim]``: one random vector each, repeated over
    positions, so any change of the logits along a row comes from the rotation alone."""
    kq, kk = jax.random.split(jax.random.key(key))
    q = jnp.broadcast_to(jax.random.normal(kq, (1, 1, heads, dim)), (1, length, heads, dim))
    k = jnp.broadcast_to(jax.random.normal(kk, (1, 1, heads, dim)), (1, length, heads, dim))
    return q, k


@nnx.jit
def _rotate_and_score(module, q, k, pos):
    qr, kr = module.rotate(q, k, pos[None], pos[None])
    return jnp.einsum("bqhd,bkhd->bhqk", qr, kr)


def constant_qk_logits(module, pos, key: int = 0) -> np.ndarray:
    """``[1, H, T, T]`` logits of :func:`constant_qk` vectors rotated by ``module`` at ``pos``."""
    q, k = constant_qk(key, len(pos))
    return np.asarray(_rotate_and_score(module, q, k, pos))


@nnx.jit(static_argnames="weights")
def forward_at(model, tokens, positions, weights=False):
    """``model(tokens, positions=...)`` jitted; with ``weights`` also the attention weights."""
    return model(tokens, positions=positions, return_attention=weights)
