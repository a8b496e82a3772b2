"""The field walk, key half: every ``--set`` key of every experiment config.

For each experiment config and each key ``settable_keys`` lists (flat fields and the dotted
fields of its nested ``model`` / ``train`` configs), a non-default value of the field's type
(derived from the default and the annotation; string options from the code's own choices, read
from the ValueError it gives for an unknown option, or from the library's registries) is passed
through the experiment's real CLI (``main(["--set", "key=value", ...])``). Then either

* ``--set`` (or the config's validation) refuses every candidate value with a ValueError, or
* **the key half**: the cells the run looks up change, i.e. the CellStore options (its salt)
  or the list of cell keys differ from the default run's. The CellStore is replaced by a
  recorder that notes its options and every key asked for and returns a placeholder instead of
  computing the cell, so the walk costs argparse plus the data preparation (stubbed where it
  trains or tokenises: pe_swap's MLM head, long_context's corpus);
* **the computation half** (``test_field_computation.py``): what the cells hand to the
  library's entry points (configs, data, losses: a traced fingerprint) changes as well.

A field that changes neither is a field ``--set`` accepts and silently ignores: it must be
declared ``experiments.common.described`` (refused) or made to act.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root, for `experiments`

CONFIGS = {  # experiment package/module -> config class
    "additive_vs_multiplicative": "AdditiveVsMultiplicativeConfig",
    "finetune_pe": "FinetunePEConfig", "init_sweep": "InitSweepConfig",
    "length_generalization": "LengthGeneralizationConfig",
    "network_simulation": "NetworkSimulationConfig", "stress_table": "StressConfig",
    "pe_swap": "PESwapConfig", "long_context": "LongContextConfig"}

# Keys that change no cell by design, with the reason (each must be a settable key somewhere,
# see test_exemptions_are_settable_keys).
OPERATIONAL = {
    "train.progress": "a progress bar",
    "hub_timeout": "how long to wait for the hub before the local files",
    "train.checkpoint_every": "checkpoint cadence: a resumed run is bit-identical",
}
# Keys whose effect is conditional on a regime the quick preset does not enter; they enter the
# key where that regime is taken.
REGIME = {
    "stress_table": {k: "acts on the matrix-free geometry path only (keyed there)"
                     for k in ("geometry", "matrix_free_above", "matrix_free_k",
                               "stress_exact_max", "stress_pairs")},
    "length_generalization": {"schedule_span": "keys the sched_* cells only"},
}


# --- the values: derived from the default and the annotation -----------------------------------
def _choices_from_error(cls, key: str) -> list[str]:
    """The options the code names when refusing an unknown value of ``key`` (its ValueError)."""
    from experiments.common import apply_overrides, parse_set

    try:
        apply_overrides(cls(), parse_set(cls, [f"{key}=__no_such_option__"]))
    except ValueError as e:
        text = str(e).split("; valid keys")[0]
        words = re.findall(r"'([A-Za-z0-9_.\-]+)'", text)
        words += re.findall(r"\b([a-z][a-z0-9_]+)\b", text.split(",", 1)[-1]
                            if "," in text else "")
        return [w for w in dict.fromkeys(words) if w != "__no_such_option__"
                and w != key.split(".")[-1]]
    return []


def _library_choices(name: str) -> list[str]:
    """Enumerated options of the library's own fields, from the library."""
    from posjax import encodings

    table = {"pe": lambda: sorted(encodings.names()),
             "optimizer": lambda: ["adam", "adamw", "sgd", "lion"],
             "schedule": lambda: ["constant", "cosine", "linear"],
             "activation": lambda: ["gelu", "relu", "silu"],
             "dtype": lambda: ["float32", "bfloat16"],
             "lm_head_dtype": lambda: ["compute", "float32"],
             "kv_source": lambda: ["residual", "input"],
             "attention_impl": lambda: ["xla", "cudnn"]}
    return table[name]() if name in table else []


