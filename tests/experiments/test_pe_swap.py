"""experiments.pe_swap: masking, splits, convergence criterion, statistics, and a tiny run."""
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root, for `experiments`

from experiments import pe_swap as ps


def test_plateau_criterion():
    assert ps.plateau([2.0] * 50, 0.02)["met"]
    assert not ps.plateau(list(np.linspace(5, 2, 50)), 0.02)["met"]
    assert not ps.plateau([1.0] * 5, 0.02)["met"]  # too short to judge


def test_spearman_ci():
    from scipy import stats

    x = [0.1, 0.5, 0.2, 0.9, 0.3, 0.7, 0.8, 0.05, 0.4]
    y = [1.0, 2.1, 1.5, 2.9, 1.2, 2.0, 3.1, 0.9, 1.7]
    c = ps.spearman_ci(x, y)
    assert c["rho"] == pytest.approx(stats.spearmanr(x, y).statistic) and c["n"] == 9
    assert -1 <= c["lo"] < c["rho"] < c["hi"] <= 1
    wide = ps.spearman_ci(x[:5], y[:5])
    assert wide["hi"] - wide["lo"] > c["hi"] - c["lo"]  # fewer points, wider interval
    assert np.isnan(ps.spearman_ci([1, 2, 3], [1, 2, 3])["rho"])
    assert ps.spearman_ci([1, 2, np.nan, 4, 5], [1, 2, 3, 4, 5])["n"] == 4


def _row(v, seed, loss, met=True):
    return {"variant": v, "seed": seed, "stress_raw": 1.0, "stress_optimal": 0.5, "rank": None,
            "held_out_loss": loss, "held_out_accuracy": 0.5, "convergence": {"met": met}}


def test_verdicts_know_the_scale():
    rows = ([_row("learned", s, 2.0 + 0.01 * s) for s in range(3)]
            + [_row("rope", s, 3.0 + 0.01 * s) for s in range(3)]
            + [_row("none", s, 2.0 + 0.01 * s, met=s != 1) for s in range(3)])
    cpu = {s["variant"]: s for s in ps.summarise(rows, ("learned", "rope", "none"), preset="cpu")}
    assert cpu["rope"]["vs_learned"]["verdict"] == "higher loss"
    assert cpu["none"]["vs_learned"]["verdict"] == ps.UNTESTED  # one run missed the plateau
    quick = ps.summarise(rows, ("learned", "rope"), preset="quick")
    assert quick[1]["vs_learned"]["verdict"] == ps.UNTESTED
    one = ps.summarise([_row("learned", 0, 2.0), _row("rope", 0, 3.0)], ("learned", "rope"),
                       preset="cpu")
    assert one[1]["vs_learned"]["verdict"] == ps.UNTESTED  # one seed


def test_config_errors():
    with pytest.raises(ValueError, match="unknown variant"):
        ps.make_config("quick", variants=("nope",))
    with pytest.raises(ValueError, match="unknown option"):
        ps.make_config("quick", bogus=1)
    assert ps.make_config("cpu").seeds == 3 and ps.make_config("cpu").train.steps == 300
    with pytest.raises(ValueError, match="did you mean train.steps"):
        ps.make_config("quick", steps=3)
    with pytest.raises(ValueError, match="did you mean train.batch_size"):
        ps.main(["--set", "batch_size=4", "--out", "/tmp/unused_ps"])
    with pytest.raises(ValueError, match="pe_schedule"):
        ps.make_config("quick", train={"pe_schedule": ((0, "rope"),)})
    head = ps.make_config("quick", head_steps=3, train={"steps": 40}).stage("head")
    assert (head.steps, head.learning_rate, head.warmup) == (3, 1e-3, 1)  # >= 1 warm-up step
    assert ps.make_config("quick", train={"steps": 40}).stage("variant").warmup == 4


@pytest.mark.slow  # ~40 s idle, 140 s on the shared 2-core machine (compiles per variant)
def test_tiny_end_to_end(tmp_path):
    from posjax.data.stdlib_text import stdlib_root, stdlib_sentences
    from posjax.pretrained import write_tiny_checkpoint

    files = tuple(str(stdlib_root() / f) for f in ("textwrap.py", "heapq.py", "bisect.py",
                                                   "fnmatch.py", "shlex.py", "calendar.py"))
    words = Counter(w.lower().strip(".,;:!?()'\"") for s in stdlib_sentences(files=files)
                    for w in s.split())
    ckpt = write_tiny_checkpoint(tmp_path / "ckpt", "bert", words=[w for w, _ in
                                                                   words.most_common(200) if w],
                                 hidden_size=16, num_layers=1, num_heads=2,
                                 intermediate_size=32, max_positions=32)
    out = tmp_path / "run"
    ps.main(["--preset", "quick", "--model", str(ckpt), "--out", str(out),
             "--variants", "learned,mds_r,none",
             "--set", "max_len=16", "head_steps=2", "train.steps=3", "eval_windows=4",
             "train.eval_every=2", "train.batch_size=4", f"stdlib_files={','.join(files)}"])
    res = json.loads((out / "results.json").read_text())
    assert [s["variant"] for s in res["summary"]] == ["learned", "mds_r", "none"]
    assert (out / "mlm_head.npz").is_file() and res["mlm_head"]["curve"]
    for row in res["rows"]:
        assert [c["step"] for c in row["curve"]] == [0, 2, 3]
        assert np.isfinite(row["held_out_loss"]) and row["convergence"]["criterion"]
    assert res["summary"][1]["vs_learned"]["verdict"] == ps.UNTESTED
    assert res["summary"][2]["stress_raw"] == pytest.approx(1.0)  # NoPE: all distances 0
    assert set(res["stress_loss_spearman"]) == {"stress_raw", "stress_optimal"}
    assert "untested at this scale" in (out / "report.md").read_text()
    # every variant starts from the same saved head: the step-0 held-out loss of `learned`
    # equals the head stage's final one
    learned = next(r for r in res["rows"] if r["variant"] == "learned")
    assert learned["curve"][0]["loss"] == pytest.approx(res["mlm_head"]["held_out_loss"],
                                                        rel=1e-5)
