"""Shared plumbing of the experiment scripts: argument parsing, resumable per-cell results,
results.json / report.md writing, tables, and one-line CLI errors."""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import sys
import time
import types
import typing
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

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


def _cell_digest(key: Any, value: Any) -> str:
    """SHA-256 of a cell's key and value (canonical JSON): stored in the cell file and checked
    when the cell is reused, so a hand-edited value is detected."""
    text = json.dumps(jsonable({"key": key, "value": value}), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class CellStore:
    """Resumable results: one JSON file per finished cell under ``out_dir/cells``.

    A cell is identified by a dict of its coordinates (e.g. ``{"pe": "rope", "seed": 0}``)
    together with the run's options; rerunning the same experiment skips finished cells. Each
    file carries the SHA-256 of its key and value: a file that fails it (edited by hand, written
    for another key, or by a version of posjax that wrote no checksum), or whose value does not
    hold the expected number of entries (``count``: e.g. one per seed), is named on stderr,
    removed and recomputed; a reused cell is never a value the experiment did not compute.
    """

    def __init__(self, out_dir: str, options: Mapping[str, Any]):
        self.dir = os.path.join(out_dir, "cells")
        os.makedirs(self.dir, exist_ok=True)
        self.options = jsonable(options)
        self._salt = hashlib.sha1(json.dumps(self.options, sort_keys=True).encode()).hexdigest()[:8]
        self.reused = 0    # cells served from disk by compute()
        self.computed = 0  # cells computed (and stored) by compute()

    def _path(self, key: Mapping[str, Any]) -> str:
        text = json.dumps(jsonable(key), sort_keys=True)
        digest = hashlib.sha1((self._salt + text).encode()).hexdigest()[:16]
        return os.path.join(self.dir, f"{digest}.json")

    def get(self, key: Mapping[str, Any], *, count: int | None = None) -> Any | None:
        """The stored value of ``key``; None when absent. A cell file that is corrupted
        (truncated, not JSON, no value), fails its checksum, belongs to another key, or (with
        ``count``) is not a list of ``count`` entries is named on stderr, removed and reported
        as absent, so the cell is recomputed."""
        path = self._path(key)
        if not os.path.exists(path):
            return None
        try:
            with open(path) as f:
                stored = json.load(f)
            value = stored["value"]
            problem = None
            if stored.get("sha256") is None:
                problem = "no checksum (written by an older posjax, or by hand)"
            elif stored["sha256"] != _cell_digest(stored["key"], value):
                problem = "its checksum does not match its contents (edited after it was written)"
            elif (json.dumps(jsonable(stored["key"]), sort_keys=True)
                  != json.dumps(jsonable(key), sort_keys=True)):
                problem = f"it holds the cell {json.dumps(stored['key'], sort_keys=True)}"
            elif count is not None and (not isinstance(value, list) or len(value) != count):
                got = len(value) if isinstance(value, list) else type(value).__name__
                problem = f"it holds {got} entries, the run needs {count} (one per seed)"
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
            problem = f"corrupted: {type(e).__name__}: {e}"
        if problem is None:
            return value
        print(f"cell file {path} is not reused: {problem}; recomputing the cell "
              f"{json.dumps(jsonable(key), sort_keys=True)}", file=sys.stderr, flush=True)
        os.remove(path)
        return None

    def put(self, key: Mapping[str, Any], value: Any) -> Any:
        value = jsonable(value)
        write_json(self._path(key), {"key": key, "value": value, "time": time.time(),
                                     "sha256": _cell_digest(key, value)})
        return value

    def compute(self, key: Mapping[str, Any], fn: Callable[[], Any], *,
                count: int | None = None) -> Any:
        """Return the stored value of ``key`` or compute, store and return it. ``count``: the
        number of entries a reused value (a list) must hold."""
        found = self.get(key, count=count)
        if found is not None:
            self.reused += 1
            return found
        self.computed += 1
        return self.put(key, fn())

    def provenance(self) -> str:
        """``"N cells computed, M reused from an earlier run"``: what a wall time measured."""
        return f"{self.computed} cells computed, {self.reused} reused from an earlier run"


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


def mean_ci(values: Iterable[float], level: float = 0.95) -> dict[str, Any]:
    """Mean and two-sided Student-t confidence interval over seeds.

    Returns ``{"mean", "lo", "hi", "half", "n", "values"}``; with one value the interval is
    unbounded (``half`` = inf), with none everything is NaN.
    """
    from scipy import stats

    arr = np.asarray([v for v in values if v is not None], float)
    n = int(arr.size)
    if n == 0:
        nan = float("nan")
        return {"mean": nan, "lo": nan, "hi": nan, "half": nan, "n": 0, "values": []}
    mean = float(arr.mean())
    half = (float(stats.t.ppf(0.5 + level / 2, n - 1) * arr.std(ddof=1) / np.sqrt(n))
            if n > 1 else float("inf"))
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "half": half, "n": n,
            "values": arr.tolist()}


