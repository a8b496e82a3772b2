"""Property-based fuzzing (hypothesis) of the input surfaces: corpus files, HF ``config.json``
dicts, safetensors files, ``--set`` strings, packed segments, generate arguments.

The oracle is a round trip (generate the data, write it in the format, load it, compare with what
was generated) or a ``ValueError`` naming the path or field; never another exception, never a
silently altered value. Profiles: ``default`` (derandomized, at most 25 examples per target) and
``slow`` (1,000 examples per target): ``POSJAX_FUZZ_PROFILE=slow pytest tests/reliability/test_fuzz.py``.
"""
from __future__ import annotations

import csv
import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

settings.register_profile("default", derandomize=True, max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow], database=None)
settings.register_profile("slow", max_examples=1000, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
_PROFILE = os.environ.get("POSJAX_FUZZ_PROFILE", "default")
settings.load_profile(_PROFILE)


class _Dir:
    """A fresh temporary directory per example (hypothesis reruns a test many times)."""

    def __enter__(self) -> Path:
        self.path = Path(tempfile.mkdtemp(prefix="posjax-fuzz-"))
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


# --- corpus files -----------------------------------------------------------------------------
# texts as a user's file holds them: any printable characters (no line breaks for .txt), at
# least one visible character
_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12
                ).filter(lambda t: t.strip() == t and t != "")
_NAME = st.text("abcdefgh", min_size=1, max_size=3)


@st.composite
def _corpus(draw):
    fmt = draw(st.sampled_from(["jsonl", "csv", "parquet", "txt"]))
    n = draw(st.integers(1, 5))
    texts = draw(st.lists(_TEXT, min_size=n, max_size=n))
    kind = "none" if fmt == "txt" else draw(st.sampled_from(["none", "int", "name", "mixed"]))
    if kind == "int":
        labels = draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
    elif kind == "name":
        labels = draw(st.lists(_NAME, min_size=n, max_size=n))
    elif kind == "mixed":
        labels = draw(st.lists(st.one_of(st.integers(0, 9), _NAME), min_size=n, max_size=n))
    else:
        labels = None
    drop = draw(st.one_of(st.none(), st.integers(0, n - 1))) if fmt == "jsonl" else None
    return fmt, texts, labels, drop


def _write_corpus(d: Path, fmt, texts, labels, drop) -> Path:
    path = d / f"train.{fmt}"
    rows = [{"text": t, **({} if labels is None else {"label": y})}
            for t, y in zip(texts, labels or [None] * len(texts))]
    if fmt == "jsonl":
        if drop is not None:
            rows[drop].pop("text")
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif fmt == "csv":
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq
        cols = {"text": texts}
        if labels is not None:
            cols["label"] = [str(y) for y in labels] if any(isinstance(y, str) for y in labels) \
                else labels
        pq.write_table(pa.table(cols), str(path))
    else:
        path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    return path


@pytest.mark.filterwarnings("ignore::UserWarning")
@given(_corpus())
def test_fuzz_corpus_files_round_trip(case):
    from posjax.data.corpus import load_corpus

    fmt, texts, labels, drop = case
    with _Dir() as d:
        path = _write_corpus(d, fmt, texts, labels, drop)
        try:
            split = load_corpus(d)["train"]
        except ValueError as e:
            assert path.name in str(e), str(e)  # a refusal names the file
            return
    assert drop is None, "a row without text was accepted"
    assert list(split.texts) == texts
    if labels is None:
        assert split.labels is None
        return
    if split.label_names is None:  # integer labels
        assert [int(v) for v in split.labels] == [int(y) for y in labels]
    else:
        assert [split.label_names[i] for i in split.labels] == [str(y) for y in labels]


# --- HF config.json dicts ---------------------------------------------------------------------
_BASE = {"model_type": "bert", "vocab_size": 32, "hidden_size": 32, "num_hidden_layers": 2,
         "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 16,
         "hidden_act": "gelu", "layer_norm_eps": 1e-12, "type_vocab_size": 2,
         "pad_token_id": 0}
