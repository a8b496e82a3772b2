"""experiments.finetune_pe: generated task, statistics, configuration, and a tiny end-to-end run."""
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root, for `experiments`

from experiments import finetune_pe as ft


def test_negation_corpus_needs_word_order():
    texts, labels = ft.negation_corpus(3000, seed=0)
    assert 0.4 < np.mean(labels) < 0.6
    # the label is not a function of the word counts: with the same polarity word and one
    # "not", both labels are frequent (the not is before the word, or elsewhere)
    groups = {}
    for t, y in zip(texts, labels):
        c = Counter(t.split())
        key = (next(w for w in ("good", "great", "bad", "awful") if c[w]), c["not"])
        groups.setdefault(key, []).append(y)
    one_not = groups[("good", 1)]
    assert 0.25 < np.mean(one_not) < 0.75
    for t, y in zip(texts[:200], labels[:200]):  # the rule itself
        w = t.split()
        polar = next(i for i, x in enumerate(w) if x in ("good", "great", "bad", "awful"))
        positive = w[polar] in ("good", "great")
        assert y == int(positive != (w[polar - 1] == "not"))


def test_summary_intervals_match_closed_forms():
    from scipy import stats

    acc = {"learned": [0.5, 0.52, 0.51], "rope": [0.9, 0.91, 0.92], "none": [0.5, 0.6, 0.55]}
    rows = [{"pe": pe, "seed": s, "test_accuracy": a} for pe, v in acc.items()
            for s, a in enumerate(v)]
    stress = {pe: {"raw": 1.0, "optimal": 0.5} for pe in acc}
    out = {line["pe"]: line for line in ft.summarise(rows[::-1], stress, list(acc))}
    ci = out["none"]["accuracy"]
    assert ci["values"] == acc["none"] and ci["mean"] == pytest.approx(0.55)
    assert ci["half"] == pytest.approx(stats.t.ppf(0.975, 2) * np.std(acc["none"], ddof=1)
                                       / math.sqrt(3))
    vs = out["rope"]["vs_learned"]  # the Welch interval of scipy's unequal-variance t test
    ref = stats.ttest_ind(acc["rope"], acc["learned"], equal_var=False).confidence_interval(0.95)
    assert (vs["lo"], vs["hi"]) == pytest.approx((ref.low, ref.high))
    assert vs["mean"] == pytest.approx(0.4) and vs["direction"] == "higher"
    assert out["none"]["vs_learned"]["direction"] == "inconclusive"  # the interval contains 0
    assert "vs_learned" not in out["learned"]
    table = ft.table(list(out.values()))
    rope_row = next(r for r in table.splitlines() if r.startswith("| rope "))
    assert "91.0 ± " in rope_row and rope_row.endswith(" higher |") and "40.0 ± " in rope_row


def test_cli_help_and_one_line_errors(capsys):
    with pytest.raises(SystemExit) as e:
        ft.main(["--help"])
    assert e.value.code == 0 and "--preset" in capsys.readouterr().out
    with pytest.raises(ValueError, match="unknown key 'epochs'; valid keys: pretrained"):
        ft.main(["--preset", "gpu", "--set", "epochs=3", "--out", "/tmp/unused_ft"])
    with pytest.raises(ValueError, match="unknown PE"):
        ft.main(["--preset", "gpu", "--pes", "learned,t6", "--out", "/tmp/unused_ft"])
    with pytest.raises(ValueError, match="--seeds must be >= 1"):
        ft.main(["--preset", "gpu", "--seeds", "0", "--out", "/tmp/unused_ft"])
    with pytest.raises(ValueError, match="conflicts"):
        ft.main(["--quick", "--preset", "gpu", "--out", "/tmp/unused_ft"])


def test_config_errors():
    with pytest.raises(ValueError, match="unknown PE"):
        ft.make_config("quick", pes=("learned", "t6"))
    with pytest.raises(ValueError, match="preset"):
        ft.make_config("huge")
    with pytest.raises(ValueError, match="unknown option"):
        ft.make_config("gpu", epochs=3)
    assert ft.make_config("paper", dataset="imdb").max_len == 512
    assert ft.make_config("paper", dataset="imdb", max_len=256).max_len == 256
    assert ft.make_config("paper").max_len == 64 and ft.make_config("gpu").train.steps == 500
    assert ft.make_config("quick") == ft.PRESETS["quick"]
    with pytest.raises(ValueError, match="did you mean train.steps"):
        ft.make_config("gpu", steps=3)
    with pytest.raises(ValueError, match="did you mean train.steps"):
        ft.main(["--preset", "gpu", "--set", "steps=3", "--out", "/tmp/unused_ft"])
    paper = ft.make_config("paper", dataset="imdb", train={"learning_rate": 1e-5})
    assert (paper.train.steps, paper.train.learning_rate) == (2350, 1e-5)


@pytest.mark.slow
def test_quick_preset_end_to_end(tmp_path):
    res = ft.main(["--quick", "--out", str(tmp_path), "--seeds", "2", "--pes", "learned,none",
                   "--set", "train.steps=3"])
    assert [s["pe"] for s in res["summary"]] == ["learned", "none"]
    assert res["seeds"] == [0, 1] and len(res["summary"][1]["accuracy"]["values"]) == 2
    assert res["stress"]["none"]["raw"] == pytest.approx(1.0)  # all-equal distances: E = 0
    assert len(res["rows"]) == 4 and (tmp_path / "report.md").exists()


def test_swapped_sinusoid_matches_the_checkpoint_table_norm(tmp_path):
    import jax.numpy as jnp

    import posjax.encodings as pe
    from posjax.pretrained import position_table, write_tiny_checkpoint

    ckpt = write_tiny_checkpoint(tmp_path / "b", "bert", hidden_size=32, max_positions=40)
    cfg = ft.make_config("quick", pretrained=str(ckpt), max_len=24)
    target = ft.table_norm(cfg)
    assert target == pytest.approx(np.linalg.norm(position_table(ckpt)[:24], axis=1).mean())
    sin = pe.make("sinusoidal", d_model=32, max_len=24, scale=target / math.sqrt(16))
    rows = np.asarray(sin.embed(jnp.zeros((1, 24, 32)), jnp.arange(24)[None]))[0]
    assert np.linalg.norm(rows, axis=1).mean() == pytest.approx(target, rel=1e-5)
    with pytest.raises(ValueError, match="pe_scale"):
        ft.make_config("quick", pe_scale="rms")
