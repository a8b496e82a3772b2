"""End-to-end tests of experiments.stress_table (arXiv 2604.05217 flagship) at toy sizes."""
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root, for `experiments`

from experiments import stress_table as st
from experiments.stress_table import experiment as driver
from experiments.stress_table import train as _stress_train

TINY = dict(num_positions=12, vocab_size=40, samples_per_position=400, train_examples=64,
            test_examples=32, seeds=1, encodings=("learned",), sens_positions=12, sens_vocab=40,
            sens_samples=(None, 400), sens_repeats=1, smacof_max_iter=20,
            model=dict(d_model=8, num_heads=2, num_layers=1, d_ff=16),
            train=dict(batch_size=16, steps=3))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("stress"))
    cfg = st.make_config("synthetic", quick=True, **TINY)
    res = st.run(cfg, out, log=lambda *_: None)
    return cfg, out, res


def test_results_json_has_every_table_and_option(tiny_run):
    cfg, out, res = tiny_run
    with open(os.path.join(out, "results.json")) as f:
        saved = json.load(f)
    for key in ("interpretation", "options", "versions", "stress", "spectrum", "parameters",
                "accuracy", "sensitivity",
                "claims", "geometry", "timing_s"):
        assert key in saved, key
    it = saved["interpretation"]
    for key in ("metric", "stress_scale", "special_tokens", "rank_rule", "N_i", "pad_mode"):
        assert key in it, key
    assert it["N_i"] == {"min": 400.0, "median": 400.0, "max": 400.0}
    # n = 12 is below the matrix-free threshold: the auto option ran the dense path
    assert it["geometry"]["path"] == "dense" and it["geometry"]["option"] == "auto"
    assert "Dense: the n x n Hellinger matrix" in open(os.path.join(out, "report.md")).read()
    assert set(saved["stress"]) == {"plugin", "split_half", "exact"}
    rows = saved["stress"]["plugin"]
    for key in ("mds_full", "mds_low", "mds_smacof", "learned", "sinusoidal", "rope", "alibi",
                "nope"):
        assert {"raw", "optimal"} <= set(rows[key]), key
    assert rows["nope"]["raw"] == 1.0 and rows["nope"]["optimal"] == 1.0
    assert len(saved["spectrum"]["plugin"]["top_normalized"]) == 10
    assert saved["accuracy"]["summary"]["learned"]["seeds"] == 1
    assert os.path.exists(os.path.join(out, "report.md"))
    for name in ("hellinger_heatmap", "mds_2d", "spectrum", "stress_bars", "accuracy_vs_params"):
        assert os.path.getsize(os.path.join(out, f"{name}.png")) > 1000


def test_full_rank_mds_stress_is_zero(tiny_run):
    _, _, res = tiny_run
    for variant in ("plugin", "exact"):  # Euclidean chord matrices
        assert res["stress"][variant]["mds_full"]["raw"] < 1e-6
    # the plug-in noise floor makes B full rank: r_tau = n - 1
    assert res["stress"]["plugin"]["mds_full"]["rank"] == 11
    # SMACOF from the r_eps configuration never increases raw stress
    assert res["stress"]["plugin"]["mds_smacof"]["raw"] <= res["stress"]["plugin"]["mds_low"]["raw"] + 1e-12


def test_resume_skips_finished_cells(tiny_run, monkeypatch):
    cfg, out, res = tiny_run

    def boom(*a, **k):
        raise AssertionError("a finished cell was recomputed")

    monkeypatch.setattr(driver, "train_cell", boom)
    monkeypatch.setattr(driver, "_sensitivity_cell", boom)
    again = st.run(cfg, out, log=lambda *_: None)
    assert again["accuracy"]["rows"] == res["accuracy"]["rows"]
    assert again["sensitivity"]["rows"] == res["sensitivity"]["rows"]


