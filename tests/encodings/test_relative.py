"""The relative (shift-invariance) property of every 1-D PE, and causality in a model.

A PE is relative iff b(i+s, j+s) = b(i, j) (bias), or
<q'_{i+s}, k'_{j+s}> = <q'_i, k'_j> for fixed q, k (rotate); tolerance 1e-5 in float32, s up to 4x
the length. Each PE's ``is_relative`` flag is asserted by this test and absolute PEs must fail it.
Additive / structural PEs are scored through the logits (u + p_i)^T A (u + p_j) of a fixed vector
u and a random A, which is shift-invariant only for a relative encoding.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe_lib
from posjax.models import LanguageModel, TransformerConfig

T = 8
SHIFTS = (5, 4 * T)
CTX = dict(d_model=16, num_heads=2, max_len=64, num_layers=2, causal=True)
# Options that make the property observable at tiny sizes (recorded here, not defaults).
TEST_OPTIONS = {
    "fire": {"base_threshold": 4.0},  # L = 4 < T: the progressive normaliser is active
    "tupe": {"init_std": 1.0},
    "hope": {"train_length": 16},
}
EXISTING = ["none", "sinusoidal", "learned", "rope", "alibi", "t5"]
CATALOGUE = ["xpos", "kerple_log", "kerple_power", "fire", "cape", "tupe", "lape", "complex",
             "hope", "pope", "gridpe", "hype", "positional_attention", "rope_linear", "rope_ntk",
             "rope_yarn", "rope_llama3", "learned_interpolated"]


def build(name):
    return pe_lib.make(name, rngs=nnx.Rngs(1), **CTX, **TEST_OPTIONS.get(name, {}))


def position_logits(pe, pos):
    """[H, T, T] (or [T, T]) positional logits of ``pe`` at positions ``pos [T]``."""
    key = jax.random.key(7)
    d, h = CTX["d_model"], CTX["num_heads"]
    if pe.hook == "bias":
        return pe.bias(pos, pos)
    if pe.hook == "rotate":
        kq, kk = jax.random.split(key)
        q = jax.random.normal(kq, (1, 1, h, d // h))
        k = jax.random.normal(kk, (1, 1, h, d // h))
        q, k = q / jnp.linalg.norm(q, axis=-1, keepdims=True), k / jnp.linalg.norm(k, axis=-1, keepdims=True)
        q = jnp.broadcast_to(q, (1, len(pos), h, d // h))
        k = jnp.broadcast_to(k, (1, len(pos), h, d // h))
        qr, kr = pe.rotate(q, k, pos[None], pos[None])
        return jnp.einsum("bqhd,bkhd->hqk", qr, kr)
    ku, ka = jax.random.split(key)
    u = jnp.broadcast_to(0.5 * jax.random.normal(ku, (1, 1, d)), (1, len(pos), d))
    if pe.hook == "embed":
        v = pe.embed(u, pos[None])
    else:  # attention / module: what the q/k projections of block 0 read
        v, _ = pe.attention_input(u, pos[None], 0)
    a = jax.random.normal(ka, (d, d)) / np.sqrt(d)
    return jnp.einsum("bqd,de,bke->qk", v, a, v)


@pytest.mark.parametrize("name", EXISTING + CATALOGUE)
def test_relative_flag_matches_shift_invariance(name):
    pe = build(name)
    pos = jnp.arange(T)
    base = np.asarray(position_logits(pe, pos))
    diffs = [float(np.abs(np.asarray(position_logits(pe, pos + s)) - base).max()) for s in SHIFTS]
    if pe.is_relative:
        assert max(diffs) < 1e-5, (name, diffs)
    else:
        assert max(diffs) > 1e-3, (name, diffs)


def test_fire_is_relative_below_its_threshold():
    fire = pe_lib.make("fire", rngs=nnx.Rngs(0), **CTX)  # L = 512 > every position used
    pos = jnp.arange(T)
    base = fire.bias(pos, pos)
    assert float(jnp.abs(fire.bias(pos + 4 * T, pos + 4 * T) - base).max()) < 1e-5


@pytest.mark.parametrize("name", CATALOGUE + ["cpe"])
def test_causal_model_never_attends_to_the_future(name):
    cfg = TransformerConfig(vocab_size=11, num_layers=2, d_model=16, num_heads=2, d_ff=16,
                            max_len=12, pe=name, causal=True, pe_options=TEST_OPTIONS.get(name, {}))
    model = LanguageModel(cfg, rngs=nnx.Rngs(0))
    tokens = jnp.array([[1, 5, 2, 7, 3, 9, 4, 4, 6, 8]])
    changed = tokens.at[:, 6:].set(10)
    a, b = model(tokens), model(changed)
    assert bool(jnp.isfinite(a).all())
    np.testing.assert_array_equal(np.asarray(a[:, :6]), np.asarray(b[:, :6]))
    assert float(jnp.abs(a[:, 6:] - b[:, 6:]).max()) > 1e-4  # the change does reach later tokens
