"""The bridge from a positional encoding to the geometry: its distances and coordinates.

:func:`encoding_distances` gives the ``[n, n]`` distances ``E`` between positions that a PE
induces, to compare with the Hellinger matrix ``D`` (:func:`posjax.geometry.stress`);
:func:`encoding_coordinates` gives coordinates ``X [n, k]`` with ``||x_i - x_j|| = E_ij`` for the
matrix-free stress. Every formula comes from the PE's own module (its frequencies, slopes or
table, with a ``dtype`` for the float64 path), and every distance from an array function of
:mod:`posjax.geometry.adapters`; this module only joins the two, so it sits above both
``posjax.encodings`` and ``posjax.geometry`` (docs/design.md). Closed forms
(``delta = p_j - p_i``, ``a_k = p w_k``):

* sinusoidal: ``E^2 = sum_k 4 sin^2(delta w_k / 2)``, ``w_k`` of
  :func:`posjax.encodings.sinusoidal_frequencies`; coordinates: the table ``[sin a_k, cos a_k]_k``
  (:func:`posjax.encodings.sinusoidal_at`, block layout; Vaswani et al., arXiv 1706.03762);
* RoPE (``"kernel"``): ``E^2 = (8/d_h) sum_k sin^2(delta theta_k / 2)``, the orbit distance
  ``||R_i u - R_j u||`` of a unit ``u`` with equal energy per rotation plane, ``theta_k`` of
  :func:`posjax.encodings.rope_frequencies`; coordinates ``sqrt(2/d_h) [cos a_k, sin a_k]_k``
  (Su et al., arXiv 2104.09864); ``"random_u"`` averages over random unit ``u`` (no coordinates);
* ALiBi: ``E = s |delta|`` (rank-1 configuration ``x = s p``), ``s`` 1, a number or the mean
  canonical slope (:func:`posjax.encodings.alibi_mean_slope`; Press et al., arXiv 2108.12409);
* NoPE: ``E = 0`` (one zero column); learned / MDS tables: distances between rows;
* any other registered PE through the hooks it overrides: an additive table (``embed``), a bias,
  a rotation, or several of them (their squared distances add).

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217 (stress of sinusoidal, learned and relative encodings).
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import posjax.encodings as pe
from posjax.encodings.alibi import alibi_mean_slope
from posjax.encodings.rope import rope_frequencies
from posjax.encodings.sinusoidal import sinusoidal_at, sinusoidal_frequencies
from posjax.geometry.adapters import (check_positions, dist_bias, dist_learned, dist_mds,
                                      dist_nope, offset_distances, orbit_distances)
from posjax.geometry.stress import pairwise_distances

__all__ = ["encoding_distances", "encoding_coordinates", "COORDINATE_ENCODINGS",
           "dist_sinusoidal", "dist_rope", "dist_alibi", "alibi_scale", "alibi_mean_slope"]

#: Encodings with a coordinate form (the closed forms of ``encoding_distances``).
COORDINATE_ENCODINGS = ("sinusoidal", "rope", "alibi", "nope", "none")

_CONTEXT_KEYS = ("d_model", "num_heads", "head_dim", "max_len", "num_layers", "causal", "rngs")
_SPACINGS = ("2k/d", "k/(d/2-1)")


def _float() -> Any:
    """The default float dtype (float64 under ``jax.enable_x64``)."""
    return jnp.result_type(float)


def _check_sinusoidal(dim: int, freq_spacing: str) -> None:
    if dim <= 0 or dim % 2:
        raise ValueError(f"dim must be a positive even integer, got {dim}")
    if freq_spacing not in _SPACINGS:
        raise ValueError(f"freq_spacing must be '2k/d' or 'k/(d/2-1)', got {freq_spacing!r}")


def _check_rope(head_dim: int, rotary_dim: int | None) -> int:
    d_rot = head_dim if rotary_dim is None else rotary_dim
    if head_dim <= 0 or head_dim % 2 or not 0 < d_rot <= head_dim:
        raise ValueError(f"need an even head_dim > 0 and 0 < rotary_dim <= head_dim, got "
                         f"head_dim={head_dim}, rotary_dim={d_rot}")
    return d_rot


def dist_sinusoidal(num_positions: int, dim: int = 768, base: float = 10000.0, *,
                    freq_spacing: str = "2k/d", positions: Any = None) -> jax.Array:
    """Sinusoidal PE distances ``E^2 = sum_{k<d/2} 4 sin^2((p_j - p_i) w_k / 2)``.

    Vaswani et al., "Attention Is All You Need", arXiv 1706.03762. ``d = 768`` is BERT-base.
    """
    check_positions(num_positions, positions)
    _check_sinusoidal(dim, freq_spacing)
    w = sinusoidal_frequencies(dim, float(base), freq_spacing=freq_spacing, dtype=_float())
    return orbit_distances(num_positions, w, positions=positions)


def dist_rope(num_positions: int, head_dim: int = 64, base: float = 10000.0, *,
              mode: str = "kernel", rotary_dim: int | None = None, num_samples: int = 64,
              seed: int = 0, positions: Any = None) -> jax.Array:
    """RoPE orbit distances (RoPE has no additive vector; docs/interpretations.md).

    ``"kernel"`` (default): ``E^2 = 2 (1 - K)`` with ``K = (2/d_h) sum_k cos(delta theta_k)``,
    i.e. ``E^2 = (8/d_h) sum_k sin^2(delta theta_k / 2)``: the distance ``||R_i u - R_j u||`` of a
    unit ``u`` with equal energy ``2/d_h`` per rotation plane. ``"random_u"``: the mean of that
    distance over ``num_samples`` uniformly random unit vectors ``u``. ``theta_k =
    base^(-2k/d_rot)`` over ``d_rot = rotary_dim`` (default ``head_dim``) rotated dims; unrotated
    dims add nothing. Su et al., "RoFormer", arXiv 2104.09864.
    """
    check_positions(num_positions, positions)
    d_rot = _check_rope(head_dim, rotary_dim)
    if mode not in ("kernel", "random_u"):
        raise ValueError(f"RoPE distance mode must be 'kernel' or 'random_u', got {mode!r}")
    theta = rope_frequencies(d_rot, float(base), _float())
    if mode == "kernel":
        weights = jnp.full((1, d_rot // 2), 2.0 / head_dim, theta.dtype)
    else:
        u = jax.random.normal(jax.random.key(seed), (num_samples, head_dim), theta.dtype)
        u = u / jnp.linalg.norm(u, axis=1, keepdims=True)
        weights = jnp.sum(jnp.square(u[:, :d_rot].reshape(num_samples, -1, 2)), axis=-1)
    return orbit_distances(num_positions, theta, weights, positions=positions)


def alibi_scale(scale: Any, num_heads: int | None = None) -> float:
    """The factor ``s`` of ALiBi's distance ``s |p_i - p_j|``: 1 for None, a number, or
    ``"mean_slope"`` (:func:`posjax.encodings.alibi_mean_slope` of ``num_heads``)."""
    if scale is None:
        return 1.0
    if isinstance(scale, str):
        if scale != "mean_slope":
            raise ValueError(f"ALiBi scale must be None, a number or 'mean_slope', got {scale!r}")
        if num_heads is None:
            raise ValueError("ALiBi scale='mean_slope' needs num_heads")
        return alibi_mean_slope(num_heads)
    return float(scale)


def dist_alibi(num_positions: int, *, scale: Any = None, num_heads: int | None = None,
               positions: Any = None) -> jax.Array:
    """ALiBi distances ``E_ij = s |p_i - p_j|`` (rank-1 configuration ``x_i = p_i``).

    Args:
      num_positions: ``n``.
      scale: None (``s = 1``), a number, or ``"mean_slope"`` (the mean canonical slope of
        ``num_heads`` heads, for raw stress). ``sigma*`` does not depend on it.
      num_heads: needed for ``scale="mean_slope"``.
      positions: optional ``[n]`` positions (default ``0..n-1``).
    """
    pos = check_positions(num_positions, positions)
    s = jnp.asarray(alibi_scale(scale, num_heads), _float())
    return _alibi(pos, s, n=num_positions)


@functools.partial(jax.jit, static_argnames=("n",))
def _alibi(pos, s, *, n):
    return offset_distances(n, pos, lambda d: s * d)


_TRACE_ERRORS = (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError,
                 jax.errors.TracerIntegerConversionError, jax.errors.TracerArrayConversionError)


def _traced(fn: Callable[..., Any], *args: Any) -> Any:
    """``jax.jit(fn)(*args)`` (one compile instead of many eager ops), or ``fn(*args)`` when the
    module's code needs concrete values."""
    try:
        return jax.jit(fn)(*args)
    except _TRACE_ERRORS:
        return fn(*args)


