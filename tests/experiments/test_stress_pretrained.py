"""stress_table with a pretrained checkpoint row and a custom corpus (--dataset text)."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root, for `experiments`

from experiments import stress_table as st

WORDS = ["the", "cat", "dog", "sat", "ran", "on", "a", "mat", "log", "good", "bad", "very"]
TINY = dict(num_positions=10, max_len=10, train_examples=40, test_examples=20, seeds=1,
            model=dict(d_model=8, num_heads=2, num_layers=1, d_ff=16),
            train=dict(batch_size=8, steps=2),
            encodings=("learned",), sens_positions=8, sens_vocab=20, sens_samples=(None,),
            sens_repeats=1, smacof_max_iter=10)


def _lines(n, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, int(rng.integers(3, 9)))) for _ in range(n)]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from posjax.pretrained import write_tiny_checkpoint
    return write_tiny_checkpoint(tmp_path_factory.mktemp("bert"), "bert", words=WORDS,
                                 max_positions=16, seed=2)


def _unlabelled(tmp_path):
    data = tmp_path / "corpus"
    data.mkdir()
    (data / "notes.txt").write_text("\n".join(_lines(200)) + "\n")
    return data


def test_unlabelled_corpus_uses_the_checkpoint_tokenizer_and_skips_accuracy(tmp_path, checkpoint):
    from experiments.stress_table.data import prepare

    cfg = st.make_config("text", quick=True, data_dir=str(_unlabelled(tmp_path)),
                         pretrained=str(checkpoint), **TINY)
    prep = prepare(cfg, str(tmp_path / "out"))
    assert prep.train is None and prep.info["accuracy_note"].startswith("accuracy table skipped")
    assert prep.info["tokenizer"]["source"].startswith("vocab:")  # the checkpoint's vocab.txt
    assert prep.geo_tokens.shape == (200, 10) and (prep.geo_tokens[:, 0] == 2).all()


def test_pretrained_row_equals_an_independent_stress(tmp_path, checkpoint):
    import jax

    import posjax.geometry as geo
    from experiments.stress_table.data import prepare
    from posjax.analysis import stress_geometry as G
    from posjax.pretrained import position_table

    cfg = st.make_config("text", quick=True, data_dir=str(_unlabelled(tmp_path)),
                         pretrained=str(checkpoint), pretrained_layernorm=True, **TINY)
    prep = prepare(cfg, str(tmp_path / "out"))
    with jax.enable_x64(True):
        P, _ = geo.positional_distributions(prep.geo_tokens, lengths=prep.geo_lengths,
                                            vocab_size=prep.vocab_size, num_positions=10,
                                            pad_id=prep.pad_id, keep_special=True,
                                            on_empty="truncate")
        D = np.asarray(geo.hellinger_matrix(np.asarray(P)), np.float64)
        tables = {"pretrained": position_table(checkpoint),
                  "pretrained_ln": position_table(checkpoint, post_layernorm=True)}
        rows = G.pretrained_stress_rows(tables, prep.model_offset, G.as_targets(
            {"plugin": {"D": D}}), checkpoint=str(checkpoint))["plugin"]
    n = rows["pretrained"]["rows"]
    assert n == min(D.shape[0], 16)
    table = position_table(checkpoint).astype(np.float64)[:n]
    E = np.sqrt(((table[:, None] - table[None]) ** 2).sum(-1))
    iu = np.triu_indices(n, 1)
    raw = float(((D[:n, :n][iu] - E[iu]) ** 2).sum() / (D[:n, :n][iu] ** 2).sum())
    assert rows["pretrained"]["raw"] == pytest.approx(raw, rel=1e-6)
    c = (D[:n, :n][iu] * E[iu]).sum() / (E[iu] ** 2).sum()  # optimal scale of E
    optimal = float(((D[:n, :n][iu] - c * E[iu]) ** 2).sum() / (D[:n, :n][iu] ** 2).sum())
    assert rows["pretrained"]["optimal"] == pytest.approx(optimal, rel=1e-6)
    assert rows["pretrained_ln"]["raw"] != pytest.approx(raw, rel=1e-3)


@pytest.mark.slow
def test_text_corpus_end_to_end_with_pretrained_row(tmp_path, checkpoint):
    cfg = st.make_config("text", quick=True, data_dir=str(_unlabelled(tmp_path)),
                         pretrained=str(checkpoint), **TINY)
    res = st.run(cfg, str(tmp_path / "out"), log=lambda *_: None)
    assert res["accuracy"]["rows"] == []
    assert {"pretrained", "mds_full"} <= set(res["stress"]["plugin"])


def _labelled(tmp_path, eval_split, names):
    data = tmp_path / "corpus"
    data.mkdir()
    for split, n, seed in (("train", 60, 0), (eval_split, 20, 1)):
        with open(data / f"{split}.jsonl", "w") as f:
            for i, line in enumerate(_lines(n, seed)):
                f.write(json.dumps({"text": line, "label": names[i % len(names)]}) + "\n")
    return data


@pytest.mark.slow
def test_text_corpus_with_labels_runs_the_accuracy_table(tmp_path):
    data = _labelled(tmp_path, "test", [0, 1])
    cfg = st.make_config("text", quick=True, data_dir=str(data), **TINY)
    res = st.run(cfg, str(tmp_path / "out"), log=lambda *_: None)
    assert [r["pe"] for r in res["accuracy"]["rows"]] == ["learned"]
    assert res["data"]["tokenizer"]["source"].startswith("wordpiece")


def test_text_dataset_needs_a_directory():
    with pytest.raises(ValueError, match="--data-dir"):
        from experiments.stress_table.data import prepare
        prepare(st.make_config("text", quick=True), "/tmp")


def test_labelled_corpus_gives_model_arrays(tmp_path):
    from experiments.stress_table.data import prepare

    data = _labelled(tmp_path, "validation", ["neg", "pos", "mixed"])
    cfg = st.make_config("text", quick=True, data_dir=str(data), **TINY)
    prep = prepare(cfg, str(tmp_path / "out"))
    assert prep.num_classes == 3 and prep.train["tokens"].shape == (40, 10)
    assert prep.test["tokens"].shape == (20, 10) and (prep.train["tokens"][:, 0] == 2).all()
    assert set(np.unique(prep.train["labels"])) <= {0, 1, 2}



STREAM = dict(stream=True, require_n=True, pretrained_layernorm=True,
              fixed_encodings=("sinusoidal", "alibi", "t5"))


def test_stream_windows_checkpoint_rows_and_required_n(tmp_path, checkpoint):
    """The real-text path (--dataset stdlib uses the same code): a contiguous token stream cut
    into windows of n tokens gives every position one sample per window, the checkpoint's
    table is scored raw and after its LayerNorm (against an independent stress), T5 at
    initialisation is a fixed row, and asking more positions than the checkpoint has fails."""
    import jax

    from experiments.stress_table.data import prepare
    from posjax.analysis import stress_geometry as G
    from posjax.pretrained import position_table

    opts = dict(TINY, data_dir=str(_unlabelled(tmp_path)), pretrained=str(checkpoint), **STREAM)
    cfg = st.make_config("text", quick=True, **opts)
    prep = prepare(cfg, str(tmp_path / "out"))
    assert prep.train is None and prep.geo_tokens.shape[1] == 10 and (prep.geo_lengths == 10).all()
    assert (prep.geo_tokens[:, 0] == prep.geo_tokens[0, 0]).all()  # [CLS] opens every window
    assert prep.info["geometry_corpus"]["windows"] == len(prep.geo_tokens)
    with jax.enable_x64(True):
        def variants_of(cfg, prep):
            return G.geometry_variants(prep, **cfg.plan().geometry)[1:]

        variants, info = variants_of(cfg, prep)
        assert info["n"] == 10 and set(G.fixed_distances(10, cfg.plan().encodings)) == {
            "sinusoidal", "alibi", "t5_init"}
        table = np.asarray(position_table(str(checkpoint), post_layernorm=True), np.float64)
        rows = G.pretrained_stress_rows({"pretrained": position_table(str(checkpoint)),
                                         "pretrained_ln": table}, prep.model_offset,
                                        G.as_targets(variants), checkpoint=str(checkpoint))["plugin"]
        table = table[:10]
        E = np.sqrt(((table[:, None] - table[None]) ** 2).sum(-1))
        D = variants["plugin"]["D"]
        iu = np.triu_indices(10, 1)
        a = (D[iu] @ E[iu]) / (E[iu] @ E[iu])
        want = ((D[iu] - a * E[iu]) ** 2).sum() / (D[iu] ** 2).sum()
        assert rows["pretrained_ln"]["optimal"] == pytest.approx(want, rel=1e-9)
        assert rows["pretrained"]["rows"] == 10
        big = st.make_config("text", quick=True, **{**opts, "num_positions": 20, "max_len": 20})
        with pytest.raises(ValueError, match="require_n"):  # the checkpoint has 16 rows
            G.pretrained_stress_rows(
                {"pretrained": position_table(str(checkpoint))}, 0,
                G.as_targets(variants_of(big, prepare(big, str(tmp_path / "o")))[0]),
                checkpoint=str(checkpoint), required=20)


@pytest.mark.slow
def test_stream_run_end_to_end(tmp_path, checkpoint):
    opts = dict(TINY, data_dir=str(_unlabelled(tmp_path)), pretrained=str(checkpoint), **STREAM)
    res = st.run(st.make_config("text", quick=True, **opts), str(tmp_path / "out"),
                 log=lambda *_: None)
    rows = res["stress"]["plugin"]
    assert {"pretrained", "pretrained_ln", "t5_init", "sinusoidal", "alibi"} <= set(rows)
    assert res["geometry"]["info"]["n"] == 10 and "rope" not in rows
