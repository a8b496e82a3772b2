"""``ntk``: neural-tangents on current JAX, positional NTKs, and numerical checks of the
theorems and Appendix A lemmas of arXiv 2604.05217 (G. Cirrincione, "On the Geometry of
Positional Encodings in Transformers").

Importing ``ntk`` is light: neural-tangents (through the import-time adaptation of
:mod:`ntk._compat`) and the kernels load on first use.

>>> import ntk
>>> nt = ntk.load_neural_tangents()            # a working neural_tangents module
>>> theta_p = ntk.positional_ntk(model, tokens) # J_p J_p^T over the PE parameters
>>> results = ntk.checks.run_all(quick=True)    # or: python -m ntk --quick --out runs/ntk
>>> results[0].data["mutants"]                  # the check rerun with its theory side poisoned
"""
import importlib

__all__ = ["load_neural_tangents", "versions", "empirical_ntk", "positional_ntk",
           "native_ntk", "infinite_attention_kernel", "nnx_bridge", "CheckResult", "checks",
           "lemma_statistics", "kernels", "toy", "recording", "neural_tangents"]

_LAZY = {
    "load_neural_tangents": "ntk._compat", "versions": "ntk._compat",
    "empirical_ntk": "ntk.kernels", "positional_ntk": "ntk.kernels",
    "native_ntk": "ntk.kernels", "infinite_attention_kernel": "ntk.attention",
    "nnx_bridge": "ntk.kernels", "CheckResult": "ntk.result",
    "neural_tangents": "ntk.recording",
}
_SUBMODULES = ("checks", "lemma_statistics", "kernels", "attention", "toy", "sweeps", "dynamics",
               "theorems", "appendix_a", "conjecture", "result", "recording", "report",
               "mutants", "attention_lemmas", "provenance")


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"ntk.{name}")
    raise AttributeError(f"module 'ntk' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))
