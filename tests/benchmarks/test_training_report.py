"""benchmarks.training_report: medians over runs, and the committed docs block generated from the
committed runs (a stale or hand-edited table fails)."""
import json
import pathlib

import pytest

from benchmarks import training_report as tr

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUNS = [ROOT / "docs" / "bench_training" / "run1", ROOT / "docs" / "bench_training" / "run2"]


def _write_run(d: pathlib.Path, ratios: dict, load: float) -> None:
    d.mkdir()
    rows = []
    for (pe, pos), (r, px, th) in ratios.items():
        rows.append({"pe": pe, "positions": pos, "torch_positions": pos, "ratio": r,
                     "posjax_step_ms": px, "torch_step_ms": th,
                     "posjax_cpu_vs_nope": px / ratios[("none", pos)][1],
                     "torch_cpu_vs_nope": th / ratios[("none", pos)][2]})
    (d / "training.json").write_text(json.dumps(rows))
    (d / "training_meta.json").write_text(json.dumps({
        "d_model": 8, "num_layers": 1, "num_heads": 1, "seq": 4, "batch": 2, "vocab_size": 16,
        "threads": 1, "rounds": 2, "steps_per_round": 1, "jax": "x", "torch": "y",
        "load_average": [load, 0, 0]}))


def test_medians_and_overheads(tmp_path):
    a = {("none", "static"): (1.0, 10.0, 10.0), ("rope", "static"): (0.8, 12.0, 11.0)}
    b = {("none", "static"): (1.2, 10.0, 12.0), ("rope", "static"): (1.0, 11.0, 12.0)}
    c = {("none", "static"): (0.9, 10.0, 10.0), ("rope", "static"): (1.4, 13.0, 10.0)}
    for name, spec in zip("abc", (a, b, c)):
        _write_run(tmp_path / name, spec, 0.5)
    runs = tr.load_runs([str(tmp_path / n) for n in "abc"])
    s = {x["pe"]: x for x in tr.summarise(runs)}
    assert s["none"]["ratio"] == pytest.approx(1.0) and s["rope"]["ratio"] == pytest.approx(1.0)
    assert s["rope"]["ratios"] == [0.8, 1.0, 1.4]
    assert s["rope"]["posjax_vs_nope"] == pytest.approx(1.2)   # median of 1.2, 1.1, 1.3
    assert s["rope"]["torch_vs_nope"] == pytest.approx(1.0)    # median of 1.1, 1.0, 1.0
    assert "rope (static) 1.00×" not in tr.doc_block(runs, tr.summarise(runs))


def test_missing_run_is_named(tmp_path):
    with pytest.raises(ValueError, match="training.json"):
        tr.load_runs([str(tmp_path)])


@pytest.mark.parametrize("path,markers,make", [
    ("docs/results.md", tr.DOC_MARKERS, tr.doc_block),
    ("README.md", tr.README_MARKERS, tr.readme_line),
])
def test_committed_blocks_are_generated(path, markers, make):
    runs = tr.load_runs([str(r) for r in RUNS])
    text = (ROOT / path).read_text()
    block = text.split(markers[0])[1].split(markers[1])[0].strip()
    assert block == make(runs, tr.summarise(runs)), (
        f"{path}: run `python -m benchmarks.training_report {' '.join(map(str, RUNS))} --write`")