def welch_ci(a: Iterable[float], b: Iterable[float], level: float = 0.95) -> dict[str, Any]:
    """Difference of means ``mean(a) - mean(b)`` with its two-sided Welch t interval (unequal
    variances, Welch-Satterthwaite degrees of freedom), in the layout of :func:`mean_ci`
    (``n`` = the smaller sample, so :func:`verdict` and :func:`fmt_ci` apply).

    Returns ``{"mean", "lo", "hi", "half", "n", "dof"}``; with fewer than 2 values on either side
    the interval is unbounded (``half`` = inf), and with no spread at all it is the point.
    """
    from scipy import stats

    x = np.asarray([v for v in a if v is not None], float)
    y = np.asarray([v for v in b if v is not None], float)
    n = int(min(x.size, y.size))
    if n == 0:
        nan = float("nan")
        return {"mean": nan, "lo": nan, "hi": nan, "half": nan, "n": 0, "dof": nan}
    diff = float(x.mean() - y.mean())
    if n < 2:
        return {"mean": diff, "lo": -np.inf, "hi": np.inf, "half": float("inf"), "n": n,
                "dof": float("nan")}
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se = float(np.sqrt(va + vb))
    if se == 0:
        return {"mean": diff, "lo": diff, "hi": diff, "half": 0.0, "n": n, "dof": float("inf")}
    dof = float((va + vb) ** 2 / (va ** 2 / (x.size - 1) + vb ** 2 / (y.size - 1)))
    half = float(stats.t.ppf(0.5 + level / 2, dof) * se)
    return {"mean": diff, "lo": diff - half, "hi": diff + half, "half": half, "n": n, "dof": dof}


def fmt_ci(ci: Mapping[str, Any], scale: float = 1.0, digits: int = 1) -> str:
    """``"mean ± half"`` of a :func:`mean_ci` result (``n/a`` when empty)."""
    if not ci["n"]:
        return "n/a"
    half = "∞" if not np.isfinite(ci["half"]) else f"{ci['half'] * scale:.{digits}f}"
    return f"{ci['mean'] * scale:.{digits}f} ± {half}"


VERDICTS = ("reproduced", "not reproduced", "inconclusive at this scale",
            "untested at this scale")

# Convergence criteria, fixed before any run: a claim about converged behaviour is judged only on
# runs that meet them.
PLATEAU_TAIL = 0.25      # compare the last quarter of the logged training-loss curve ...
PLATEAU_REL_TOL = 0.05   # ... with the quarter before it: a relative drop of at most 5 %
IN_DISTRIBUTION_MIN = 0.9  # a task learned in distribution (accuracy / exact match at >= 90 %)


def loss_plateau(curve: Sequence[Sequence[float]] | None, run: str = "", *,
                 tail: float = PLATEAU_TAIL, rel_tol: float = PLATEAU_REL_TOL) -> dict[str, Any]:
    """Has the training loss stopped falling? ``curve`` is ``[[step, loss], ...]`` as logged
    (:func:`loss_curve`). Met when the mean loss over the last ``tail`` of the logged points is
    at most ``rel_tol`` (relative) below the mean over the ``tail`` before it, and is finite.
    Fewer than 8 logged points, or no curve, do not meet it."""
    losses = [float(v) for _, v in (curve or []) if v is not None]
    crit = (f"training-loss plateau: mean over the last {tail:.0%} of the logged curve at most "
            f"{rel_tol:.0%} below the mean over the {tail:.0%} before it")
    if len(losses) < 8:
        return {"criterion": crit, "run": run, "value": None, "threshold": rel_tol,
                "met": False, "note": f"{len(losses)} logged points (< 8)"}
    k = max(int(round(tail * len(losses))), 2)
    last, prev = float(np.mean(losses[-k:])), float(np.mean(losses[-2 * k:-k]))
    drop = (prev - last) / max(abs(prev), 1e-12)
    return {"criterion": crit, "run": run, "value": drop, "threshold": rel_tol,
            "met": bool(np.isfinite(last) and drop <= rel_tol)}


