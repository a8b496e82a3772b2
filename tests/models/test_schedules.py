"""Per-layer schedules (posjax.models.schedules): masks against NumPy, cached decoding against a
full recompute (the windowed layers' ring buffer wraps), packed rows against segments alone."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from posjax.models import LanguageModel, Transformer, TransformerConfig, generate
from posjax.models import schedules as S

VOCAB = 32


def np_mask(kind, q, k, *, causal, window=None, chunk=None):
    """Independent NumPy statement of the three masks (True = attend), [Tq, Tk]."""
    out = np.ones((len(q), len(k)), bool)
    for i, p in enumerate(q):
        for j, r in enumerate(k):
            if causal and r > p:
                out[i, j] = False
            elif kind == "sliding":
                out[i, j] = (p - r < window) if causal else abs(p - r) <= window // 2
            elif kind == "chunked":
                out[i, j] = p // chunk == r // chunk
    return out


@pytest.mark.parametrize("kind,causal", [("sliding", True), ("sliding", False),
                                         ("chunked", True), ("chunked", False), ("full", True)])
def test_masks_match_numpy(kind, causal):
    q = np.array([0, 1, 2, 5, 8, 9, 13])
    k = np.array([0, 2, 3, 4, 5, 8, 12, 13])
    got = S.layer_kind_mask(kind, q, k, causal=causal, sliding_window=4, attention_chunk_size=4)
    if causal:
        got = S.and_masks(got, jnp.asarray(k[None, :] <= q[:, None])[None, None])
    want = np_mask(kind, q, k, causal=causal, window=4, chunk=4)
    if got is None:
        assert kind == "full" and not causal
    else:
        np.testing.assert_array_equal(np.asarray(got)[0, 0], want)


def test_bad_schedules_raise():
    with pytest.raises(ValueError, match="sliding_window is not set"):
        TransformerConfig(layer_types=("sliding", "full"))
    with pytest.raises(ValueError, match="unknown kind 'local'"):
        TransformerConfig(layer_types=("local",))
    with pytest.raises(ValueError, match="act on attention only"):
        TransformerConfig(layer_types=("full",), layer_pe={"full": "sinusoidal"})
    with pytest.raises(ValueError, match=r"layer_pe\['full'\]"):
        TransformerConfig(layer_types=("full",), layer_pe={"full": "no_such_pe"})
    with pytest.raises(ValueError, match="4 entries for 2 layers"):
        TransformerConfig(layer_types=("full",) * 4, num_layers=2)
    with pytest.raises(ValueError, match="unknown keys"):
        TransformerConfig(attention_temperature={"floor": 1})


def test_single_pe_configs_unchanged():
    cfg = TransformerConfig(num_layers=3)
    assert cfg.kinds == ("full",) * 3 and cfg.layer_pe_spec("full") == ("sinusoidal", {})
    assert cfg.temperature_layers() == (False,) * 3
    # a pattern repeats and is cut to num_layers; HF names are accepted
    cfg = TransformerConfig(num_layers=5, layer_types=("sliding_attention", "full_attention"),
                            sliding_window=3)
    assert cfg.kinds == ("sliding", "full", "sliding", "full", "sliding")


# one schedule per attention kind in the default suite; every preset under slow
DEFAULT = {"sliding": "gemma3", "chunked": "llama4_irope"}
SPAN = 3


def tiny_config(preset, *, causal=None, short=True):
    """The preset's PEs, masks and temperature on a tiny model; ``short``: one layer per
    distinct kind of its pattern (in pattern order) instead of the whole pattern."""
    fields = S.preset_config(preset, span=SPAN)
    if short:
        fields["layer_types"] = tuple(dict.fromkeys(fields["layer_types"]))
    layers = len(fields["layer_types"])
    if causal is not None:
        fields["causal"] = causal
    return TransformerConfig(vocab_size=VOCAB, num_layers=layers, d_model=16, num_heads=2,
                             d_ff=32, max_len=32, **fields)


def decode_error(preset, *, prompt_len=4, new=8, lengths=(4, 2)):
    """max |cached - recomputed| logits over the generated steps (rows of different lengths;
    prompt_len + new > SPAN, so every ring wraps)."""
    model = LanguageModel(tiny_config(preset), rngs=nnx.Rngs(0))
    prompt = jax.random.randint(jax.random.key(1), (2, prompt_len), 0, VOCAB)
    tokens, logits = generate(model, prompt, max_new_tokens=new, return_logits=True,
                              prompt_lengths=lengths)
    err = 0.0
    for b, n in enumerate(lengths):
        full = model(tokens[b:b + 1, :n + new])[0, n - 1:-1]
        err = max(err, float(jnp.max(jnp.abs(full - logits[b]))))
        np.testing.assert_array_equal(tokens[b, n:n + new], jnp.argmax(full, -1))
    return err


def pack_error(preset, *, causal=None):
    """max |packed - alone| hidden states over two segments of a packed row (7 + 6 tokens)."""
    cfg = tiny_config(preset, causal=causal)
    body = Transformer(cfg, rngs=nnx.Rngs(0))
    run = nnx.jit(lambda m, t, s: m(t, segment_ids=s))  # jitted: faster than eager dispatch
    tokens = jax.random.randint(jax.random.key(2), (1, 13), 0, VOCAB)
    seg = jnp.asarray([[0] * 7 + [1] * 6])
    packed = run(body, tokens, seg)
    alone = {(lo, hi): run(body, tokens[:, lo:hi], jnp.zeros((1, hi - lo), jnp.int32))
             for lo, hi in ((0, 7), (7, 13))}
    err = max(float(jnp.max(jnp.abs(packed[:, lo:hi] - a))) for (lo, hi), a in alone.items())
    # without segment ids the second segment sees the first (the test can fail)
    whole = run(body, tokens, jnp.zeros((1, 13), jnp.int32))
    leak = float(jnp.max(jnp.abs(whole[:, 7:] - alone[7, 13])))
    assert leak > 1e-3
    return err


def _presets(default):
    return [pytest.param(p, marks=() if p in default else pytest.mark.slow) for p in S.PRESETS]


@pytest.mark.parametrize("preset", _presets(set(DEFAULT.values())))
def test_cached_decoding_equals_recompute(preset):
    if not S.PRESETS[preset]["causal"]:
        pytest.skip("an encoder does not decode")
    assert decode_error(preset) < 1e-5


@pytest.mark.parametrize("preset", _presets({"modernbert"}))
def test_packed_equals_alone(preset):
    assert pack_error(preset) < 1e-5


def test_windowed_layers_really_forget():
    """A sliding layer's output at position p does not depend on tokens before p - window + 1,
    and the ring keeps only the window: a cache of size 2 * SPAN has SPAN-slot rings."""
    cfg = TransformerConfig(vocab_size=VOCAB, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=32, pe="rope", layer_types=("sliding",), sliding_window=SPAN,
                            causal=True)
    body = Transformer(cfg, rngs=nnx.Rngs(0))
    a = jax.random.randint(jax.random.key(3), (1, 10), 0, VOCAB)
    b = a.at[:, :4].set((a[:, :4] + 1) % VOCAB)
    np.testing.assert_allclose(body(a)[:, 4 + SPAN - 1:], body(b)[:, 4 + SPAN - 1:], atol=1e-6)
    assert float(jnp.max(jnp.abs(body(a)[:, 4] - body(b)[:, 4]))) > 1e-3
    cache = body.init_cache(1, 2 * SPAN)
    assert cache["layers"][0]["key"].shape[1] == SPAN and cache["ring"]["sliding"]["time"].shape == (1, SPAN)
    # only windowed layers: decoding may run past `size` (the ring wraps)
    step = nnx.jit(lambda m, t, c: m.decode(t, c))
    for t in range(3 * SPAN):
        _, cache = step(body, a[:, t:t + 1], cache)
    assert int(cache["index"]) == 3 * SPAN


def test_full_layers_raise_past_their_end():
    model = LanguageModel(tiny_config("gemma3"), rngs=nnx.Rngs(0))  # sliding + full
    cache = model.transformer.init_cache(1, 4)
    assert cache["layers"][0]["key"].shape[1] == SPAN and cache["layers"][1]["key"].shape[1] == 4
    cache = {**cache, "index": jnp.int32(4)}  # as after 4 tokens
    with pytest.raises(ValueError, match="past the end of the cache"):
        model.transformer.decode(jnp.zeros((1, 1), jnp.int32), cache)


def test_per_layer_pe_modules():
    body = Transformer(tiny_config("gemma3", short=False), rngs=nnx.Rngs(0))
    assert body.pe_of_layer == (0, 0, 0, 0, 0, 1) and len(body.pes) == 2
    assert body.pes[0].options.base == 1e4 and body.pes[1].options.base == 1e6


def test_contextual_logits_pes_refuse_a_ring_buffer():
    cfg = TransformerConfig(vocab_size=VOCAB, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=32, pe="cope", layer_types=("sliding",), sliding_window=SPAN,
                            causal=True)
    with pytest.raises(ValueError, match="ring buffer rotates"):
        Transformer(cfg, rngs=nnx.Rngs(0)).init_cache(1, 8)
