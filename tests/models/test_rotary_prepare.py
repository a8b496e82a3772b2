"""Rotary PEs' per-forward ``prepare``: the shared cos/sin tables against a per-layer computation.

The model computes ``pe.prepare`` once per forward (a host float64 table for static positions, a
traced table for explicit ``[B, T]`` positions) and passes it to every layer's
``rotate_prepared``. The reference here recomputes ``prepare`` inside every layer, separately for
q and k, from traced-style (``jnp``) positions: the computation before sharing.
"""
import inspect
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe
from posjax.encodings.base import PositionalEncoding
from posjax.encodings.rope import RoPE, rope_angles, rope_frequencies, rope_tables
from posjax.models import LanguageModel, TransformerConfig

ROTARY = [n for n in pe.names() if "rotate" in pe.info(n).hooks]
PREPARED = [n for n in ROTARY if pe.info(n).module.prepare is not PositionalEncoding.prepare]
T, VOCAB = 8, 32


def one_per_prepare(names):
    """``pytest.param`` per PE: by default the first PE of each distinct ``prepare`` (and
    ``rotate_prepared``) implementation runs, the others carry the ``slow`` mark."""
    seen, out = set(), []
    for name in names:
        cls = pe.info(name).module
        kind = (cls.prepare, cls.rotate_prepared)
        out.append(pytest.param(name, id=name, marks=[pytest.mark.slow] if kind in seen else []))
        seen.add(kind)
    return out


def tiny_lm(name, *, causal=False, seed=0):
    cfg = TransformerConfig(vocab_size=VOCAB, num_layers=2, d_model=16, num_heads=2, d_ff=32,
                            max_len=16, pe=name, causal=causal)
    return LanguageModel(cfg, rngs=nnx.Rngs(seed))


def tokens(batch=2, length=T, seed=1):
    return jax.random.randint(jax.random.key(seed), (batch, length), 0, VOCAB)


def per_layer(monkeypatch, model):
    """Make every layer recompute ``prepare`` for q and for k from ``jnp`` positions."""
    for cls in {type(p) for p in model.transformer.pes}:
        original = cls.rotate_prepared

        def unshared(self, q, k, q_pos, k_pos, prepared, _original=original):
            del prepared
            q_pos, k_pos = jnp.asarray(q_pos), jnp.asarray(k_pos)  # distinct: no q/k sharing
            return _original(self, q, k, q_pos, k_pos, self.prepare(q_pos, k_pos))

        monkeypatch.setattr(cls, "rotate_prepared", unshared)


def _uses_rope_angles(cls) -> bool:
    """Whether the PE class rotates by the shared angle function: it keeps RoPE's ``rotate`` or
    its module calls the RoPE angle/table functions."""
    src = inspect.getsource(sys.modules[cls.__module__])
    calls = r"(?<!\w)(apply_rope|rope_tables|rope_angles|rope_table_pair)\("
    return cls.rotate is RoPE.rotate or re.search(calls, src) is not None


def test_every_rope_angles_user_prepares():
    """Every rotary PE that uses the shared angle function has a prepare step (returning
    tables); the others (own angle functions) return None."""
    users = [n for n in ROTARY if _uses_rope_angles(pe.info(n).module)]
    assert {"rope", "xpos", "rope_yarn", "rope2d_axial", "mla", "cayley_string"} <= set(users)
    assert sorted(users) == sorted(PREPARED)
    pos = np.arange(4)[None]
    for name in ROTARY:
        got = pe.make(name, d_model=16, num_heads=2, max_len=16).prepare(pos, pos)
        assert (got is None) == (name not in PREPARED), name


