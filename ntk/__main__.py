"""``python -m ntk [--quick | --full] [--out DIR] [--checks a,b]``: run the NTK checks.

Prints one table row per check, writes ``DIR/ntk_checks.json`` (results, configuration,
versions, wall time) and ``DIR/report.md`` with one plot per check, and exits with status 1 if
any check fails.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _table(results) -> str:
    rows = [("check", "result", "statistic", "threshold", "control", "negative control")]
    rows += [(r.name, "PASS" if r.passed else "FAIL", f"{r.statistic:.4g}", f"{r.threshold:.4g}",
              "holds" if r.data["control"]["passed"] else "FAILS",
              "fails (good)" if not r.data["negative_control"]["passed"] else "holds (bad)")
             for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in results:
        lines.append(f"- {r.name}: {r.detail}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ntk", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="CPU-sized sweep (default)")
    mode.add_argument("--full", action="store_true", help="sweep sized for one GPU")
    parser.add_argument("--out", default=None, help="folder for ntk_checks.json and report.md")
    parser.add_argument("--checks", default=None, help="comma-separated subset of checks")
    args = parser.parse_args(argv)
    from ntk import checks
    from ntk._compat import AdaptationError, adapted_names, load_neural_tangents, versions
    try:
        names = None if args.checks is None else [n.strip() for n in args.checks.split(",")]
        if names is not None:
            unknown = [n for n in names if n not in checks.CHECKS]
            if unknown:
                raise ValueError(f"unknown check(s) {unknown}; choose from {list(checks.CHECKS)}")
        load_neural_tangents()
        start = time.perf_counter()
        config = checks.full_config() if args.full else checks.quick_config()
        results = checks.run_all(config=config, names=names,
                                 log=lambda line: print(line, file=sys.stderr, flush=True))
        wall = time.perf_counter() - start
    except (ValueError, AdaptationError) as e:
        sys.exit(f"error: {e}")
    mode_name = "full" if args.full else "quick"
    print(_table(results))
    print(f"{sum(r.passed for r in results)}/{len(results)} passed in {wall:.1f} s ({mode_name})")
    if args.out:
        from ntk.report import write_report
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "ntk_checks.json")
        payload = {"mode": mode_name, "wall_s": round(wall, 2),
                   "versions": versions(), "adapted": adapted_names(),
                   "config": config.to_dict(),
                   "results": [r.to_dict() for r in results]}
        with open(path, "w") as f:
            json.dump(payload, f, indent=1)
        report = write_report(results, args.out, mode=mode_name, wall_s=wall)
        print(f"wrote {path} and {report}")
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