def test_cli_errors_are_one_line(tmp_path):
    with pytest.raises(SystemExit) as e:
        st.run_cli(st.main, ["--dataset", "mnist", "--out", str(tmp_path)])
    assert "unknown dataset 'mnist'" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(SystemExit) as e:
        st.run_cli(st.main, ["--dataset", "synthetic", "--set", "no_such=1",
                             "--out", str(tmp_path)])
    assert "unknown key 'no_such'; valid keys: dataset" in str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(SystemExit) as e:
        st.run_cli(st.main, ["--dataset", "sst2", "--data-dir", str(tmp_path / "missing"),
                             "--out", str(tmp_path)])
    assert "does not exist" in str(e.value) and "\n" not in str(e.value)


def test_synthetic_task_is_balanced_and_its_ceiling_recorded(tmp_path):
    from experiments.stress_table.data import prepare
    from posjax.data.tasks import bayes_accuracy

    cfg = st.make_config("synthetic", quick=True, **TINY)
    prep = prepare(cfg, str(tmp_path))
    task = prep.info["task"]
    assert task["shift"] == 1  # None: max(1, n // 8) at n = 12
    assert prep.train["labels"].sum() == 32 and prep.test["tokens"].shape == (32, 12)
    assert task["bayes_accuracy"] == bayes_accuracy(prep.exact_P, prep.test, task["shift"])


def test_old_layout_run_directory_is_refused(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"experiment": "stress_table", "E1": {}}))
    cfg = st.make_config("synthetic", quick=True, **TINY)
    with pytest.raises(ValueError, match="old layout"):
        st.run(cfg, str(tmp_path), log=lambda *_: None)
    assert not (tmp_path / "cells").exists()


def test_mds_encoding_installed_in_model():
    from posjax.pretrained import param_count

    cfg = st.make_config("synthetic", quick=True, **TINY)

    class Prep:
        vocab_size, num_classes, model_offset = 40, 2, 0
        train = {"tokens": np.zeros((4, 12), np.int32)}

    model, _ = _stress_train.build_model(cfg.model, Prep, "mds", 0, mds_coords=np.ones((12, 3)))
    pe = model.transformer.pe
    assert pe.hook == "embed" and pe.rank == 3
    assert param_count(model.transformer.pes) == 3 * (12 + 8)


