"""Reliability v3: corpora, LM targets, decoding, packing, generation and hyper-parameters never
give a wrong value without an error (one test per item, named after it)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from posjax.training import TrainConfig, train_ensemble

import _tiny


# --- R7: finite hyper-parameters ------------------------------------------------------------
@pytest.mark.parametrize("field", ["learning_rate", "weight_decay", "b1", "b2", "eps",
                                   "momentum", "warmup_fraction", "grad_clip"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, np.float32("nan")])
def test_r7_train_config_refuses_non_finite(field, bad):
    with pytest.raises(ValueError, match=f"TrainConfig.{field} must be finite"):
        TrainConfig(**{field: bad})


def test_r7_ensemble_member_hyperparameters_finite_and_keys_known():
    tiny = lambda: _tiny.model()  # the refusals come before any step runs

    def ensemble(members):
        return train_ensemble(lambda m: tiny(), _tiny.classification_loss,
                              _tiny.BATCHES, _tiny.config(), members=members)

    with pytest.raises(ValueError, match=r"member 1 .*learning_rate must be finite, got nan"):
        ensemble([{"seed": 0}, {"seed": 1, "learning_rate": math.nan}])
    with pytest.raises(ValueError, match=r"member 0 .*weight_decay must be finite, got inf"):
        ensemble([{"weight_decay": math.inf}])
    with pytest.raises(ValueError, match=r"keys \['lr'\] are never read by make_model"):
        ensemble([{"seed": 0, "lr": 0.1}, {"seed": 1, "lr": 0.01}])
    # a key make_model reads is accepted (and builds before any step runs)
    read = []
    with pytest.raises(ValueError, match="sentinel"):
        train_ensemble(lambda m: read.append(m["std"]) or tiny(), _tiny.classification_loss,
                       lambda s: (_ for _ in ()).throw(ValueError("sentinel")), _tiny.config(),
                       members=[{"std": 0.1}, {"std": 0.2}])
    assert read == [0.1, 0.2]


# --- R2: LM targets: -100 ignored, anything else outside [0, V) an error or a NaN row --------
def _lm(chunked, vocab=16, causal=True, **kw):
    from posjax.models import LanguageModel, TransformerConfig
    cfg = TransformerConfig(vocab_size=vocab, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=16, causal=causal, chunked_lm_loss=chunked, **kw)
    return LanguageModel(cfg, rngs=nnx.Rngs(0))


def test_r2_lm_targets_ignore_index_and_out_of_range():
    from posjax.input_checks import collect, first_error, stack_rows

    IGNORE_INDEX = -100  # the documented ignore index (posjax.models.chunked_ce.IGNORE_INDEX)
    rng = np.random.default_rng(0)
    tok = jnp.asarray(rng.integers(0, 16, (2, 6)), jnp.int32)
    tgt = jnp.asarray(rng.integers(0, 16, (2, 6)), jnp.int32)
    keep = np.ones((2, 6), bool)
    keep[0, 2] = keep[1, 5] = False
    ignored = jnp.where(keep, tgt, IGNORE_INDEX)
    out = {}
    for chunked in (False, True):
        m = _lm(chunked)
        graphdef, params, rest = nnx.split(m, nnx.Param, ...)
        loss = lambda p, t: nnx.merge(graphdef, p, rest).loss(tok, t, chunk_size=5)

        @jax.jit
        def checked(p, t, w):
            with collect() as found:
                values, grad = jax.value_and_grad(lambda p: (loss(p, t) * w).sum())(p)
            return values, grad, loss(p, t), stack_rows(found)

        # reference: valid targets everywhere, the ignored rows multiplied out afterwards
        ref, ref_grad, _, _ = checked(params, tgt, keep)
        got, grad, rows, checks = checked(params, ignored, np.ones_like(keep))
        rows = np.asarray(rows)
        assert first_error(checks) is None
        assert np.all(rows[~keep] == 0.0) and np.all(rows[keep] > 0)
        assert abs(float(got) - float(ref)) <= 1e-5 * abs(float(ref))
        for a, b in zip(jax.tree.leaves(grad), jax.tree.leaves(ref_grad)):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
        out[chunked] = grad
        for bad in (-1, 16, -99):
            wrong = tgt.at[1, 3].set(bad)
            with pytest.raises(ValueError, match=rf"labels must be in \[0, 16\) or -100.*target "
                                                 rf"{bad} (>= vocab_size 16|< 0)"):
                loss(params, wrong)
            _, _, values, checks = checked(params, wrong, np.ones_like(keep))
            values = np.asarray(values)
            assert np.isnan(values[1, 3]) and np.isfinite(np.delete(values.ravel(), 9)).all()
            assert first_error(checks) == (f"target {bad} >= vocab_size 16" if bad >= 16 else
                                           f"target {bad} < 0 (valid: 0 <= target < vocab_size 16)")
    # the dense and chunked gradients agree with ignored targets (they differed by 1.03 at -1)
    for a, b in zip(jax.tree.leaves(out[False]), jax.tree.leaves(out[True])):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


# --- R1 / R8: corpora -------------------------------------------------------------------------
def _jsonl(path, rows):
    import json
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_r1_label_mapping_over_all_files(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from posjax.data.corpus import load_corpus

    # "pos" is the only class of validation: it must keep the id it has in train
    _jsonl(tmp_path / "train.jsonl", [{"text": "a", "label": "neg"}, {"text": "b", "label": "pos"}])
    _jsonl(tmp_path / "validation.jsonl", [{"text": "c", "label": "pos"}])
    s = load_corpus(tmp_path)
    assert list(s["train"].labels) == [0, 1] and list(s["validation"].labels) == [1]
    assert s["train"].label_names == s["validation"].label_names == ("neg", "pos")
    # int 1 in train, string "1" in validation: refused, naming both files
    _jsonl(tmp_path / "train.jsonl", [{"text": "a", "label": 0}, {"text": "b", "label": 1}])
    _jsonl(tmp_path / "validation.jsonl", [{"text": "c", "label": "1"}])
    with pytest.raises(ValueError, match=r"integers in .*train\.jsonl but class names in "
                                         r".*validation\.jsonl \(e\.g\. '1'\)"):
        load_corpus(tmp_path)
    # round trip over random names spread over three files and formats
    rng = np.random.default_rng(0)
    for trial in range(5):
        d = tmp_path / f"t{trial}"
        d.mkdir()
        classes = [f"c{int(x)}" for x in rng.choice(50, 4, replace=False)]
        written = {}
        for name in ("train.jsonl", "dev.parquet", "test.csv"):
            labels = [classes[i] for i in rng.integers(0, 4, int(rng.integers(1, 6)))]
            texts = [f"t {i}" for i in range(len(labels))]
            written[name] = labels
            if name.endswith("jsonl"):
                _jsonl(d / name, [{"text": t, "label": x} for t, x in zip(texts, labels)])
            elif name.endswith("parquet"):
                pq.write_table(pa.table({"text": texts, "label": labels}), str(d / name))
            else:
                (d / name).write_text("text,label\n" + "".join(
                    f"{t},{x}\n" for t, x in zip(texts, labels)))
        s = load_corpus(d)
        for split, name in zip(("train", "validation", "test"), written):
            got = [s[split].label_names[i] for i in s[split].labels]
            assert got == written[name], (trial, name)


def test_r8_corpus_files_rows_and_columns(tmp_path):
    from posjax.data.corpus import corpus_tokens, load_corpus, load_tokenizer

    (tmp_path / "train.txt").write_text("one line\n")
    (tmp_path / "test.en.txt").write_text("held out\n")
    (tmp_path / "valid.txt").write_text("dev text\n")
    s = load_corpus(tmp_path)
    assert {k: list(v.texts) for k, v in s.items()} == {
        "train": ["one line"], "validation": ["dev text"], "test": ["held out"]}
    for rows, match in (([{"text": "a", "label": 0}, {"label": 1}], r"x\.jsonl:2: column 'text'"),
                        ([{"text": "a", "label": 0}, {"text": None, "label": 1}],
                         r"x\.jsonl:2: column 'text' is missing or null"),
                        ([{"text": "a"}, {"text": "b", "label": 1}],
                         r"x\.jsonl:1: column 'label' is missing"),
                        ([{"text": 3}], r"x\.jsonl:1: text column 'text' holds int")):
        d = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
        d.mkdir()
        _jsonl(d / "x.jsonl", rows)
        with pytest.raises(ValueError, match=match):
            load_corpus(d)
    with pytest.raises(ValueError, match=r"x\.jsonl has no label column 'polarity'"):
        _jsonl(d / "x.jsonl", [{"text": "a", "label": 1}])
        load_corpus(d, label_column="polarity")
    (d / "x.jsonl").write_text('{"text": "a"}\n{"text": \n')
    with pytest.raises(ValueError, match=r"x\.jsonl:2: not a JSON line"):
        load_corpus(d)
    (d / "x.jsonl").write_bytes(b'{"text": "a"}\n{"text": "\xff"}\n')
    with pytest.raises(ValueError, match=r"x\.jsonl:2: not UTF-8"):
        load_corpus(d)
    (d / "x.jsonl").unlink()
    (d / "x.csv").write_text("")
    with pytest.raises(ValueError, match=r"x\.csv: cannot read the csv table"):
        load_corpus(d)
    (d / "x.csv").write_text("text,label\n1,0\n")  # a numeric-looking text stays the string
    assert list(load_corpus(d)["train"].texts) == ["1"]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello"]) + "\n")
    with pytest.raises(ValueError, match="one string 'hello'"):
        corpus_tokens("hello", load_tokenizer(vocab), 4)


# --- R3: decode past the end of a full-attention cache ----------------------------------------
def test_r3_decode_past_cache_end_raises():
    from posjax.input_checks import collect, first_error, stack_rows

    m = _lm(False)
    graphdef, state = nnx.split(m)
    tok = jnp.asarray(np.random.default_rng(1).integers(0, 16, (2, 7)), jnp.int32)

    @jax.jit
    def step(state, t, cache):
        with collect() as rows:
            logits, cache = nnx.merge(graphdef, state).decode(t, cache)
        return logits, cache, stack_rows(rows)

    cache = m.init_cache(2, 6)
    with pytest.raises(ValueError, match="decode got 7 tokens for a cache of 6 slots"):
        m.decode(tok, cache)
    first, cache, _ = step(state, tok[:, :4], cache)
    with pytest.raises(ValueError, match=r"past the end of the cache: slots 4\.\.6 of a cache "
                                         r"of 6 slots"):
        m.decode(tok[:, 4:7], cache)  # eager, concrete index
    second, full, rows = step(state, tok[:, 4:6], cache)  # exactly full: the plain forward
    assert first_error(rows) is None
    plain = jax.jit(lambda s, t: nnx.merge(graphdef, s)(t))(state, tok[:, :6])
    np.testing.assert_allclose(np.concatenate([first, second], 1), plain, atol=1e-5)
    over, _, rows = step(state, tok[:, 5:7], full)
    assert np.isnan(np.asarray(over)).all()
    assert first_error(rows) == "cache slot 7 >= cache size 6"


# --- R6: generate(use_cache=False) equals plain forwards, whatever max_new_tokens ------------
def _check_recompute_generation(name, options, new=2):
    from posjax.models import LanguageModel, TransformerConfig, generate

    cfg = TransformerConfig(vocab_size=11, num_layers=1, d_model=16, num_heads=2, d_ff=16,
                            max_len=12, pe=name, causal=True, pe_options=options)
    m = LanguageModel(cfg, rngs=nnx.Rngs(0))
    prompt = jnp.asarray([[1, 5, 2, 7], [3, 9, 4, 4]], jnp.int32)
    tokens, logits = generate(m, prompt, max_new_tokens=new, use_cache=False, return_logits=True)
    short = generate(m, prompt, max_new_tokens=1, use_cache=False, return_logits=True)[1]
    forward = nnx.jit(lambda m, t: m(t))
    for k in range(new):  # step k: a plain forward over the prompt and the k tokens so far
        want = forward(m, tokens[:, :4 + k])[:, -1]
        np.testing.assert_allclose(logits[:, k], want, atol=2e-5, err_msg=f"{name} step {k}")
    np.testing.assert_allclose(short[:, 0], logits[:, 0], atol=2e-5, err_msg=name)


@pytest.mark.parametrize("name, options", [("cape", {"center": True}),
                                           ("rope_ntk", {"dynamic": True, "factor": 4.0,
                                                         "original_max_len": 4}),
                                           pytest.param("cpe", {}, marks=pytest.mark.slow)])
def test_r6_generate_without_cache_equals_plain_forward(name, options):
    _check_recompute_generation(name, options)


@pytest.mark.slow
def test_r6_generate_without_cache_every_registered_pe():
    import posjax.encodings as registry

    for name in registry.names():
        if name in ("rope2d_axial", "sinusoidal2d"):  # need a square grid, not a causal LM
            continue
        _check_recompute_generation(name, {})


# --- R5: training losses honour the segment_ids of packed batches ------------------------------
def test_r5_packed_losses_equal_unpacked():
    from posjax.models import Classifier, LanguageModel, TransformerConfig
    from posjax.training import classification_loss, masked_lm_loss, pack_sequences

    rng = np.random.default_rng(3)
    seqs = [rng.integers(0, 16, n).astype(np.int32) for n in (5, 3, 4, 2, 6)]
    packed = pack_sequences(seqs, 8, labels=[0, 1, 1, 0, 1])
    assert packed["tokens"].shape[0] < len(seqs)  # some rows hold several sequences
    batch = {k: jnp.asarray(v) for k, v in packed.items() if k != "example"}
    batch["loss_mask"] = batch["padding_mask"]  # the tokens to predict: every real token
    cfg = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=8, causal=True, dropout=0.0)
    key = jax.random.key(0)
    lm = LanguageModel(cfg, rngs=nnx.Rngs(0))
    loss, metrics = jax.jit(lambda b: masked_lm_loss(lm, b, key))(batch)
    # reference: one sequence per row (right-padded, so causally unaffected), float64 NumPy
    alone = np.zeros((len(seqs), 8), np.int32)
    real = np.zeros((len(seqs), 8), bool)
    for i, s in enumerate(seqs):
        alone[i, :len(s)], real[i, :len(s)] = s, True
    z = np.asarray(nnx.jit(lambda m, t: m(t))(lm, jnp.asarray(alone)), np.float64)[:, :-1]
    top = z.max(-1, keepdims=True)
    logp = z - top - np.log(np.exp(z - top).sum(-1, keepdims=True))
    targets = real[:, 1:]
    nll = -np.take_along_axis(logp, alone[:, 1:, None], -1)[..., 0][targets]
    hits = (z.argmax(-1) == alone[:, 1:])[targets]
    np.testing.assert_allclose(float(loss), nll.mean(), rtol=1e-5)
    np.testing.assert_allclose(float(metrics["token_accuracy"]), hits.mean(), rtol=1e-6)

    clf = Classifier(cfg.replace(causal=False), 2, pooling="mean", rngs=nnx.Rngs(0))
    score = jax.jit(lambda b: classification_loss(clf, b, key, deterministic=True))
    loss, metrics = score(batch)
    want, _ = score({"tokens": jnp.asarray(alone), "padding_mask": jnp.asarray(real),
                     "labels": jnp.asarray([0, 1, 1, 0, 1])})
    np.testing.assert_allclose(float(loss), float(want), rtol=1e-5)
    # a label on an empty slot is skipped; a bad label on a real segment is an error
    empty = np.asarray(packed["example"]) < 0
    assert empty.any()
    skipped = dict(batch, labels=jnp.where(empty, 7, batch["labels"]))
    assert float(score(skipped)[0]) == pytest.approx(float(loss), rel=1e-6)
    from posjax.input_checks import collect, first_error, stack_rows

    def checked(b):
        with collect() as rows:
            classification_loss(clf, b, key, deterministic=True)
        return stack_rows(rows)

    bad = jax.jit(checked)(dict(batch, labels=batch["labels"].at[0, 0].set(-1)))
    assert first_error(bad).startswith("label -1 < 0")
    with pytest.raises(ValueError, match=r"needs labels \[B, S\] with segment_ids"):
        classification_loss(clf, dict(batch, labels=batch["labels"][:, 0]), key)


# --- R4: module attributes other than the config are part of the run record ------------------
def test_r4_changed_module_attribute_refuses_resume(tmp_path):
    import inspect

    from posjax.models import Classifier

    _tiny.run(str(tmp_path), steps=2, log_every=1)
    other = {"config": _tiny.CFG.replace(d_ff=16), "num_classes": 3, "pooling": "cls"}
    params = [p for p in inspect.signature(Classifier.__init__).parameters
              if p not in ("self", "rngs")]
    assert set(params) == set(other), "a new Classifier argument needs a changed value here"
    for name in params:
        kwargs = {"config": _tiny.CFG, "num_classes": 2, "pooling": "mean", name: other[name]}
        changed = Classifier(**kwargs, rngs=nnx.Rngs(0))
        field = "configs.config.d_ff" if name == "config" else f"attributes.{name}: stored"
        with pytest.raises(ValueError, match=f"different configuration .*model.{field}"):
            _tiny.run(str(tmp_path), m=changed, steps=2, log_every=1)
    # the same module resumes (nothing else in the record changed)
    _tiny.run(str(tmp_path), steps=2, log_every=1)


# --- R12 (part): generate and pack_sequences arguments -----------------------------------------
def test_r12_generate_and_packing_arguments():
    from posjax.models import generate
    from posjax.training import pack_sequences

    m = _lm(False)
    prompt = jnp.asarray([[1, 2]], jnp.int32)
    with pytest.raises(ValueError, match="top_k must be an integer or None, got 2.5"):
        generate(m, prompt, max_new_tokens=1, temperature=1.0, top_k=2.5, rng=jax.random.key(0))
    with pytest.raises(ValueError, match="temperature 1e-45 is below the smallest normal"):
        generate(m, prompt, max_new_tokens=1, temperature=1e-45, rng=jax.random.key(0))
    with pytest.raises(ValueError, match=r"sequence 1 holds token ids in \[5, 4294967301\]"):
        pack_sequences([np.array([1, 2]), np.array([2 ** 32 + 5, 5], np.int64)], 4)
    with pytest.raises(ValueError, match="needs integer labels"):
        pack_sequences([np.array([1, 2]), np.array([3])], 4, labels=["pos", "neg"])


# --- R9: load_hf accounts for every tensor it does not load ------------------------------------
def _edit_checkpoint(path, config=None, add=(), drop=()):
    import json

    from safetensors.numpy import load_file, save_file

    if config:
        cfg = json.loads((path / "config.json").read_text())
        (path / "config.json").write_text(json.dumps({**cfg, **config}))
    w = load_file(path / "model.safetensors")
    w = {k: v for k, v in w.items() if k not in drop}
    save_file({**w, **dict(add)}, path / "model.safetensors")
    return w


def test_r9_load_hf_extras_ambiguity_and_learned_options(tmp_path):
    import warnings

    from posjax.pretrained import load_hf, position_table, write_tiny_checkpoint

    # a config saying 2 layers over weights with 3 (old: 2 loaded silently)
    deep = write_tiny_checkpoint(tmp_path / "deep", "bert", num_layers=3)
    _edit_checkpoint(deep, config={"num_hidden_layers": 2})
    with pytest.raises(ValueError, match=r"tensors of layer\(s\) \[2\].*num_hidden_layers = 2"):
        load_hf(deep)
    # an unprefixed duplicate position table (old: the shortest key was returned silently)
    amb = write_tiny_checkpoint(tmp_path / "amb", "bert", max_positions=16)
    w = _edit_checkpoint(amb, add={"embeddings.position_embeddings.weight":
                                   np.ones((16, 32), np.float32)})
    for load in (load_hf, position_table):
        with pytest.raises(ValueError, match=r"ambiguous checkpoint: 2 tensors match "
                                             r"\*embeddings\.position_embeddings\.weight"):
            load(amb)
    # a second table under another name is refused too; with a swapped PE it is not read
    _edit_checkpoint(amb, add={"bert.embeddings.extra.position_embeddings.weight":
                               np.ones((16, 32), np.float32)},
                     drop=("embeddings.position_embeddings.weight",))
    with pytest.raises(ValueError, match="second position table"):
        load_hf(amb)
    # BERT's known extras load silently; any other unused tensor is named in a warning
    base = write_tiny_checkpoint(tmp_path / "base", "bert", max_positions=16)
    _edit_checkpoint(base, add={"bert.embeddings.position_ids": np.arange(16)[None]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        for head in (None, "mlm", "classifier"):
            load_hf(base, head=head)
        load_hf(amb, pe="rope")
    # pe_options with pe="learned" are applied (old: dropped), or refused when they cannot apply
    frozen, cfg = load_hf(base, pe_options={"trainable": False, "num_positions": 12})
    table = w["bert.embeddings.position_embeddings.weight"]
    assert cfg.max_len == 12 and cfg.pe_options == {"trainable": False, "num_positions": 12}
    np.testing.assert_array_equal(np.asarray(frozen.pe.embedding[...]), table[:12])
    assert not isinstance(frozen.pe.embedding, nnx.Param)  # frozen: not a trainable parameter
    with pytest.raises(ValueError, match=r"pe_options \['std'\] have no effect"):
        load_hf(base, pe_options={"std": 0.5})
    with pytest.raises(ValueError, match=r"num_positions must be an integer in \[1, 16\]"):
        load_hf(base, pe_options={"num_positions": 17})
    _edit_checkpoint(base, add={"bert.encoder.adapter.weight": np.ones((4, 4), np.float32)})
    with pytest.warns(UserWarning, match=r"1 tensor\(s\) .* not loaded: "
                                         r"bert\.encoder\.adapter\.weight"):
        load_hf(base)


# --- R12 (rest): RoPE precision warning, HF RoPE blocks, segments, pairs, spectra ------------
def test_r12_rope_warns_once_past_2_20(monkeypatch):
    import warnings

    from posjax.encodings import rope

    monkeypatch.setattr(rope, "_warned_past_bound", False, raising=False)
    x = jnp.ones((1, 2, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        rope.apply_rope(x, jnp.asarray([0, 2 ** 20]))                    # at the bound: silent
        jax.jit(lambda p: rope.apply_rope(x, p))(jnp.asarray([0, 2 ** 23]))  # traced: silent
    with pytest.warns(UserWarning, match=r"RoPE position 8388608 is past 2\^20"):
        rope.apply_rope(x, jnp.asarray([0, 2 ** 23]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        rope.apply_rope(x, jnp.asarray([0, 2 ** 23]))                    # once per process


def test_r12_hf_rope_blocks():
    from posjax.pretrained import rope_from_hf_config

    base = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 4096}
    # yarn without a factor: old 1.0 silently; now derived from original/max, or refused
    with pytest.raises(ValueError, match="RoPE type 'yarn' needs 'factor'"):
        rope_from_hf_config({**base, "rope_scaling": {"rope_type": "yarn"}})
    name, opts = rope_from_hf_config({**base, "rope_scaling": {
        "rope_type": "yarn", "original_max_position_embeddings": 1024}})
    assert name == "rope_yarn" and opts["factor"] == 4.0
    # rope_parameters without rope_type next to a linear rope_scaling: old "rope" (shadowed)
    name, opts = rope_from_hf_config({**base, "rope_parameters": {"rope_theta": 5e5},
                                      "rope_scaling": {"type": "linear", "factor": 4.0}})
    assert (name, opts["factor"], opts["base"]) == ("rope_linear", 4.0, 5e5)
    with pytest.raises(ValueError, match=r"disagree on factor \(8\.0 vs 4\.0\)"):
        rope_from_hf_config({**base, "rope_parameters": {"rope_type": "linear", "factor": 8.0},
                             "rope_scaling": {"type": "linear", "factor": 4.0}})


def test_r12_segments_pairs_and_spectrum():
    from posjax.geometry import stress_from_distributions, topk_spectrum_report
    from posjax.models import Classifier, TransformerConfig

    cfg = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=16,
                            max_len=8)
    clf = Classifier(cfg, 2, pooling="mean", rngs=nnx.Rngs(0))
    tok = jnp.ones((1, 8), jnp.int32)
    seg = jnp.asarray([[0, 0, 0, 1, 1, 2, 2, 2]])
    assert clf(tok, segment_ids=seg).shape == (1, 3, 2)
    # a one-token row (found by tests/reliability/test_fuzz.py; was a ZeroDivisionError)
    np.testing.assert_allclose(clf(tok[:, :1], segment_ids=seg[:, :1])[:, 0], clf(tok[:, :1]),
                               atol=1e-6)
    with pytest.raises(ValueError, match="num_segments must be an integer >= 1, got -1"):
        clf(tok, segment_ids=seg, num_segments=-1)  # old: empty logits [1, 0, 2]
    with pytest.raises(ValueError, match="num_segments=2 but a row holds 3 segments"):
        clf(tok, segment_ids=seg, num_segments=2)
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(5), 6)
    X = rng.normal(size=(6, 2))
    with pytest.raises(ValueError, match="pairs must be an integer .* got 2.7"):
        stress_from_distributions(P, X, pairs=2.7)  # old: truncated to 2
    assert topk_spectrum_report([0.5, 0.25], 1.0)["lambda1_share"] == 0.5
    with pytest.raises(ValueError, match=r"sum to 2\.5 > trace\(B\) = 1 \(lambda_1 share 2\.5"):
        topk_spectrum_report([2.5], 1.0)  # old: a share of 2.5 reported


# --- R10: experiment cells and finished runs ---------------------------------------------------
def test_r10_cell_files_checksummed_and_counted(tmp_path, capsys):
    import json
    import os

    from experiments.common import CellStore

    store = CellStore(str(tmp_path), {"steps": 3})
    key = {"pe": "rope"}
    store.compute(key, lambda: [{"seed": s, "acc": 0.5 + s} for s in range(3)])
    (path,) = [os.path.join(store.dir, f) for f in os.listdir(store.dir)]
    fresh = lambda: [{"seed": s, "acc": 0.1} for s in range(3)]

    def edit(change):
        with open(path) as f:
            cell = json.load(f)
        change(cell)
        with open(path, "w") as f:
            json.dump(cell, f)

    assert CellStore(str(tmp_path), {"steps": 3}).compute(key, fresh)[2]["acc"] == 2.5
    # an edited value (valid JSON): old code returned 9.0
    edit(lambda c: c["value"][0].update(acc=9.0))
    again = CellStore(str(tmp_path), {"steps": 3})
    assert [r["acc"] for r in again.compute(key, fresh)] == [0.1, 0.1, 0.1]
    assert again.computed == 1 and "checksum does not match" in capsys.readouterr().err
    # one seed removed (and the checksum recomputed by hand): the count is checked
    from experiments.common import _cell_digest

    edit(lambda c: (c["value"].pop(), c.update(sha256=_cell_digest(c["key"], c["value"]))))
    assert len(CellStore(str(tmp_path), {"steps": 3}).compute(key, fresh, count=3)) == 3
    assert "holds 2 entries, the run needs 3" in capsys.readouterr().err
    # a file written before checksums existed is recomputed, not trusted
    edit(lambda c: (c.pop("sha256"), c["value"][0].update(acc=7.0)))
    assert CellStore(str(tmp_path), {"steps": 3}).compute(key, fresh, count=3)[0]["acc"] == 0.1


def test_r10_finished_run_returns_its_last_metrics(tmp_path):
    _, first = _tiny.run(str(tmp_path / "one"), steps=4, log_every=2)
    _, again = _tiny.run(str(tmp_path / "one"), steps=4, log_every=2)
    assert first.metrics and again.metrics == pytest.approx(first.metrics)  # old: {}
    assert again.resumed_from == 4
    tiny = lambda m: nnx.Linear(8, 2, rngs=nnx.Rngs(m["seed"]))

    def loss(model, batch, key):
        x = jax.nn.one_hot(batch["tokens"][:, 0], 8)
        logits = model(x)
        value = -jnp.take_along_axis(jax.nn.log_softmax(logits), batch["labels"][:, None],
                                     1).mean()
        return value, {"acc": (logits.argmax(-1) == batch["labels"]).mean()}

    runs = [train_ensemble(tiny, loss, _tiny.BATCHES, _tiny.config(steps=4, log_every=2),
                           members=[{"seed": 0}, {"seed": 1}], out_dir=str(tmp_path / "ens"))
            for _ in range(2)]
    assert runs[0].metrics[1]["acc"] >= 0 and runs[1].metrics == runs[0].metrics  # old: [{}, {}]


# --- R11: --set of fields no code reads -------------------------------------------------------
def test_r11_set_refuses_described_fields():
    from experiments.additive_vs_multiplicative import AdditiveVsMultiplicativeConfig
    from experiments.common import parse_set
    from experiments.length_generalization import LengthGeneralizationConfig
    from experiments.network_simulation import NetworkSimulationConfig

    for cls, field in ((AdditiveVsMultiplicativeConfig, "decay_mask"), (LengthGeneralizationConfig, "eval_method"),
                       (NetworkSimulationConfig, "mask_token")):
        with pytest.raises(ValueError, match=f"--set: '{field}' describes what the code does"):
            parse_set(cls, [f"{field}=something else"])
    assert parse_set(NetworkSimulationConfig, ["train.steps=3"]) == {"train": {"steps": 3}}


# --- unclear errors and internal exceptions: each a ValueError naming the file/tensor/field -----
def test_unclear_errors_name_the_file_tensor_or_field(tmp_path):
    import json

    from posjax.data.corpus import load_tokenizer
    from posjax.pretrained import load_hf, position_table, write_tiny_checkpoint

    ck = write_tiny_checkpoint(tmp_path / "ck", "bert", max_positions=16)
    raw = (ck / "model.safetensors").read_bytes()
    (ck / "model.safetensors").write_bytes(raw[:len(raw) // 2])  # truncated
    for load in (load_hf, position_table):
        with pytest.raises(ValueError, match=r"cannot read the safetensors weights "
                                             r"model\.safetensors in .*ck"):
            load(ck)
    (ck / "model.safetensors").write_bytes(b"")  # empty
    with pytest.raises(ValueError, match=r"model\.safetensors .*truncated, empty"):
        load_hf(ck)
    (ck / "model.safetensors").write_bytes(raw)
    config = (ck / "config.json").read_text()
    (ck / "config.json").write_text(config[:40])
    with pytest.raises(ValueError, match=r"config\.json:\d+:\d+: not valid JSON"):
        load_hf(ck)
    (ck / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"config\.json: must hold a JSON object.* list"):
        load_hf(ck)
    (ck / "config.json").write_text(config)
    _edit_checkpoint(ck, add={"bert.encoder.layer.0.intermediate.dense.bias":
                              np.zeros(7, np.float32)})
    with pytest.raises(ValueError, match=r"tensor bert\.encoder\.layer\.0\.intermediate\.dense"
                                         r"\.bias has shape \(7,\); .* needs \(64,\)"):
        load_hf(ck)
    gpt2 = write_tiny_checkpoint(tmp_path / "gpt2", "gpt2")
    _edit_checkpoint(gpt2, config={"model_type": "bert"})
    with pytest.raises(ValueError, match=r"model_type 'bert' has no field 'max_position_embed"):
        load_hf(gpt2)
    rob = write_tiny_checkpoint(tmp_path / "rob", "roberta", max_positions=16)
    _edit_checkpoint(rob, config={"pad_token_id": None})
    with pytest.raises(ValueError, match=r"field 'pad_token_id' must be a non-negative integer"):
        load_hf(rob)
    (tmp_path / "tokenizer.json").write_text('{"model": 3}')
    with pytest.raises(ValueError, match=r"tokenizer\.json: not a valid tokenizer\.json"):
        load_tokenizer(tmp_path / "tokenizer.json")


def test_internal_exceptions_become_value_errors(tmp_path):
    from experiments.common import run_cli
    from posjax.geometry import mds_from_distributions
    from posjax.models import Classifier, TransformerConfig
    from posjax.training import ArrayBatches
    from posjax.training.run_dir import RunDirLocked

    with pytest.raises(ValueError, match="every row of P is the same distribution"):
        mds_from_distributions(np.full((5, 3), 1 / 3), k=2)  # old: IndexError
    data = _tiny.data()
    other = ArrayBatches({"tokens": data["tokens"][:, :6], "labels": data["labels"]}, 16, seed=0)
    with pytest.raises(ValueError, match=r"batch of member 1 .* field \['tokens'\] has shape "
                                         r"\(16, 6\), member 0's \(16, 8\)"):
        train_ensemble(lambda m: _tiny.model(), _tiny.classification_loss,
                       [_tiny.BATCHES, other], _tiny.config(), members=[{}, {}])
    with pytest.raises(SystemExit, match="error: .*busy"):
        run_cli(lambda argv: (_ for _ in ()).throw(RunDirLocked(f"{tmp_path} is busy")))
    # a learned PE accepts a packed row longer than its table when every position fits
    cfg = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=16,
                            max_len=4, pe="learned")
    clf = Classifier(cfg, 2, pooling="mean", rngs=nnx.Rngs(0))
    tok = jnp.asarray([[3, 1, 4, 1, 5, 9]])
    packed = clf(tok, segment_ids=jnp.asarray([[0, 0, 0, 1, 1, 1]]))
    alone = jnp.stack([clf(tok[:, :3]), clf(tok[:, 3:])], 1)
    np.testing.assert_allclose(packed, alone, atol=1e-5)
    with pytest.raises(ValueError, match="sequence length 6 exceeds the 4 positions"):
        clf(tok)


def test_r12_three_d_positions_refused_by_the_layer_masks():
    """The sliding-window and chunked masks take positions ``[T]`` or ``[B, T]``: a ``[B, T, 3]``
    tensor (M-RoPE's three axes) is refused, as the PEs' ``batch_positions`` refuses it, instead
    of broadcasting into a ``[B, 1, T, T, 3]`` mask."""
    from posjax.models.schedules import chunked_mask, layer_kind_mask, sliding_window_mask

    flat = np.arange(5, dtype=np.int32)
    assert sliding_window_mask(flat, flat, 2, causal=True).shape == (1, 1, 5, 5)
    assert chunked_mask(flat[None], flat[None], 2, causal=False).shape == (1, 1, 5, 5)
    three = np.stack([np.broadcast_to(flat, (2, 5))] * 3, axis=-1)
    for make in (sliding_window_mask, chunked_mask):
        with pytest.raises(ValueError, match=r"\[seq\] or \[batch, seq\]"):
            make(three, three, 2, causal=True)
    with pytest.raises(ValueError, match=r"\[seq\] or \[batch, seq\]"):
        layer_kind_mask("sliding", three, flat, causal=True, sliding_window=2)
