"""Incremental decoding: the key/value cache against a full recompute, for every registered PE."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe
from posjax.models import LanguageModel, TransformerConfig, generate
from posjax.models.generate import _generate
from _registry_params import one_per_kind_params  # noqa: E402  (tests/models on sys.path)

PROMPT, NEW, VOCAB = 4, 6, 32
# The full recompute as one compiled program per PE and length (instead of XLA compiling every
# eager op of every new model and shape); the cached decoder is jitted already.
_forward = nnx.jit(lambda model, tokens: model(tokens))


def tiny_lm(name, *, num_layers=1, seed=0, **pe_options):
    cfg = TransformerConfig(vocab_size=VOCAB, num_layers=num_layers, d_model=16, num_heads=2,
                            d_ff=32, max_len=16, pe=name, pe_options=pe_options, causal=True)
    return LanguageModel(cfg, rngs=nnx.Rngs(seed))


def prompt(batch=2, length=PROMPT, seed=1):
    return jax.random.randint(jax.random.key(seed), (batch, length), 0, VOCAB)


def check_cache_matches_recompute(model, lengths=(PROMPT, PROMPT - 2)):
    """Cached generation from prompts of different lengths vs a full forward pass over each
    row's generated tokens alone.

    The full pass at step i sees exactly the prefix the uncached decoder sees, so its argmax
    equal to the generated token at every step means the two decoders emit the same tokens.
    """
    tokens, logits = generate(model, prompt(), max_new_tokens=NEW, return_logits=True,
                              prompt_lengths=lengths)
    assert tokens.shape == (2, PROMPT + NEW)
    for b, n in enumerate(lengths):
        np.testing.assert_array_equal(tokens[b, :n], prompt()[b, :n])
        assert not np.any(tokens[b, n + NEW:])
        full = _forward(model, tokens[b:b + 1, :n + NEW])[0, n - 1:-1]
        err = float(jnp.max(jnp.abs(full - logits[b])))
        assert err < 1e-5, f"cached logits differ from a full recompute by {err:.2e}"
        np.testing.assert_array_equal(tokens[b, n:n + NEW], jnp.argmax(full, -1))


@pytest.mark.parametrize("name", one_per_kind_params())  # every PE; one per kind by default
def test_cached_decoding_equals_full_recompute(name):
    model = tiny_lm(name)
    reasons = [p.kv_cache_unsupported() for p in model.transformer.pes]
    reason = next((r for r in reasons if r), None)
    if reason is not None:
        with pytest.raises(ValueError, match=f"PE '{name}' does not support incremental"):
            generate(model, prompt(), max_new_tokens=NEW)
        # the reference decoder works for every causal PE
        out = generate(model, prompt(), max_new_tokens=2, use_cache=False)
        full = model(out)[:, PROMPT - 1:-1]
        np.testing.assert_array_equal(out[:, PROMPT:], jnp.argmax(full, -1))
        return
    check_cache_matches_recompute(model)


@pytest.mark.slow
@pytest.mark.parametrize("name", pe.names())
def test_two_layer_cached_and_uncached_decoders_agree(name):
    model = tiny_lm(name, num_layers=2, seed=3)
    if any(p.kv_cache_unsupported() for p in model.transformer.pes):
        pytest.skip("declares no cache support (the registry test checks the error)")
    check_cache_matches_recompute(model)
    for kwargs in ({}, {"temperature": 0.7, "top_k": 5, "rng": jax.random.key(4)}):
        a = generate(model, prompt(), max_new_tokens=NEW, **kwargs)
        b = generate(model, prompt(), max_new_tokens=NEW, use_cache=False, **kwargs)
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name, options, reason", [
    ("rope_ntk", {"dynamic": True}, "current length"),
    ("cape", {"center": True}, "mean position"),
])
def test_option_dependent_cache_support_raises(name, options, reason):
    model = tiny_lm(name, **options)
    with pytest.raises(ValueError, match=reason):
        generate(model, prompt(), max_new_tokens=2)
    with pytest.raises(ValueError, match=reason):
        model.init_cache(2, 8)


def test_sampling_matches_reference_decoder_and_respects_top_k():
    model = tiny_lm("rope")
    key = jax.random.key(7)
    a, logits = generate(model, prompt(), max_new_tokens=NEW, temperature=1.5, top_k=3, rng=key,
                         return_logits=True)
    b = generate(model, prompt(), max_new_tokens=NEW, temperature=1.5, top_k=3, rng=key,
                 use_cache=False)
    np.testing.assert_array_equal(a, b)
    top3 = jax.lax.top_k(logits, 3)[1]
    assert bool(jnp.all(jnp.any(top3 == a[:, PROMPT:, None], -1)))
    # top_k=1 is greedy whatever the temperature; at T=1.5 over 3 tokens some draw is not argmax
    greedy = generate(model, prompt(), max_new_tokens=NEW)
    one = generate(model, prompt(), max_new_tokens=NEW, temperature=1.5, top_k=1, rng=key)
    np.testing.assert_array_equal(greedy, one)
    draws = [generate(model, prompt(), max_new_tokens=NEW, temperature=1.5, top_k=3,
                      rng=jax.random.key(s)) for s in range(3)]
    assert any(not np.array_equal(d, greedy) for d in draws)


def test_steps_do_not_recompile():
    model = tiny_lm("alibi")
    generate(model, prompt(seed=1), max_new_tokens=NEW)
    size = _generate._cache_size()
    generate(model, prompt(seed=2), max_new_tokens=NEW)
    assert _generate._cache_size() == size


def test_decode_with_position_offsets_is_shift_invariant_only_for_relative_pes():
    toks = prompt()
    out = {}
    for name in ("rope", "learned"):
        model = tiny_lm(name)
        runs = []
        for offset in (0, 5):
            cache = model.init_cache(2, 8)
            logits, _ = model.decode(toks, cache, positions=offset + jnp.arange(PROMPT))
            runs.append(logits)
        out[name] = float(jnp.max(jnp.abs(runs[0] - runs[1])))
    assert out["rope"] < 1e-5
    assert out["learned"] > 1e-3


def test_generate_rejects_bad_input():
    model = tiny_lm("rope")
    with pytest.raises(ValueError, match="causal"):
        cfg = model.config.replace(causal=False)
        generate(LanguageModel(cfg, rngs=nnx.Rngs(0)), prompt(), max_new_tokens=2)
    with pytest.raises(ValueError, match="vocabulary"):
        generate(model, prompt() + VOCAB, max_new_tokens=2)
    with pytest.raises(ValueError, match="integer"):
        generate(model, prompt().astype(jnp.float32), max_new_tokens=2)
    with pytest.raises(ValueError, match="prompt must be"):
        generate(model, jnp.zeros((3,), jnp.int32), max_new_tokens=2)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, prompt(), max_new_tokens=-1)
    with pytest.raises(ValueError, match="temperature"):
        generate(model, prompt(), max_new_tokens=2, temperature=-1.0)
    with pytest.raises(ValueError, match="top_k"):
        generate(model, prompt(), max_new_tokens=2, top_k=VOCAB + 1)
    with pytest.raises(ValueError, match="PRNG key"):
        generate(model, prompt(), max_new_tokens=2, temperature=1.0)
    with pytest.raises(ValueError, match="16 positions of PE 'learned'"):
        generate(tiny_lm("learned"), prompt(), max_new_tokens=13)
    assert generate(model, prompt(), max_new_tokens=0).shape == (2, PROMPT)


class _CumulativeGate(pe.PositionalEncoding):
    """A test PE in the pattern of gated cumulative positions: ``rotate`` appends a per-key gate
    coordinate (cached with the key), and the ``logits`` hook subtracts, for each query i and
    key j, the sum of the gates of the visible keys after j plus a contextual count
    ``sum_{t >= j visible} sigmoid(q_i . k_t)``."""

    hook = "rotate"

    def __init__(self, options, ctx, *, rngs):
        super().__init__(options, ctx)

    def rotate(self, q, k, q_pos, k_pos):
        gate = jax.nn.log_sigmoid(k.sum(-1, keepdims=True))
        return (jnp.concatenate([q, jnp.zeros_like(q[..., :1])], -1),
                jnp.concatenate([k, gate], -1))

    def logits(self, logits, q, k, q_pos, k_pos, mask):
        vis = jnp.ones(logits.shape, bool) if mask is None else jnp.broadcast_to(mask, logits.shape)
        after = lambda x: jnp.cumsum(x[..., ::-1], -1)[..., ::-1] - x  # sum over t > j
        gate = jnp.where(vis, jnp.moveaxis(k[..., -1], 1, -1)[:, :, None, :], 0.0)
        count = jnp.where(vis, jax.nn.sigmoid(jnp.einsum("bqhd,bkhd->bhqk", q, k)), 0.0)
        return logits + after(gate) - 0.5 * (after(count) + count)


@pytest.fixture
def cumulative_gate_pe():
    import dataclasses

    from posjax.encodings import registry

    @dataclasses.dataclass(frozen=True)
    class Options:
        pass

    registry.register("_test_cumulative_gate", options=Options)(_CumulativeGate)
    try:
        yield "_test_cumulative_gate"
    finally:
        registry._REGISTRY.pop("_test_cumulative_gate")


def test_contextual_logits_hook_decodes_and_packs(cumulative_gate_pe):
    model = tiny_lm(cumulative_gate_pe)
    check_cache_matches_recompute(model)
    tokens = prompt(batch=1, length=9)
    seg = jnp.array([[0] * 4 + [1] * 5])
    packed = nnx.jit(lambda m, t, s: m(t, segment_ids=s))(model, tokens, seg)
    np.testing.assert_allclose(packed[:, :4], _forward(model, tokens[:, :4]), atol=1e-5)
    np.testing.assert_allclose(packed[:, 4:], _forward(model, tokens[:, 4:]), atol=1e-5)
    # negative control: the hook does act (same weights without it give other logits)
    plain = tiny_lm("none")
    assert float(jnp.max(jnp.abs(_forward(plain, tokens) - _forward(model, tokens)))) > 1e-3