def _write_sst2(root, n_train=120, n_eval=40, seed=0):
    """A tiny SST-2-shaped corpus: the label is carried by one sentiment word."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    words = {1: ["good", "great", "superb"], 0: ["bad", "awful", "dull"]}
    filler = ["the", "movie", "was", "a", "plot", "and", "it", "really", "story"]

    def make(m):
        labels = rng.integers(0, 2, m)
        texts = []
        for y in labels:
            w = list(rng.choice(filler, rng.integers(2, 10)))
            w.insert(int(rng.integers(0, len(w))), str(rng.choice(words[int(y)])))
            texts.append(" ".join(w))
        return texts, labels.tolist()

    t, y = make(n_train)
    pq.write_table(pa.table({"sentence": t, "label": y}), str(root / "train.parquet"))
    t, y = make(n_eval)
    with open(root / "validation.jsonl", "w") as f:
        f.writelines(json.dumps({"text": a, "label": b}) + "\n" for a, b in zip(t, y))


@pytest.mark.parametrize("keep_special", [True, False])
def test_prepare_text_from_local_files(tmp_path, monkeypatch, keep_special):
    from experiments.stress_table.data import prepare

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    _write_sst2(tmp_path)
    cfg = st.make_config("sst2", quick=True, data_dir=str(tmp_path), tokenizer_vocab=60,
                         max_len=16, num_positions=16, train_examples=50,
                         keep_special=keep_special)
    prep = prepare(cfg, str(tmp_path / "out"))
    assert prep.train["tokens"].shape == (50, 16) and prep.test["tokens"].shape == (40, 16)
    assert prep.train["padding_mask"].dtype == bool
    assert (prep.train["tokens"][:, 0] == 2).all()  # model inputs always start with [CLS]
    assert ((prep.geo_tokens[:, 0] == 2).all()) == keep_special
    assert prep.model_offset == (0 if keep_special else 1)
    assert prep.geo_tokens.shape == (120, 16) and prep.pad_id == 0
    assert prep.info["source"]["train"].endswith("train.parquet")
    assert prep.info["eval_split"] == "validation"
    assert len(list((tmp_path / "out" / "tokenizer").glob("sst2-v60-*.json"))) == 1


@pytest.mark.slow
def test_sst2_end_to_end_from_local_files(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    _write_sst2(tmp_path)
    tiny = {k: v for k, v in TINY.items() if k not in ("num_positions", "vocab_size",
                                                       "samples_per_position")}
    cfg = st.make_config("sst2", quick=True, data_dir=str(tmp_path), tokenizer_vocab=60,
                         max_len=16, num_positions=16, **{**tiny, "encodings": ("learned", "mds")})
    res = st.run(cfg, str(tmp_path / "out"), log=lambda *_: None)
    assert set(res["stress"]) == {"plugin", "split_half"}
    assert res["stress"]["plugin"]["mds_full"]["raw"] < 1e-6
    assert res["interpretation"]["N_i"]["max"] == 120
    assert {r["pe"] for r in res["accuracy"]["rows"]} == {"learned", "mds"}


def test_adding_seeds_or_encodings_keeps_finished_cells():
    import dataclasses

    cfg = st.make_config("synthetic", quick=True, **TINY)
    more = dataclasses.replace(cfg, seeds=5, encodings=("rope", "learned"),
                               train=dataclasses.replace(cfg.train, progress=True))
    assert more.salt() == cfg.salt()
    fewer = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=4))
    assert fewer.salt() != cfg.salt()


def test_plan_keys_each_part_by_the_options_it_reads():
    """The plan resolves the options once: a sensitivity-only option moves the sensitivity salt
    and arguments, not the accuracy salt; a model option the reverse; the matrix-free salt holds
    the path options, the dense one does not."""
    import dataclasses

    cfg = st.make_config("synthetic", quick=True, **TINY)
    plan = cfg.plan()
    assert plan.accuracy_salt["dense"] == {"part": "E4", **cfg.salt()}
    assert "stress_pairs" in plan.accuracy_salt["matrix_free"]
    assert "stress_pairs" not in plan.accuracy_salt["dense"]
    sens = dataclasses.replace(cfg, sens_vocab=41).plan()
    assert sens.sensitivity_salt != plan.sensitivity_salt and sens.sensitivity["vocab"] == 41
    assert sens.accuracy_salt["dense"]["sens_vocab"] == 41  # every result option keys accuracy
    model = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, d_model=16)).plan()
    assert model.sensitivity_salt == plan.sensitivity_salt
    assert model.accuracy_salt != plan.accuracy_salt and model.tables["model_d"] == 16
    assert plan.sensitivity["matrix_free"] is False and plan.pretrained is None
    mf = dataclasses.replace(cfg, matrix_free_above=8).plan()
    assert mf.sensitivity["matrix_free"] is True  # sens_positions = 12 > 8, chord metric


def test_library_fields_are_dotted_and_a_flat_one_says_where_it_lives():
    from experiments.common import parse_set

    assert parse_set(st.StressConfig, ["model.d_model=64", "train.steps=5"]) == {
        "model": {"d_model": 64}, "train": {"steps": 5}}
    cfg = st.make_config("synthetic", quick=True, **parse_set(st.StressConfig, ["model.d_ff=48"]))
    assert cfg.model.d_ff == 48 and cfg.model.d_model == 32  # the preset's other fields stay
    with pytest.raises(ValueError, match="did you mean model.d_model"):
        parse_set(st.StressConfig, ["d_model=64"])
    with pytest.raises(ValueError, match="did you mean train.steps"):
        st.make_config("synthetic", steps=5)


def test_accuracy_claims_with_the_mds_pe_alone_or_beside_others():
    from experiments.stress_table.report import accuracy_claims

    row = lambda acc: {"mean": float(np.mean(acc)), "acc": acc, "seed": list(range(len(acc)))}
    assert accuracy_claims({"mds": row([0.8, 0.82])}, None) == []  # nothing to compare with
    (claim,) = accuracy_claims({"mds": row([0.8, 0.82, 0.81]), "rope": row([0.7, 0.72, 0.71]),
                                "none": row([0.5, 0.52, 0.51])}, None)
    assert claim["value"]["best_other"] == "rope"
    assert claim["value"]["statistic"]["mean"] == pytest.approx(0.11)