def reaches(value: float | None, name: str, run: str = "", *,
            threshold: float = IN_DISTRIBUTION_MIN) -> dict[str, Any]:
    """A learned-the-task criterion: ``value`` (e.g. in-distribution accuracy) ``>= threshold``."""
    met = value is not None and bool(np.isfinite(value)) and float(value) >= threshold
    return {"criterion": f"{name} >= {threshold:g}", "run": run,
            "value": None if value is None else float(value), "threshold": threshold,
            "met": bool(met)}


def loss_curve(metrics_jsonl: str, member: int | None = None) -> list[list[float]]:
    """``[[step, loss], ...]`` from a run directory's ``metrics.jsonl`` (``member``: the index
    into an ensemble's per-member loss lists)."""
    out = []
    if not os.path.exists(metrics_jsonl):
        return out
    with open(metrics_jsonl) as f:
        for row in map(json.loads, f):
            v = row.get("loss")
            if isinstance(v, list) and member is not None and member < len(v):
                out.append([row["step"], v[member]])
            elif isinstance(v, (int, float)) and member is None:
                out.append([row["step"], v])
    return out


def verdict(ci: Mapping[str, Any], threshold: float = 0.0, *,
            convergence: Sequence[Mapping[str, Any]] = ()) -> str:
    """The one verdict function of every experiment, on a claim "the statistic exceeds
    ``threshold``", decided by its 95 % CI: reproduced when the whole interval lies above, not
    reproduced when it lies at or below, inconclusive when it straddles the threshold (or has
    fewer than 2 seeds). A claim about converged behaviour passes its runs' convergence
    criteria (:func:`loss_plateau`, :func:`reaches`) as ``convergence``; when any is not met
    the verdict is "untested at this scale" whatever the interval says."""
    if any(not c["met"] for c in convergence):
        return VERDICTS[3]
    if ci["n"] < 2 or not np.isfinite(ci["half"]):
        return VERDICTS[2]
    if ci["lo"] > threshold:
        return VERDICTS[0]
    if ci["hi"] <= threshold:
        return VERDICTS[1]
    return VERDICTS[2]


PLATEAU_CRITERION = (f"the mean training loss over the last {PLATEAU_TAIL:.0%} of the logged curve "
                     f"is at most {PLATEAU_REL_TOL:.0%} below the mean over the {PLATEAU_TAIL:.0%} "
                     "before it")


def converged_cell(claim: Mapping[str, Any]) -> str:
    """``"k / n"`` runs of a claim that meet their convergence criteria (``"-"`` if none)."""
    conv = claim.get("convergence") or []
    return f"{sum(c['met'] for c in conv)} / {len(conv)}" if conv else "-"


def converged_claim(claim: Mapping[str, Any], convergence: Sequence[Mapping[str, Any]]
                    ) -> dict[str, Any]:
    """``claim`` (with ``"ci"`` and ``"threshold"``) plus its convergence record and verdict."""
    conv = list(convergence)
    return {**claim, "convergence": conv, "converged": all(c["met"] for c in conv),
            "verdict": verdict(claim["ci"], claim["threshold"], convergence=conv)}


CI_METHOD = ("mean ± half-width of the two-sided 95 % Student-t interval over seeds "
             "(t_{0.975, n-1} · sd / √n, sd with n-1 degrees of freedom)")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-markdown table (floats with 4 significant digits)."""
    def cell(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


# --- one experiment pattern: a frozen config dataclass, named presets, typed --set --------------
PRESETS = ("quick", "gpu", "paper")
C = TypeVar("C")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(text: str, tp: Any) -> Any:
    """``text`` as a value of the annotated type ``tp`` (ValueError when it is not one)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if text.strip().lower() in ("none", "null") and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(text, arg)
            except ValueError as e:
                errors.append(str(e))
        raise ValueError("; ".join(errors))
    if origin is typing.Literal:
        for arg in args:
            if str(arg) == text:
                return arg
        raise ValueError(f"expected one of {list(args)}")
    if origin in (tuple, list):
        items = [t.strip() for t in text.split(",") if t.strip()]
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(t, args[0]) for t in items)
        if origin is tuple and args:
            if len(items) != len(args):
                raise ValueError(f"expected {len(args)} comma-separated values")
            return tuple(_convert(t, a) for t, a in zip(items, args))
        return origin(items)
    if tp is bool:
        low = text.strip().lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise ValueError("expected true or false")
    if tp is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError("expected an integer") from None
    if tp is float:
        try:
            return float(text)
        except ValueError:
            raise ValueError("expected a number") from None
    if tp is str:
        return text
    if origin is dict or tp is dict:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"expected a JSON object ({e.msg})") from None
        if not isinstance(value, dict):
            raise ValueError("expected a JSON object")
        return value
    if tp is Any:
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    raise ValueError(f"cannot parse a {_type_name(tp)} from the command line")