_ODD = st.one_of(st.none(), st.booleans(), st.integers(-3, 70), st.floats(allow_nan=True),
                 st.text(max_size=4), st.lists(st.integers(0, 3), max_size=2))


@given(st.dictionaries(st.sampled_from(sorted(_BASE)), _ODD, max_size=3),
       st.sets(st.sampled_from(sorted(_BASE)), max_size=2))
def test_fuzz_hf_config_dicts(changes, dropped):
    from posjax.pretrained import hf_transformer_config

    config = {k: v for k, v in {**_BASE, **changes}.items() if k not in dropped}
    try:
        cfg = hf_transformer_config(config)
    except ValueError:
        return
    for field, key in (("vocab_size", "vocab_size"), ("num_layers", "num_hidden_layers"),
                       ("d_model", "hidden_size"), ("num_heads", "num_attention_heads"),
                       ("d_ff", "intermediate_size")):
        assert getattr(cfg, field) == config[key] and not isinstance(config[key], bool), key
    assert cfg.max_len == config["max_position_embeddings"]


# --- safetensors files ------------------------------------------------------------------------
@given(st.dictionaries(st.from_regex(r"[a-z]{1,4}(\.[a-z0-9]{1,3}){0,2}", fullmatch=True),
                       st.tuples(st.integers(1, 3), st.integers(1, 3)), min_size=1, max_size=4),
       st.one_of(st.none(), st.floats(0.0, 0.999)))
def test_fuzz_safetensors_round_trip_or_named(shapes, cut):
    from safetensors.numpy import save_file

    from posjax.pretrained.tables import load_checkpoint_checked

    rng = np.random.default_rng(len(shapes))
    tensors = {k: rng.normal(size=s).astype(np.float32) for k, s in shapes.items()}
    with _Dir() as d:
        (d / "config.json").write_text(json.dumps(_BASE))
        save_file(tensors, str(d / "model.safetensors"))
        if cut is not None:
            raw = (d / "model.safetensors").read_bytes()
            (d / "model.safetensors").write_bytes(raw[:int(cut * len(raw))])
        try:
            config, weights, _ = load_checkpoint_checked(d)
        except ValueError as e:
            assert cut is not None and "model.safetensors" in str(e), str(e)
            return
    assert config == _BASE and set(weights) == set(tensors)
    for k, v in tensors.items():
        np.testing.assert_array_equal(weights[k], v)


# --- --set strings ----------------------------------------------------------------------------
@given(st.data())
def test_fuzz_set_strings(data):
    import dataclasses
    import typing

    from experiments.common import described_fields, parse_set
    from experiments.network_simulation import NetworkSimulationConfig

    names = [f.name for f in dataclasses.fields(NetworkSimulationConfig)]
    key = data.draw(st.sampled_from(names + ["no_such_key"]))
    text = data.draw(st.one_of(st.text(max_size=6), st.integers(-5, 50).map(str),
                               st.floats(allow_nan=False).map(repr),
                               st.sampled_from(["true", "false", "none", "1,2", "0.5,1"])))
    try:
        out = parse_set(NetworkSimulationConfig, [f"{key}={text}"])
    except ValueError as e:
        assert key in str(e) or "key=value" in str(e), str(e)
        return
    assert key not in described_fields(NetworkSimulationConfig) and key in names
    value, tp = out[key], typing.get_type_hints(NetworkSimulationConfig)[key]
    if tp is int:
        assert value == int(text)
    elif tp is float:
        assert value == float(text) or (math.isnan(value) and math.isnan(float(text)))
    elif tp is str:
        assert value == text
    elif tp is bool:
        assert isinstance(value, bool)
    else:
        assert isinstance(value, tuple)


