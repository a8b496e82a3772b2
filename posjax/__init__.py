"""posjax: positional encodings in Transformers, in JAX/Flax NNX.

Subpackages: ``encodings`` (the PE catalogue), ``models`` (Transformer, heads), ``training``
(the loop), ``geometry`` (Hellinger/MDS/stress toolkit of arXiv 2604.05217), ``data``
(corpora, tasks, loaders), ``analysis`` (head ablation, PE similarity), ``distributed`` (meshes),
``cpu`` (host settings for XLA:CPU training: thread pinning, keeping freed host memory).
Only ``encodings`` and ``geometry`` load eagerly; the others load on first attribute access.
"""
import importlib

__version__ = "0.1.0"

from posjax import encodings, geometry  # noqa: F401,E402  (jax, flax and numpy only)

_LAZY = ("models", "training", "data", "analysis", "distributed", "cpu")


def __getattr__(name):
    if name in _LAZY:
        return importlib.import_module(f"posjax.{name}")
    raise AttributeError(f"module 'posjax' has no attribute '{name}'")
