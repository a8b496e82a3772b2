"""The shared experiment layer: typed --set, presets, CIs and verdicts, corrupted cell files."""
import dataclasses
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `experiments`
from experiments import common  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Cfg:
    steps: int = 10
    lr: float = 1e-3
    flag: bool = False
    name: str = "a"
    cap: int | None = None
    pes: tuple[str, ...] = ("rope",)
    pair: tuple[int, int] = (1, 2)
    seeds: int = 3


def test_parse_set_converts_by_field_type():
    got = common.parse_set(Cfg, ["steps=5", "lr=0.5", "flag=true", "name=b", "cap=none",
                                 "pes=none,alibi", "pair=3,4", "pes="])
    assert got == {"steps": 5, "lr": 0.5, "flag": True, "name": "b", "cap": None,
                   "pes": (), "pair": (3, 4)}
    assert common.parse_set(Cfg, ["cap=7"]) == {"cap": 7}


@pytest.mark.parametrize("item, match", [
    ("stepz=5", "unknown key 'stepz'; valid keys: steps, lr, flag, name, cap, pes, pair, seeds"),
    ("steps=five", "steps='five': expected an integer"),
    ("flag=maybe", "expected true or false"),
    ("pair=1,2,3", "expected 2 comma-separated values"),
    ("steps", "expects key=value"),
])
def test_parse_set_errors_name_the_problem_and_the_keys(item, match):
    with pytest.raises(ValueError, match=match) as e:
        common.parse_set(Cfg, [item])
    assert "\n" not in str(e.value) and "valid keys" in str(e.value)


def test_presets_and_quick_alias():
    presets = {"quick": Cfg(steps=1), "gpu": Cfg(steps=2), "paper": Cfg()}
    p = common.experiment_parser("x", default_out="o")
    assert common.resolve_config(p.parse_args(["--quick"]), presets).steps == 1
    assert common.resolve_config(p.parse_args(["--preset", "gpu"]), presets).steps == 2
    assert common.resolve_config(p.parse_args([]), presets) == Cfg()
    cfg = common.resolve_config(p.parse_args(["--quick", "--seeds", "5", "--set", "lr=2",
                                              "--set", "name=z"]), presets)
    assert (cfg.steps, cfg.seeds, cfg.lr, cfg.name) == (1, 5, 2.0, "z")
    with pytest.raises(ValueError, match="conflicts"):
        common.resolve_config(p.parse_args(["--quick", "--preset", "paper"]), presets)
    with pytest.raises(ValueError, match="--seeds must be >= 1"):
        common.resolve_config(p.parse_args(["--seeds", "0"]), presets)


def _composed():
    from posjax.models.config import TransformerConfig
    from posjax.training.config import TrainConfig

    @dataclasses.dataclass(frozen=True)
    class ExpConfig:
        pes: tuple[str, ...] = ("none",)
        seeds: int = 3
        model: TransformerConfig = TransformerConfig()
        train: TrainConfig = TrainConfig()
    return ExpConfig


def test_dotted_keys_reach_the_nested_library_configs():
    cls = _composed()
    got = common.parse_set(cls, ["pes=rope,alibi", "model.d_model=32", "train.learning_rate=3e-3",
                                 "model.layer_types=sliding,full", "model.sliding_window=8",
                                 'model.pe_options={"base": 500}'])
    assert got == {"pes": ("rope", "alibi"), "train": {"learning_rate": 3e-3},
                   "model": {"d_model": 32, "layer_types": ("sliding", "full"),
                             "sliding_window": 8, "pe_options": {"base": 500}}}
    cfg = common.apply_overrides(cls(), got)
    assert (cfg.model.d_model, cfg.model.layer_types, cfg.model.sliding_window) == \
        (32, ("sliding", "full"), 8)
    assert cfg.model.num_layers == cls().model.num_layers  # untouched fields stay
    assert (cfg.train.learning_rate, cfg.pes) == (3e-3, ("rope", "alibi"))
    assert "model.d_model" in common.settable_keys(cls) and "d_model" not in \
        common.settable_keys(cls)


