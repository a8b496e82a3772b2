"""Mutants of the NTK checks: does a verdict move when the thing it tests is broken?

A check of a claim must fail when its theory side is wrong and when the claim's premise is
broken, and must keep its verdict when a setting the claim does not depend on moves. This module
runs every check of :data:`ntk.checks.SPECS` through the same code under

* **neural-tangents poisons** (:func:`ntk.recording.poisoned`): one library function answers
  wrongly, with a finite result of the right shape and scale —

  ======================  =====================================================================
  ``nt:linearize``        ``linearize(f, params)`` returns ``f`` itself (the exact model)
  ``nt:empirical_ntk_fn`` the empirical NTK replaced by the isotropic kernel of equal trace
  ``nt:kernel_fn``        a ``stax`` network's NNGP returned where its NTK is asked for
  ``nt:kernel_fn_shift``  ``K + 0.5 mean(diag K) 1 1^T`` in place of the NTK ``K``
  ``nt:predict``          ``gradient_descent_mse``'s prediction replaced by the prior mean
  ======================  =====================================================================

* **premise breakers**: configuration overrides under which the claim should not hold (the
  check's :class:`CheckSpec` names them: mean-field parameterisation, shuffled positions, one
  shared ``P``, a wrong distance, ...);
* **nuisance grids**: one factor at a time around the default (width window, samples per
  position, horizon, ridge, seeds), each a grid fixed in the spec before any run.

:func:`run_check` returns the check's :class:`CheckResult` with ``data["mutants"]``
(``{mutant: {"statistic", "passed"}}``), ``data["robustness"]`` (``{setting: {"statistic",
"verdict"}}``), ``data["nt_called"]`` (the recorder's list) and ``data["neural_tangents"]`` (the
functions whose poison flips the verdict), and a ``robust_verdict`` of PASS / FAIL when every setting
of the grid agrees, else FRAGILE. ``python -m ntk --mutants`` runs it for every check.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ntk.recording import POISON_TARGETS, poisoned, recording
from ntk.result import CheckResult

__all__ = ["NT_POISONS", "CheckSpec", "poison_call", "isotropic_like", "apply_overrides",
           "run_check", "verdict_of"]

NT_POISONS = tuple(POISON_TARGETS)


@dataclasses.dataclass(frozen=True)
class CheckSpec:
    """What the harness needs to know about a check, fixed before any run.

    Attributes:
      fn: ``cfg -> CheckResult``; ``passed`` is the check's verdict at that configuration.
      kind: ``"theory"`` (compares a neural-tangents prediction with a quantity computed
        without it, so some poison must flip its verdict) or ``"guard"`` (a symmetry or an
        identity, allowed to list no neural-tangents function).
      premise_breakers: ``{name: overrides}`` (a dict, or ``cfg -> dict``); under each the
        claim must fail.
      nuisance: ``{field: values}`` (a tuple, or ``cfg -> tuple``); a setting the claim does
        not depend on, varied one at a time around the default (dotted fields reach nested
        configs).
      description: one line for the report.
    """

    fn: Callable
    kind: str = "theory"
    premise_breakers: dict = dataclasses.field(default_factory=dict)
    nuisance: dict = dataclasses.field(default_factory=dict)
    description: str = ""

    def __post_init__(self):
        if self.kind not in ("theory", "guard"):
            raise ValueError(f"CheckSpec.kind must be 'theory' or 'guard', got {self.kind!r}")


# --- poisons ----------------------------------------------------------------------------------

def isotropic_like(theta) -> jax.Array:
    """The isotropic kernel with the trace of ``theta`` (neural-tangents layout).

    ``theta [N1, N2, O1, O1', ...]`` is read as the matrix ``[(N1 O1 ...), (N2 O1' ...)]``; a
    square one becomes ``tr / m * I``, a rectangular (cross) one zero.
    """
    theta = jnp.asarray(theta)
    k = (theta.ndim - 2) // 2
    order = [0] + [2 + 2 * i for i in range(k)] + [1] + [3 + 2 * i for i in range(k)]
    m = theta.transpose(order)
    rows = int(np.prod(m.shape[:k + 1]))
    cols = int(np.prod(m.shape[k + 1:]))
    mat = m.reshape(rows, cols)
    iso = (jnp.trace(mat) / rows * jnp.eye(rows, dtype=mat.dtype) if rows == cols
           else jnp.zeros_like(mat))
    inverse = np.argsort(order)
    return iso.reshape(m.shape).transpose(inverse)


def _kernel_get(args, kwargs):
    get = kwargs.get("get", args[2] if len(args) > 2 else None)
    return get


def _replace_ntk(out, get, ntk_value_fn):
    """Apply ``ntk_value_fn`` to the NTK inside whatever ``kernel_fn`` returned for ``get``."""
    if isinstance(get, str):
        return ntk_value_fn(out) if get == "ntk" else out
    if get is None:
        return out.replace(ntk=ntk_value_fn(out.ntk))
    if "ntk" in get:
        names = list(get)
        values = list(out)
        values[names.index("ntk")] = ntk_value_fn(values[names.index("ntk")])
        return type(out)(*values) if hasattr(out, "_fields") else tuple(values)
    return out


def poison_call(poison: str, name: str, fn: Callable) -> Callable | None:
    """The poisoned stand-in for the recorded function ``name``, or None if ``poison`` leaves
    it alone (called by :mod:`ntk.recording` for every neural-tangents call)."""
    if poison == "nt:linearize" and name == "linearize":
        return lambda f, params: f
    if poison == "nt:empirical_ntk_fn" and name == "empirical_ntk_fn.fn":
        return lambda *a, **k: isotropic_like(fn(*a, **k))
    if poison == "nt:predict" and name == "predict.gradient_descent_mse.fn":
        def prior_mean(t=None, fx_train_0=0.0, fx_test_0=0.0, k_test_train=None, *a, **k):
            real = fn(t, fx_train_0, fx_test_0, k_test_train, *a, **k)
            priors = (fx_train_0, fx_test_0)
            if isinstance(real, tuple):
                return tuple(None if r is None else jnp.broadcast_to(jnp.asarray(p, r.dtype),
                                                                      r.shape)
                             for r, p in zip(real, priors))
            return jnp.broadcast_to(jnp.asarray(fx_test_0 if k_test_train is not None
                                                else fx_train_0, real.dtype), real.shape)
        return prior_mean
    if name.endswith("serial.kernel_fn") and poison in ("nt:kernel_fn", "nt:kernel_fn_shift"):
        def kernel(*args, **kwargs):
            get = _kernel_get(args, kwargs)
            if poison == "nt:kernel_fn":
                both = fn(*args[:2], ("nngp", "ntk"), **{k: v for k, v in kwargs.items()
                                                         if k != "get"})
                swapped = _replace_ntk(fn(*args, **kwargs), get, lambda _: both.nngp)
                return swapped
            x1 = args[0]
            square = fn(x1, None, "ntk")
            c = 0.5 * jnp.mean(jnp.diagonal(square, axis1=0, axis2=1))
            return _replace_ntk(fn(*args, **kwargs), get, lambda K: K + c)
        return kernel
    return None


# --- harness ----------------------------------------------------------------------------------

def apply_overrides(cfg, overrides: dict):
    """``dataclasses.replace`` with dotted keys for nested configuration dataclasses."""
    nested: dict[str, dict] = {}
    flat = {}
    for key, value in overrides.items():
        head, _, rest = key.partition(".")
        if not hasattr(cfg, head):
            raise ValueError(f"{type(cfg).__name__} has no field {head!r} (override {key!r})")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            flat[key] = value
    for head, sub in nested.items():
        flat[head] = apply_overrides(getattr(cfg, head), sub)
    return dataclasses.replace(cfg, **flat)


def verdict_of(passed_values) -> str:
    """PASS / FAIL when every setting agrees, else FRAGILE."""
    values = set(bool(v) for v in passed_values)
    if len(values) > 1:
        return "FRAGILE"
    return "PASS" if values.pop() else "FAIL"


def _setting_label(field: str, value: Any) -> str:
    return f"{field}={list(value) if isinstance(value, tuple) else value}"


def run_check(name: str, spec: CheckSpec, cfg, *, mutants: bool = True,
              robustness: bool = True, log: Callable[[str], None] | None = None
              ) -> CheckResult:
    """Run one check at ``cfg``, then its mutants and its nuisance grid (see module docstring).

    A poison whose function the default run never called cannot change anything the check
    computed; it is recorded with the default's statistic and ``"skipped": "not called"``.
    """
    say = log or (lambda line: None)
    start = time.perf_counter()
    jax.clear_caches()
    with recording() as calls:
        base = spec.fn(cfg)
    called = sorted(calls)
    data = {**base.data, "nt_called": called}
    mutant_rows: dict[str, dict] = {}
    if mutants:
        for poison in NT_POISONS:
            if POISON_TARGETS[poison] not in called:
                mutant_rows[poison] = {"statistic": float(base.statistic),
                                       "passed": bool(base.passed), "skipped": "not called"}
                continue
            t0 = time.perf_counter()
            with poisoned(poison):
                res = spec.fn(cfg)
            mutant_rows[poison] = {"statistic": float(res.statistic), "passed": bool(res.passed)}
            say(f"  {name} {poison}: {'PASS' if res.passed else 'FAIL'} "
                f"{res.statistic:.4g} ({time.perf_counter() - t0:.1f} s)")
        for breaker, overrides in spec.premise_breakers.items():
            t0 = time.perf_counter()
            resolved = overrides(cfg) if callable(overrides) else dict(overrides)
            res = spec.fn(apply_overrides(cfg, resolved))
            mutant_rows[f"premise:{breaker}"] = {"statistic": float(res.statistic),
                                                 "passed": bool(res.passed),
                                                 "overrides": resolved}
            say(f"  {name} premise:{breaker}: {'PASS' if res.passed else 'FAIL'} "
                f"{res.statistic:.4g} ({time.perf_counter() - t0:.1f} s)")
    flips = sorted({POISON_TARGETS[p] for p in NT_POISONS
                    if p in mutant_rows and "skipped" not in mutant_rows[p]
                    and mutant_rows[p]["passed"] != bool(base.passed)})
    rob: dict[str, dict] = {"default": {"statistic": float(base.statistic),
                                        "verdict": "PASS" if base.passed else "FAIL"}}
    if robustness:
        for field, values in spec.nuisance.items():
            for value in (values(cfg) if callable(values) else values):
                t0 = time.perf_counter()
                res = spec.fn(apply_overrides(cfg, {field: value}))
                rob[_setting_label(field, value)] = {
                    "statistic": float(res.statistic),
                    "verdict": "PASS" if res.passed else "FAIL"}
                say(f"  {name} {_setting_label(field, value)}: "
                    f"{'PASS' if res.passed else 'FAIL'} {res.statistic:.4g} "
                    f"({time.perf_counter() - t0:.1f} s)")
    verdict = verdict_of(r["verdict"] == "PASS" for r in rob.values())
    flipping = sorted(k for k, r in rob.items()
                      if r["verdict"] != ("PASS" if base.passed else "FAIL"))
    breakers_fail = all(not r["passed"] for k, r in mutant_rows.items()
                        if k.startswith("premise:"))
    data.update({"mutants": mutant_rows, "neural_tangents": flips, "robustness": rob,
                 "robust_verdict": verdict, "fragile_settings": flipping, "kind": spec.kind,
                 "premise_breakers_fail": breakers_fail,
                 "harness_wall_s": round(time.perf_counter() - start, 2)})
    return CheckResult(base.name, base.passed, base.statistic, base.threshold, base.detail, data)