def _from_registry(name: str, n: int, options: dict[str, Any]) -> jax.Array:
    """Distances of a PE built by ``posjax.encodings.make`` (or passed as ``module=``)."""
    heads = options.pop("heads", "mean")
    side = options.pop("side", None)
    positions = options.pop("positions", None)
    module = options.pop("module", None)
    pos = jnp.arange(n) if positions is None else check_positions(n, positions)
    if module is None:
        ctx = {k: options.pop(k) for k in _CONTEXT_KEYS if k in options}
        ctx.setdefault("max_len", n)
        ctx.setdefault("causal", False)
        module = pe.make(name, **ctx, **options)  # ValueError for unknown names / options
    elif options:
        raise ValueError(f"options {sorted(options)} cannot be combined with module=")
    hooks = _hooks_of(module)
    parts = hooks & {"embed", "bias", "rotate"}
    other = hooks - parts  # structural or content-dependent hooks: no distance of their own
    if other:
        raise ValueError(f"PE '{name}' (hooks {sorted(hooks)}) induces no distance between "
                         f"positions: {', '.join(sorted(other))} depend on more than an additive "
                         "table, a bias or a rotation")
    if not parts:
        return dist_nope(n)
    # One traced call per hook (instead of many eager ops); the module's arrays become constants.
    # A PE with several hooks (e.g. RoPE plus an absolute sinusoid) is the concatenation of its
    # parts' configurations: squared distances add.
    dists = []
    if "embed" in parts:
        dists.append(dist_learned(_traced(module.table, pos)))
    if "bias" in parts:
        b = _traced(lambda p: module.bias(p, p), pos)
        if b is None:
            raise ValueError(f"PE '{name}' returned no bias")
        causal = bool(getattr(module, "causal", False))
        dists.append(dist_bias(b, heads=heads, side=side or ("lower" if causal else "both")))
    if "rotate" in parts:
        ctx = getattr(module, "ctx", None)
        d_h = getattr(ctx, "head_dim", None)
        if d_h is None:
            raise ValueError(f"PE '{name}' (rotate hook) has no head_dim; pass head_dim=")
        H = getattr(ctx, "num_heads", None) or 1
        u = jnp.ones((1, n, H, d_h), jnp.float32) / math.sqrt(d_h)  # equal energy per plane
        E = _traced(lambda u, p: jax.vmap(pairwise_distances, in_axes=1)(
            module.rotate(u, u, p, p)[0][0]), u, pos)  # [H, n, n]
        dists.append(jnp.mean(E, axis=0) if heads == "mean"
                     else E if heads == "per_head" else E[int(heads)])
    if len(dists) == 1:
        return dists[0]
    return jnp.sqrt(sum(jnp.square(E) for E in dists))


