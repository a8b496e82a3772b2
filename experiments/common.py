"""Shared plumbing of the experiment scripts: argument parsing, resumable per-cell results,
results.json / report.md writing, tables, and one-line CLI errors."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from posjax._json import jsonable  # noqa: F401  (re-exported for the experiments)


def versions() -> dict[str, str]:
    """Library versions recorded in every results file."""
    import flax
    import jax

    import posjax

    return {"posjax": posjax.__version__, "jax": jax.__version__, "flax": flax.__version__,
            "numpy": np.__version__, "python": platform.python_version(),
            "backend": jax.default_backend()}


def write_json(path: str, data: Any) -> None:
    """Write JSON atomically (temp file then rename), so an interrupt never leaves half a file."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(jsonable(data), f, indent=2)
    os.replace(tmp, path)


class CellStore:
    """Resumable results: one JSON file per finished cell under ``out_dir/cells``.

    A cell is identified by a dict of its coordinates (e.g. ``{"pe": "rope", "seed": 0}``)
    together with the run's options; rerunning the same experiment skips finished cells.
    """

    def __init__(self, out_dir: str, options: Mapping[str, Any]):
        self.dir = os.path.join(out_dir, "cells")
        os.makedirs(self.dir, exist_ok=True)
        self.options = jsonable(options)
        self._salt = hashlib.sha1(json.dumps(self.options, sort_keys=True).encode()).hexdigest()[:8]

    def _path(self, key: Mapping[str, Any]) -> str:
        text = json.dumps(jsonable(key), sort_keys=True)
        digest = hashlib.sha1((self._salt + text).encode()).hexdigest()[:16]
        return os.path.join(self.dir, f"{digest}.json")

    def get(self, key: Mapping[str, Any]) -> Any | None:
        path = self._path(key)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)["value"]

    def put(self, key: Mapping[str, Any], value: Any) -> Any:
        write_json(self._path(key), {"key": key, "value": value, "time": time.time()})
        return jsonable(value)

    def compute(self, key: Mapping[str, Any], fn: Callable[[], Any]) -> Any:
        """Return the stored value of ``key`` or compute, store and return it."""
        found = self.get(key)
        return found if found is not None else self.put(key, fn())


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    """Mean and (population) standard deviation; NaN for an empty list."""
    arr = np.asarray([v for v in values if v is not None], float)
    if arr.size == 0:
        return float("nan"), float("nan")
    return float(arr.mean()), float(arr.std())


def fmt_mean_std(values: Iterable[float], scale: float = 1.0, digits: int = 1) -> str:
    m, s = mean_std(values)
    if np.isnan(m):
        return "n/a"
    return f"{m * scale:.{digits}f} ± {s * scale:.{digits}f}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-markdown table (floats with 4 significant digits)."""
    def cell(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def base_parser(description: str, *, default_out: str) -> argparse.ArgumentParser:
    """An argument parser with the common ``--quick``, ``--out`` and ``--seeds`` flags."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small configuration for a 2-core CPU")
    p.add_argument("--out", default=default_out, help="output directory (default: %(default)s)")
    p.add_argument("--seeds", type=int, default=None, help="number of seeds (default: per mode)")
    return p


def run_cli(main: Callable[[Sequence[str] | None], Any], argv: Sequence[str] | None = None) -> None:
    """Run ``main(argv)``; a ValueError or FileNotFoundError becomes a one-line error, exit 2."""
    try:
        main(argv)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
    except KeyboardInterrupt:
        sys.exit("interrupted: finished cells are saved; rerun the same command to resume")
