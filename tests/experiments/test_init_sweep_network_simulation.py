"""Smoke tests of the learned-PE initialisation experiments (arXiv 2406.08272) (tiny configurations; full CLIs are marked slow)."""
import dataclasses
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `experiments`
from experiments import init_sweep  # noqa: E402
from posjax.data.latin_square import LSTOptions, make_splits  # noqa: E402


def test_init_sweep_group_smoke(tmp_path):
    splits = make_splits(LSTOptions(n_per_condition=10, ood_unique_per_condition=2), seed=0)
    quick = init_sweep.PRESETS["quick"]
    cfg = dataclasses.replace(quick, max_steps=3, seeds=2, sigmas=(0.5, 2.0),
                              model=dataclasses.replace(quick.model, d_model=8, num_layers=1),
                              train=dataclasses.replace(quick.train, batch_size=8))
    cells = init_sweep.run_group("learned", ["learned_s0.5", "learned_s2"], splits, cfg,
                                 str(tmp_path))
    assert [(c["label"], c["seed"]) for c in cells] == [
        ("learned_s0.5", 2235), ("learned_s0.5", 6312), ("learned_s2", 2235), ("learned_s2", 6312)]
    for cell in cells:
        for split in ("train", "test", "ood"):
            assert 0.0 <= cell[split]["all"] <= 1.0
        assert cell["steps"] == 3 and cell["diverged_at"] is None
        assert set(cell["similarity"]) >= {"rsm_cosine", "spearman", "procrustes_r2", "per_layer"}
        # the init ratio logged is the PE row norm over the content-embedding norm
        assert cell["init_pe_content_ratio"] == pytest.approx(
            cell["init_pe_norm"] / cell["init_content_norm"])
    # σ sets the init scale of the table: row norm ≈ σ √d
    assert cells[2]["init_pe_norm"] / cells[0]["init_pe_norm"] == pytest.approx(4.0, rel=0.35)
    tab = np.load(tmp_path / "tables" / "learned_s0.5_seed2235.npy")
    assert tab.shape == (1, 16, 8)


def test_init_sweep_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="unknown fixed PE"):
        init_sweep.main(["--quick", "--out", str(tmp_path), "--set", "fixed_pes=alibi"])
    with pytest.raises(ValueError, match="positive"):
        init_sweep.main(["--quick", "--out", str(tmp_path), "--set", "sigmas=0,1"])
    with pytest.raises(ValueError, match="valid keys: sigmas, fixed_pes, seeds"):
        init_sweep.main(["--quick", "--out", str(tmp_path), "--set", "sigma=1"])


@pytest.mark.slow
def test_init_sweep_cli_resumes(tmp_path):
    args = ["--quick", "--out", str(tmp_path), "--seeds", "2", "--set", "sigmas=0.1",
            "fixed_pes=sin2d", "max_steps=2", "n_per_condition=12", "train.batch_size=8"]
    init_sweep.main(args)
    res = json.load(open(tmp_path / "results.json"))
    assert [c["label"] for c in res["cells"]] == ["learned_s0.1"] * 2 + ["sin2d"] * 2
    assert res["seeds"] == [2235, 6312] and res["claims"]
    assert res["lst_options"]["jaccard_min"] == 0.8 and "versions" in res
    assert os.path.exists(tmp_path / "report.md") and os.path.exists(tmp_path / "sigma_sweep.png")
    before = sorted(os.listdir(tmp_path / "cells"))
    init_sweep.main(args)                                     # resumes: no cell recomputed
    assert sorted(os.listdir(tmp_path / "cells")) == before


@pytest.mark.slow
def test_network_simulation_cli(tmp_path):
    from experiments import network_simulation

    network_simulation.main(["--quick", "--out", str(tmp_path), "--set", "train.steps=2",
                             "sim_steps=400", "--seeds", "2"])
    res = json.load(open(tmp_path / "results.json"))
    assert {r["label"] for r in res["summary"]} >= {"learned_s0.05", "none"}
    assert os.path.exists(tmp_path / "network_pe.png")


def test_learned_label_round_trip():
    from experiments.common import display_label, learned_label, learned_pe, learned_sigma

    for sigma in (0.01, 0.05, 0.2, 1.0, 2.0, 1.5):
        label = learned_label(sigma)
        assert learned_sigma(label) == sigma and display_label(label) == f"σ={sigma:g}"
    assert learned_label(0.2) == "learned_s0.2"   # cell keys of earlier runs stay valid
    assert learned_sigma("sin2d") is None and display_label("sin2d") == "sin2d"
    assert learned_pe(0.5) == ("learned", {"init": "normal", "std": 0.5})
