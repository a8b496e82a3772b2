"""Data: synthetic corpora, task generators and text-classification loaders.

Submodules are imported lazily (``posjax.data.synthetic``, ``posjax.data.tasks``,
``posjax.data.latin_square``, ``posjax.data.text``, ``posjax.data.stdlib_text``) so that importing
posjax stays light. ``stdlib_sentences`` / ``stdlib_stream`` / ``word_order_task`` are the
real-text corpus every machine has (the standard library's docstrings).
"""
from posjax import lazy_member

_LAZY = {"load_text_classification": "posjax.data.text",
         "stdlib_sentences": "posjax.data.stdlib_text", "stdlib_stream": "posjax.data.stdlib_text",
         "stdlib_digest": "posjax.data.stdlib_text", "word_order_task": "posjax.data.stdlib_text"}


def __getattr__(name):
    return lazy_member("posjax.data", name, _LAZY)
