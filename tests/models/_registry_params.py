"""Registry-driven parametrisations that keep the default suite small.

Every registered PE is a case; in the default suite one PE of each kind runs (the first name of
each distinct combination of hooks and declared decoding/packing support, taken from the
registry), and the other cases carry the ``slow`` mark. A new PE with a new combination of hooks
therefore runs by default without any edit here; ``pytest -m slow`` runs them all.
"""
import pytest

import posjax.encodings as pe


def _kind(name: str) -> tuple:
    entry = pe.info(name)
    cls = entry.module
    return (tuple(sorted(entry.hooks)), cls.supports_kv_cache, cls.supports_packing,
            entry.relative)


def one_per_kind_params() -> list:
    """``pytest.param`` per registered PE: one per kind by default, the rest marked slow."""
    seen, out = set(), []
    for name in pe.names():
        kind = _kind(name)
        marks = [pytest.mark.slow] if kind in seen else []
        seen.add(kind)
        out.append(pytest.param(name, id=name, marks=marks))
    return out
