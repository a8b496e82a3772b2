"""Smoke tests of ``python -m experiments.additive_vs_multiplicative`` (tiny settings)."""
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `experiments`
from experiments import additive_vs_multiplicative as exp  # noqa: E402

TINY = ["--quick", "--set", "pes=rope", "--set", "count_pes=", "--set", "sweep_k=",
        "--set", "steps=2", "--set", "distance_samples=200", "--set", "attention_probe=false",
        "--set", "model.num_layers=1", "--set", "model.d_model=16", "--set", "train.batch_size=16",
        "--seeds", "1"]


def test_tiny_run_writes_results_and_resumes(tmp_path, monkeypatch):
    out = str(tmp_path / "run")
    exp.main(TINY + ["--out", out])
    with open(os.path.join(out, "results.json")) as f:
        res = json.load(f)
    assert res["preset"] == "quick" and res["settings"]["steps"] == 2 and res["settings"]["pes"] == ["rope"]
    assert res["settings"]["model"]["kv_source"] == "residual"
    assert res["settings"]["model"]["d_model"] == 16 and res["settings"]["train"]["batch_size"] == 16
    assert res["settings"]["alibi_slopes"] == "canonical"
    (cell,) = res["cells"]
    v = cell["value"]
    assert cell["pe_options"] == {"interleaved": True}
    assert v["ablation_baseline"] == pytest.approx(v["test_accuracy"])
    assert len(v["ablated"]) == 1 and len(v["ablated"][0]) == 4
    assert "jax" in res["versions"] and res["priors"]["distance"][0]["chance"] > 0
    report = open(os.path.join(out, "report.md")).read()
    assert "| distance | rope |" in report and "Claims" in report
    assert os.path.exists(os.path.join(out, "ablation_distance.png"))
    # rerun: the finished cell is read back, not recomputed
    monkeypatch.setattr(exp.experiment, "run_cell", lambda *a, **k: pytest.fail("cell recomputed"))
    exp.main(TINY + ["--out", out])


def test_bad_overrides_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown key 'nosuchfield'; valid keys: "):
        exp.main(["--quick", "--set", "nosuchfield=1", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match=r"steps='many'.*valid keys"):
        exp.main(["--quick", "--set", "steps=many", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="unknown PE"):
        exp.main(["--quick", "--set", "pes=rope,xyz", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match=r"did you mean model.kv_source\?"):
        exp.main(["--quick", "--set", "kv_source=embeddings", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="train.seed is decided by the experiment"):
        exp.main(["--quick", "--set", "train.seed=3", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="error: "):
        from experiments.common import run_cli
        run_cli(exp.main, ["--quick", "--set", "seed_grid=diagonal", "--out", str(tmp_path)])


@pytest.mark.slow
def test_quick_distance_rope_beats_nope(tmp_path):
    """The qualitative result of --quick: NoPE near its order-blind ceiling, RoPE far above."""
    out = str(tmp_path / "q")
    exp.main(["--quick", "--seeds", "1", "--set", "pes=none,rope", "--set", "count_pes=",
              "--set", "sweep_k=", "--out", out])
    res = json.load(open(os.path.join(out, "results.json")))
    acc = {c["row"]: c["value"]["test_accuracy"] for c in res["cells"]}
    prior = res["priors"]["distance"][0]["length_prior"]
    assert acc["none"] < prior + 0.05
    assert acc["rope"] > acc["none"] + 0.3
