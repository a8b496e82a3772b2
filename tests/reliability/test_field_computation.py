"""The field walk, computation half: a non-default ``--set`` value changes what the cells compute.

The key half (``test_field_walk.py``) shows every settable field reaches the cell key. A field
in the key that no computation reads is the other silent failure: the run records an option it
never applied. Here the walk runs each experiment's CLI (quick preset) once more per key, with
the recording CellStore now *calling* each cell's function, and with the library's entry points
the experiment code calls (every ``posjax`` name it imports: the training loops, the model
constructors, evaluation and analysis functions, the data builders) wrapped by a tracer:

* each call made from experiment code is noted as its qualified name plus a fingerprint of its
  arguments: dataclass configs field by field, arrays by shape, dtype and a hash of their bytes,
  ``ArrayBatches`` / RNGs by their contents, callables by qualified name plus their scalar
  closure values (a loss made by ``make_loss(readout)`` differs by ``readout``), and any value
  a traced call returned as a placeholder by that call's fingerprint (so a model built from
  ``model.d_model=64`` carries it into ``train``);
* the heavy ones (``train``, ``train_ensemble``, the model classes, ``generate``, the pretrained
  loaders) return a placeholder instead of running; ``train_ensemble`` still builds each member
  (so its model config is traced); the data builders run for real, memoised on their arguments;
  any other call runs for real and becomes a placeholder if it fails on a placeholder input.

The *computation fingerprint* of a run is the sequence of those calls. Per settable key a
non-default value must be refused by ``--set``, or change both the cell key and the computation
fingerprint. Fields that by design act only on reporting (thresholds of a verdict, plots) go
in :data:`REPORTING` with the reason (pe_swap's convergence tolerance; the other thresholds act
inside the cells); fields that act only in a regime the quick preset does not enter are
walked from a base that enters it (:data:`REGIME_SETS`: e.g. stress_table's text options from
``dataset=text`` on finetune_pe's quick corpus, its matrix-free options from
``geometry=matrix_free``); a test checks all three tables name real keys. Where a
preparation is real (:data:`PREPARE`: finetune_pe's tiny checkpoint and corpus, written once
per walk, which stress_table's text regime and pe_swap read as well; pe_swap's own MLM loop
traced as a training entry point; long_context's short synthetic stream and two small text
files) a path or file key is given another value that exists (:data:`VALUES`).
``test_first_step_loss_...``
shows the fingerprint tracks real computation: the first training step's loss of a real tiny
model moves with ``model.d_model`` and not with ``train.learning_rate`` (which moves the second).
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import hashlib
import importlib
import inspect
import io
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import test_field_walk as walk

ROOT = Path(__file__).resolve().parents[2]

# --- fingerprints ------------------------------------------------------------------------------
_SCALARS = (type(None), bool, int, float, str)


class Traced(walk._Placeholder):
    """A placeholder for the value of a traced call (or a part of it): ``origin`` is the call's
    fingerprint plus the attribute / item path taken from it."""

    def __init__(self, origin: str):
        object.__setattr__(self, "_origin", origin)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Traced(f"{self._origin}.{name}")

    def __getitem__(self, key):
        return Traced(f"{self._origin}[{fingerprint(key)}]")

    def __call__(self, *a, **k):
        return Traced(f"{self._origin}(...)")

    def get(self, key, default=None):
        return self[key]

    def keys(self):  # ``**placeholder``: no items
        return ()

    def __iter__(self):  # two parts: enough to take the code into its per-member loops
        return iter((self[0], self[1]))

    def __len__(self):
        return 2

    def __array__(self, *a, **k):  # a small array (never a nested array of placeholders)
        return np.ones((2, 2))

    def __float__(self):
        return float("nan")

    def __int__(self):
        return 1

    __index__ = __int__

    def __round__(self, ndigits=None):
        return float("nan")

    def _op(self, *other):
        return Traced(f"{self._origin}(op)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _op
    __rtruediv__ = __floordiv__ = __rfloordiv__ = __pow__ = __neg__ = __matmul__ = _op

    def _no(self, other):  # a check of a placeholder passes (the code takes its normal path)
        return False

    __lt__ = __le__ = __gt__ = __ge__ = _no


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def fingerprint(obj: Any, depth: int = 0) -> str:
    """A canonical text of what ``obj`` holds that can change a computation (see the module
    docstring); a closure's non-scalar captured values (e.g. the whole experiment config) are
    left out, so a field reaches the fingerprint only through a value a call receives."""
    if depth > 8:
        return "…"
    d = depth + 1
    if isinstance(obj, Traced):
        return f"<{obj._origin}>"
    if isinstance(obj, walk._Placeholder):
        return "<placeholder>"
    if isinstance(obj, _SCALARS):
        return repr(obj)
    if isinstance(obj, (np.ndarray, np.generic)) or type(obj).__module__.startswith("jax"):
        try:
            arr = np.asarray(obj)
            if arr.dtype == object:
                raise TypeError
            return f"array{arr.shape}{arr.dtype}:{hashlib.sha1(arr.tobytes()).hexdigest()[:12]}"
        except Exception:  # noqa: BLE001 - a jax object that is not an array
            pass
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        items = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return f"{type(obj).__name__}{fingerprint(items, d)}"
    if isinstance(obj, dict):
        return "{" + ",".join(f"{k!r}:{fingerprint(v, d)}" for k, v in
                              sorted(obj.items(), key=lambda kv: repr(kv[0]))) + "}"
    if isinstance(obj, (list, tuple, set, frozenset, range)):
        items = sorted(obj, key=repr) if isinstance(obj, (set, frozenset)) else obj
        return "[" + ",".join(fingerprint(v, d) for v in items) + "]"
    if isinstance(obj, np.random.Generator):
        return f"Generator{fingerprint(obj.bit_generator.state, d)}"
    if isinstance(obj, functools.partial):
        return f"partial({fingerprint(obj.func, d)},{fingerprint(obj.args, d)}," \
               f"{fingerprint(obj.keywords, d)})"
    if isinstance(obj, types.ModuleType):
        return f"module {obj.__name__}"
    if type(obj).__name__ == "Rngs":
        import jax

        try:
            return f"Rngs({fingerprint(jax.random.key_data(obj.default.key[...]), d)})"
        except Exception:  # noqa: BLE001
            return "Rngs(?)"
    if callable(obj) and hasattr(obj, "__qualname__"):
        func = getattr(obj, "__wrapped__", obj)
        cells = {}
        code = getattr(func, "__code__", None)
        for name, cell in zip(code.co_freevars if code else (), getattr(func, "__closure__", None)
                              or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if isinstance(value, _SCALARS) or (isinstance(value, tuple) and all(
                    isinstance(v, _SCALARS) for v in value)):
                cells[name] = value
        return f"{getattr(func, '__module__', '')}.{func.__qualname__}{fingerprint(cells, d)}"
    if hasattr(obj, "__dict__") and depth < 4:
        return f"{type(obj).__name__}{fingerprint(vars(obj), d)}"
    return type(obj).__name__


# --- the tracer --------------------------------------------------------------------------------
# Entry points that do not run under the trace (they train, build a model, load weights): they
# return a placeholder carrying their fingerprint (``Tracer.real``: the ones a walk runs).
HEAVY = {"train", "train_ensemble", "train_mlm", "generate", "load_hf", "mlm_encoder",
         "load_checkpoint", "write_tiny_checkpoint", "order_blind_baselines"}
# Plumbing, not computation (``jsonable`` writes the records, the cell keys included).
UNTRACED = {"jsonable"}
# Arguments that say where and under which name a run is recorded, not what it computes (a
# ``run_config`` holds the whole experiment config: it would make every field look read).
RECORD_ARGS = {"run_config", "desc", "out_dir", "log"}
# Data builders (pure functions of their arguments): run for real, memoised on the fingerprint.
MEMOISED = {"make_splits", "simulate", "windows", "trigger_distance", "trigger_count", "split",
            "order_blind_baselines", "make_dataset", "train_lengths", "eval_lengths",
            "three_regime_corpus", "sample_distributions", "text_classification_corpus",
            "load_checkpoint", "position_table", "shift_task_corpus", "geometry_variants",
            "dense_tables", "matrix_free_tables", "fixed_distances", "fixed_coordinates",
            "sensitivity_stress"}


class Tracer:
    """The trace of one CLI run: ``calls`` is the list of ``(name, fingerprint digest)``;
    ``active`` is False outside a traced run, ``depth`` > 0 inside a traced call (calls the
    library makes itself are not noted)."""

    def __init__(self):
        self.real: set[str] = set()  # HEAVY names run for real in this experiment's walk
        self.calls: list[tuple[str, str]] = []
        self.active = False
        self.depth = 0
        self.failed: list[str] = []
        self.memo: dict[str, Any] = {}
        self.losses: list[float] | None = None  # [] asks for two real steps of the first member


def _two_real_steps(real, args, kwargs) -> list[float]:
    """The losses of the first two training steps of the first member of a ``train_ensemble``
    call, trained for real (no checkpoint, a fresh run directory)."""
    import tempfile

    from experiments.common import loss_curve

    build, loss_fn, batches, config = args[:4]
    member = list(kwargs["members"])[:1]
    batches = batches[:1] if isinstance(batches, (list, tuple)) else batches
    config = dataclasses.replace(config, steps=2, log_every=1, checkpoint_every=0)
    with tempfile.TemporaryDirectory() as run_dir:
        real(build, loss_fn, batches, config, members=member, out_dir=run_dir)
        return [v for _, v in loss_curve(str(Path(run_dir) / "metrics.jsonl"), member=0)]


TRACE = Tracer()


def _traced(qualname: str, real: Any):
    name = qualname.rpartition(".")[2]
    module_class = isinstance(real, type) and _is_module_class(real)

    @functools.wraps(real)
    def wrapper(*args, **kwargs):
        if not TRACE.active or TRACE.depth:
            return real(*args, **kwargs)
        heavy = module_class or (name in HEAVY and name not in TRACE.real)
        text = fingerprint((args, {k: v for k, v in kwargs.items() if k not in RECORD_ARGS}))
        digest = _digest(f"{qualname}{text}")
        TRACE.calls.append((qualname, digest))
        if name == "train_ensemble" and TRACE.losses == []:
            TRACE.depth += 1  # the real models, built and trained untraced
            try:
                TRACE.losses.extend(_two_real_steps(real, args, kwargs))
            finally:
                TRACE.depth -= 1
        if heavy:
            if name == "train_ensemble":  # the members' models: built (traced) one by one
                for member in kwargs.get("members") or ():
                    args[0](member)
            return Traced(qualname + ":" + digest)
        memo_key = digest + _bound_selves(args, kwargs)
        if name in MEMOISED and memo_key in TRACE.memo:
            return TRACE.memo[memo_key]
        TRACE.depth += 1
        try:
            value = real(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - a placeholder met real code
            TRACE.failed.append(f"{qualname}: {type(e).__name__}")
            return Traced(qualname + ":" + digest)
        finally:
            TRACE.depth -= 1
        if name in MEMOISED:
            TRACE.memo[memo_key] = value
        return value

    return wrapper


def _bound_selves(args, kwargs) -> str:
    """The objects behind the bound-method arguments of a call (e.g. a config's method passed as a callback):
    left out of the fingerprint (they would make every field of a config look read), but part
    of a memoised call's key, since the method's answer depends on them."""
    selves = [v.__self__ for v in (*args, *kwargs.values()) if inspect.ismethod(v)]
    return _digest(fingerprint(selves)) if selves else ""


def _is_module_class(cls: type) -> bool:
    try:
        from flax import nnx

        return issubclass(cls, nnx.Module)
    except TypeError:
        return False


@functools.cache
def library_imports() -> tuple[tuple[str, str], ...]:
    """``(module, name)`` of every ``from posjax... import name`` in the experiments' code (a
    module imported so, or by ``import posjax.x as y``: each public function it defines or, for a
    package, re-exports from its own submodules)."""
    found = set()
    for path in sorted((ROOT / "experiments").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("posjax"):
                for alias in node.names:
                    found.add((node.module, alias.name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("posjax.") and alias.asname:
                        found.add(tuple(alias.name.rsplit(".", 1)))
    out = set()
    for module, name in found:
        obj = getattr(importlib.import_module(module), name, None)
        if obj is None:
            with contextlib.suppress(ImportError):
                obj = importlib.import_module(f"{module}.{name}")
        if isinstance(obj, types.ModuleType):
            out |= {(obj.__name__, n) for n, f in vars(obj).items() if not n.startswith("_")
                    and n not in UNTRACED and inspect.isfunction(f)
                    and (f.__module__ == obj.__name__
                         or f.__module__.startswith(obj.__name__ + "."))}
        elif name in UNTRACED:
            continue
        elif inspect.isfunction(obj) or (isinstance(obj, type) and _is_module_class(obj)):
            out.add((module, name))
    return tuple(sorted(out))


def install_tracer(mp) -> None:
    """Wrap every library entry point the experiments import, where they import it from and in
    every experiments module holding it by name."""
    for module, name in library_imports():
        mod = importlib.import_module(module)
        real = getattr(mod, name)
        if getattr(real, "__traced__", False):
            continue
        fake = _traced(f"{module}.{name}", real)
        fake.__traced__ = True
        mp.setattr(mod, name, fake)
        for mname, m in list(sys.modules.items()):
            if mname.startswith("experiments") and getattr(m, name, None) is real:
                mp.setattr(m, name, fake)


class ComputingRecorder(walk.Recorder):
    """The recording CellStore of the key half, now running each cell's function (under the
    tracer); a cell that fails on a placeholder is noted and stands as a placeholder."""

    def compute(self, key, fn, *, count=None):
        self._note(key)
        try:
            return fn()
        except Exception as e:  # noqa: BLE001
            TRACE.failed.append(f"cell {type(e).__name__}: {e}"[:200])
            return walk._Placeholder()

    def get(self, key, *, count=None):
        self._note(key)
        return None


def traced_run(module: str, sets: list[str], out: str, mp) -> tuple[tuple[str, ...], tuple]:
    """``(cells asked, computation trace)`` of the experiment's CLI under ``--set sets`` (quick
    preset). ValueError: the CLI refused the options."""
    exp = importlib.import_module(f"experiments.{module}")
    for name, mod in list(sys.modules.items()):
        store = getattr(mod, "CellStore", None) if name.startswith("experiments") else None
        if isinstance(store, type) and store.__name__ == "CellStore":
            mp.setattr(mod, "CellStore", ComputingRecorder)
    install_tracer(mp)
    TRACE.real = set()
    if module in PREPARE:  # a tiny real preparation, made once per walk
        PREPARE[module](mp, out)
    elif module in walk.STUBS:  # the stubbed preparation is not traced
        walk.STUBS[module](mp)
    walk.Recorder.log, TRACE.calls, TRACE.failed = [], [], []
    argv = ["--preset", "quick", "--out", out, *walk.ARGV.get(module, [])]
    if sets:
        argv += ["--set", *sets]
    TRACE.active = True
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            exp.main(argv)
    except Exception:  # noqa: BLE001 - refused (no cell asked), or the report met a placeholder
        if not any(kind == "cell" for kind, _ in walk.Recorder.log):
            raise
    finally:
        TRACE.active = False
    return tuple(text for _, text in walk.Recorder.log), tuple(TRACE.calls)


def _untraced(fn):
    """``fn`` run outside the trace (its library calls not noted), memoised on its arguments:
    the assets a quick preset writes are the same for every key of a walk."""
    memo: dict[str, Any] = {}

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        text = fingerprint((args, kwargs))
        if text not in memo:
            TRACE.depth += 1
            try:
                memo[text] = fn(*args, **kwargs)
            finally:
                TRACE.depth -= 1
        return memo[text]

    return wrapper


_ASSETS: dict[str, Any] = {}


def _quick_assets(out: str):
    """finetune_pe's quick assets (a tiny BERT checkpoint ``{out}/tiny-bert`` and a generated
    labelled corpus ``{out}/corpus``), and a second set of another seed under ``{out}/alt``,
    written once per walk; returns the memoised writer."""
    from experiments.finetune_pe.config import write_quick_assets

    if out not in _ASSETS:
        _ASSETS[out] = _untraced(write_quick_assets)
        _ASSETS[out](out)
        _ASSETS[out](str(Path(out) / "alt"), seed=1)
    return _ASSETS[out]


def _prepare_finetune_pe(mp, out: str) -> None:
    """finetune_pe on its quick assets, made before the first run (the asset keys' base names
    them; the run's own call finds them made); the checkpoint is read for real (its config and
    position table feed the geometry and the PE scale)."""
    ex = importlib.import_module("experiments.finetune_pe.experiment")
    mp.setattr(ex, "write_quick_assets", _quick_assets(out))
    TRACE.real = {"load_checkpoint"}


def _prepare_pe_swap(mp, out: str) -> None:
    """pe_swap on finetune_pe's tiny checkpoint (its tokenizer, the stdlib windows for real);
    its own MLM loop ``train_mlm`` is traced as a training entry point. The head a previous
    run saved is removed: every run trains (traces) its head stage."""
    _quick_assets(out)
    for name in ("mlm_head.npz", "mlm_head.json"):
        (Path(out) / name).unlink(missing_ok=True)
    for name in ("experiments.pe_swap.mlm", "experiments.pe_swap.experiment"):
        mod = importlib.import_module(name)
        if not getattr(mod.train_mlm, "__traced__", False):
            fake = _traced("experiments.pe_swap.mlm.train_mlm", mod.train_mlm)
            fake.__traced__ = True
            mp.setattr(mod, "train_mlm", fake)


def _prepare_long_context(mp, out: str) -> None:
    """long_context's corpus made for real: two small UTF-8 text files for its ``dataset=text``
    regime (``{out}/corpus.txt``, ``{out}/alt.txt``); the walk's base is the seeded synthetic
    stream (no tokenizer to train), and ``dataset=stdlib`` tokenises the docstrings for real."""
    Path(out).mkdir(parents=True, exist_ok=True)
    words = ("position", "encoding", "token", "attention", "length", "rotary", "table", "head",
             "layer", "window", "corpus", "stream", "model", "context", "distance", "key")
    for name, seed in (("corpus.txt", 0), ("alt.txt", 1)):
        rng = np.random.default_rng(seed)
        lines = [" ".join(rng.choice(words, size=12)) for _ in range(400)]
        (Path(out) / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


# The preparation each walk makes for real (the others: walk.STUBS): stress_table builds its
# synthetic corpus, or in the text / checkpoint regimes reads finetune_pe's quick assets;
# long_context builds its synthetic stream, or tokenises a small text file or the stdlib.
PREPARE = {"finetune_pe": _prepare_finetune_pe,
           "stress_table": lambda mp, out: _quick_assets(out) and None,
           "pe_swap": _prepare_pe_swap, "long_context": _prepare_long_context}
# Values tried before the derived candidates ("{out}": the run's output folder).
# (The other assets, so that no walk asks the hub; a metric, pad mode, mixing, column and
# tokenizer files that exist, where the derived "<default>_other" is refused as unknown only
# when the run reaches the library.)
VALUES = {"finetune_pe": {"pretrained": ["{out}/alt/tiny-bert"], "data_dir": ["{out}/alt/corpus"],
                          "metric": ["fr_arc"], "text_column": ["text"],
                          "tokenizer": ["{out}/alt/tiny-bert"],
                          "vocab_file": ["{out}/alt/tiny-bert/vocab.txt"]},
          "stress_table": {"pretrained": ["{out}/tiny-bert"], "data_dir": ["{out}/alt/corpus"],
                           "tokenizer": ["{out}/tiny-bert"], "text_column": ["text"],
                           "vocab_file": ["{out}/tiny-bert/vocab.txt"], "mixing": ["hard"],
                           "metric": ["normalized"], "pad_mode": ["count"],
                           "package": ["numpy"]},
          "pe_swap": {"metric": ["normalized"], "pretrained": ["{out}/alt/tiny-bert"]},
          "long_context": {"text_file": ["{out}/alt.txt"], "geometry_windows": ["16"]}}

# Data sizes the walk shrinks (with the key's own value set after, so it wins): what a field
# reaches does not depend on how many puzzles / windows there are, the walk's time does
# (pe_swap: the tiny checkpoint, whose table holds 32 positions, instead of MiniLM).
BASE_SETS = {"init_sweep": ["n_per_condition=40"],
             "pe_swap": ["pretrained={out}/tiny-bert", "max_len=32"],
             "finetune_pe": ["seeds=1", "train.steps=2"],
             # the synthetic stream, short: 3,000 tokens hold 2 held-out rows of 8L + 1
             "long_context": ["dataset=synthetic", "corpus_tokens=3000", "eval_rows=2",
                              "attention_rows=1", "trials=2", "geometry_windows=12"]}
# Keys that act only in a regime the quick preset does not enter: walked from a base that enters
# it (the key half keys them there as well).
REGIME_SETS = {
    "init_sweep": {"epochs": ["max_steps=none"]},
    "additive_vs_multiplicative": {"epochs": ["steps=none"]},
    "length_generalization": {"lape_base": ["pes=lape"], "schedule_span": ["pes=sched_gemma3"]},
    # the asset keys: any one set turns off the quick assets, so the base names all three
    "finetune_pe": {k: ["pretrained={out}/tiny-bert", "data_dir={out}/corpus", "dataset=text"]
                    for k in ("pretrained", "data_dir", "dataset")},
    # the text corpus (a small file written by the walk)
    "long_context": {"text_file": ["dataset=text", "text_file={out}/corpus.txt"],
                     "eval_rows": ["corpus_tokens=20000"]},  # room for more held-out rows
    # the preset warms up by fraction; the step count acts without one
    "pe_swap": {"train.warmup_steps": ["train.warmup_fraction=none"]},
    "stress_table": {
        **{k: ["geometry=matrix_free"] for k in ("matrix_free_k", "stress_exact_max",
                                                 "stress_pairs")},
        "matrix_free_above": ["matrix_free_above=31"],  # n = 32: matrix-free at 31, not at 62
        "alibi_heads": ["alibi_scale=mean_slope"],
        # the text corpus options (the quick corpus; its WordPiece trained unless one is named)
        **{k: ["dataset=text", "data_dir={out}/corpus"] for k in (
            "keep_special", "max_len", "tokenizer_vocab", "text_column", "stream", "vocab_file",
            "data_dir", "tokenizer")},
        **{k: ["pretrained={out}/tiny-bert"] for k in ("pretrained_layernorm", "require_n")},
        # the docstrings of an installed package instead of the standard library's
        "package": ["dataset=stdlib"],
    },
}


def _other_names(cls, key: str, default: Any) -> list[tuple[str, ...]]:
    """For a tuple of names (PEs, tasks, variants): one-name tuples of other valid names (the
    key half's candidates only shorten or repeat the default, which may change no cell)."""
    from posjax import encodings

    if not (isinstance(default, tuple) and default and all(isinstance(v, str) for v in default)):
        return []
    names = walk._choices_from_error(cls, key) + sorted(encodings.names())
    return [(n,) for n in dict.fromkeys(names) if n not in default][:2]


def walk_computation(module: str, out: str, mp, keys=None) -> dict[str, str]:
    """``{key: verdict}``: "refused", "key and computation change", or a finding ("key only:
    ...", "computation only: ...", "silently ignored: ...", "internal error ...")."""
    from experiments.common import settable_keys

    cls = getattr(importlib.import_module(f"experiments.{module}"), walk.CONFIGS[module])
    bases: dict[tuple, tuple] = {}
    verdicts = {}
    for key in keys or settable_keys(cls):
        base_sets = [s.format(out=out) for s in
                     BASE_SETS.get(module, []) + REGIME_SETS.get(module, {}).get(key, [])]
        if tuple(base_sets) not in bases:
            bases[tuple(base_sets)] = traced_run(module, base_sets, out, mp)
        base = bases[tuple(base_sets)]
        assert any(t.startswith("{") for t in base[0]) and base[1], f"{module}: nothing traced"
        default, tp = walk.default_and_type(cls, key)
        verdict, seen = None, []
        given = [v.format(out=out) for v in VALUES.get(module, {}).get(key, [])]
        for value in given + walk.candidates(cls, key, default, tp) \
                + _other_names(cls, key, default) + [default]:
            try:
                cells, calls = traced_run(module, [*base_sets, f"{key}={walk.as_text(value)}"],
                                          out, mp)
            except ValueError:
                continue
            except Exception as e:  # noqa: BLE001 - an internal error is a finding
                verdict = f"internal error for {key}={walk.as_text(value)}: {type(e).__name__}: {e}"
                break
            changed = (cells != base[0], calls != base[1])
            if changed == (True, True):
                verdict = "key and computation change"
                break
            if value is default and changed == (False, False):
                continue
            seen.append((walk.as_text(value), changed))
            if len(seen) == 3:
                break
        if verdict is None and seen:
            what = {(True, False): "key only", (False, True): "computation only",
                    (False, False): "silently ignored"}
            verdict = "; ".join(f"{what[c]}: {key}={v}" for v, c in seen)
        verdicts[key] = verdict or "refused"
    return verdicts


# --- what the default suite and the slow suite walk ---------------------------------------------
# The experiments whose cells the tracer follows to their training and evaluation calls
# (finetune_pe, stress_table, pe_swap and long_context on a real tiny preparation,
# :data:`PREPARE`): all eight.
TRACED = ("init_sweep", "network_simulation", "additive_vs_multiplicative",
          "length_generalization", "finetune_pe", "stress_table", "pe_swap", "long_context")
# Keys that by design act on reporting only (what a verdict or a plot reads), with the reason.
REPORTING: dict[str, dict[str, str]] = {
    "pe_swap": {"plateau_tol": "the convergence criterion read off a cell's training curve (its "
                               "row's 'convergence' entry and the verdict's 'untested'), not "
                               "what the cell trains"},
}


def sample_keys(module: str, n: int = 3) -> list[str]:
    """``n`` keys of the module's config spread over its key list (deterministic)."""
    from experiments.common import settable_keys

    keys = settable_keys(getattr(importlib.import_module(f"experiments.{module}"),
                                 walk.CONFIGS[module]))
    return [keys[i * (len(keys) - 1) // max(n - 1, 1)] for i in range(n)]


def _findings(module: str, verdicts: dict[str, str]) -> dict[str, str]:
    exempt = set(walk.OPERATIONAL) | set(REPORTING.get(module, {}))
    return {k: v for k, v in verdicts.items()
            if v not in ("key and computation change", "refused") and k not in exempt}


# init_sweep's Latin squares and additive_vs_multiplicative's trigger tasks take 15-25 s to
# build on the shared 2-core machine, finetune_pe's assets, pe_swap's stdlib windows and
# stress_table's first geometry (compiled) 5-15 s: their sample runs in the slow suite
SLOW_DATA = ("init_sweep", "additive_vs_multiplicative", "finetune_pe", "stress_table",
             "pe_swap")


@pytest.mark.parametrize("module", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW_DATA
                                    else m for m in TRACED])
def test_sampled_set_keys_change_key_and_computation(module, tmp_path, monkeypatch):
    """The computation half on three keys per experiment (first, middle, last settable key)."""
    verdicts = walk_computation(module, str(tmp_path / "out"), monkeypatch,
                                keys=sample_keys(module))
    assert not _findings(module, verdicts), verdicts


@pytest.mark.slow
@pytest.mark.parametrize("module", TRACED)
def test_every_set_key_changes_key_and_computation(module, tmp_path, monkeypatch):
    """The computation half over every settable key of the traced experiments."""
    verdicts = walk_computation(module, str(tmp_path / "out"), monkeypatch)
    bad = _findings(module, verdicts)
    assert not bad, f"{walk.CONFIGS[module]}: keys in the cell key that no computation reads: {bad}"


def test_negative_control_a_field_not_handed_to_training_is_found(tmp_path, monkeypatch):
    """A mutant of network_simulation that trains with the preset's learning rate whatever
    ``train.learning_rate`` says (the field still enters the cell key) is caught; the batch
    size, still handed on, is not."""
    ex = importlib.import_module("experiments.network_simulation.experiment")
    real = ex.train_sweep_ensemble

    def mutant(*args, train, **kwargs):
        return real(*args, train=dataclasses.replace(train, learning_rate=1e-3), **kwargs)

    monkeypatch.setattr(ex, "train_sweep_ensemble", mutant)
    verdicts = walk_computation("network_simulation", str(tmp_path / "out"), monkeypatch,
                                keys=["train.learning_rate", "train.batch_size"])
    assert verdicts["train.learning_rate"].startswith("key only"), verdicts
    assert verdicts["train.batch_size"] == "key and computation change", verdicts


def test_exemptions_name_real_keys():
    from experiments.common import settable_keys

    for table in (REPORTING, REGIME_SETS, VALUES):
        for module, keys in table.items():
            cls = getattr(importlib.import_module(f"experiments.{module}"), walk.CONFIGS[module])
            assert set(keys) <= set(settable_keys(cls)), module


def first_two_losses(module: str, sets: list[str], out: str, mp) -> tuple[list[float], tuple]:
    """The real losses of the first two training steps of the first member of the run's first
    ensemble under ``--set sets``, with the run's computation fingerprint."""
    TRACE.losses = []
    try:
        _, calls = traced_run(module, [*BASE_SETS.get(module, []), *sets], out, mp)
        return list(TRACE.losses), calls
    finally:
        TRACE.losses = None


@pytest.mark.slow
def test_first_step_loss_moves_with_the_fields_the_fingerprint_sees(tmp_path, monkeypatch):
    """The fingerprint tracks real computation (network_simulation, a real tiny model trained
    two steps): ``model.d_model`` changes the first step's loss, ``train.learning_rate`` leaves
    it and changes the second; both change the fingerprint."""
    out = str(tmp_path / "out")
    small = ["sigmas=0.5", "seeds=1", "model.num_layers=1", "model.d_model=16", "model.d_ff=32"]
    base, fp = first_two_losses("network_simulation", small, out, monkeypatch)
    wide, fp_wide = first_two_losses("network_simulation", [*small, "model.d_model=32"], out,
                                     monkeypatch)
    fast, fp_fast = first_two_losses("network_simulation", [*small, "train.learning_rate=0.05"],
                                     out, monkeypatch)
    assert len(base) == len(wide) == len(fast) == 2 and np.all(np.isfinite(base)), base
    assert wide[0] != base[0]
    assert fast[0] == base[0] and fast[1] != base[1]
    assert fp_wide != fp and fp_fast != fp