def _hooks_of(module: Any) -> frozenset[str]:
    """The hook set of a PE module (``hooks``); an object with only a legacy ``hook`` label is
    read through it."""
    hooks = getattr(module, "hooks", None)
    if hooks is not None:
        return frozenset(hooks)
    label = getattr(module, "hook", None) or "none"
    return frozenset() if label == "none" else frozenset(label.split("+"))


def encoding_distances(name: str, num_positions: int, **options: Any) -> jax.Array:
    """Distance matrix ``E [n, n]`` induced by a positional encoding.

    Args:
      name: ``"sinusoidal"`` (options ``dim``/``d_model``, ``base``, ``freq_spacing``),
        ``"rope"`` (``head_dim``, ``base``, ``mode``, ``rotary_dim``, ``num_samples``, ``seed``),
        ``"alibi"`` (``scale``, ``num_heads``), ``"nope"``/``"none"``, ``"learned"``
        (``table=`` ``[L, d]``, ``ln``...), ``"mds"`` (``coords=``), ``"bias"`` (``b=``,
        ``heads``, ``side``), or any name registered in ``posjax.encodings``. All closed forms
        accept ``positions=`` (default ``0..n-1``).
      num_positions: ``n``.
      **options: per-encoding options; ``use_registry=True`` forces the generic path through
        ``posjax.encodings.make`` (context keys ``d_model``, ``num_heads``, ``head_dim``,
        ``max_len`` (default ``n``), ``causal`` (default False) are passed to ``make``; ``heads``,
        ``side``, ``positions`` and ``module=`` (an already-built PE) are used by the adapter).

    Returns:
      ``E [n, n]``.

    Raises:
      ValueError: unknown PE or option, or a PE that induces no distance (naming it).
    """
    opts = dict(options)
    use_registry = opts.pop("use_registry", False) or "module" in opts
    n = int(num_positions)
    closed = {
        "sinusoidal": lambda o: dist_sinusoidal(n, o.pop("dim", o.pop("d_model", 768)), **o),
        "rope": lambda o: dist_rope(n, **o),
        "alibi": lambda o: dist_alibi(n, **o),
        "nope": lambda o: dist_nope(n, **o),
        "none": lambda o: dist_nope(n, **o),
        "learned": lambda o: dist_learned(o.pop("table"), num_positions=n, **o),
        "mds": lambda o: dist_mds(o.pop("coords"))[:n, :n],
        "bias": lambda o: dist_bias(o.pop("b"), num_positions=n, **o),
    }
    needs = {"learned": "table", "mds": "coords", "bias": "b"}
    if not use_registry and name in closed and (name not in needs or needs[name] in opts):
        try:
            return closed[name](opts)
        except TypeError as exc:
            raise ValueError(f"bad options for encoding '{name}': {exc}") from None
    if name == "bias" or (name == "mds" and not use_registry):
        raise ValueError(f"encoding '{name}' needs {needs[name]}= (or use_registry=True for a "
                         "registered PE)")
    return _from_registry(name, n, opts)