# --- packed segments --------------------------------------------------------------------------
@given(st.lists(st.integers(1, 6), min_size=1, max_size=8), st.integers(6, 9))
def test_fuzz_pack_sequences_round_trip(lengths, width):
    from posjax.models.packing import segment_positions
    from posjax.training import pack_sequences

    rng = np.random.default_rng(sum(lengths))
    seqs = [rng.integers(0, 100, n) for n in lengths]
    packed = pack_sequences(seqs, width, labels=list(range(len(seqs))))
    seg, ex = packed["segment_ids"], packed["example"]
    padded = np.zeros((8, 9), np.int32)  # one shape for every example: one compilation
    padded[:seg.shape[0], :seg.shape[1]] = seg
    pos = np.asarray(segment_positions(padded))[:seg.shape[0], :seg.shape[1]]
    found = {}
    for r in range(seg.shape[0]):
        for slot in range(ex.shape[1]):
            if ex[r, slot] >= 0:
                where = seg[r] == slot + 1
                found[int(ex[r, slot])] = packed["tokens"][r][where]
                assert list(pos[r][where]) == list(range(int(where.sum())))
                assert packed["labels"][r, slot] == ex[r, slot]
    assert sorted(found) == list(range(len(seqs)))
    for i, s in enumerate(seqs):
        np.testing.assert_array_equal(found[i], s)


@settings(max_examples=12 if _PROFILE == "default" else 1000)  # each new shape compiles
@given(st.lists(st.lists(st.integers(-2, 4), min_size=6, max_size=6), min_size=2, max_size=2),
       st.sampled_from([None, -1, 2]))
def test_fuzz_segment_ids_in_a_classifier(rows, num_segments):
    import jax.numpy as jnp

    seg = np.asarray(rows, np.int32)  # one shape [2, 6] (each new shape compiles)
    model = _classifier()
    tokens = jnp.ones(seg.shape, jnp.int32)
    try:
        logits = model(tokens, segment_ids=seg, num_segments=num_segments)
    except ValueError as e:
        assert "segment" in str(e), str(e)
        return
    runs = [1 + int((np.diff(r) != 0).sum()) for r in seg]
    assert logits.shape == (len(rows), num_segments or max(runs), 2)
    assert np.isfinite(np.asarray(logits)).all()


_MODELS: dict = {}


def _classifier():
    from flax import nnx

    from posjax.models import Classifier, TransformerConfig

    if "clf" not in _MODELS:
        cfg = TransformerConfig(vocab_size=8, num_layers=1, d_model=8, num_heads=2, d_ff=8,
                                max_len=8, pe="rope")
        _MODELS["clf"] = Classifier(cfg, 2, pooling="mean", rngs=nnx.Rngs(0))
    return _MODELS["clf"]


# --- generate arguments -----------------------------------------------------------------------
@settings(max_examples=12 if _PROFILE == "default" else 1000)  # each new shape compiles
@given(st.one_of(st.integers(-1, 3), st.floats(-1, 3), st.none()),
       st.one_of(st.just(0.0), st.floats(-1.0, 2.0), st.just(1e-45), st.just(math.nan)),
       st.one_of(st.none(), st.integers(-1, 9), st.floats(0, 3)))
def test_fuzz_generate_arguments(max_new_tokens, temperature, top_k):
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from posjax.models import LanguageModel, TransformerConfig, generate

    if "lm" not in _MODELS:
        cfg = TransformerConfig(vocab_size=8, num_layers=1, d_model=8, num_heads=2, d_ff=8,
                                max_len=8, causal=True)
        _MODELS["lm"] = LanguageModel(cfg, rngs=nnx.Rngs(0))
    prompt = jnp.asarray([[1, 2, 3]], jnp.int32)
    try:
        out = generate(_MODELS["lm"], prompt, max_new_tokens=max_new_tokens,
                       temperature=temperature, top_k=top_k, rng=jax.random.key(0))
    except ValueError:
        return
    out = np.asarray(out)
    assert isinstance(max_new_tokens, int) and max_new_tokens >= 0
    assert out.shape == (1, 3 + max_new_tokens)
    assert (out[:, :3] == [1, 2, 3]).all() and ((out >= 0) & (out < 8)).all()
