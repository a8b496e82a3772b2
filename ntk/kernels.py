"""Empirical, positional and infinite-width NTKs of posjax models through neural-tangents.

* :func:`empirical_ntk`: the finite-width NTK ``Theta(x1, x2) = J(x1) J(x2)^T`` of an NNX model
  (bridged with ``nnx.split`` / ``nnx.merge``) or of a pure ``apply_fn(params, x)``, optionally
  restricted to a parameter subset (Jacot et al., arXiv 1806.07572; computed by
  neural-tangents' ``empirical_ntk_fn``, Novak et al., arXiv 2206.08720).
* :func:`positional_ntk`: the block ``Theta_p = J_p J_p^T`` restricted to the positional
  parameters (arXiv 2604.05217, Appendix A), batched over ``x1`` with ``lax.map``.
* :func:`native_ntk`: an independent ``J J^T`` over the flattened parameters (row-by-row VJPs),
  used to cross-check neural-tangents.
* :func:`jit_jacobians_reliable`: a self-test of jitted batched VJPs. On jax 0.10.2 CPU they are
  wrong for outputs of ~200 rows or more, so the NTK functions then run eagerly by default.
* :func:`infinite_attention_kernel` (from :mod:`ntk.attention`): analytic NNGP / NTK of an
  infinitely wide ``stax.GlobalSelfAttention`` network with its positional-embedding options.

Kernel layout (neural-tangents convention): ``[N1, N2]`` followed by the non-traced output
axes, each present twice and interleaved (``zip(f(x1).shape[1:], f(x2).shape[1:])``); a traced
axis is averaged (normalised trace), not summed.
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ntk.recording import neural_tangents

__all__ = ["IMPLEMENTATIONS", "DEFAULT_IMPLEMENTATION", "resolve_implementation", "nnx_bridge",
           "split_params", "empirical_ntk", "positional_ntk", "native_ntk", "native_jacobian",
           "infinite_attention_kernel", "attention_network", "jit_jacobians_reliable",
           "POS_EMB_TYPES"]

IMPLEMENTATIONS = ("JACOBIAN_CONTRACTION", "NTK_VECTOR_PRODUCTS")
DEFAULT_IMPLEMENTATION = "NTK_VECTOR_PRODUCTS"
_REFUSED = {
    "AUTO": "AUTO reads compile().cost_analysis() as a list, which JAX >= 0.4.38 returns as a "
            "dict (KeyError: 0), so it fails",
    "STRUCTURED_DERIVATIVES": "STRUCTURED_DERIVATIVES relies on JAX internals that moved "
                              "(jax.interpreters.ad.source_info_util, linearize's has_aux), so "
                              "it fails on this JAX",
}
ParamFilter = Any  # None | str | callable(path, leaf) -> bool | an nnx filter (for NNX models)


def resolve_implementation(implementation: Any = DEFAULT_IMPLEMENTATION) -> int:
    """Map a name (or neural-tangents enum / int) to a supported ``NtkImplementation``.

    Raises:
      ValueError: for ``AUTO`` and ``STRUCTURED_DERIVATIVES`` (broken on current JAX) or an
        unknown name.
    """
    nt = neural_tangents()
    enum = nt.NtkImplementation
    if isinstance(implementation, str):
        name = implementation.upper()
    else:
        try:
            name = enum(int(implementation)).name
        except (ValueError, TypeError):
            raise ValueError(f"unknown NTK implementation {implementation!r}") from None
    if name in _REFUSED:
        raise ValueError(f"NTK implementation {name} is not supported: {_REFUSED[name]}; use "
                         f"one of {IMPLEMENTATIONS} (default {DEFAULT_IMPLEMENTATION})")
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"unknown NTK implementation {implementation!r}; choose one of "
                         f"{IMPLEMENTATIONS}")
    return enum[name]


def _path_keys(path) -> list[str]:
    out = []
    for entry in path:
        for attr in ("key", "name", "idx"):
            if hasattr(entry, attr):
                out.append(str(getattr(entry, attr)))
                break
        else:
            out.append(str(entry))
    return out


def _leaf_predicate(param_filter: ParamFilter) -> Callable[[Any, Any], bool]:
    """A predicate ``(key_path, leaf) -> bool``: a string matches any path key exactly."""
    if param_filter is None:
        return lambda path, leaf: True
    if isinstance(param_filter, str):
        return lambda path, leaf: param_filter in _path_keys(path)
    if callable(param_filter):
        return lambda path, leaf: bool(param_filter(tuple(_path_keys(path)), leaf))
    raise ValueError(f"param_filter must be None, a path key (str) or a callable "
                     f"(path, leaf) -> bool, got {type(param_filter).__name__}")


def split_params(params: Any, param_filter: ParamFilter):
    """Split a parameter pytree into the selected leaves and a function rebuilding the tree.

    Returns:
      ``(selected, rebuild)``: ``selected`` is the list of chosen leaves; ``rebuild(selected)``
      returns the full pytree with the other leaves held fixed (closed over).

    Raises:
      ValueError: if the filter selects no leaf.
    """
    keep = _leaf_predicate(param_filter)
    leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path(params)
    mask = [keep(path, leaf) for path, leaf in leaves_with_path]
    if not any(mask):
        raise ValueError(f"param_filter {param_filter!r} selects no parameter")
    leaves = [leaf for _, leaf in leaves_with_path]
    selected = [leaf for leaf, m in zip(leaves, mask) if m]

    def rebuild(sel):
        it = iter(sel)
        return jax.tree_util.tree_unflatten(treedef, [next(it) if m else leaf
                                                      for leaf, m in zip(leaves, mask)])
    return selected, rebuild


def nnx_bridge(model: nnx.Module, *, param_filter: ParamFilter = None, **call_kwargs):
    """Functional view ``(apply_fn, params)`` of an NNX model for neural-tangents.

    The model is switched to eval mode (dropout off). ``params`` is an ``nnx.State`` of the
    selected ``nnx.Param`` leaves; everything else is closed over.

    Args:
      model: any NNX module called as ``model(x, **call_kwargs)``.
      param_filter: ``None`` (all ``nnx.Param``), a path key such as ``"pes"`` (the PE modules
        of a posjax Transformer) or ``"embedding"``, or any nnx filter.
      **call_kwargs: fixed keyword arguments of the call (e.g. ``positions``).

    Returns:
      ``apply_fn(params, x) -> model(x)`` and the selected ``params``.
    """
    model.eval()
    if param_filter is None:
        sel = nnx.Param
    elif isinstance(param_filter, str):
        sel = nnx.All(nnx.Param, nnx.PathContains(param_filter))
    else:
        sel = nnx.All(nnx.Param, param_filter)
    graphdef, params, rest = nnx.split(model, sel, ...)
    if not jax.tree_util.tree_leaves(params):
        raise ValueError(f"param_filter {param_filter!r} selects no nnx.Param of "
                         f"{type(model).__name__}")

    def apply_fn(p, x):
        return nnx.merge(graphdef, p, rest)(x, **call_kwargs)
    return apply_fn, params


def _functional(model_or_apply_fn, params, param_filter, call_kwargs):
    """``(apply_fn, params)`` over the selected parameters only."""
    if isinstance(model_or_apply_fn, nnx.Module):
        if params is not None:
            raise ValueError("pass params=None with an NNX model (its own parameters are used)")
        return nnx_bridge(model_or_apply_fn, param_filter=param_filter, **call_kwargs)
    if not callable(model_or_apply_fn):
        raise ValueError(f"expected an nnx.Module or apply_fn(params, x), got "
                         f"{type(model_or_apply_fn).__name__}")
    if params is None:
        raise ValueError("params are required with an apply_fn")
    if param_filter is None:
        fn = model_or_apply_fn
        return (lambda p, x: fn(p, x, **call_kwargs)), params
    selected, rebuild = split_params(params, param_filter)
    fn = model_or_apply_fn
    return (lambda sel, x: fn(rebuild(sel), x, **call_kwargs)), selected


@functools.cache
def jit_jacobians_reliable() -> bool:
    """Self-test: does ``jit(jacrev)`` (a vmap of VJPs) compute correct Jacobians here?

    On jax/jaxlib 0.10.2 on CPU it does not: ``jax.jit(jax.jacrev(f))`` of
    ``f(x) = (x - mean(x, -1)) * mean(x, -1)`` for ``x [48, 8]`` is off by O(1) in most rows
    once the Jacobian has >= ~192 rows, while eager ``jacrev``, ``jacfwd`` (eager or jitted) and
    ``jit(grad)`` are exact. The same pattern (a row mean broadcast back, as in LayerNorm) makes
    jitted neural-tangents empirical NTKs of posjax Transformers silently wrong. This test
    compares the jitted Jacobian with the closed form
    ``d f_ri / d x_rj = (delta_ij - 1/n) m_r + (x_ri - m_r) / n`` in numpy.
    """
    x = np.random.default_rng(0).normal(size=(48, 8)).astype(np.float32)
    n, m = x.shape[1], x.mean(-1)
    ref = np.zeros((48, n, 48, n), np.float32)
    rows = np.arange(48)
    ref[rows, :, rows, :] = ((np.eye(n)[None] - 1.0 / n) * m[:, None, None]
                             + (x - m[:, None])[:, :, None] / n)
    f = lambda z: ((z - z.mean(-1, keepdims=True)) * z.mean(-1, keepdims=True)).reshape(-1)
    got = np.asarray(jax.jit(jax.jacrev(f))(jnp.asarray(x))).reshape(ref.shape)
    return bool(np.max(np.abs(got - ref)) < 1e-5)


def _use_jit(jit: bool | None) -> bool:
    if jit is not None:
        return bool(jit)
    if jit_jacobians_reliable():
        return True
    warnings.warn("jit(jacrev) gives wrong Jacobians on this JAX/CPU (see "
                  "ntk.kernels.jit_jacobians_reliable); computing the empirical NTK eagerly "
                  "(correct but slow). Pass jit=True to override.", RuntimeWarning, stacklevel=3)
    return False


def empirical_ntk(model_or_apply_fn, params=None, x1=None, x2=None, *,
                  param_filter: ParamFilter = None,
                  implementation: Any = DEFAULT_IMPLEMENTATION,
                  trace_axes: tuple[int, ...] = (), diagonal_axes: tuple[int, ...] = (),
                  vmap_axes: Any = 0, jit: bool | None = None, **call_kwargs) -> jax.Array:
    """Empirical NTK ``Theta = J(x1) J(x2)^T`` of a posjax model via neural-tangents.

    Args:
      model_or_apply_fn: an NNX module (with ``params=None``) or ``apply_fn(params, x)``.
      params: the parameter pytree of ``apply_fn`` (None for an NNX module).
      x1: ``[N1, ...]`` inputs; x2: ``[N2, ...]`` inputs or None (``x2 = x1``).
      param_filter: restrict J to a parameter subset (see :func:`nnx_bridge` /
        :func:`split_params`), e.g. ``"pes"`` for the PE table of a posjax Transformer.
      implementation: ``"NTK_VECTOR_PRODUCTS"`` (default) or ``"JACOBIAN_CONTRACTION"``;
        ``AUTO`` and ``STRUCTURED_DERIVATIVES`` raise ValueError.
      trace_axes / diagonal_axes / vmap_axes: as in neural-tangents' ``empirical_ntk_fn``
        (``vmap_axes=0``: examples are independent; pass None for batch-coupled models).
      jit: compile the kernel function (fast). None (default): only where
        :func:`jit_jacobians_reliable` passes; otherwise run eagerly with a warning.
      **call_kwargs: fixed keyword arguments of the model call.

    Returns:
      ``[N1, N2, ...]`` kernel (neural-tangents layout, see module docstring).
    """
    if x1 is None:
        raise ValueError("x1 is required")
    nt = neural_tangents()
    impl = resolve_implementation(implementation)
    apply_fn, p = _functional(model_or_apply_fn, params, param_filter, call_kwargs)
    fn = nt.empirical_ntk_fn(apply_fn, trace_axes=tuple(trace_axes),
                             diagonal_axes=tuple(diagonal_axes), vmap_axes=vmap_axes,
                             implementation=impl)
    return (jax.jit(fn) if _use_jit(jit) else fn)(x1, x2, p)


def positional_ntk(model, tokens, tokens2=None, *, params=None,
                   param_filter: ParamFilter = "pes", trace_axes: tuple[int, ...] = (-1,),
                   batch_size: int = 1, implementation: Any = DEFAULT_IMPLEMENTATION,
                   jit: bool | None = None, **call_kwargs) -> jax.Array:
    """Positional NTK ``Theta_p = J_p J_p^T``, J_p = d model(tokens) / d (PE parameters).

    Rows of ``tokens`` are processed ``batch_size`` at a time with ``lax.map`` so the memory
    stays that of one block (``128`` positions x a small model fit on CPU).
    Appendix A of arXiv 2604.05217 (our reading: ``docs/ntk.md``).

    Args:
      model: an NNX module (``params=None``; default filter ``"pes"`` = the PE modules of a
        posjax ``Transformer`` / ``Classifier`` / ``LanguageModel``) or ``apply_fn(params, x)``
        with ``params`` and a ``param_filter`` naming the positional leaves.
      tokens: ``[N1, T]`` inputs; tokens2: ``[N2, T]`` or None (= tokens).
      trace_axes: output axes traced over (default the feature axis, so a Transformer's
        ``[N, T, d]`` output gives ``Theta_p [N1, N2, T, T]``). neural-tangents normalises the
        trace: it is the *mean* over the traced axes, ``(1/d) sum_c <dF_c/dp, dF'_c/dp>``.
      batch_size: rows of ``tokens`` per ``lax.map`` step (or per eager call).
      jit: as in :func:`empirical_ntk`; when not jitted, blocks are processed by a Python loop
        (same memory bound) instead of ``lax.map``.

    Returns:
      ``[N1, N2, ...]`` positional NTK.
    """
    tokens = jnp.asarray(tokens)
    tokens2 = tokens if tokens2 is None else jnp.asarray(tokens2)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    nt = neural_tangents()
    impl = resolve_implementation(implementation)
    apply_fn, p = _functional(model, params, param_filter, call_kwargs)
    fn = nt.empirical_ntk_fn(apply_fn, trace_axes=tuple(trace_axes), vmap_axes=0,
                             implementation=impl)
    n1 = tokens.shape[0]
    pad = (-n1) % batch_size
    padded = jnp.concatenate([tokens, jnp.repeat(tokens[-1:], pad, axis=0)]) if pad else tokens
    blocks = padded.reshape(-1, batch_size, *tokens.shape[1:])
    if _use_jit(jit):
        out = jax.jit(lambda b, x, q: jax.lax.map(lambda block: fn(block, x, q), b))(
            blocks, tokens2, p)
    else:
        out = jnp.stack([fn(block, tokens2, p) for block in blocks])
    return out.reshape(-1, *out.shape[2:])[:n1]


def native_jacobian(apply_fn: Callable, params: Any, xs: list[jax.Array]) -> list[jax.Array]:
    """Jacobians ``[prod(out), P]`` of ``apply_fn(params, x)`` w.r.t. the flattened ``params``
    (``jax.flatten_util.ravel_pytree`` order), one per input in ``xs``.

    Rows are VJPs taken one output at a time (``lax.map`` over the rows of the identity, under
    ``jit``), not ``vmap``-batched as in ``jax.jacrev``: jitted batched VJPs are wrong on jax
    0.10.2 CPU for large outputs (see :func:`jit_jacobians_reliable`). Inputs of equal shape
    share one compilation.
    """
    flat, unravel = jax.flatten_util.ravel_pytree(params)

    @jax.jit
    def jac(x):
        out, vjp = jax.vjp(lambda g: apply_fn(unravel(g), x).reshape(-1), flat)
        return jax.lax.map(lambda c: vjp(c)[0], jnp.eye(out.size, dtype=out.dtype))
    return [jac(x) for x in xs]


def native_ntk(apply_fn: Callable, params: Any, x1: jax.Array, x2: jax.Array | None = None
               ) -> jax.Array:
    """Independent empirical NTK ``J1 J2^T`` from :func:`native_jacobian`.

    No trace and no diagonal: the result has the layout of :func:`empirical_ntk` with
    ``trace_axes=()``, i.e. ``[N1, N2, O1, O1', O2, O2', ...]``. This is the reference the
    neural-tangents kernels are tested against.
    """
    x2 = x1 if x2 is None else x2
    flat, unravel = jax.flatten_util.ravel_pytree(params)
    s1 = jax.eval_shape(lambda f: apply_fn(unravel(f), x1), flat).shape
    s2 = jax.eval_shape(lambda f: apply_fn(unravel(f), x2), flat).shape
    J1, J2 = native_jacobian(apply_fn, params, [x1, x2])
    return jac_to_ntk(J1, J2, s1, s2)


def jac_to_ntk(J1: jax.Array, J2: jax.Array, s1: tuple, s2: tuple) -> jax.Array:
    """``J1 J2^T`` reshaped to the neural-tangents layout ``[N1, N2, O1, O1', ...]``."""
    theta = (J1 @ J2.T).reshape(*s1, *s2)
    k = len(s1)
    order = [ax for pair in zip(range(k), range(k, 2 * k)) for ax in pair]
    return theta.transpose(order)


# Re-exported here for convenience (defined in ntk.attention).
from ntk.attention import (POS_EMB_TYPES, attention_network,  # noqa: E402,F401
                           infinite_attention_kernel)
