"""``python -m ntk [--quick | --full] [--out DIR] [--checks a,b] [--no-mutants]``: run the NTK
checks through the mutation harness.

Prints one table row per check, writes ``DIR/ntk_checks.json`` (results, configuration,
versions, the SHA-256 of the sources that produced them, wall time and load) and
``DIR/report.md`` with one plot per check, and exits with status 1 unless every check is PASS
over its whole grid. ``--mutants`` (the default) runs the neural-tangents poisons, the premise
breakers and the nuisance grids of :mod:`ntk.mutants`; ``--no-mutants`` only the checks.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _table(results) -> str:
    rows = [("check", "kind", "default", "over the grid", "statistic", "threshold",
             "NT functions that flip it")]
    rows += [(r.name, r.data.get("kind", "?"), "PASS" if r.passed else "FAIL",
              r.data.get("robust_verdict", "-"), f"{r.statistic:.4g}", f"{r.threshold:.4g}",
              ", ".join(r.data.get("neural_tangents", [])) or "none")
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
    harness = parser.add_mutually_exclusive_group()
    harness.add_argument("--mutants", dest="mutants", action="store_true", default=True,
                         help="run poisons, premise breakers and nuisance grids (default)")
    harness.add_argument("--no-mutants", dest="mutants", action="store_false",
                         help="run the checks at their default settings only")
    args = parser.parse_args(argv)
    from ntk import checks
    from ntk._compat import AdaptationError, adapted_names, load_neural_tangents, versions
    from ntk.provenance import source_digest
    try:
        names = None if args.checks is None else [n.strip() for n in args.checks.split(",")]
        if names is not None:
            unknown = [n for n in names if n not in checks.SPECS]
            if unknown:
                raise ValueError(f"unknown check(s) {unknown}; choose from {list(checks.SPECS)}")
        load_neural_tangents()
        load_before = os.getloadavg()
        start = time.perf_counter()
        config = checks.full_config() if args.full else checks.quick_config()
        results = checks.run_all(config=config, names=names, mutants=args.mutants,
                                 robustness=args.mutants,
                                 log=lambda line: print(line, file=sys.stderr, flush=True))
        wall = time.perf_counter() - start
        load_after = os.getloadavg()
    except (ValueError, AdaptationError) as e:
        sys.exit(f"error: {e}")
    mode_name = "full" if args.full else "quick"
    print(_table(results))
    robust = [r.data["robust_verdict"] for r in results]
    print(f"{robust.count('PASS')}/{len(results)} PASS over their grids in {wall:.1f} s "
          f"({mode_name}; load average {load_after[1]:.2f} over the last 5 min)")
    if args.out:
        from ntk.report import write_report
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "ntk_checks.json")
        payload = {"mode": mode_name, "mutants": args.mutants, "wall_s": round(wall, 2),
                   "load_average": {"start_1min": round(load_before[0], 2),
                                    "end_1min": round(load_after[0], 2),
                                    "end_5min": round(load_after[1], 2),
                                    "end_15min": round(load_after[2], 2)},
                   "source_sha256": source_digest(), "checks": names or list(checks.SPECS),
                   "versions": versions(), "adapted": adapted_names(),
                   "config": config.to_dict(),
                   "results": [r.to_dict() for r in results]}
        with open(path, "w") as f:
            json.dump(payload, f, indent=1)
        report = write_report(results, args.out, mode=mode_name, wall_s=wall)
        print(f"wrote {path} and {report}")
    return 0 if all(v == "PASS" for v in robust) else 1


if __name__ == "__main__":
    sys.exit(main())
