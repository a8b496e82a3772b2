"""Registry of positional encodings, selectable by name.

Each entry couples a frozen options dataclass (every interpretation choice is a field, so
``dataclasses.asdict`` records it in results) with the NNX module class that implements it.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable

import numpy as np
from flax import nnx

from posjax.config_types import check_field_types
from posjax.encodings.base import PEContext, PositionalEncoding, hook_label, overridden_hooks


@dataclasses.dataclass(frozen=True)
class PEInfo:
    """Catalogue entry of a registered PE.

    ``hooks`` is the frozenset of hook methods the class overrides (derived at registration);
    ``hook`` is its printable label (``"embed+rotate"``, ``"none"``).
    """

    name: str
    module: type
    options: type
    hooks: frozenset[str]
    relative: bool
    paper: str

    @property
    def hook(self) -> str:
        return hook_label(self.hooks)


_REGISTRY: dict[str, PEInfo] = {}
# Deprecated names: alias -> (canonical name, why it was renamed). An alias is not listed by
# names() (the registry-driven tests see each PE once); info/make/build_options resolve it with a
# DeprecationWarning.
_ALIASES: dict[str, tuple[str, str]] = {}


def register_alias(alias: str, canonical: str, reason: str) -> None:
    """Keep ``alias`` working as a deprecated name of the registered PE ``canonical``."""
    if alias in _REGISTRY or alias in _ALIASES:
        raise ValueError(f"PE name '{alias}' is already registered")
    if canonical not in _REGISTRY:
        raise ValueError(f"alias '{alias}': unknown PE '{canonical}'")
    _ALIASES[alias] = (canonical, reason)


def aliases() -> dict[str, str]:
    """Deprecated PE names and the canonical names they resolve to."""
    return {a: c for a, (c, _) in sorted(_ALIASES.items())}


def canonical_name(name: str) -> str:
    """``name`` itself, or the canonical name of a deprecated alias (with a DeprecationWarning)."""
    if name in _ALIASES and name not in _REGISTRY:
        canonical, reason = _ALIASES[name]
        warnings.warn(f"PE name '{name}' is deprecated, use '{canonical}' ({reason})",
                      DeprecationWarning, stacklevel=3)
        return canonical
    return name


def register(name: str, *, options: type, paper: str = "") -> Callable[[type], type]:
    """Class decorator registering a :class:`PositionalEncoding` subclass under ``name``.

    Args:
      name: the registry name (``posjax.encodings.make(name)``).
      options: frozen dataclass of the PE's options; an optional ``validate(self, ctx)`` method
        raises ValueError on bad values.
      paper: citation shown in the catalogue.
    """

    def wrap(cls: type) -> type:
        if name in _REGISTRY:
            raise ValueError(f"PE name '{name}' is already registered")
        if not issubclass(cls, PositionalEncoding):
            raise TypeError(f"{cls.__name__} must subclass PositionalEncoding")
        hooks = overridden_hooks(cls)
        if hooks != cls.hooks:  # a class attribute assigned after definition
            raise ValueError(f"PE '{name}': hooks {sorted(cls.hooks)} disagree with the "
                             f"overridden methods {sorted(hooks)}")
        cls.name = name
        _REGISTRY[name] = PEInfo(name, cls, options, hooks, cls.is_relative, paper)
        return cls

    return wrap


def names() -> list[str]:
    """Names of every registered PE, sorted."""
    return sorted(_REGISTRY)


def info(name: str) -> PEInfo:
    """The catalogue entry of ``name`` (ValueError for an unknown name)."""
    try:
        return _REGISTRY[canonical_name(name)]
    except KeyError:
        raise ValueError(f"unknown positional encoding '{name}'; registered: {', '.join(names())}") from None


def build_options(name: str, options: dict[str, Any] | None, ctx: PEContext | None = None) -> Any:
    """Build and validate the options dataclass of ``name`` from a plain dict."""
    name = canonical_name(name)
    entry = info(name)
    options = dict(options or {})
    fields = {f.name for f in dataclasses.fields(entry.options)}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for PE '{name}'; "
            f"valid options: {', '.join(sorted(fields)) or '(none)'}"
        )
    opts = entry.options(**options)
    check_field_types(opts, f"PE '{name}' option ")
    validate = getattr(opts, "validate", None)
    if validate is not None:
        validate(ctx if ctx is not None else PEContext())
    return opts


def _check_context(**sizes: Any) -> None:
    """Sizes of the model context are positive ints (or None where optional)."""
    for key, value in sizes.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{key} must be a positive int, got {value!r} "
                             f"({type(value).__name__})")
        if value <= 0:
            raise ValueError(f"{key} must be a positive int, got {value}")


def make(name: str, *, d_model: int | None = None, num_heads: int | None = None,
         head_dim: int | None = None, max_len: int | None = None, num_layers: int = 1,
         causal: bool = False, rngs: nnx.Rngs | None = None, **options: Any) -> PositionalEncoding:
    """Build the PE registered as ``name``.

    Args:
      name: a name from :func:`names`.
      d_model, num_heads, head_dim, max_len, num_layers, causal: the model context (see
        :class:`PEContext`); a PE that needs a missing field raises ValueError naming it.
      rngs: ``nnx.Rngs`` for PEs with parameters (default ``nnx.Rngs(0)``).
      **options: fields of the PE's options dataclass; unknown or invalid ones raise ValueError.

    Returns:
      The PE module.
    """
    _check_context(d_model=d_model, num_heads=num_heads, head_dim=head_dim, max_len=max_len,
                   num_layers=num_layers)
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be a bool, got {causal!r} ({type(causal).__name__})")
    if head_dim is None and d_model is not None and num_heads:
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        head_dim = d_model // num_heads
    ctx = PEContext(d_model=d_model, num_heads=num_heads, head_dim=head_dim, max_len=max_len,
                    num_layers=num_layers, causal=causal)
    name = canonical_name(name)
    opts = build_options(name, options, ctx)
    return info(name).module(opts, ctx, rngs=rngs if rngs is not None else nnx.Rngs(0))
