"""experiments.long_context: a tiny run end to end (arrays finite, CIs contain their means,
report.md links every PNG, the docs block is generated from results.json), data invariants."""
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: `experiments`
from experiments.long_context import (LongContextConfig, PRESETS, QUICK_PES, data,  # noqa: E402
                                      report, run)
from experiments.common import apply_overrides, parse_set  # noqa: E402

TINY = apply_overrides(LongContextConfig(), parse_set(LongContextConfig, [
    "dataset=synthetic", "vocab_size=48", "corpus_tokens=12000", "pes=rope",
    "scalings=rope_linear", "train_length=16", "eval_factors=1,2", "train.steps=4",
    "train.batch_size=8", "model.num_layers=1", "model.d_model=16", "model.num_heads=2",
    "model.d_ff=32", "seeds=2", "trials=2", "eval_rows=2", "attention_rows=1",
    "geometry_windows=40", "key_length=1", "num_symbols=4", "depths=0.0,1.0",
    "train.warmup_steps=1"]))


def _walk(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _walk(v, f"{path}/{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, x


def test_tiny_run_arrays_report_and_docs(tmp_path):
    out = str(tmp_path / "run")
    run(TINY, out, preset="tiny")
    results = json.load(open(os.path.join(out, "results.json")))
    figures = results["summary"]["figures"]
    assert set(figures["ppl_vs_length"]) == {"rope", "rope_linear"}
    for pe, e in figures["ppl_vs_length"].items():
        assert len(e["mean"]) == 2 and np.isfinite(e["mean"]).all() and np.isfinite(e["half"]).all()
        assert all(lo <= m <= hi for lo, m, hi in zip(e["lo"], e["mean"], e["hi"]))
        assert all(m > 1 for m in e["mean"])                  # a perplexity
    for task in ("passkey", "needle"):
        for pe, e in figures[task].items():
            acc = np.asarray(e["accuracy_mean"])
            assert acc.shape == (2, 2) and ((acc >= 0) & (acc <= 1)).all()
            assert e["status"] in ("testable", report.UNTESTED)
    for pe, e in figures["attention"].items():
        for key in ("entropy", "sink"):
            c = e[key]
            assert np.isfinite(c["mean"]).all()
            assert all(lo <= m <= hi for lo, m, hi in zip(c["lo"], c["mean"], c["hi"]))
    # the scaling's perplexity at L equals RoPE's (s = 1 there): the same trained parameters
    assert figures["ppl_vs_length"]["rope_linear"]["mean"][0] == pytest.approx(
        figures["ppl_vs_length"]["rope"]["mean"][0], rel=1e-5)
    geo = results["geometry"]
    assert "rope" in geo["rows"] and "rope_linear" not in geo["rows"]
    assert all(0 <= v <= 1 for v in geo["rows"]["rope"]["stress_per_seed"]["16"])
    ranking = results["summary"]["ranking"]
    assert [r["pe"] for r in ranking] == sorted(
        figures["ppl_vs_length"], key=lambda p: figures["ppl_vs_length"][p]["mean"][1])
    text = open(os.path.join(out, "report.md")).read()
    for name in report.FIGURES:
        assert f"]({name})" in text and os.path.getsize(os.path.join(out, name)) > 1000
    assert "LongRoPE without searched per-pair factors" in text
    assert "rows past L are never trained" in text
    # docs: numbers copied from results.json into a generated block, replaced on rerun
    docs = tmp_path / "docs.md"
    docs.write_text("# Doc\n\nintro\n")
    report.update_docs(os.path.join(out, "results.json"), str(docs), str(tmp_path / "figs"))
    report.update_docs(os.path.join(out, "results.json"), str(docs), str(tmp_path / "figs"))
    body = docs.read_text()
    begin, end = report.markers("tiny")  # the run's preset names its block
    assert body.count(begin) == 1 and body.count(end) == 1 and body.startswith("# Doc")
    assert report.BEGIN not in body and report.fmt_ci(ranking[0]["ppl_at"], 1.0, 2) in body
    # a second preset's block sits beside the first; each rerun replaces only its own
    results["preset"] = "quick"
    Path(out, "quick.json").write_text(json.dumps(results))
    for _ in range(2):
        report.update_docs(os.path.join(out, "quick.json"), str(docs), str(tmp_path / "figs"))
    body = docs.read_text()
    assert body.count(begin) == 1 and body.count(report.BEGIN) == 1
    assert all((tmp_path / "figs" / n).exists() for n in report.FIGURES + ("results.json",))


def test_training_rows_hold_retrievable_answers():
    cfg = TINY
    stream = data.markov_stream(4000, 48, seed=0)
    vocab = data.retrieval_vocab(cfg, 48, 0)
    arr = data.training_arrays(stream, vocab, cfg, seed=0)
    toks, mask = arr["tokens"], arr["loss_mask"]
    assert toks.shape[1] == cfg.train_length and toks.max() < 48 + 2
    ret = ~mask.all(1)
    assert 0.2 < ret.mean() < 0.4                              # retrieval_fraction 0.3
    for row, m in zip(toks[ret][:20], mask[ret][:20]):
        at = np.flatnonzero(m)
        assert len(at) == cfg.key_length
        assert vocab.query_marker in (row[at[0] - 1], row[at[0] - 2])  # passkey / needle query
        if row[0] != vocab.key_marker and list(row).count(vocab.key_marker) == 1:  # passkey
            k = list(row).index(vocab.key_marker)
            assert list(row[k + 1:k + 1 + cfg.key_length]) == list(row[at])


def test_fixed_width_greedy_equals_generate():
    from flax import nnx

    from experiments.long_context.evaluate import greedy_answers
    from experiments.long_context.experiment import model_config
    from posjax.models import LanguageModel, generate

    model = LanguageModel(model_config(TINY, "alibi", {}, 50), rngs=nnx.Rngs(3))
    prompts = np.random.default_rng(0).integers(0, 50, (2, 6)).astype(np.int32)
    want = np.asarray(generate(model, prompts, max_new_tokens=2, temperature=0.0,
                               use_cache=False))[:, 6:]
    np.testing.assert_array_equal(greedy_answers(model, prompts, 2), want)
    cpe = LanguageModel(model_config(TINY, "cpe", {}, 50), rngs=nnx.Rngs(3))  # no kv cache
    want = np.asarray(generate(cpe, prompts, max_new_tokens=1, temperature=0.0,
                               use_cache=False))[:, 6:]
    np.testing.assert_array_equal(greedy_answers(cpe, prompts, 1), want)


def test_content_dependent_pe_has_no_static_geometry():
    from flax import nnx

    from experiments.long_context import geometry
    from experiments.long_context.experiment import model_config
    from posjax.models import LanguageModel

    corpus = {"train": data.markov_stream(2000, 48, seed=1), "model_vocab": 50}
    model = LanguageModel(model_config(TINY, "fox", {}, 50), rngs=nnx.Rngs(0))
    got = geometry.pe_stress("fox", [model], TINY, corpus)
    assert set(got) == {"none"} and "fox" in got["none"].lower()


def test_presets_and_set():
    q = PRESETS["quick"]
    assert q.pes == QUICK_PES and q.train_length == 32 and q.vocab_size <= 2000
    assert q.seeds >= 3 and len(PRESETS["cpu"].pes) >= 12
    assert parse_set(LongContextConfig, ["pes=none,xpos", "scalings="]) == {
        "pes": ("none", "xpos"), "scalings": ()}
    assert parse_set(LongContextConfig, ["model.d_model=32", "train.steps=7"]) == {
        "model": {"d_model": 32}, "train": {"steps": 7}}
    with pytest.raises(ValueError, match="did you mean model.d_model"):
        parse_set(LongContextConfig, ["d_model=32"])
    with pytest.raises(ValueError, match="did you mean train.steps"):
        parse_set(LongContextConfig, ["steps=32"])
    with pytest.raises(ValueError, match="model.max_len is decided per PE"):
        apply_overrides(q, {"model": {"max_len": 64}})
    assert (PRESETS["gpu"].model.d_model, PRESETS["gpu"].train.steps, q.train.steps) == (128, 3000,
                                                                                        300)
    with pytest.raises(ValueError, match="unknown PE"):
        LongContextConfig(pes=("nope_not_a_pe",))
    with pytest.raises(ValueError, match="rope"):
        LongContextConfig(pes=("none",))


def test_settings_the_run_would_override_or_cap_are_refused(tmp_path):
    """``--set`` values the experiment would silently replace or cut are refused: the logging
    and checkpoint cadence (decided by train.steps), a text file without dataset=text, and more
    geometry windows than the training stream holds (the control: as many as it holds run)."""
    with pytest.raises(ValueError, match="train.log_every"):
        apply_overrides(TINY, parse_set(LongContextConfig, ["train.log_every=3"]))
    with pytest.raises(ValueError, match="train.checkpoint_every"):
        apply_overrides(TINY, parse_set(LongContextConfig, ["train.checkpoint_every=3"]))
    with pytest.raises(ValueError, match="text_file"):
        apply_overrides(TINY, parse_set(LongContextConfig, ["dataset=text"]))
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b\n")
    with pytest.raises(ValueError, match="dataset=text"):
        apply_overrides(TINY, parse_set(LongContextConfig, [f"text_file={corpus}"]))
    from experiments.long_context.geometry import check_windows

    stream = np.zeros(4 * TINY.train_length * TINY.geometry_windows, np.int32)  # exactly enough
    check_windows(TINY, stream)
    with pytest.raises(ValueError, match="geometry_windows=40"):
        check_windows(TINY, stream[:-1])


def test_rope_llama3_is_evaluated_at_the_trained_base():
    """At factor 1 every RoPE scaling of the experiment is the trained RoPE: its options keep
    the trained base (rope_llama3's own default is Llama 3.1's 5e5)."""
    from flax import nnx

    from experiments.long_context.experiment import model_config, pe_options
    from posjax.models import LanguageModel, rebuild_with_config

    model = LanguageModel(model_config(TINY, "rope", {}, 50), rngs=nnx.Rngs(0))
    tokens = np.random.default_rng(0).integers(0, 50, (2, TINY.train_length)).astype(np.int32)
    want = np.asarray(model(tokens))
    for pe in ("rope_linear", "rope_ntk", "rope_yarn", "rope_llama3", "longrope"):
        scaled = rebuild_with_config(model, model_config(TINY, pe, pe_options(pe, TINY), 50))
        np.testing.assert_allclose(np.asarray(scaled(tokens)), want, atol=1e-5, err_msg=pe)
