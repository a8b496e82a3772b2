"""Swap the positional encoding of a built model in place, keeping every other weight."""
from __future__ import annotations

from typing import Any, Mapping

from flax import nnx

from posjax.models.transformer import Transformer


def replace_pe(model: nnx.Module, pe: str, pe_options: Mapping[str, Any] | None = None, *,
               seed: int = 0) -> nnx.Module:
    """Give every :class:`Transformer` inside ``model`` the PE ``pe`` (with ``pe_options``): its
    PE modules are rebuilt exactly as a Transformer built with that config would build them (a
    PE with parameters is initialised from ``seed``), and its ``config`` (and a head's
    ``config``) records the new PE. All other weights are untouched. Returns ``model``.

    Used by the PE schedule of :func:`posjax.training.train` (e.g. RoPE, then no PE: DroPE,
    arXiv 2512.12167)."""
    found = False
    for _, node in list(nnx.iter_graph(model)):
        if isinstance(node, Transformer):
            found = True
            cfg = node.config.replace(pe=pe, pe_options=dict(pe_options or {}))
            fresh = Transformer(cfg, rngs=nnx.Rngs(seed))
            node.config, node.pes, node.shared_pe = cfg, fresh.pes, fresh.shared_pe
            node.pe_of_layer = fresh.pe_of_layer
    if not found:
        raise ValueError(f"replace_pe: {type(model).__name__} holds no posjax Transformer")
    old = getattr(model, "config", None)
    if old is not None and hasattr(old, "pe") and not isinstance(model, Transformer):
        model.config = old.replace(pe=pe, pe_options=dict(pe_options or {}))
    return model
