"""Encoding -> distance adapters (docs/interpretations.md).

Every adapter returns an ``[n, n]`` matrix ``E`` of distances between positions induced by a
positional encoding, to compare with the Hellinger matrix ``D`` (:func:`stress`). Closed forms
(``delta = p_j - p_i``):

* sinusoidal: ``E^2 = sum_k 2 (1 - cos(delta w_k)) = sum_k 4 sin^2(delta w_k / 2)``,
  ``w_k = base^(-2k/d)`` (shift-invariant, saturating);
* RoPE (``"kernel"``): ``K = (2/d_h) sum_k cos(delta theta_k)``, ``E = sqrt(2 (1 - K))``, the orbit
  distance ``||R_i u - R_j u||`` of a unit ``u`` with equal energy per rotation plane;
* ALiBi: ``E = |delta|`` (rank-1 configuration ``x_i = i``), optionally times the mean slope;
* bias PEs: ``E_ij = b(0) - b(i - j)`` clipped at 0 (reduces to ``m |i - j|`` for ALiBi);
* learned / MDS: Euclidean distances between table rows; NoPE: ``E = 0``.

:func:`encoding_distances` dispatches by name and falls back to any PE registered in
``posjax.encodings`` through the hooks it overrides: an additive table (``embed``), a bias, a
rotation, or several of them (their squared distances add).

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

from posjax.geometry.stress import pairwise_distances
from posjax.geometry.validation import as_float_array

__all__ = ["dist_mds", "dist_learned", "dist_sinusoidal", "dist_rope", "dist_alibi",
           "dist_bias", "dist_nope", "encoding_distances", "alibi_mean_slope"]

_CONTEXT_KEYS = ("d_model", "num_heads", "head_dim", "max_len", "num_layers", "causal", "rngs")


def _positions(num_positions: int, positions: Any) -> jax.Array | None:
    if num_positions <= 0:
        raise ValueError(f"num_positions must be positive, got {num_positions}")
    if positions is None:
        return None
    pos = jnp.asarray(positions)
    if pos.shape != (num_positions,):
        raise ValueError(f"positions must have shape ({num_positions},), got {pos.shape}")
    return pos


def _offset_profile(num_positions: int, positions: jax.Array | None,
                    profile: Callable[[jax.Array], jax.Array]) -> jax.Array:
    """``E_ij = profile(|p_j - p_i|)``: a Toeplitz gather for ``arange`` positions, else direct."""
    if positions is None:
        prof = profile(jnp.arange(num_positions, dtype=jnp.result_type(float)))
        idx = jnp.abs(jnp.arange(num_positions)[:, None] - jnp.arange(num_positions)[None, :])
        return prof[idx]
    pos = positions.astype(jnp.result_type(float))
    return jax.lax.map(lambda p: profile(jnp.abs(pos - p)), pos)


def dist_mds(coords: Any) -> jax.Array:
    """``E_ij = ||x_i - x_j||`` for a configuration ``coords [n, k]`` (Algorithm 1)."""
    X = as_float_array(coords, "coords")
    return pairwise_distances(X[:, None] if X.ndim == 1 else X)


def dist_learned(table: Any, *, num_positions: int | None = None, ln: bool = False,
                 ln_scale: Any = None, ln_bias: Any = None, ln_eps: float = 1e-12) -> jax.Array:
    """Distances between the rows ``p_i`` of a learned (or any additive) PE table.

    Args:
      table: ``[L, d]`` table; the first ``num_positions`` rows are used (default all).
      num_positions: ``n <= L``.
      ln: apply a LayerNorm to each row first (BERT's embedding LayerNorm when ``ln_scale``,
        ``ln_bias``, ``ln_eps`` are the model's; ``ln_eps=1e-12`` is BERT's).
      ln_scale, ln_bias: optional ``[d]`` affine parameters of that LayerNorm.

    Returns:
      ``E [n, n]``.
    """
    T = as_float_array(table, "table", ndim=2)
    n = T.shape[0] if num_positions is None else num_positions
    if n > T.shape[0]:
        raise ValueError(f"num_positions={n} exceeds the {T.shape[0]} rows of the table")
    T = T[:n]
    if ln:
        T = _layer_norm(T, 1.0 if ln_scale is None else jnp.asarray(ln_scale),
                        0.0 if ln_bias is None else jnp.asarray(ln_bias), ln_eps)
    return pairwise_distances(T)


@jax.jit
def _layer_norm(T, scale, bias, eps):
    mu = jnp.mean(T, axis=1, keepdims=True)
    var = jnp.mean(jnp.square(T - mu), axis=1, keepdims=True)
    return (T - mu) / jnp.sqrt(var + eps) * scale + bias


def _frequencies(dim: int, base: float, spacing: str) -> jax.Array:
    k = jnp.arange(dim // 2, dtype=jnp.result_type(float))
    if spacing == "2k/d":
        expo = 2.0 * k / dim
    elif spacing == "k/(d/2-1)":
        expo = k / max(dim // 2 - 1, 1)
    else:
        raise ValueError(f"freq_spacing must be '2k/d' or 'k/(d/2-1)', got {spacing!r}")
    return jnp.asarray(base, k.dtype) ** (-expo)


def dist_sinusoidal(num_positions: int, dim: int = 768, base: float = 10000.0, *,
                    freq_spacing: str = "2k/d", positions: Any = None) -> jax.Array:
    """Sinusoidal PE distances ``E^2 = sum_{k<d/2} 4 sin^2((p_j - p_i) w_k / 2)``.

    Vaswani et al., "Attention Is All You Need", arXiv 1706.03762. ``d = 768`` is BERT-base.
    """
    pos = _positions(num_positions, positions)
    if dim <= 0 or dim % 2:
        raise ValueError(f"dim must be a positive even integer, got {dim}")
    if freq_spacing not in ("2k/d", "k/(d/2-1)"):
        raise ValueError(f"freq_spacing must be '2k/d' or 'k/(d/2-1)', got {freq_spacing!r}")
    return _sinusoidal(pos, n=num_positions, dim=dim, base=float(base), spacing=freq_spacing)


@functools.partial(jax.jit, static_argnames=("n", "dim", "base", "spacing"))
def _sinusoidal(pos, *, n, dim, base, spacing):
    w = _frequencies(dim, base, spacing)
    return _offset_profile(n, pos, lambda d: jnp.sqrt(
        jnp.sum(4.0 * jnp.square(jnp.sin(d[:, None] * w / 2.0)), axis=-1)))


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
    pos = _positions(num_positions, positions)
    d_rot = head_dim if rotary_dim is None else rotary_dim
    if head_dim <= 0 or head_dim % 2 or not 0 < d_rot <= head_dim:
        raise ValueError(f"need an even head_dim > 0 and 0 < rotary_dim <= head_dim, got "
                         f"head_dim={head_dim}, rotary_dim={d_rot}")
    if mode not in ("kernel", "random_u"):
        raise ValueError(f"RoPE distance mode must be 'kernel' or 'random_u', got {mode!r}")
    return _rope(pos, jax.random.key(seed), n=num_positions, head_dim=head_dim, d_rot=d_rot,
                 base=float(base), mode=mode, num_samples=num_samples)


@functools.partial(jax.jit, static_argnames=("n", "head_dim", "d_rot", "base", "mode",
                                             "num_samples"))
def _rope(pos, key, *, n, head_dim, d_rot, base, mode, num_samples):
    theta = _frequencies(d_rot, base, "2k/d")
    if mode == "kernel":
        weights = jnp.full((1, d_rot // 2), 2.0 / head_dim, theta.dtype)
    else:
        u = jax.random.normal(key, (num_samples, head_dim), theta.dtype)
        u = u / jnp.linalg.norm(u, axis=1, keepdims=True)
        weights = jnp.sum(jnp.square(u[:, :d_rot].reshape(num_samples, -1, 2)), axis=-1)

    def profile(d):
        s2 = 4.0 * jnp.square(jnp.sin(d[:, None] * theta / 2.0))  # [m, K]
        return jnp.mean(jnp.sqrt(jnp.maximum(s2 @ weights.T, 0.0)), axis=-1)

    return _offset_profile(n, pos, profile)


def alibi_mean_slope(num_heads: int) -> float:
    """Mean of the canonical ALiBi slopes (Press et al., arXiv 2108.12409): ``2^(-8h/H)`` for a
    power-of-two ``H``, otherwise those of ``c = 2^floor(log2 H)`` plus every other slope of
    ``2c``."""
    if num_heads <= 0:
        raise ValueError(f"num_heads must be positive, got {num_heads}")
    c = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = [2.0 ** (-8.0 * h / c) for h in range(1, c + 1)]
    slopes += [2.0 ** (-8.0 * h / (2 * c)) for h in range(1, 2 * c + 1)][0::2][: num_heads - c]
    return float(np.mean(slopes))


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
    pos = _positions(num_positions, positions)
    s = alibi_scale(scale, num_heads)
    return _alibi(pos, jnp.asarray(s, jnp.result_type(float)), n=num_positions)


def alibi_scale(scale: Any, num_heads: int | None = None) -> float:
    """The factor ``s`` of ALiBi's distance ``s |p_i - p_j|``: 1 for None, a number, or
    ``"mean_slope"`` (:func:`alibi_mean_slope` of ``num_heads``)."""
    if scale is None:
        return 1.0
    if isinstance(scale, str):
        if scale != "mean_slope":
            raise ValueError(f"ALiBi scale must be None, a number or 'mean_slope', got {scale!r}")
        if num_heads is None:
            raise ValueError("ALiBi scale='mean_slope' needs num_heads")
        return alibi_mean_slope(num_heads)
    return float(scale)


@functools.partial(jax.jit, static_argnames=("n",))
def _alibi(pos, s, *, n):
    return _offset_profile(n, pos, lambda d: s * d)


def dist_bias(b: Any, *, num_positions: int | None = None, heads: str | int = "mean",
              side: str = "both") -> jax.Array:
    """Distances from a logit bias: ``E_ij = b(0) - b(i - j)`` clipped at 0 (docs/interpretations.md).

    Args:
      b: a bias array ``[n, n]``, ``[H, n, n]`` or ``[1, H, n, n]`` with ``b[h, i, j]`` the bias of
        query ``i`` on key ``j`` (``b(0)`` is read on the diagonal), or a callable mapping the
        offsets ``r = j - i`` ``[n, n]`` to such an array (then ``num_positions`` is required).
      num_positions: ``n`` for a callable ``b``.
      heads: ``"mean"`` (default: average ``E`` over heads), ``"per_head"`` (return
        ``[H, n, n]``), or an int head index.
      side: ``"both"`` (default: average ``E`` and ``E^T``), ``"lower"`` (keys ``j <= i`` only,
        mirrored; for causal biases) or ``"upper"``. Non-finite entries (masked keys) are
        replaced by their transposed value.

    Returns:
      ``E [n, n]`` (``[H, n, n]`` with ``heads="per_head"``), symmetric, zero diagonal.
    """
    if callable(b):
        if num_positions is None:
            raise ValueError("dist_bias with a callable b needs num_positions")
        r = jnp.arange(num_positions)[None, :] - jnp.arange(num_positions)[:, None]
        b = b(r)
    B = as_float_array(b, "b")
    if B.ndim == 4:
        if B.shape[0] != 1:
            raise ValueError(f"a batched bias must have batch size 1, got shape {B.shape}")
        B = B[0]
    if B.ndim == 2:
        B = B[None]
    if B.ndim != 3 or B.shape[1] != B.shape[2]:
        raise ValueError(f"bias must be [n, n], [H, n, n] or [1, H, n, n], got shape {B.shape}")
    if side not in ("both", "lower", "upper"):
        raise ValueError(f"side must be 'both', 'lower' or 'upper', got {side!r}")
    if not (heads in ("mean", "per_head") or isinstance(heads, (int, np.integer))):
        raise ValueError(f"heads must be 'mean', 'per_head' or an int, got {heads!r}")
    E, finite = _bias_distances(B, side=side)
    if not bool(finite):
        raise ValueError("bias has non-finite entries on both sides of the diagonal")
    if heads == "mean":
        return jnp.mean(E, axis=0)
    if heads == "per_head":
        return E
    return E[int(heads)]


@functools.partial(jax.jit, static_argnames=("side",))
def _bias_distances(B, *, side):
    E = jnp.diagonal(B, axis1=1, axis2=2)[:, :, None] - B
    Et = jnp.swapaxes(E, 1, 2)
    E = jnp.where(jnp.isfinite(E), E, Et)
    Et = jnp.swapaxes(E, 1, 2)
    lower = jnp.tril(jnp.ones(E.shape[1:], bool))
    if side == "both":
        E = 0.5 * (E + Et)
    elif side == "lower":
        E = jnp.where(lower, E, Et)
    else:
        E = jnp.where(lower, Et, E)
    finite = jnp.all(jnp.isfinite(E))
    E = jnp.where(jnp.isfinite(E), E, 0.0)
    return jnp.maximum(E, 0.0) * (1 - jnp.eye(E.shape[1], dtype=E.dtype)), finite


def dist_nope(num_positions: int) -> jax.Array:
    """NoPE: ``E = 0`` (so ``sigma_raw = 1``, ``sigma* = 1``); the Theorem 1 sanity check."""
    _positions(num_positions, None)
    return jnp.zeros((num_positions, num_positions), jnp.result_type(float))


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
    pos = jnp.arange(n) if positions is None else _positions(n, positions)
    if module is None:
        try:
            import posjax.encodings as pe  # noqa: PLC0415
        except ImportError as exc:  # pragma: no cover - the package ships with posjax
            raise ValueError(f"unknown positional encoding '{name}' (posjax.encodings is "
                             f"unavailable: {exc})") from None
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