@pytest.mark.parametrize("item, match", [
    ("d_model=64", "did you mean model.d_model[?]"),
    ("learning_rate=1", "did you mean train.learning_rate[?]"),
    ("model=3", "is a config of its own"),
    ("pes.x=1", "'pes' has no fields to set"),
    ("model.nope=1", "unknown key 'model.nope'"),
    ("train.steps=x", "train.steps='x': expected an integer"),
    ("model.pe_options=[1]", "expected a JSON object"),
])
def test_dotted_key_errors_name_the_key(item, match):
    with pytest.raises(ValueError, match=match) as e:
        common.parse_set(_composed(), [item])
    assert "\n" not in str(e.value)


def test_nested_validation_runs_on_the_nested_config():
    cls = _composed()
    with pytest.raises(ValueError, match="sliding_window is not set"):
        common.apply_overrides(cls(), common.parse_set(cls, ["model.layer_types=sliding"]))


def test_mean_ci_is_the_student_t_interval():
    ci = common.mean_ci([1.0, 2.0, 3.0])
    # t_{0.975, 2} = 4.302652729911275; sd = 1; n = 3
    assert ci["mean"] == 2.0 and ci["half"] == pytest.approx(4.302652729911275 / np.sqrt(3))
    assert ci["values"] == [1.0, 2.0, 3.0] and ci["n"] == 3
    rng = np.random.default_rng(0)  # coverage of a 95 % interval, by simulation
    covered = 0
    for _ in range(400):
        c = common.mean_ci(rng.normal(0.3, 1.0, 4))
        covered += c["lo"] <= 0.3 <= c["hi"]
    assert 0.92 < covered / 400 < 0.98  # a z-interval (1.96 sd/√n) would cover ~0.86
    assert common.mean_ci([2.0])["half"] == float("inf")
    assert common.mean_ci([])["n"] == 0


def test_verdict_is_decided_by_the_interval():
    assert common.verdict(common.mean_ci([1.0, 1.1, 0.9])) == "reproduced"
    assert common.verdict(common.mean_ci([-1.0, -1.1, -0.9])) == "not reproduced"
    assert common.verdict(common.mean_ci([-1.0, 1.0, 0.2])) == "inconclusive at this scale"
    assert common.verdict(common.mean_ci([5.0])) == "inconclusive at this scale"
    assert common.verdict(common.mean_ci([0.97, 0.975, 0.98]), 0.956) == "reproduced"


def test_corrupted_cell_file_is_named_and_recomputed(tmp_path, capsys):
    store = common.CellStore(str(tmp_path), {"opt": 1})
    assert store.compute({"cell": 1}, lambda: {"acc": 0.5}) == {"acc": 0.5}
    (path,) = [os.path.join(store.dir, f) for f in os.listdir(store.dir)]
    with open(path, "w") as f:
        f.write('{"key": {"cell": 1}, "val')  # truncated by a crash
    calls = []
    value = store.compute({"cell": 1}, lambda: calls.append(1) or {"acc": 0.7})
    assert value == {"acc": 0.7} and calls == [1]
    assert path in capsys.readouterr().err
    assert json.load(open(path))["value"] == {"acc": 0.7}


def test_welch_ci_edge_cases_and_verdict():
    one = common.welch_ci([0.9], [0.1, 0.2])  # one value: no interval
    assert one["mean"] == pytest.approx(0.75) and one["half"] == float("inf")
    assert common.verdict(one) == common.VERDICTS[2]
    flat = common.welch_ci([0.5, 0.5], [0.4, 0.4])  # no spread: the point
    assert (flat["lo"], flat["hi"]) == pytest.approx((0.1, 0.1))
    apart = common.welch_ci([0.9, 0.91, 0.92], [0.5, 0.52, 0.51])
    assert common.verdict(apart) == common.VERDICTS[0]
    assert common.verdict(common.welch_ci([0.5, 0.52, 0.51], [0.9, 0.91, 0.92])) \
        == common.VERDICTS[1]
    assert common.welch_ci([], [1.0])["n"] == 0


def test_cell_store_counts_what_a_wall_time_measured(tmp_path):
    store = common.CellStore(str(tmp_path), {"opt": 1})
    store.compute({"cell": 1}, lambda: 1)
    store.compute({"cell": 2}, lambda: 2)
    again = common.CellStore(str(tmp_path), {"opt": 1})
    assert again.compute({"cell": 1}, lambda: 99) == 1  # served from disk, not recomputed
    again.compute({"cell": 3}, lambda: 3)
    assert (store.computed, store.reused) == (2, 0)
    assert (again.computed, again.reused) == (1, 1)
    assert again.provenance() == "1 cells computed, 1 reused from an earlier run"