def _sinusoidal_coords(pos, dim: int = 768, base: float = 10000.0, freq_spacing: str = "2k/d"):
    _check_sinusoidal(dim, freq_spacing)
    return sinusoidal_at(pos, dim, float(base), layout="block", freq_spacing=freq_spacing,
                         dtype=pos.dtype)


def _rope_coords(pos, head_dim: int = 64, base: float = 10000.0, mode: str = "kernel",
                 rotary_dim: int | None = None):
    d_rot = _check_rope(head_dim, rotary_dim)
    if mode != "kernel":
        raise ValueError(f"RoPE mode {mode!r} has no coordinate form (the 'random_u' distance "
                         "is a mean of orbit distances); use mode='kernel'")
    a = pos[:, None] * rope_frequencies(d_rot, float(base), pos.dtype)[None, :]
    return math.sqrt(2.0 / head_dim) * jnp.concatenate([jnp.cos(a), jnp.sin(a)], axis=1)


def _alibi_coords(pos, scale: Any = None, num_heads: int | None = None):
    return alibi_scale(scale, num_heads) * pos[:, None]


def encoding_coordinates(name: str, num_positions: int, *, positions: Any = None,
                         **options: Any) -> np.ndarray:
    """Coordinates ``X [n, k]`` with ``||x_i - x_j|| = encoding_distances(name, n, ...)_ij``.

    Args:
      name: ``"sinusoidal"`` (options ``dim``/``d_model``, ``base``, ``freq_spacing``;
        ``k = dim``), ``"rope"`` (``head_dim``, ``base``, ``mode="kernel"``, ``rotary_dim``;
        ``k = rotary_dim``), ``"alibi"`` (``scale``, ``num_heads``; ``k = 1``) or
        ``"nope"``/``"none"`` (``k = 1``, all zero).
      num_positions: ``n``.
      positions: optional ``[n]`` positions (default ``0..n-1``).
      **options: the options of the matching closed form of ``encoding_distances``.

    Returns:
      ``X [n, k]`` as a NumPy array (float64 under ``jax.enable_x64``).

    Raises:
      ValueError: an encoding without a coordinate form (bias PEs such as T5, RoPE
        ``"random_u"``), or bad options.
    """
    n = int(num_positions)
    pos = check_positions(n, positions)
    pos = jnp.arange(n, dtype=_float()) if pos is None else pos.astype(_float())
    opts = dict(options)
    if name == "sinusoidal" and "d_model" in opts:
        opts["dim"] = opts.pop("d_model")
    forms = {"sinusoidal": _sinusoidal_coords, "rope": _rope_coords, "alibi": _alibi_coords,
             "nope": lambda p: jnp.zeros((n, 1), p.dtype),
             "none": lambda p: jnp.zeros((n, 1), p.dtype)}
    if name not in forms:
        raise ValueError(f"encoding {name!r} has no coordinate form; choose one of "
                         f"{', '.join(COORDINATE_ENCODINGS)} (use encoding_distances for the "
                         "others)")
    try:
        return np.asarray(forms[name](pos, **opts))
    except TypeError as exc:
        raise ValueError(f"bad options for encoding '{name}': {exc}") from None
