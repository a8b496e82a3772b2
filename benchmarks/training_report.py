"""The training-throughput table of ``docs/results.md`` and the README's speed line, generated from
``benchmarks.training`` runs.

Usage::

    python -m benchmarks.training_report RUN_DIR [RUN_DIR ...] [--write]

Each ``RUN_DIR`` holds the ``training.json`` and ``training_meta.json`` of one
``python -m benchmarks.training`` run. For every (PE, positions) row the report gives the median
over the runs of the posjax / x-transformers throughput ratio (and each run's ratio), the two step
times, and each library's step time relative to its own NoPE step in the same row (so "RoPE's
overhead over NoPE" is read within one library and one run, then its median taken). ``--write``
replaces the text between ``<!-- training-bench:begin -->`` and ``<!-- training-bench:end -->`` in
``docs/results.md`` and between ``<!-- training-line:begin -->`` / ``<!-- training-line:end -->``
in ``README.md``; without it the blocks are printed.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC_MARKERS = ("<!-- training-bench:begin -->", "<!-- training-bench:end -->")
README_MARKERS = ("<!-- training-line:begin -->", "<!-- training-line:end -->")


def load_runs(dirs: list[str]) -> list[tuple[list[dict], dict]]:
    """``[(rows, meta), ...]`` of the run directories; a missing file or a run without torch
    numbers is refused with the path named."""
    runs = []
    for d in dirs:
        p = pathlib.Path(d)
        rows_f, meta_f = p / "training.json", p / "training_meta.json"
        for f in (rows_f, meta_f):
            if not f.is_file():
                raise ValueError(f"{f}: not found (a benchmarks.training --out directory?)")
        rows = json.loads(rows_f.read_text())
        if any(r.get("ratio") is None for r in rows):
            raise ValueError(f"{rows_f}: rows without x-transformers numbers (torch missing?)")
        runs.append((rows, json.loads(meta_f.read_text())))
    if not runs:
        raise ValueError("no run directories given")
    return runs


def summarise(runs: list[tuple[list[dict], dict]]) -> list[dict]:
    """One dict per (pe, positions), in the order of the first run, with the medians over runs."""
    keys = [(r["pe"], r["positions"]) for r in runs[0][0]]
    out = []
    for pe, pos in keys:
        sel = []
        for rows, meta in runs:
            match = [r for r in rows if r["pe"] == pe and r["positions"] == pos]
            if len(match) != 1:
                raise ValueError(f"run {meta.get('out', '?')}: row ({pe}, {pos}) missing or repeated")
            sel.append(match[0])
        med = lambda k: statistics.median(r[k] for r in sel)  # noqa: E731
        out.append({
            "pe": pe, "positions": pos, "ratios": [r["ratio"] for r in sel],
            "ratio": med("ratio"), "posjax_ms": med("posjax_step_ms"),
            "torch_ms": med("torch_step_ms"), "posjax_vs_nope": med("posjax_cpu_vs_nope"),
            "torch_vs_nope": med("torch_cpu_vs_nope"), "torch_positions": sel[0]["torch_positions"],
        })
    return out


def _x(v: float) -> str:
    return f"{v:.2f}×"


def doc_block(runs, summary) -> str:
    meta = runs[0][1]
    loads = ", ".join(f"{m['load_average'][0]:.2f}" for _, m in runs if m.get("load_average"))
    lines = [
        f"Quick size (d = {meta['d_model']}, {meta['num_layers']} layers, {meta['num_heads']} heads, "
        f"T = {meta['seq']}, B = {meta['batch']}, V = {meta['vocab_size']}), `--threads "
        f"{meta['threads']}`, best of {meta['rounds']} rounds of {meta['steps_per_round']} steps, "
        f"{len(runs)} runs (1-minute load average at the end of each: {loads}; JAX {meta['jax']}, "
        f"PyTorch {meta.get('torch', '?')}). Ratio = posjax tokens/s ÷ x-transformers tokens/s, "
        "median over the runs (each run's in brackets); \"over NoPE\" = the library's own CPU time "
        "per step ÷ its NoPE step in the same row and run (median).",
        "",
        "| pe | positions | ratio (median) | per run | posjax ms/step | torch ms/step "
        "| posjax over NoPE | torch over NoPE |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        per = ", ".join(f"{r:.2f}" for r in s["ratios"])
        lines.append(f"| {s['pe']} | {s['positions']} | {_x(s['ratio'])} | [{per}] | "
                     f"{s['posjax_ms']:.1f} | {s['torch_ms']:.1f} | {_x(s['posjax_vs_nope'])} | "
                     f"{_x(s['torch_vs_nope'])} |")
    below = [f"{s['pe']} ({s['positions']}) {_x(s['ratio'])}" for s in summary if s["ratio"] < 1.0]
    rope = {s["positions"]: s for s in summary if s["pe"] == "rope"}
    lines += ["", "Goal check (every PE ≥ 1.00× in both rows; RoPE's overhead over NoPE ≤ "
              "x-transformers'): " + ("rows below 1.00×: " + ", ".join(below) if below
                                      else "every row ≥ 1.00×") + "; RoPE over NoPE " +
              "; ".join(f"{p}: posjax {_x(s['posjax_vs_nope'])} vs torch {_x(s['torch_vs_nope'])}"
                        for p, s in rope.items()) + "."]
    return "\n".join(lines)


def readme_line(runs, summary) -> str:
    lo, hi = min(s["ratio"] for s in summary), max(s["ratio"] for s in summary)
    rope = [s for s in summary if s["pe"] == "rope"]
    rr = ", ".join(f"{s['positions']} {_x(s['ratio'])}" for s in rope)
    ov = ", ".join(f"{s['positions']} {_x(s['posjax_vs_nope'])} (torch {_x(s['torch_vs_nope'])})"
                   for s in rope)
    return (f"training steps {lo:.2f}–{hi:.2f}× x-transformers on one CPU thread (quick size, five "
            f"PEs, static and `[B, T]` positions, median of {len(runs)} runs; RoPE {rr}; RoPE's "
            f"step over NoPE's: {ov}; docs/results.md)")


def _replace(path: pathlib.Path, markers: tuple[str, str], text: str) -> None:
    src = path.read_text()
    a, b = markers
    if src.count(a) != 1 or src.count(b) != 1:
        raise ValueError(f"{path}: expected one {a} and one {b}")
    head, rest = src.split(a)
    _, tail = rest.split(b)
    path.write_text(f"{head}{a}\n{text}\n{b}{tail}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="benchmarks.training --out directories")
    ap.add_argument("--write", action="store_true", help="write docs/results.md and README.md")
    args = ap.parse_args(argv)
    try:
        runs = load_runs(args.runs)
        summary = summarise(runs)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    block, line = doc_block(runs, summary), readme_line(runs, summary)
    if args.write:
        _replace(ROOT / "docs" / "results.md", DOC_MARKERS, block)
        _replace(ROOT / "README.md", README_MARKERS, line)
    else:
        print(block, "", line, sep="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
