"""The relative (shift-invariance) property of every registered PE, and causality in a model.

A PE is relative iff its positional logits satisfy b(i+s, j+s) = b(i, j). The probe runs every
hook the PE overrides, in the model's order, on a fixed content vector u at every position:
``embed`` adds the PE to u, ``attention_input`` gives the q/k input, fixed random projections
make q and k, ``rotate`` transforms them, ``bias`` is added to the logits and ``block_output``
transforms the stream that the next block's logits read. Tolerance 1e-5 in float32, s up to 4x
the length; each PE's ``is_relative`` flag is asserted and absolute PEs must fail it. The test
runs over ``posjax.encodings.names()``: a PE that needs options to show its position dependence
at this size declares them (``probe_options``); one that a position shift cannot probe says why
(``probe_unsupported``), and that reason is reported as the skip reason.
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


def build(name):
    return pe_lib.make(name, rngs=nnx.Rngs(1), **CTX, **pe_lib.info(name).module.probe_options)


def _logits(x, pe, pos, key):
    """Positional logits ``[H, T, T]`` of the stream ``x [1, T, d]`` through q/k projections."""
    d, h = CTX["d_model"], CTX["num_heads"]
    hooks = pe.hooks
    qk, _ = pe.attention_input(x, pos[None], 0) if "attention_input" in hooks else (x, x)
    kq, kk = jax.random.split(key)
    q = (qk @ (jax.random.normal(kq, (d, d)) / np.sqrt(d))).reshape(1, len(pos), h, d // h)
    k = (qk @ (jax.random.normal(kk, (d, d)) / np.sqrt(d))).reshape(1, len(pos), h, d // h)
    if "rotate" in hooks:
        q, k = pe.rotate(q, k, pos[None], pos[None])
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k)
    if "bias" in hooks:
        logits = logits + jnp.broadcast_to(pe.bias(pos, pos), logits.shape)
    if "logits" in hooks:
        logits = pe.logits(logits, q, k, pos[None], pos[None], None)
    return logits[0]


def position_logits(pe, pos):
    """[H, T, T] positional logits of ``pe`` at positions ``pos [T]`` (every hook it overrides)."""
    key = jax.random.key(7)
    ku, k0, k1 = jax.random.split(key, 3)
    d = CTX["d_model"]
    x = jnp.broadcast_to(0.5 * jax.random.normal(ku, (1, 1, d)), (1, len(pos), d))
    if "embed" in pe.hooks:
        x = pe.embed(x, pos[None])
    out = _logits(x, pe, pos, k0)
    if "block_output" in pe.hooks:  # what the next block's logits read
        out = jnp.concatenate([out, _logits(pe.block_output(x, pos[None], 0), pe, pos, k1)])
    return out


def test_every_pe_declares_its_hooks_by_overriding_them():
    for name in pe_lib.names():
        entry = pe_lib.info(name)
        assert entry.hooks == entry.module.hooks, name
        assert (name == "none") == (not entry.hooks), (name, entry.hooks)


@pytest.mark.parametrize("name", pe_lib.names())
def test_relative_flag_matches_shift_invariance(name):
    reason = pe_lib.info(name).module.probe_unsupported
    if reason:
        pytest.skip(f"{name}: {reason}")
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


@pytest.mark.parametrize("name", pe_lib.names())
def test_causal_model_never_attends_to_the_future(name):
    module = pe_lib.info(name).module
    cfg = TransformerConfig(vocab_size=11, num_layers=2, d_model=16, num_heads=2, d_ff=16,
                            max_len=16, pe=name, causal=True, pe_options=dict(module.probe_options))
    model = LanguageModel(cfg, rngs=nnx.Rngs(0))
    tokens = jnp.array([[1, 5, 2, 7, 3, 9, 4, 4, 6, 8]])
    changed = tokens.at[:, 6:].set(10)
    a, b = model(tokens), model(changed)
    assert bool(jnp.isfinite(a).all())
    np.testing.assert_array_equal(np.asarray(a[:, :6]), np.asarray(b[:, :6]))
    assert float(jnp.abs(a[:, 6:] - b[:, 6:]).max()) > 1e-4  # the change does reach later tokens
