"""Packed sequences: a packed row gives every segment the outputs it gives alone, for every PE."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe
from posjax.models import (Classifier, LanguageModel, Transformer, TransformerConfig,
                           segment_positions, segment_runs)
from posjax.training import ArrayBatches, pack_sequences
from _registry_params import one_per_kind_params  # noqa: E402  (tests/models on sys.path)

LENGTHS = (3, 5, 4)
IDS = (7, 2, 7)  # a new segment wherever the id changes: the two 7-runs are distinct segments
VOCAB = 32


def config(name, *, causal=False, **pe_options):
    return TransformerConfig(vocab_size=VOCAB, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                             max_len=16, pe=name, pe_options=pe_options, causal=causal)


def packed_row(seed=2):
    tokens = jax.random.randint(jax.random.key(seed), (1, sum(LENGTHS)), 0, VOCAB)
    seg = jnp.repeat(jnp.array(IDS), jnp.array(LENGTHS))[None]
    return tokens, seg


def pieces(x):
    out, start = [], 0
    for n in LENGTHS:
        out.append(x[:, start:start + n])
        start += n
    return out


# One compiled program per PE and shape instead of XLA compiling every eager op of every new
# model and shape (the registry test's cost); the packed and the alone outputs are both jitted.
_packed_forward = nnx.jit(lambda model, tokens, seg: model(tokens, segment_ids=seg))
_forward = nnx.jit(lambda model, tokens: model(tokens))


def check_packed_equals_alone(model):
    tokens, seg = packed_row()
    packed = _packed_forward(model, tokens, seg)
    for part, alone_tokens in zip(pieces(packed), pieces(tokens)):
        err = float(jnp.max(jnp.abs(part - _forward(model, alone_tokens))))
        assert err < 1e-5, f"packed segment differs from the segment alone by {err:.2e}"


def run_registry_case(name, causal):
    model = Transformer(config(name, causal=causal), rngs=nnx.Rngs(0))
    reason = next((r for r in (p.packing_unsupported() for p in model.pes) if r), None)
    if reason is not None:
        tokens, seg = packed_row()
        with pytest.raises(ValueError, match=f"PE '{name}' does not support packed"):
            model(tokens, segment_ids=seg)
        return
    check_packed_equals_alone(model)


@pytest.mark.parametrize("name", one_per_kind_params())  # every PE; one per kind by default
def test_packed_row_equals_segments_alone(name):
    run_registry_case(name, causal=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", pe.names())
def test_packed_row_equals_segments_alone_causal(name):
    run_registry_case(name, causal=True)


def test_without_segment_ids_the_segments_leak():
    """Negative control: the same row without segment_ids is not its segments alone."""
    model = Transformer(config("rope"), rngs=nnx.Rngs(0))
    tokens, _ = packed_row()
    whole = _forward(model, tokens)
    errs = [float(jnp.max(jnp.abs(p - _forward(model, t))))
            for p, t in zip(pieces(whole), pieces(tokens))]
    assert min(errs) > 1e-3


def test_segment_positions_and_runs_golden():
    seg = jnp.array([[7, 7, 2, 2, 2, 7], [0, 0, 0, 0, 1, 1]])
    np.testing.assert_array_equal(segment_positions(seg), [[0, 1, 0, 1, 2, 0], [0, 1, 2, 3, 0, 1]])
    np.testing.assert_array_equal(segment_runs(seg), [[0, 0, 1, 1, 1, 2], [0, 0, 0, 0, 1, 1]])


def test_explicit_positions_are_kept():
    model = Transformer(config("learned"), rngs=nnx.Rngs(0))
    tokens, seg = packed_row()
    positions = jnp.arange(sum(LENGTHS))[None] + 1
    packed = model(tokens, segment_ids=seg, positions=positions)
    for part, t, p in zip(pieces(packed), pieces(tokens), pieces(positions)):
        np.testing.assert_allclose(part, model(t, positions=p), atol=1e-5)
    restarted = model(tokens, segment_ids=seg)
    assert float(jnp.max(jnp.abs(restarted - packed))) > 1e-3


@pytest.mark.parametrize("pooling", ["cls", "mean", "last"])
def test_classifier_pools_per_segment(pooling):
    model = Classifier(config("alibi"), num_classes=3, pooling=pooling, rngs=nnx.Rngs(0))
    tokens, seg = packed_row()
    # a second row with two segments and padding: its third slot is empty (zeros pooled)
    tokens2 = jnp.concatenate([tokens, tokens], 0)
    seg2 = jnp.concatenate([seg, jnp.array([[1] * 6 + [2] * 4 + [0] * 2])], 0)
    pad = jnp.concatenate([jnp.ones((1, 12), bool), jnp.arange(12)[None] < 10], 0)
    logits = model(tokens2, segment_ids=seg2, padding_mask=pad)  # eager: counts the segments
    assert logits.shape == (2, 3, 3)
    for s, t in enumerate(pieces(tokens)):
        np.testing.assert_allclose(logits[0, s], _forward(model, t)[0], atol=1e-5)
    np.testing.assert_allclose(logits[1, 0], _forward(model, tokens[:, :6])[0], atol=1e-5)
    np.testing.assert_allclose(logits[1, 1], _forward(model, tokens[:, 6:10])[0], atol=1e-5)
    np.testing.assert_allclose(logits[1, 2], model.head(jnp.zeros(16)), atol=1e-6)


def test_language_model_with_segments():
    model = LanguageModel(config("t5", causal=True), rngs=nnx.Rngs(0))
    tokens, seg = packed_row()
    packed = model(tokens, segment_ids=seg)
    for part, t in zip(pieces(packed), pieces(tokens)):
        np.testing.assert_allclose(part, model(t), atol=1e-5)


@pytest.mark.parametrize("name, options, reason", [
    ("rope_ntk", {"dynamic": True}, "longest position"),
    ("cape", {"center": True}, "mean position"),
    ("cpe", {"skip_tokens": 1}, "skip_tokens"),
])
def test_option_dependent_packing_support_raises(name, options, reason):
    model = Transformer(config(name, **options), rngs=nnx.Rngs(0))
    tokens, seg = packed_row()
    with pytest.raises(ValueError, match=reason):
        model(tokens, segment_ids=seg)


def test_segment_ids_are_validated():
    model = Transformer(config("rope"), rngs=nnx.Rngs(0))
    tokens, seg = packed_row()
    with pytest.raises(ValueError, match="shape"):
        model(tokens, segment_ids=seg[:, :-1])
    with pytest.raises(ValueError, match="integers"):
        model(tokens, segment_ids=seg.astype(jnp.float32))


def test_pack_sequences_first_fit_and_model_round_trip():
    rng = np.random.default_rng(0)
    seqs = [rng.integers(1, VOCAB, n) for n in (5, 4, 6, 3, 2)]
    packed = pack_sequences(seqs, 10, labels=[0, 1, 2, 1, 0])
    # first fit: row 0 = seqs 0, 1 (9 tokens); row 1 = seqs 2, 3 (9); seq 4 does not fit either
    np.testing.assert_array_equal(packed["example"], [[0, 1], [2, 3], [4, -1]])
    np.testing.assert_array_equal(packed["labels"], [[0, 1], [2, 1], [0, -1]])
    np.testing.assert_array_equal(packed["segment_ids"][0], [1] * 5 + [2] * 4 + [0])
    np.testing.assert_array_equal(packed["padding_mask"].sum(1), [9, 9, 2])
    np.testing.assert_array_equal(packed["tokens"][1, 6:9], seqs[3])
    batch = ArrayBatches(packed, 3, seed=0)(0)  # training batches carry the packing arrays
    model = Transformer(config("rope"), rngs=nnx.Rngs(0))
    row = int(np.flatnonzero((batch["example"][:, 0] == 2))[0])
    hidden = model(jnp.asarray(batch["tokens"]), segment_ids=jnp.asarray(batch["segment_ids"]),
                   padding_mask=jnp.asarray(batch["padding_mask"]))
    np.testing.assert_allclose(hidden[row, :6], model(jnp.asarray(seqs[2])[None])[0], atol=1e-5)
    with pytest.raises(ValueError, match="1 to 4 tokens"):
        pack_sequences(seqs, 4)
