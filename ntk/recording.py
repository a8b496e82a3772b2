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
"""
from __future__ import annotations

import contextlib
import functools
import types
from typing import Any, Callable

from ntk._compat import load_neural_tangents

__all__ = ["recording", "neural_tangents", "cached_with_calls", "note"]

_ACTIVE: list[set] = []
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
        _ACTIVE.remove(calls)


def note(names) -> None:
    """Add ``names`` (an iterable of recorded names) to every active recording."""
    for calls in _ACTIVE:
        calls.update(names)


def _wrap(fn: Callable, name: str, *, wrap_result: bool) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        note((name,))
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
    """``functools.lru_cache`` that also stores and replays the recorded neural-tangents calls.

    The decorated function's arguments must be hashable.
    """
    def decorator(fn):
        @functools.lru_cache(maxsize=maxsize)
        def compute(*args, **kwargs):
            with recording() as calls:
                value = fn(*args, **kwargs)
            return value, frozenset(calls)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            value, calls = compute(*args, **kwargs)
            note(calls)
            return value
        wrapper.cache_clear = compute.cache_clear
        return wrapper
    return decorator
