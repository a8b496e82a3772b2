"""Data: synthetic corpora, task generators and text-classification loaders.

Submodules are imported lazily (``posjax.data.synthetic``, ``posjax.data.tasks``,
``posjax.data.latin_square``, ``posjax.data.text``) so that importing posjax stays light.
"""
from posjax import lazy_member

_LAZY = {"load_text_classification": "posjax.data.text"}


def __getattr__(name):
    return lazy_member("posjax.data", name, _LAZY)
