"""Compiled training steps shared by structure.

Two models that differ only in how they were initialised (the init scale of a learned PE, the
seed, the values of a table) run the same program. Their NNX graph definitions may still differ,
because a module keeps its options (``std=0.1`` vs ``std=0.5``) as static attributes, so keying
compiled steps on the graph definition compiles one step per option value.

Here a step is keyed on what XLA actually compiles: the step function is traced once over the
abstract shapes and dtypes of its arguments (``jax.make_jaxpr``), and the key is a digest of the
resulting program (its equations, literals and the values of the constants it closes over) and of
the argument/result tree structure. Steps with equal keys share one compiled executable;
anything that changes the computation (a RoPE base, a learning rate baked into the schedule, a
different loss) changes the program and gets its own.
"""
from __future__ import annotations

import hashlib
from typing import Any, Callable

import jax
import numpy as np
from jax.extend.core import jaxpr_as_fun



class BoundedCache:
    """Values by hashable key, at most ``maxsize`` of them: when full, the oldest entry is
    dropped first (FIFO). The one cache of posjax.training (steps, pinned steps, evaluation
    programs, shared executables). An unhashable key is not cached: :meth:`get` then builds a
    fresh value each call."""

    def __init__(self, maxsize: int = 64):
        if maxsize < 1:
            raise ValueError(f"BoundedCache needs maxsize >= 1, got {maxsize}")
        self.maxsize = maxsize
        self._items: dict[Any, Any] = {}

    def get(self, key: Any, build: Callable[[], Any]) -> Any:
        """The value of ``key``, built by ``build()`` (and stored) on a miss."""
        try:
            hash(key)
        except TypeError:  # e.g. an unhashable static attribute of a graph definition
            return build()
        if key not in self._items:
            if len(self._items) >= self.maxsize:
                self._items.pop(next(iter(self._items)))
            self._items[key] = build()
        return self._items[key]

    def values(self):
        return self._items.values()

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Any) -> bool:
        return key in self._items


# digest of (program, constants, tree structures) -> jitted flat program
_COMPILED = BoundedCache(64)


def _abstract(x: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(np.shape(x), jax.numpy.result_type(x) if not hasattr(x, "dtype")
                                else x.dtype, weak_type=bool(getattr(x, "weak_type", False)))


def _const_bytes(c: Any) -> bytes:
    if jax.dtypes.issubdtype(getattr(c, "dtype", np.float32), jax.dtypes.prng_key):
        c = jax.random.key_data(c)
    a = np.asarray(c)
    return f"{a.shape}{a.dtype}".encode() + a.tobytes()


def _hash_values(digest: Any, jaxpr: Any) -> None:
    """Add to ``digest`` every value the printed program leaves out: literals, and the constants
    closed over by the sub-programs of higher-order equations (``pjit``, ``custom_vjp``, ``scan``,
    ``cond``...), which the outer ``consts`` do not list."""
    from jax.extend.core import ClosedJaxpr, Jaxpr, Literal

    def visit(value: Any) -> None:
        if isinstance(value, ClosedJaxpr):
            for c in value.consts:
                digest.update(_const_bytes(c))
            visit(value.jaxpr)
        elif isinstance(value, Jaxpr):
            for eqn in value.eqns:
                for v in eqn.invars:
                    if isinstance(v, Literal):
                        digest.update(_const_bytes(v.val))
                for param in eqn.params.values():
                    visit(param)
        elif isinstance(value, (tuple, list)):
            for item in value:
                visit(item)

    visit(jaxpr)


def program_key(fn: Callable, *args: Any) -> tuple[tuple[str, str, str], Any, Any]:
    """Trace ``fn(*args)`` abstractly; return ``(key, closed_jaxpr, out_tree)``.

    ``key`` is equal for two functions exactly when they trace to the same program (same
    equations and literals, same closed-over constant values) over arguments and results with the
    same tree structures; only shapes and dtypes of ``args`` matter, never their values.
    """
    abstract = jax.tree.map(_abstract, args)
    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*abstract)
    digest = hashlib.sha256(str(closed.jaxpr).encode())
    for c in closed.consts:
        digest.update(_const_bytes(c))
    _hash_values(digest, closed.jaxpr)
    out_tree = jax.tree.structure(out_shape)
    key = (digest.hexdigest(), str(jax.tree.structure(abstract)), str(out_tree))
    return key, closed, out_tree


def shared_compiled(fn: Callable, *args: Any) -> tuple[Callable, Any]:
    """The jitted flat program of ``fn`` over the shapes of ``args`` (shared with every function
    of the same key, see :func:`program_key`) and the tree structure of its result."""
    key, closed, out_tree = program_key(fn, *args)
    return _COMPILED.get(key, lambda: jax.jit(jaxpr_as_fun(closed))), out_tree


class StructuralStep:
    """``fn`` jitted through the shared cache: called like ``fn``, it resolves (once per tree
    structure and shapes of its arguments) the shared executable and runs it."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self._by_signature: dict[Any, tuple[Callable, Any]] = {}

    def __call__(self, *args: Any) -> Any:
        leaves, treedef = jax.tree.flatten(args)
        signature = (treedef, tuple((np.shape(x), getattr(x, "dtype", None),
                                     bool(getattr(x, "weak_type", False))) for x in leaves))
        found = self._by_signature.get(signature)
        if found is None:
            found = self._by_signature[signature] = shared_compiled(self.fn, *args)
        flat, out_tree = found
        return jax.tree.unflatten(out_tree, flat(*leaves))