# --- convergence criteria and the "untested at this scale" verdict ---------------------------

def test_loss_plateau_on_a_flat_and_a_falling_curve():
    from experiments.common import loss_plateau
    flat = [[i, 1.0 + 0.01 * (-1) ** i] for i in range(20)]
    falling = [[i, 10.0 * 0.8 ** i] for i in range(20)]
    assert loss_plateau(flat)["met"] and abs(loss_plateau(flat)["value"]) < 0.05
    got = loss_plateau(falling)
    # last 5 vs previous 5 points of a geometric decay by 0.8 per point: 1 - 0.8**5 = 0.672
    assert not got["met"] and got["value"] == pytest.approx(1 - 0.8 ** 5, rel=1e-9)
    assert not loss_plateau(flat[:5])["met"]                       # too few points
    assert not loss_plateau([[i, float("nan")] for i in range(20)])["met"]
    assert not loss_plateau(None)["met"]


def test_verdict_is_untested_when_a_run_did_not_converge():
    from experiments.common import VERDICTS, converged_claim, reaches, verdict
    above = {"n": 3, "mean": 1.0, "half": 0.1, "lo": 0.9, "hi": 1.1}
    ok, bad = reaches(0.95, "train accuracy"), reaches(0.5, "train accuracy")
    assert ok["met"] and not bad["met"] and not reaches(None, "x")["met"]
    assert verdict(above, 0.0) == VERDICTS[0] == verdict(above, 0.0, convergence=[ok])
    assert verdict(above, 0.0, convergence=[ok, bad]) == "untested at this scale"
    c = converged_claim({"claim": "x", "ci": above, "threshold": 0.0}, [ok, bad])
    assert c["verdict"] == "untested at this scale" and c["converged"] is False


def test_loss_curve_reads_members_and_single_runs(tmp_path):
    import json
    from experiments.common import loss_curve
    f = tmp_path / "metrics.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in [
        {"step": 1, "loss": [3.0, 4.0]}, {"step": 2, "loss": [2.0, 3.5]}, {"step": 2, "eval": 1}]))
    assert loss_curve(str(f), member=1) == [[1, 4.0], [2, 3.5]]
    g = tmp_path / "single.jsonl"
    g.write_text(json.dumps({"step": 5, "loss": 1.5}))
    assert loss_curve(str(g)) == [[5, 1.5]] and loss_curve(str(tmp_path / "none.jsonl")) == []


def test_sigma_sweep_groups_members_and_resumable_cells(tmp_path, capsys):
    groups = common.sweep_groups((0.1, 2.0), ("none", "sin2d"))
    assert groups == {"learned": ["learned_s0.1", "learned_s2"], "none": ["none"],
                      "sin2d": ["sin2d"]}
    assert common.sweep_groups((), ("none",)) == {"none": ["none"]}
    assert common.sweep_members(["a", "b"], [7, 9]) == [
        {"label": "a", "seed": 7}, {"label": "a", "seed": 9}, {"label": "b", "seed": 7},
        {"label": "b", "seed": 9}]
    calls = []

    def run_group(name, labels):
        calls.append(name)
        return [{"label": m["label"], "seed": m["seed"]}
                for m in common.sweep_members(labels, [0, 1])]

    store = common.CellStore(str(tmp_path), {"opt": 1})
    cells = common.run_sweep("t", store, groups, 2, run_group)
    assert [(c["label"], c["seed"]) for c in cells][:3] == [
        ("learned_s0.1", 0), ("learned_s0.1", 1), ("learned_s2", 0)] and len(cells) == 8
    assert calls == ["learned", "none", "sin2d"]
    assert "t: ensemble learned (2 x 2 members)" in capsys.readouterr().out
    again = common.run_sweep("t", common.CellStore(str(tmp_path), {"opt": 1}), groups, 2,
                             lambda *a: pytest.fail("a finished ensemble was recomputed"))
    assert again == cells