def described(value: Any, why: str = "") -> Any:
    """A config field that records what the code does rather than choosing it (e.g. the
    weight-decay mask of ``optax.adamw``): it goes into results.json, but ``--set`` refuses it,
    since no code reads it. ``why`` names what would have to change instead."""
    return dataclasses.field(default=value, metadata={"described": why or "fixed by the code"})


def described_fields(cls: type) -> dict[str, str]:
    """``{name: why}`` of the fields of ``cls`` declared with :func:`described`."""
    return {f.name: f.metadata["described"] for f in dataclasses.fields(cls)
            if "described" in f.metadata}


def nested_fields(cls: type) -> dict[str, type]:
    """``{name: dataclass type}`` of the fields of ``cls`` that are themselves dataclasses
    (e.g. ``model: TransformerConfig``, ``train: TrainConfig``): ``--set`` reaches their fields
    by a dotted key (``model.d_model=64``)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)
            if isinstance(hints[f.name], type) and dataclasses.is_dataclass(hints[f.name])}


def settable_keys(cls: type) -> list[str]:
    """Every key ``--set`` accepts for the dataclass ``cls``: its own fields flat, the fields of
    its nested config dataclasses dotted (``model.d_model``); :func:`described` fields left out."""
    nested = nested_fields(cls)
    fixed = described_fields(cls)
    keys = []
    for f in dataclasses.fields(cls):
        if f.name in fixed:
            continue
        if f.name in nested:
            keys += [f"{f.name}.{k}" for k in settable_keys(nested[f.name])]
        else:
            keys.append(f.name)
    return keys


def parse_set(cls: type, items: Sequence[str]) -> dict[str, Any]:
    """``["key=value", ...]`` as typed overrides of the fields of the dataclass ``cls``.

    The experiment's own fields are flat (``steps=500``); the fields of a nested config dataclass
    are dotted (``model.d_model=64``, ``train.learning_rate=3e-3``) and come back as a nested
    dict (``{"model": {"d_model": 64}}``); a flat key that only a nested config has fails with
    "did you mean model.d_model?". Values are converted by each field's annotation: ``int``,
    ``float``, ``bool`` (true/false), ``str``, ``X | None`` (``none``), ``tuple[X, ...]``
    (comma-separated), ``Literal``, ``dict`` (a JSON object). An unknown key, a
    :func:`described` field (recorded, never read) or an unconvertible value is a one-line
    ValueError listing the valid keys.
    """
    valid = f"valid keys: {', '.join(settable_keys(cls))}"
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"--set expects key=value, got {item!r}; {valid}")
        target, path = cls, key.split(".")
        into = out
        for depth, name in enumerate(path):
            prefix = ".".join(path[:depth])
            where = f"{prefix}." if prefix else ""
            hints = typing.get_type_hints(target)
            fixed = described_fields(target)
            nested = nested_fields(target)
            names = [f.name for f in dataclasses.fields(target)]
            last = depth == len(path) - 1
            if name in fixed:
                raise ValueError(f"--set: {where}{name!r} describes what the code does "
                                 f"({fixed[name]}); no code reads it, so it cannot be set; {valid}")
            if name not in names:
                hint = [f"{n}.{name}" for n, sub in nested.items()
                        if name in {f.name for f in dataclasses.fields(sub)}]
                if hint:
                    raise ValueError(f"--set: {key!r} is a field of a nested config: did you mean "
                                     f"{' or '.join(where + h for h in hint)}?")
                raise ValueError(f"--set: unknown key {key!r}; {valid}")
            if last:
                if name in nested:
                    raise ValueError(f"--set: {key!r} is a config of its own; set its fields "
                                     f"({key}.<field>=...); {valid}")
                try:
                    into[name] = _convert(text, hints[name])
                except ValueError as e:
                    raise ValueError(f"--set {key}={text!r}: {e} ({_type_name(hints[name])}); "
                                     f"{valid}") from None
            else:
                if name not in nested:
                    raise ValueError(f"--set: {where}{name!r} has no fields to set; {valid}")
                into = into.setdefault(name, {})
                target = nested[name]
    return out


def apply_overrides(base: C, changes: Mapping[str, Any]) -> C:
    """``base`` with ``changes`` applied: a nested dict (from :func:`parse_set`'s dotted keys)
    replaces fields of the nested config it names, every other value replaces the field."""
    nested = nested_fields(type(base))
    flat = {}
    for name, value in changes.items():
        if name in nested and isinstance(value, Mapping):
            value = apply_overrides(getattr(base, name), value)
        flat[name] = value
    return dataclasses.replace(base, **flat)


def experiment_parser(description: str, *, default_out: str) -> argparse.ArgumentParser:
    """The arguments every experiment shares: ``--preset quick|gpu|paper`` (default paper;
    ``--quick`` is ``--preset quick``), ``--set key=value ...``, ``--seeds N``, ``--out``.
    Scripts add their own flags to the returned parser."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--preset", choices=PRESETS, default=None,
                   help="configuration: quick (2-core CPU, <= 10 min), gpu (one H200, "
                        "<= 8 min), paper (the paper's configuration; default)")
    p.add_argument("--quick", action="store_true", help="alias of --preset quick")
    p.add_argument("--set", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                   help="override fields of the preset's configuration, e.g. --set steps=500")
    p.add_argument("--seeds", type=int, default=None, help="number of seeds (default: preset's)")
    p.add_argument("--out", default=default_out, help="output directory (default: %(default)s)")
    return p


