"""Smoke tests of the Paper B experiments (tiny configurations; full CLIs are marked slow)."""
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


def test_init_sweep_cell_smoke(tmp_path):
    splits = make_splits(LSTOptions(n_per_condition=10, ood_unique_per_condition=2), seed=0)
    opts = dataclasses.replace(init_sweep.quick_options("adam"), d_model=8, num_layers=1,
                               batch_size=8, max_steps=3)
    cell = init_sweep.run_cell("learned_s0.5", 1, splits, opts, str(tmp_path))
    for split in ("train", "test", "ood"):
        assert 0.0 <= cell[split]["all"] <= 1.0
    assert cell["steps"] == 3 and cell["sigma"] == 0.5
    assert set(cell["similarity"]) >= {"rsm_cosine", "spearman", "procrustes_r2", "per_layer"}
    tab = np.load(tmp_path / "tables" / "learned_s0.5_seed1.npy")
    assert tab.shape == (1, 16, 8)
    # the init ratio logged is the PE row norm over the content-embedding norm
    assert cell["init_pe_content_ratio"] == pytest.approx(cell["init_pe_norm"] / cell["init_content_norm"])


def test_init_sweep_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="unknown fixed PE"):
        init_sweep.main(["--quick", "--out", str(tmp_path), "--pes", "alibi"])
    with pytest.raises(ValueError, match="positive"):
        init_sweep.main(["--quick", "--out", str(tmp_path), "--sigmas", "0,1"])


@pytest.mark.slow
def test_init_sweep_cli_resumes(tmp_path):
    args = ["--quick", "--out", str(tmp_path), "--sigmas", "0.1", "--pes", "sin2d",
            "--steps", "2", "--n-per-condition", "12"]
    init_sweep.main(args)
    res = json.load(open(tmp_path / "results.json"))
    assert [c["label"] for c in res["cells"]] == ["learned_s0.1", "sin2d"]
    assert res["lst_options"]["jaccard_min"] == 0.8 and "versions" in res
    assert os.path.exists(tmp_path / "report.md") and os.path.exists(tmp_path / "sigma_sweep.png")
    before = sorted(os.listdir(tmp_path / "cells"))
    init_sweep.main(args)                                     # resumes: no cell recomputed
    assert sorted(os.listdir(tmp_path / "cells")) == before


@pytest.mark.slow
def test_network_simulation_cli(tmp_path):
    from experiments import network_simulation

    network_simulation.main(["--quick", "--out", str(tmp_path), "--steps", "2", "--seeds", "1"])
    res = json.load(open(tmp_path / "results.json"))
    assert {r["label"] for r in res["summary"]} >= {"learned_s0.05", "none"}
    assert os.path.exists(tmp_path / "network_pe.png")