@pytest.mark.parametrize("name", one_per_prepare(ROTARY))
@pytest.mark.parametrize("kind", ["static", "batch"])
def test_shared_tables_equal_per_layer_computation(name, kind, monkeypatch):
    model = tiny_lm(name)
    toks = tokens()
    # static: the default arange(T) (host table); batch: explicit [B, T] positions, one row
    # shifted (traced tables under jit)
    positions = None if kind == "static" else jnp.arange(T)[None] + jnp.array([[0], [5]])
    forward = nnx.jit(lambda m, t, p: m(t, positions=p))
    shared = forward(model, toks, positions)
    per_layer(monkeypatch, model)
    reference = model(toks, positions=positions)
    scale = float(jnp.max(jnp.abs(reference)))
    np.testing.assert_allclose(np.asarray(shared), np.asarray(reference), rtol=0,
                               atol=2e-5 * max(scale, 1.0))


def _count(jaxpr, primitive):
    n = 0
    for eqn in jaxpr.eqns:
        n += eqn.primitive.name == primitive
        for sub in jax.core.jaxprs_in_params(eqn.params):
            n += _count(sub, primitive)
    return n


@pytest.mark.parametrize("name", ["rope", "rope2d_axial"])
def test_cos_is_computed_once_per_forward(name):
    """Two layers, q and k: no cos at all in the jitted step for static positions (a constant
    table), one cos per angle table for explicit [B, T] positions (1 for rope, 2 for the two
    axes of rope2d_axial)."""
    model = tiny_lm(name)
    graph, state = nnx.split(model)
    toks = tokens()

    def jaxpr(positions):
        def f(s, t, p):
            return nnx.merge(graph, s)(t, positions=p)
        return jax.make_jaxpr(f)(state, toks, positions).jaxpr

    assert _count(jaxpr(None), "cos") == 0
    explicit = jnp.broadcast_to(jnp.arange(T), (2, T))
    assert _count(jaxpr(explicit), "cos") == (2 if name == "rope2d_axial" else 1)


def test_host_table_matches_extended_precision_angles():
    """The float64 host table and the traced float32 reduction agree to float32 at large
    positions (negative control: the naive float32 product does not)."""
    pos = np.array([0, 1, 4097, 2**18 + 3, 2**20 - 1], np.int64)
    theta = rope_frequencies(32, 10000.0, np.float64)
    cos_h, sin_h = rope_tables(pos, theta)
    cos_t, sin_t = jax.jit(lambda p: rope_tables(p, theta))(jnp.asarray(pos, jnp.int32))
    ref = pos[:, None].astype(np.float64) * theta
    np.testing.assert_allclose(cos_h, np.cos(ref), atol=1e-7)
    np.testing.assert_allclose(sin_h, np.sin(ref), atol=1e-7)
    np.testing.assert_allclose(np.asarray(cos_t), np.cos(ref), atol=1e-5)
    np.testing.assert_allclose(np.asarray(sin_t), np.sin(ref), atol=1e-5)
    naive = np.float32(pos[:, None]) * np.float32(theta)
    assert np.max(np.abs(np.cos(naive.astype(np.float64)) - np.cos(ref))) > 1e-3
    assert rope_tables(pos, theta)[0] is cos_h  # cached: computed once per positions/options
    ang = rope_angles(jnp.asarray(pos, jnp.int32), theta)
    np.testing.assert_allclose(np.cos(np.asarray(ang, np.float64)), np.cos(ref), atol=1e-5)


@pytest.mark.parametrize("name", one_per_prepare(PREPARED))
def test_decode_step_with_cache_equals_recompute(name):
    model = tiny_lm(name, causal=True, seed=2)
    if any(p.kv_cache_unsupported() for p in model.transformer.pes):
        pytest.skip("declares no key/value-cache support (tested in test_generate)")
    toks = tokens(length=6)
    cache = model.init_cache(2, 8)
    decode = nnx.jit(lambda m, t, c: m.decode(t, c))  # compiled programs, not every eager op
    _, cache = decode(model, toks[:, :5], cache)
    step, _ = decode(model, toks[:, 5:], cache)
    full = nnx.jit(lambda m, t: m(t))(model, toks)[:, 5:]
    np.testing.assert_allclose(np.asarray(step), np.asarray(full), rtol=0, atol=1e-5)
