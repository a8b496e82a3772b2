"""Type checks of configuration dataclasses, driven by their field annotations.

:func:`check_field_types` checks every field of a dataclass instance against its annotation, so a
string where a bool or float belongs (``interleaved="no"``, ``base="10000"``) or a fraction where a
count belongs (``num_rotary_heads=2.5``) is a ``ValueError`` naming the field and the expected type,
at construction, rather than a silently truthy string or a ``TypeError`` deep in a model. It
serves :class:`posjax.models.TransformerConfig`, :class:`posjax.training.TrainConfig` and the
options dataclass of every registered PE (:func:`posjax.encodings.registry.build_options`).

Understood annotations: ``bool``, ``int`` (also NumPy integers; not bools, not floats), ``float``
(ints and NumPy scalars too; not bools), ``str``, ``X | None``, unions, ``Literal[...]``,
``tuple``/``list``/``Sequence`` (any list, tuple or array), ``dict``/``Mapping``. Any other
annotation (``Any``, arrays, callables, unresolvable names) is not checked.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import functools
import types
import typing
from typing import Any

import numpy as np

_UNCHECKED = object()


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # an unresolvable forward reference: resolve field by field
        out = {}
        for f in dataclasses.fields(cls):
            try:
                out[f.name] = typing.get_type_hints(
                    type("_One", (), {"__annotations__": {f.name: f.type},
                                      "__module__": cls.__module__}))[f.name]
            except Exception:
                out[f.name] = _UNCHECKED
        return out


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_float(v: Any) -> bool:
    return (isinstance(v, (int, float, np.integer, np.floating))
            and not isinstance(v, (bool, np.bool_)))


def _is_sequence(v: Any) -> bool:
    return isinstance(v, (list, tuple, np.ndarray)) or hasattr(v, "__array__")


def _matcher(hint: Any) -> tuple[Any, str] | None:
    """``(predicate, description)`` for ``hint``, or None when it is not checked."""
    if hint is _UNCHECKED or hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        arms = [_matcher(a) for a in typing.get_args(hint)]
        if any(a is None for a in arms):
            return None
        return (lambda v: any(pred(v) for pred, _ in arms),
                " or ".join(desc for _, desc in arms))
    if origin is typing.Literal:
        allowed = typing.get_args(hint)
        return (lambda v: v in allowed), f"one of {allowed}"
    if hint is type(None):
        return (lambda v: v is None), "None"
    if hint is bool:
        return (lambda v: isinstance(v, (bool, np.bool_))), "a bool"
    if hint is int:
        return _is_int, "an int"
    if hint is float:
        return _is_float, "a float"
    if hint is str:
        return (lambda v: isinstance(v, str)), "a str"
    base = origin or hint
    if base in (tuple, list, collections.abc.Sequence):
        return _is_sequence, "a list or tuple"
    if base in (dict, collections.abc.Mapping):
        return (lambda v: isinstance(v, collections.abc.Mapping)), "a dict"
    return None


def check_field_types(obj: Any, owner: str) -> None:
    """Raise ValueError for the first field of dataclass ``obj`` whose value does not match its
    annotation, e.g. ``PE 'rope' option interleaved must be a bool, got 'no' (str)``.

    Args:
      obj: a dataclass instance.
      owner: how messages name the fields' owner (``"TransformerConfig."``,
        ``"PE 'rope' option "``).
    """
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        match = _matcher(hints.get(f.name, _UNCHECKED))
        if match is None:
            continue
        value = getattr(obj, f.name)
        pred, desc = match
        if not pred(value):
            raise ValueError(f"{owner}{f.name} must be {desc}, got {value!r} "
                             f"({type(value).__name__})")