def preset_name(args: argparse.Namespace) -> str:
    if args.quick and args.preset not in (None, "quick"):
        raise ValueError(f"--quick conflicts with --preset {args.preset}")
    return "quick" if args.quick else (args.preset or "paper")


def resolve_config(args: argparse.Namespace, presets: Mapping[str, C]) -> C:
    """The preset chosen by ``args`` with its ``--set`` overrides and ``--seeds`` applied (the
    config dataclass must have an int field ``seeds``). Validation errors of the dataclass
    (``__post_init__``) surface as one-line CLI errors through :func:`run_cli`."""
    base = presets[preset_name(args)]
    return apply_overrides(base, config_overrides(type(base), args))


def config_overrides(cls: type, args: argparse.Namespace, flags: Sequence[str] = ()
                     ) -> dict[str, Any]:
    """The changes ``args`` asks of a config dataclass ``cls``: its ``--set`` items (typed by
    :func:`parse_set`), ``--seeds`` (field ``seeds``), then every attribute named in ``flags``
    that was given (not None, and not False for a ``store_true`` flag), under the same name."""
    changes = parse_set(cls, args.set)
    if args.seeds is not None:
        if args.seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
        changes["seeds"] = args.seeds
    for key in flags:
        value = getattr(args, key)
        if value is not None and value is not False:
            changes[key] = value
    return changes


base_parser = experiment_parser  # the shared flags, for scripts outside the five experiments


def run_cli(main: Callable[[Sequence[str] | None], Any], argv: Sequence[str] | None = None) -> None:
    """Run ``main(argv)``; a ValueError, FileNotFoundError or a locked run directory (another
    process training there) becomes a one-line error, exit 2."""
    from posjax.training.run_dir import RunDirLocked

    try:
        main(argv)
    except (ValueError, FileNotFoundError, RunDirLocked) as e:
        sys.exit(f"error: {e}")
    except KeyboardInterrupt:
        sys.exit("interrupted: finished cells are saved; rerun the same command to resume")


# --- the σ-sweep label of a learned PE (init_sweep, network_simulation) -------------------------
LEARNED_PREFIX = "learned_s"


def learned_label(sigma: float) -> str:
    """The cell label of a learned table initialised N(0, σ²): ``"learned_s0.2"`` (a cell key)."""
    return f"{LEARNED_PREFIX}{sigma:g}"


