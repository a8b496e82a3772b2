"""posjax: positional encodings in Transformers, in JAX/Flax NNX.

Subpackages: ``encodings`` (the PE catalogue), ``models`` (Transformer, heads), ``training``
(the loop), ``geometry`` (Hellinger/MDS/stress toolkit), ``data``, ``analysis``.
"""
__version__ = "0.1.0"

from posjax import encodings  # noqa: F401  (light: jax, flax, numpy only)
