"""Data: synthetic corpora, task generators and text-classification loaders.

Submodules are imported lazily (``posjax.data.synthetic``, ``posjax.data.tasks``,
``posjax.data.latin_square``, ``posjax.data.text``) so that importing posjax stays light.
"""
import importlib

_LAZY = {"load_text_classification": "posjax.data.text"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    try:
        return importlib.import_module(f"posjax.data.{name}")
    except ModuleNotFoundError:
        raise AttributeError(f"module 'posjax.data' has no attribute '{name}'") from None