def learned_sigma(label: str) -> float | None:
    """σ of a :func:`learned_label` (None for any other label, e.g. a fixed PE)."""
    return float(label[len(LEARNED_PREFIX):]) if label.startswith(LEARNED_PREFIX) else None


def learned_pe(sigma: float) -> tuple[str, dict[str, Any]]:
    """Registry name and options of a learned table initialised N(0, σ²) (arXiv 2406.08272)."""
    return "learned", {"init": "normal", "std": float(sigma)}


def display_label(label: str, prefix: str = "σ=") -> str:
    """``"learned_s0.2"`` -> ``"σ=0.2"`` for plots and tables; other labels unchanged."""
    sigma = learned_sigma(label)
    return label if sigma is None else f"{prefix}{label[len(LEARNED_PREFIX):]}"


# --- the σ sweep run as ensembles (init_sweep, network_simulation) -----------------------------
def sweep_groups(sigmas: Sequence[float], others: Sequence[str]) -> dict[str, list[str]]:
    """The ensembles of a σ sweep, ``{name: labels}``: every learned σ in one (``"learned"``; σ
    only changes the initialisation, so they share one compiled step), each other PE alone."""
    out = {"learned": [learned_label(s) for s in sigmas]} if sigmas else {}
    out.update({label: [label] for label in others})
    return out


def sweep_members(labels: Sequence[str], seeds: Sequence[int]) -> list[dict[str, Any]]:
    """The members of one sweep ensemble, ``{"label", "seed"}`` per label x seed (label-major)."""
    return [{"label": label, "seed": seed} for label in labels for seed in seeds]


@dataclasses.dataclass(frozen=True)
class SweepEnsemble:
    """A trained sweep ensemble: its ``members`` (:func:`sweep_members`), the
    :class:`posjax.training.EnsembleResult` and each member's logged training-loss curve."""

    members: list[dict[str, Any]]
    result: Any
    curves: list[list[list[float]]]


def train_sweep_ensemble(name: str, labels: Sequence[str], seeds: Sequence[int], *,
                         build: Callable[[str, int], Any], loss_fn: Callable,
                         arrays: Mapping[str, np.ndarray], train: Any, steps: int, out_dir: str,
                         run_config: Mapping[str, Any]) -> SweepEnsemble:
    """Train (or resume) one ensemble of a σ sweep with :func:`posjax.training.train_ensemble`.

    One member per label x seed; member ``m`` is ``build(m["label"], m["seed"])`` and draws its
    batches of ``arrays`` (``train.batch_size`` rows) in the order of its seed. ``train`` (a
    :class:`posjax.training.TrainConfig`) runs ``steps`` steps, logging 20 and checkpointing 4
    times; the run lives in ``out_dir/train/<name>`` with ``run_config`` in its record."""
    from posjax.training import ArrayBatches, train_ensemble

    members = sweep_members(labels, seeds)
    tcfg = dataclasses.replace(train, steps=steps, log_every=max(steps // 20, 1),
                               checkpoint_every=max(steps // 4, 1))
    batches = [ArrayBatches(dict(arrays), train.batch_size, seed=m["seed"]) for m in members]
    run_dir = os.path.join(out_dir, "train", name)
    result = train_ensemble(lambda m: build(m["label"], m["seed"]), loss_fn, batches, tcfg,
                            members=members, out_dir=run_dir, run_config=dict(run_config))
    curves = [loss_curve(os.path.join(run_dir, "metrics.jsonl"), member=i)
              for i in range(len(members))]
    return SweepEnsemble(members, result, curves)


def run_sweep(tag: str, store: CellStore, groups: Mapping[str, Sequence[str]], n_seeds: int,
              run_group: Callable[[str, list[str]], list[dict]]) -> list[dict]:
    """The cells of every ensemble of ``groups`` (:func:`sweep_groups`), each ensemble one
    resumable cell of ``store`` holding one entry per label x seed; ``run_group(name, labels)``
    computes a missing one."""
    cells: list[dict] = []
    for name, labels in groups.items():
        print(f"{tag}: ensemble {name} ({len(labels)} x {n_seeds} members)", flush=True)
        cells += store.compute({"group": name, "labels": labels},
                               lambda: run_group(name, list(labels)),
                               count=len(labels) * n_seeds)
    return cells