def candidates(cls, key: str, default: Any, tp: Any) -> list[Any]:
    """Non-default values of the annotated type ``tp`` for ``key``, most plausible first."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        out = [] if default is None else [None]
        for a in inner:
            out += candidates(cls, key, default if default is not None else _zero(a), a)
        return [v for v in out if v != default]
    if origin is typing.Literal:
        return [a for a in args if a != default]
    if tp is bool:
        return [not default]
    if tp is int:
        d = int(default)
        return [v for v in (2 * d if d else 1, d + 1, d - 1, 2) if v != d and v >= 0]
    if tp is float or tp is Any and isinstance(default, float):
        d = float(default)
        return [v for v in (2 * d if d else 0.5, d / 2, 0.5, 1.0) if v != d]
    if tp is Any:
        return [0.5, 1.0, "x"]
    if tp is str:
        name = key.split(".")[-1]
        opts = _choices_from_error(cls, key) + _library_choices(name)
        return [o for o in dict.fromkeys(opts) if o != default] or [f"{default}_other"]
    if origin in (tuple, list) or tp in (tuple, list):
        d = tuple(default or ())
        if len(d) > 1:
            return [d[1:], d[:-1], d[::-1]]
        if len(d) == 1:
            return [d + d]
        inner = args[0] if args else str
        return [tuple(candidates(cls, key, _zero(inner), inner)[:1])]
    if origin is dict or tp is dict:
        return [{"__field_walk__": 1}]
    return []


def _zero(tp):
    return {int: 0, float: 0.0, bool: False, str: ""}.get(tp, None)


def as_text(value: Any) -> str:
    """``value`` as ``--set`` text (the CLI's own syntax)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (tuple, list)):
        return ",".join(as_text(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def default_and_type(cls, key: str):
    obj, target = cls(), cls
    for part in key.split("."):
        tp = typing.get_type_hints(target)[part]
        obj, target = getattr(obj, part), tp
    return obj, tp


# --- the key half: a CellStore that records what it is asked -----------------------------------
class _Placeholder:
    """Stands for any computed value: every attribute, item, call and format is itself."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __getitem__(self, key):
        return self

    def __call__(self, *a, **k):
        return self

    def __format__(self, spec):
        return "?"

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def get(self, key, default=None):
        return self


class _Stop(Exception):
    pass


class Recorder:
    """The CellStore the walk installs: options and every cell key asked for, no computation."""

    log: list = []

    def __init__(self, out_dir, options):
        from experiments.common import jsonable

        self.options = jsonable(options)
        Recorder.log.append(("store", json.dumps(self.options, sort_keys=True, default=str)))
        self.reused = self.computed = 0

    def _note(self, key):
        from experiments.common import jsonable

        Recorder.log.append(("cell", json.dumps(jsonable(key), sort_keys=True, default=str)))
        if len(Recorder.log) > 2000:
            raise _Stop()
        return _Placeholder()

    def compute(self, key, fn, *, count=None):
        return self._note(key)

    def get(self, key, *, count=None):
        return self._note(key)

    def put(self, key, value):
        return value

    def provenance(self):
        return ""


def _stub_pe_swap(mp):
    ex = importlib.import_module("experiments.pe_swap.experiment")
    import posjax.pretrained as pre

    mp.setattr(pre, "resolve", lambda name: name)
    mp.setattr(ex, "prepare_data", lambda cfg, ckpt: _Placeholder())
    mp.setattr(ex, "corpus_geometry", lambda cfg, data: _Placeholder())
    mp.setattr(ex, "head_stage", lambda *a, **k: {})


def _stub_long_context(mp):
    ex = importlib.import_module("experiments.long_context.experiment")
    mp.setattr(ex, "prepare", lambda cfg, out: _Placeholder())


def _stub_finetune_pe(mp):
    ex = importlib.import_module("experiments.finetune_pe.experiment")
    import posjax.data.classification_corpus as cc
    import posjax.pretrained as pre

    mp.setattr(pre, "resolve", lambda name: name)
    mp.setattr(pre, "load_checkpoint", lambda name: (None, None, None))
    mp.setattr(cc, "text_classification_corpus", lambda *a, **k: _Placeholder())
    mp.setattr(ex, "geometry", lambda cfg, prep, hf: ({"none": {"n": 0}, "mds": {"rank": 0}},
                                                      None))


def _stub_stress_table(mp):
    ex = importlib.import_module("experiments.stress_table.experiment")
    mp.setattr(ex, "prepare", lambda cfg, out: _Placeholder())
    G = ex.G
    variants = {v: _Placeholder() for v in ("plugin", "split_half", "exact")}
    mp.setattr(G, "geometry_variants",
               lambda prep, **k: ("dense", variants,
                                  {"n": 8, "N_i": {"min": 0, "median": 0, "max": 0}}))
    mp.setattr(G, "variant_tables",
               lambda path, variants, *a, **k: ({v: _Placeholder() for v in variants},
                                                {v: _Placeholder() for v in variants}))


def _patch_everywhere(mp, qualname: str, fake):
    """Replace ``module.attr`` (``qualname``) in that module and in every experiments module
    that imported it by name."""
    mod, _, attr = qualname.rpartition(".")
    target = importlib.import_module(mod)
    real = getattr(target, attr)
    mp.setattr(target, attr, fake)
    for name, m in list(sys.modules.items()):
        if name.startswith("experiments") and getattr(m, attr, None) is real:
            mp.setattr(m, attr, fake)


# The data the quick presets build before their first cell (seconds per call): the key half
# does not need it. The options that make it are in the store options all the same.
DATA_STUBS = {
    "additive_vs_multiplicative": {
        "posjax.data.tasks.order_blind_baselines": lambda *a, **k: _Placeholder(),
        "experiments.additive_vs_multiplicative.make_data": lambda *a, **k: _Placeholder()},
    "init_sweep": {"posjax.data.latin_square.make_splits": lambda *a, **k: _Placeholder()},
    "network_simulation": {
        "posjax.data.network_sim.simulate": lambda *a, **k: _Placeholder(),
        "posjax.data.network_sim.windows": lambda *a, **k: _Placeholder(),
        "posjax.data.network_sim.random_masks": lambda *a, **k: _Placeholder()},
}

STUBS = {"pe_swap": _stub_pe_swap, "long_context": _stub_long_context,
         "finetune_pe": _stub_finetune_pe, "stress_table": _stub_stress_table}
ARGV = {"stress_table": ["--dataset", "synthetic"]}


def cells_asked(module: str, sets: list[str], out: str, mp) -> tuple[str, ...]:
    """What the experiment's CLI asks its CellStore for under ``--set sets`` (quick preset):
    the store options and cell keys, in order. ValueError: the CLI refused the options."""
    exp = importlib.import_module(f"experiments.{module}")
    for name, mod in list(sys.modules.items()):
        store = getattr(mod, "CellStore", None) if name.startswith("experiments") else None
        if isinstance(store, type) and store.__name__ == "CellStore":
            mp.setattr(mod, "CellStore", Recorder)
    if module in STUBS:
        STUBS[module](mp)
    for name, fake in DATA_STUBS.get(module, {}).items():
        _patch_everywhere(mp, name, fake)
    Recorder.log = []
    argv = ["--preset", "quick", "--out", out, *ARGV.get(module, [])]
    if sets:
        argv += ["--set", *sets]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            exp.main(argv)
    except ValueError:
        if not any(kind == "cell" for kind, _ in Recorder.log):
            raise
    except (_Stop, Exception):  # after the cells: the report code met a placeholder
        if not any(kind == "cell" for kind, _ in Recorder.log):
            raise
    return tuple(text for _, text in Recorder.log)


def walk_keys(module: str, out: str, mp, keys=None):
    """``{key: verdict}`` over ``keys`` (default: every settable key): "refused", "key changes",
    or a finding ("silently ignored: value ...", "internal error ...")."""
    from experiments.common import settable_keys

    cls = getattr(importlib.import_module(f"experiments.{module}"), CONFIGS[module])
    base = cells_asked(module, [], out, mp)
    assert any(t.startswith("{") for t in base)
    verdicts = {}
    for key in keys or settable_keys(cls):
        default, tp = default_and_type(cls, key)
        verdict, accepted = None, []
        # the class default last: the quick preset may have changed it (then it is another value)
        tried = candidates(cls, key, default, tp) + [default]
        for value in tried:
            try:
                asked = cells_asked(module, [f"{key}={as_text(value)}"], out, mp)
            except ValueError:
                continue
            except Exception as e:  # noqa: BLE001 - an internal error is a finding
                verdict = f"internal error for {key}={as_text(value)}: {type(e).__name__}: {e}"
                break
            if asked != base:
                verdict = "key changes"
                break
            if value is default:  # the preset's own value: no change asked
                continue
            accepted.append(as_text(value))
            if len(accepted) == 3:
                break
        if verdict is None and accepted:
            verdict = f"silently ignored: {key}={' / '.join(accepted)} ask for the same cells"
        verdicts[key] = verdict or "refused"
    return verdicts


# the walks over 10 s each on the shared 2-core machine (their CLIs import the pretrained stack
# or write assets per call) run in the slow suite; the default suite walks the other four
SLOW_WALKS = ("additive_vs_multiplicative", "finetune_pe")


@pytest.mark.parametrize("module", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW_WALKS
                                    else m for m in CONFIGS])
def test_every_set_key_changes_the_cell_key_or_is_refused(module, tmp_path, monkeypatch):
    """The key half over every settable key of every experiment config."""
    verdicts = walk_keys(module, str(tmp_path / "out"), monkeypatch)
    exempt = set(OPERATIONAL) | set(REGIME.get(module, {}))
    bad = {k: v for k, v in verdicts.items()
           if v not in ("key changes", "refused") and k not in exempt}
    assert not bad, f"{CONFIGS[module]}: keys --set accepts but no cell key sees: {bad}"


def test_negative_control_a_field_missing_from_the_key_is_found(tmp_path, monkeypatch):
    """A key builder that drops one field (a mutant of pe_swap's: its store options without
    ``mask_prob``) is caught; the other fields still change the key."""
    ex = importlib.import_module("experiments.pe_swap.experiment")

    def asdict(cfg):
        return {k: v for k, v in dataclasses.asdict(cfg).items() if k != "mask_prob"}

    monkeypatch.setattr(ex, "dataclasses", types.SimpleNamespace(asdict=asdict))
    verdicts = walk_keys("pe_swap", str(tmp_path / "out"), monkeypatch,
                         keys=["mask_prob", "min_words"])
    assert verdicts["mask_prob"].startswith("silently ignored"), verdicts
    assert verdicts["min_words"] == "key changes"


def test_exemptions_are_settable_keys():
    from experiments.common import settable_keys

    every = {k for m, c in CONFIGS.items()
             for k in settable_keys(getattr(importlib.import_module(f"experiments.{m}"), c))}
    assert set(OPERATIONAL) <= every
    for module, keys in REGIME.items():
        cls = getattr(importlib.import_module(f"experiments.{module}"), CONFIGS[module])
        assert set(keys) <= set(settable_keys(cls))
