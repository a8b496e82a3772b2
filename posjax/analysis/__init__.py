"""Analysis tools: head ablation, PE similarity, plots (imported lazily by name)."""
import importlib

_LAZY = {
    "head_ablation": "posjax.analysis.ablation",
    "deposit_metrics": "posjax.analysis.ablation",
    "pe_similarity": "posjax.analysis.similarity",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    try:
        return importlib.import_module(f"posjax.analysis.{name}")
    except ModuleNotFoundError:
        raise AttributeError(f"module 'posjax.analysis' has no attribute '{name}'") from None
