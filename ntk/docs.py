"""``python -m ntk.docs [--run docs/ntk_run/ntk_checks.json] [--check]``: regenerate the NTK
numbers in ``README.md`` and ``docs/ntk.md`` from a committed run.

Every number about the NTK checks in those two files sits between a pair of markers

    <!-- ntk:begin NAME -->  ...  <!-- ntk:end NAME -->

and is written here from ``ntk_checks.json`` (``python -m ntk --quick --out docs/ntk_run``),
never typed by hand. ``--check`` exits with status 1 (naming the block) when a block differs
from what the run gives, without writing.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

from ntk.provenance import ROOT

__all__ = ["RUN", "TARGETS", "blocks", "render", "replace_blocks", "stale_blocks"]

RUN = ROOT / "docs" / "ntk_run" / "ntk_checks.json"
TARGETS = {"README.md": ("ntk-summary",),
           "docs/ntk.md": ("ntk-run", "ntk-results", "ntk-mutants", "ntk-robustness",
                           "ntk-conjecture", "ntk-details")}
_BLOCK = re.compile(r"(<!-- ntk:begin (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- ntk:end (?P=name) -->)",
                    re.S)


class _Result:
    """The fields of a serialised :class:`ntk.result.CheckResult` the tables read."""

    def __init__(self, d: dict):
        self.name, self.passed = d["name"], d["passed"]
        self.statistic, self.threshold = d["statistic"], d["threshold"]
        self.detail, self.data = d["detail"], d["data"]


def _summary(run: dict, results) -> str:
    from ntk.report import nt_moves
    lines = []
    for r in results:
        flips = ", ".join(r.data.get("neural_tangents", [])) or "none"
        moves = ", ".join(nt_moves(r)) or "none"
        lines.append(f"  - `{r.name}` ({r.data.get('kind')}): "
                     f"**{r.data.get('robust_verdict')}** over its grid (default "
                     f"{'PASS' if r.passed else 'FAIL'}, statistic {r.statistic:.4g} vs "
                     f"{r.threshold:.4g}); neural-tangents functions whose poison flips it: "
                     f"{flips}; whose poison moves its statistic: {moves}")
    verdicts = [r.data.get("robust_verdict") for r in results]
    if not run.get("mutants", True):
        head = (f"- **NTK checks (arXiv 2604.05217, Appendix A)**, `python -m ntk --quick "
                f"--no-mutants` ({run['wall_s'] / 60:.1f} min at load "
                f"{run['load_average']['end_5min']:.2f}): {verdicts.count('PASS')} PASS, "
                f"{verdicts.count('FAIL')} FAIL of {len(results)} at their default settings. "
                f"This committed run did not run the mutation harness: verdicts over the "
                f"nuisance grid and the functions whose poison flips them come from "
                f"`python -m ntk --quick` ([docs/ntk.md](docs/ntk.md)):")
        return "\n".join([head] + [f"  - `{r.name}` ({r.data.get('kind')}): "
                                   f"{'PASS' if r.passed else 'FAIL'} at the default (statistic "
                                   f"{r.statistic:.4g} vs {r.threshold:.4g})"
                                   for r in results]) + "\n"
    head = (f"- **NTK checks (arXiv 2604.05217, Appendix A)**, `python -m ntk --quick` "
            f"({run['wall_s'] / 60:.1f} min at load {run['load_average']['end_5min']:.2f}): "
            f"{verdicts.count('PASS')} PASS, {verdicts.count('FAIL')} FAIL, "
            f"{verdicts.count('FRAGILE')} FRAGILE of {len(results)}, each rerun with its "
            f"neural-tangents functions poisoned, its premise broken and its nuisance settings "
            f"moved ([docs/ntk.md](docs/ntk.md)):")
    return "\n".join([head] + lines) + "\n"


def render(run: dict) -> dict[str, str]:
    """The text of every generated block, by name."""
    from ntk.report import conjecture_table, mutant_table, results_table, robustness_table
    results = [_Result(d) for d in run["results"]]
    la = run["load_average"]
    return {
        "ntk-summary": _summary(run, results),
        "ntk-run": (f"`python -m ntk --{run['mode']}"
                    f"{'' if run.get('mutants', True) else ' --no-mutants'} --out docs/ntk_run`: "
                    f"{run['wall_s']:.0f} s wall on 2 CPU cores, load average "
                    f"{la['start_1min']:.2f} at the start and {la['end_5min']:.2f} over the last "
                    f"5 minutes; jax {run['versions'].get('jax')}, neural-tangents "
                    f"{run['versions'].get('neural_tangents')}; sources SHA-256 "
                    f"`{run['source_sha256'][:16]}…` ([report](ntk_run/report.md)).\n"),
        "ntk-results": results_table(results) + "\n",
        "ntk-mutants": mutant_table(results) + "\n",
        "ntk-robustness": robustness_table(results) + "\n",
        "ntk-conjecture": "".join(conjecture_table(r) + "\n" for r in results
                                  if r.name == "monotonicity_conjecture") or "(not run)\n",
        "ntk-details": "".join(f"- **{r.name}** — {r.detail}\n" for r in results),
    }


def blocks(text: str) -> dict[str, str]:
    """``{name: body}`` of the generated blocks of ``text``."""
    return {m.group("name"): m.group("body") for m in _BLOCK.finditer(text)}


def replace_blocks(text: str, bodies: dict[str, str], *, names) -> str:
    """``text`` with the named blocks' bodies replaced.

    Raises:
      ValueError: if a named block is missing from ``text``.
    """
    missing = [n for n in names if n not in blocks(text)]
    if missing:
        raise ValueError(f"generated block(s) {missing} not found (markers "
                         f"'<!-- ntk:begin NAME -->' / '<!-- ntk:end NAME -->')")
    return _BLOCK.sub(lambda m: (m.group(1) + bodies[m.group("name")] + m.group(4))
                      if m.group("name") in names else m.group(0), text)


def stale_blocks(run: dict) -> list[str]:
    """``file:block`` of every generated block that differs from what ``run`` gives."""
    bodies = render(run)
    stale = []
    for rel, names in TARGETS.items():
        have = blocks((ROOT / rel).read_text())
        stale += [f"{rel}:{n}" for n in names if have.get(n) != bodies[n]]
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ntk.docs", description=__doc__.splitlines()[0])
    parser.add_argument("--run", default=str(RUN), help="the ntk_checks.json to read")
    parser.add_argument("--check", action="store_true", help="only report stale blocks")
    args = parser.parse_args(argv)
    try:
        run = json.loads(pathlib.Path(args.run).read_text())
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"error: cannot read the run {args.run}: {e}")
    if args.check:
        stale = stale_blocks(run)
        for s in stale:
            print(f"stale: {s}")
        return 1 if stale else 0
    bodies = render(run)
    for rel, names in TARGETS.items():
        path = ROOT / rel
        path.write_text(replace_blocks(path.read_text(), bodies, names=names))
        print(f"wrote {rel}: {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
