"""Swap the positional encoding of a built model in place, keeping every other weight, or
rebuild a model from a new config with the same parameters."""
from __future__ import annotations

from typing import Any, Mapping

import jax
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


def _pe_base(config: Any) -> float | None:
    """The ``base`` option of ``config``'s PE with its defaults filled in (None: the PE has no
    such option, or ``config`` is not a model config)."""
    from posjax.encodings import registry

    pe = getattr(config, "pe", None)
    if not isinstance(pe, str):
        return None
    try:
        options = registry.info(pe).options(**dict(config.pe_options or {}))
    except (TypeError, ValueError):
        return None
    base = getattr(options, "base", None)
    return float(base) if isinstance(base, (int, float)) else None


def rebuild_with_config(model: nnx.Module, config: Any, *, seed: int = 0) -> nnx.Module:
    """A new model of ``model``'s class built from ``config`` that holds ``model``'s parameters.

    For a change that leaves every parameter's shape as it is: a training-free RoPE scaling
    applied at evaluation time (``pe="rope"`` → ``"rope_yarn"`` with a longer ``max_len``), a
    larger ``max_len`` for a parameter-free PE. ``model`` is not changed; parameters are copied
    by reference (``nnx.update``), non-parameter state comes from the build with ``seed``.

    Raises:
      ValueError: the new config's parameters differ from ``model``'s in name or shape (e.g. a
        learned table of another length, a PE with parameters where there were none); or both
        PEs have a frequency ``base`` option and the values differ (a scaling whose own default
        base is not the trained one, e.g. ``rope_llama3``'s 5e5 over a RoPE trained at 1e4:
        pass ``base=`` in its options).
    """
    old_base, new_base = (_pe_base(getattr(model, "config", None)), _pe_base(config))
    if old_base is not None and new_base is not None and old_base != new_base:
        raise ValueError(f"rebuild_with_config: the new PE {config.pe!r} has base {new_base:g}, "
                         f"the model's {model.config.pe!r} was built with base {old_base:g}; "
                         f"pass pe_options base={old_base:g} to keep the trained frequencies")
    fresh = type(model)(config, rngs=nnx.Rngs(seed))
    old, new = nnx.state(model, nnx.Param), nnx.state(fresh, nnx.Param)
    shapes = [{".".join(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k))))
                        for k in path): leaf.shape
               for path, leaf in jax.tree_util.tree_leaves_with_path(s)} for s in (old, new)]
    if shapes[0] != shapes[1]:
        diff = sorted(set(shapes[0].items()) ^ set(shapes[1].items()))
        raise ValueError(f"rebuild_with_config: the new config changes the parameters "
                         f"({len(diff)} differ, e.g. {diff[0][0]} {diff[0][1]}); only configs "
                         "with the same parameter shapes can take them over")
    nnx.update(fresh, old)
    return fresh
