"""Load the neural-tangents 0.6.5 wheel on current JAX by adapting moved names at import time.

neural-tangents (Novak et al., "Neural Tangents: Fast and Easy Infinite Neural Networks in
Python", arXiv 1912.02803) was last released for JAX 0.4.x. Its modules import JAX internals
that later releases moved or removed, and its package ``__init__`` imports the TensorFlow-based
``neural_tangents.experimental``. This module makes the unmodified wheel importable
(steps a-g; the rules are described in ``docs/ntk.md``):

a. read the installed ``jax`` / ``neural_tangents`` versions (:func:`versions`);
b. alias ``Jaxpr, JaxprEqn, Var, Literal, Primitive, ClosedJaxpr`` from ``jax.extend.core`` onto
   ``jax.core``, only where missing;
c. register a minimal ``jax.util`` (strict ``safe_map`` / ``safe_zip``) if it is missing;
d. register inert placeholder primitives for ``jax.interpreters.ad.zeros_like_p`` /
   ``add_jaxvals_p`` if missing (they only let the import succeed: neural-tangents keys its
   STRUCTURED_DERIVATIVES rule tables with them, a path posjax refuses);
e. register an empty ``neural_tangents.experimental`` so TensorFlow is never imported;
f. bypass the package ``__init__`` with a stub package whose ``__path__`` is the installed
   directory, then import ``stax``, ``predict`` and the empirical / Monte Carlo modules directly;
g. never overwrite an existing attribute; nothing happens until :func:`load_neural_tangents` is
   first called.

No neural-tangents source is copied: the installed wheel is imported as is.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import types

__all__ = ["load_neural_tangents", "versions", "adapted_names", "AdaptationError"]

# Names aliased from jax.extend.core onto jax.core. jax 0.4.36 deprecated them in jax.core and
# jax 0.6.0 removed them there (they live in jax.extend.core since jax 0.4.30).
_CORE_ALIASES = ("Jaxpr", "JaxprEqn", "Var", "Literal", "Primitive", "ClosedJaxpr")

# Public names re-exported on the returned module (those of the wheel's own __init__, minus
# `experimental` (TensorFlow) and `batch` (built on jax.pmap; posjax batches with lax.map)).
_EMPIRICAL_NAMES = ("empirical_kernel_fn", "empirical_nngp_fn", "empirical_ntk_fn",
                    "empirical_ntk_vp_fn", "linearize", "NtkImplementation", "taylor_expand")

_STATE: dict = {"module": None, "adapted": []}


class AdaptationError(ImportError):
    """The compatibility layer could not make neural-tangents importable on this JAX."""


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def versions() -> dict[str, str]:
    """Installed versions to record in every NTK result (step a).

    Returns:
      ``{"jax": ..., "jaxlib": ..., "flax": ..., "neural_tangents": ..., "numpy": ...}``.
    """
    import jax
    import numpy as np
    return {"jax": jax.__version__, "jaxlib": _dist_version("jaxlib"),
            "flax": _dist_version("flax"), "neural_tangents": _dist_version("neural-tangents"),
            "numpy": np.__version__}


def adapted_names() -> list[str]:
    """The JAX / neural-tangents names this process had to adapt (empty before loading)."""
    return list(_STATE["adapted"])


def _require(module, name: str, where: str):
    """``getattr(module, name)`` or an :class:`AdaptationError` naming the missing attribute."""
    try:
        return getattr(module, name)
    except AttributeError:
        import jax
        raise AdaptationError(
            f"ntk cannot adapt neural-tangents to jax {jax.__version__}: {where}.{name} is "
            f"missing") from None


def _alias_core(adapted: list[str]) -> None:
    """Step b: ``jax.core.X = jax.extend.core.X`` for each missing X (moved in jax 0.6.0)."""
    import jax.core
    import jax.extend.core
    for name in _CORE_ALIASES:
        if not hasattr(jax.core, name):
            setattr(jax.core, name, _require(jax.extend.core, name, "jax.extend.core"))
            adapted.append(f"jax.core.{name}")


def _strict_map(f, *args):
    """``list(map(f, *args))`` that raises when the argument lengths differ."""
    return [f(*xs) for xs in _strict_zip(*args)]


def _strict_zip(*args):
    """``list(zip(*args))`` that raises when the argument lengths differ."""
    return list(zip(*args, strict=True))


def _register_jax_util(adapted: list[str]) -> None:
    """Step c: a minimal ``jax.util`` if missing (jax 0.8.0 removed the module)."""
    if "jax.util" in sys.modules or importlib.util.find_spec("jax.util") is not None:
        return
    util = types.ModuleType("jax.util", "posjax ntk stand-in for the removed jax.util "
                            "(safe_map / safe_zip only).")
    util.safe_map = _strict_map
    util.safe_zip = _strict_zip
    sys.modules["jax.util"] = util
    adapted.append("jax.util")


def _placeholder_impl(*args, **kwargs):
    raise NotImplementedError(
        "ntk placeholder primitive: this neural-tangents code path (STRUCTURED_DERIVATIVES) is "
        "unsupported on this JAX")


def _register_placeholders(adapted: list[str]) -> None:
    """Step d: inert ``ad.zeros_like_p`` / ``ad.add_jaxvals_p`` where missing.

    ``zeros_like_p`` was removed from ``jax.interpreters.ad`` in jax 0.8.0; ``add_jaxvals_p``
    is listed for the same release and is still present in some later ones.
    """
    import jax.extend.core
    from jax.interpreters import ad
    primitive = _require(jax.extend.core, "Primitive", "jax.extend.core")
    for name in ("zeros_like_p", "add_jaxvals_p"):
        if not hasattr(ad, name):
            prim = primitive(f"ntk_placeholder_{name}")
            prim.def_impl(_placeholder_impl)
            setattr(ad, name, prim)
            adapted.append(f"jax.interpreters.ad.{name}")


def _stub_package(adapted: list[str]) -> types.ModuleType:
    """Steps e and f: a stub ``neural_tangents`` package over the installed directory."""
    spec = importlib.util.find_spec("neural_tangents")
    if spec is None or not spec.submodule_search_locations:
        raise AdaptationError("neural-tangents is not installed (pip install --no-deps "
                              "neural-tangents==0.6.5 frozendict)")
    pkg = types.ModuleType("neural_tangents", "neural-tangents loaded by posjax's ntk without "
                           "its package __init__ (no TensorFlow).")
    pkg.__path__ = list(spec.submodule_search_locations)
    pkg.__package__ = "neural_tangents"
    pkg.__file__ = spec.origin
    pkg.__version__ = _dist_version("neural-tangents")
    sys.modules["neural_tangents"] = pkg
    if "neural_tangents.experimental" not in sys.modules:
        sys.modules["neural_tangents.experimental"] = types.ModuleType(
            "neural_tangents.experimental", "empty stub: the TensorFlow-based module is never "
            "imported by posjax")
        adapted.append("neural_tangents.experimental")
    adapted.append("neural_tangents.__init__ (bypassed)")
    return pkg


def _populate(pkg: types.ModuleType) -> None:
    """Import the public submodules directly and re-export the public names on ``pkg``."""
    import jax
    try:
        for sub in ("stax", "predict"):
            mod = importlib.import_module(f"neural_tangents.{sub}")
            if not hasattr(pkg, sub):
                setattr(pkg, sub, mod)
        empirical = importlib.import_module("neural_tangents._src.empirical")
        monte_carlo = importlib.import_module("neural_tangents._src.monte_carlo")
        kernel = importlib.import_module("neural_tangents._src.utils.kernel")
    except (ImportError, AttributeError) as e:
        for name in [m for m in sys.modules if m == "neural_tangents" or
                     m.startswith("neural_tangents.")]:
            del sys.modules[name]
        raise AdaptationError(f"ntk cannot import neural-tangents on jax {jax.__version__}: "
                              f"{type(e).__name__}: {e}") from e
    for name in _EMPIRICAL_NAMES:
        if not hasattr(pkg, name):
            setattr(pkg, name, getattr(empirical, name))
    for name, value in (("monte_carlo_kernel_fn", monte_carlo.monte_carlo_kernel_fn),
                        ("Kernel", kernel.Kernel)):
        if not hasattr(pkg, name):
            setattr(pkg, name, value)


def load_neural_tangents() -> types.ModuleType:
    """Return a working ``neural_tangents`` module on the installed JAX (adapting on first call).

    The returned module exposes ``stax``, ``predict``, ``empirical_ntk_fn``,
    ``empirical_kernel_fn``, ``empirical_nngp_fn``, ``empirical_ntk_vp_fn``, ``linearize``,
    ``taylor_expand``, ``NtkImplementation``, ``monte_carlo_kernel_fn``, ``Kernel`` and
    ``__version__``. If ``neural_tangents`` was already imported normally (an environment whose
    JAX and TensorFlow still suit the wheel), that module is returned untouched.

    Raises:
      AdaptationError: naming the missing JAX attribute when the adaptation no longer applies.
    """
    if _STATE["module"] is not None:
        return _STATE["module"]
    existing = sys.modules.get("neural_tangents")
    if existing is not None and hasattr(existing, "stax") and hasattr(existing, "empirical_ntk_fn"):
        _STATE["module"] = existing
        return existing
    adapted: list[str] = []
    _alias_core(adapted)
    _register_jax_util(adapted)
    _register_placeholders(adapted)
    pkg = _stub_package(adapted)
    _populate(pkg)
    _STATE["adapted"] = adapted
    _STATE["module"] = pkg
    return pkg
