"""Record which neural-tangents functions a computation actually calls.

:func:`neural_tangents` returns a thin proxy of the adapted neural-tangents module
(:func:`ntk._compat.load_neural_tangents`). Calling a function through it (``nt.stax.serial``,
``nt.empirical_ntk_fn``, ``nt.predict.gradient_descent_mse``, ...) adds its name to every
active :func:`recording`; the functions such a call returns (a network's ``kernel_fn``, an NTK
function, a prediction function, ``f_lin``) are wrapped too, so evaluating them is recorded as
``"<factory>.<returned>"``. Nothing is written by hand: a name appears only if the call
happened, at call (or trace) time.

>>> with recording() as calls:
...     kernel = neural_tangents().stax.serial(...)[2](x, None, "ntk")
>>> sorted(calls)        # ['stax.Dense', ..., 'stax.serial', 'stax.serial.kernel_fn']

:func:`cached_with_calls` memoises an expensive computation together with the names it
recorded, and replays them into the active recordings on every cache hit, so a check that
reuses a shared sweep reports the neural-tangents functions that produced its data.

A recorded name says a function was called, not that its output mattered. Whether it matters is
decided by :mod:`ntk.mutants`, which installs a *poison* here (:func:`poisoned`): the named
neural-tangents function then returns a wrong but finite answer of the right shape, and the
harness checks whether the verdict moves. :func:`cached_with_calls` keys its cache by the active
poison whenever the cached computation called the poisoned function, so no sweep computed with
the real library is replayed into a poisoned run (and vice versa).
"""
from __future__ import annotations

import contextlib
import functools
import types
from typing import Any, Callable

from ntk._compat import load_neural_tangents

__all__ = ["recording", "neural_tangents", "cached_with_calls", "note", "poisoned",
           "active_poison", "POISON_TARGETS"]

_ACTIVE: list[set] = []
_POISON: list[str] = []          # at most one active poison (the mutant harness nests none)
# poison name -> the recorded name of the neural-tangents function it replaces.
POISON_TARGETS = {
    "nt:linearize": "linearize",
    "nt:empirical_ntk_fn": "empirical_ntk_fn",
    "nt:kernel_fn": "stax.serial.kernel_fn",
    "nt:kernel_fn_shift": "stax.serial.kernel_fn",
    "nt:predict": "predict.gradient_descent_mse",
}
# Names of the callables a factory returns, by factory (others are recorded as "<name>.fn").
_RETURNED = {"serial": ("init_fn", "apply_fn", "kernel_fn")}


@contextlib.contextmanager
def recording():
    """Collect, into the yielded set, the neural-tangents functions called inside the block."""
    calls: set = set()
    _ACTIVE.append(calls)
    try:
        yield calls
    finally:
        # by identity: nested recordings may hold equal sets
        del _ACTIVE[next(i for i, c in enumerate(_ACTIVE) if c is calls)]


@contextlib.contextmanager
def poisoned(name: str):
    """Within the block, the neural-tangents function named by ``name`` answers wrongly.

    ``name`` is one of :data:`POISON_TARGETS` (see :mod:`ntk.mutants` for what each returns).
    JAX's compilation caches are cleared on entry and exit, so no trace made with the real
    function is reused inside the block, nor a poisoned trace after it.
    """
    if name not in POISON_TARGETS:
        raise ValueError(f"unknown poison {name!r}; choose from {sorted(POISON_TARGETS)}")
    if _POISON:
        raise ValueError(f"poison {_POISON[-1]!r} is already active; poisons do not nest")
    import jax
    jax.clear_caches()
    _POISON.append(name)
    try:
        yield
    finally:
        _POISON.remove(name)
        jax.clear_caches()


def active_poison() -> str | None:
    """The poison in force (:func:`poisoned`), or None."""
    return _POISON[-1] if _POISON else None


def note(names) -> None:
    """Add ``names`` (an iterable of recorded names) to every active recording."""
    for calls in _ACTIVE:
        calls.update(names)


def _wrap(fn: Callable, name: str, *, wrap_result: bool) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        note((name,))
        if _POISON:
            from ntk import mutants
            poisoned_fn = mutants.poison_call(_POISON[-1], name, fn)
            if poisoned_fn is not None:
                return poisoned_fn(*args, **kwargs)
        out = fn(*args, **kwargs)
        return _wrap_result(out, name) if wrap_result else out
    return wrapper


def _wrap_result(out: Any, name: str) -> Any:
    short = name.rsplit(".", 1)[-1]
    if short in _RETURNED and isinstance(out, tuple) and len(out) == len(_RETURNED[short]):
        return tuple(_wrap(f, f"{name}.{sub}", wrap_result=False) if callable(f) else f
                     for f, sub in zip(out, _RETURNED[short]))
    if callable(out) and not isinstance(out, type):
        return _wrap(out, f"{name}.fn", wrap_result=False)
    return out


class _Proxy:
    """Attribute access passes through; module functions are recorded when called."""

    def __init__(self, target: types.ModuleType, prefix: str):
        self._target = target
        self._prefix = prefix

    def __getattr__(self, attr: str):
        value = getattr(self._target, attr)
        full = f"{self._prefix}{attr}"
        if isinstance(value, types.ModuleType):
            return _Proxy(value, f"{full}.")
        if callable(value) and not isinstance(value, type):
            # stax layer constructors return raw layers (stax.serial combines them); everything
            # else returns functions worth recording when evaluated.
            stax_layer = self._prefix == "stax." and attr not in _RETURNED
            return _wrap(value, full, wrap_result=not stax_layer)
        return value

    def __dir__(self):
        return dir(self._target)


def neural_tangents() -> _Proxy:
    """The adapted neural-tangents module behind a recording proxy (see module docstring)."""
    return _Proxy(load_neural_tangents(), "")


def cached_with_calls(maxsize: int = 4) -> Callable:
    """A memoiser that also stores and replays the recorded neural-tangents calls.

    Entries are keyed by the arguments and, when the computation called the function that the
    active poison replaces, by that poison too: a poisoned run reuses a clean entry only if the
    poisoned function played no part in it. The decorated function's arguments must be
    hashable (dataclass fields declared with ``compare=False`` do not enter the key: they are
    analysis settings that the cached computation does not read).
    """
    def decorator(fn):
        store: dict = {}

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            key = (args, tuple(sorted(kwargs.items())))
            poison = active_poison()
            hit = store.get((key, None))
            if hit is not None and poison is not None and POISON_TARGETS[poison] in hit[1]:
                hit = store.get((key, poison))
            if hit is None:
                with recording() as calls:
                    value = fn(*args, **kwargs)
                tag = poison if poison is not None and POISON_TARGETS[poison] in calls else None
                if len(store) >= 2 * maxsize:
                    store.pop(next(iter(store)))
                hit = store[(key, tag)] = (value, frozenset(calls))
            note(hit[1])
            return hit[0]
        wrapper.cache_clear = store.clear
        return wrapper
    return decorator
