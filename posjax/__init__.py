"""posjax: positional encodings in Transformers, in JAX/Flax NNX.

Subpackages: ``encodings`` (the PE catalogue), ``models`` (Transformer, heads), ``training``
(the loop), ``geometry`` (Hellinger/MDS/stress toolkit of arXiv 2604.05217), ``data``
(corpora, tasks, loaders), ``analysis`` (head ablation, PE similarity, the PE -> geometry
bridge), ``distributed`` (meshes), ``pretrained`` (Hugging Face checkpoints), ``cpu`` (host
settings for XLA:CPU training: thread pinning, keeping freed host memory).
Only ``encodings`` and ``geometry`` load eagerly; the others load on first attribute access.
This file (with :func:`lazy_member`, used by the lazy package faces) and the PE registry are
the only places that import a module by a computed name (docs/design.md).
"""
import importlib

__version__ = "0.1.0"

from posjax import encodings, geometry  # noqa: F401,E402  (jax, flax and numpy only)

_LAZY = ("models", "training", "data", "analysis", "distributed", "pretrained", "cpu")


def lazy_member(package: str, name: str, members: dict[str, str]):
    """``package.name`` loaded on first access: a member listed in ``members`` (name -> module)
    or a submodule ``package.name``; AttributeError otherwise."""
    if name in members:
        return getattr(importlib.import_module(members[name]), name)
    try:
        return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{package}.{name}":
            raise
        raise AttributeError(f"module '{package}' has no attribute '{name}'") from None


def __getattr__(name):
    if name in _LAZY:
        return importlib.import_module(f"posjax.{name}")
    raise AttributeError(f"module 'posjax' has no attribute '{name}'")
