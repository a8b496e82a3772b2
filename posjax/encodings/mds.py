"""The MDS positional encoding of arXiv 2604.05217 (Algorithm 1), registered as ``"mds"``.

The table is stored as low-rank factors ``P = A W^T`` (``A [n, r]``, ``W [d, r]``): ``r (n + d)``
parameters instead of ``n d`` (the paper's minimal parametrisation). Either factor can be
trainable (``nnx.Param``) or frozen (a plain ``nnx.Variable``, which optimisers filtering on
``nnx.Param`` leave alone). The lift ``W`` comes from :func:`posjax.geometry.lift_matrix`.

One class, :class:`MDSEncoding`, with one options dataclass, :class:`MDSOptions`: the registry
builds it from the options and the model context (``make("mds", coords=X_r, ...)``,
``TransformerConfig(pe="mds", pe_options={"coords": X_r, ...})``, ``n = max_len``), and
:meth:`MDSEncoding.create` from explicit sizes (``create(n, d, coords=X_r)``). (The former
``RegisteredMDS`` / ``MDSPEOptions`` pair was merged into these two names.)

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217 (Algorithm 1, minimal parametrisation).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding, check_table_length
from posjax.encodings.registry import register
from posjax.geometry.lowrank import LIFTS, lift_matrix

__all__ = ["MDSOptions", "MDSEncoding", "mds_model_coords"]

_INITS = ("mds", "random")
_TRAINABLE = ("both", "A", "W", "none")


def mds_model_coords(coords: Any, max_len: int, offset: int = 0, scale: float = 1.0
                     ) -> np.ndarray:
    """MDS coordinates ``coords [n, r]`` of corpus positions placed on model positions
    ``0..max_len-1``: the ``[max_len, r]`` float32 table ``scale * coords[clip(p - offset)]``.

    Corpus position ``i`` is model position ``i + offset`` (1 when the model inputs start with a
    ``[CLS]`` the corpus lacks); model positions outside the analysed range take the coordinates
    of the nearest analysed position. The result is the ``coords`` option of ``pe="mds"``.
    """
    if max_len < 1 or np.ndim(coords) != 2 or np.shape(coords)[0] < 1:
        raise ValueError(f"mds_model_coords needs coords [n >= 1, r] and max_len >= 1, got "
                         f"coords of shape {np.shape(coords)} and max_len={max_len}")
    idx = np.clip(np.arange(max_len) - offset, 0, np.shape(coords)[0] - 1)
    return scale * np.asarray(coords, np.float32)[idx]


@dataclasses.dataclass(frozen=True)
class MDSOptions:
    """Options of the MDS encoding (arXiv 2604.05217, Algorithm 1).

    Attributes:
      coords: ``[n', r']`` MDS coordinates (e.g. ``classical_mds(D).coords``), stored as nested
        tuples so the options stay hashable and JSON-recordable; rows beyond ``n'`` up to the
        model's ``max_len`` are zero. None: random init (``init="random"``).
      rank: ``r`` (default: the columns of ``coords``, capped at d_model; with random init,
        ``min(8, d_model)``).
      init: "mds" (A = X_r, W from ``lift``) or "random" (A ~ N(0, init_std^2), random
        orthonormal W); None: "mds" when ``coords`` is given, else "random".
      trainable: which factors are ``nnx.Param``: "both", "A", "W" or "none".
      lift: "pad" (W = [I_r; 0]) or "random_orthonormal", for ``init="mds"``.
      init_std: std of A for ``init="random"``.
    """

    coords: Any = None
    rank: int | None = None
    init: str | None = None
    trainable: str = "both"
    lift: str = "pad"
    init_std: float = 0.02

    def __post_init__(self):
        if self.coords is not None:
            arr = np.asarray(self.coords, np.float64)
            arr = arr[:, None] if arr.ndim == 1 else arr
            if arr.ndim != 2 or not np.all(np.isfinite(arr)):
                raise ValueError(f"mds coords must be a finite [n, r] array, got shape {arr.shape}")
            object.__setattr__(self, "coords", tuple(map(tuple, arr.tolist())))

    @property
    def resolved_init(self) -> str:
        """``init``, or its default: "mds" with ``coords``, "random" without."""
        return self.init or ("mds" if self.coords is not None else "random")

    def validate(self, ctx: PEContext) -> None:
        init = self.resolved_init
        if init not in _INITS:
            raise ValueError(f"MDS encoding init must be one of {_INITS}, got {self.init!r}")
        if init == "mds" and self.coords is None:
            raise ValueError("PE 'mds' with init='mds' needs coords= (MDS coordinates [n, r])")
        if self.trainable not in _TRAINABLE:
            raise ValueError(f"MDS encoding trainable must be one of {_TRAINABLE}, got "
                             f"{self.trainable!r}")
        if self.lift not in LIFTS:
            raise ValueError(f"MDS encoding lift must be one of {LIFTS}, got {self.lift!r}")
        if self.rank is not None and self.rank <= 0:
            raise ValueError(f"PE 'mds' rank must be positive, got {self.rank}")
        if self.rank is not None and ctx.d_model is not None and self.rank > ctx.d_model:
            raise ValueError(f"MDS encoding rank must be in [1, d_model={ctx.d_model}], got "
                             f"{self.rank}")
        if init == "mds" and self.rank is not None and self.rank > len(self.coords[0]):
            raise ValueError(f"rank={self.rank} exceeds the {len(self.coords[0])} columns of coords")
        if self.coords is not None and ctx.max_len is not None and len(self.coords) > ctx.max_len:
            raise ValueError(f"mds coords have {len(self.coords)} rows, more than max_len={ctx.max_len}")
        if self.init_std < 0:
            raise ValueError(f"init_std must be >= 0, got {self.init_std}")


@register("mds", options=MDSOptions,
          paper="Cirrincione, On the Geometry of Positional Encodings in Transformers, arXiv 2604.05217")
class MDSEncoding(PositionalEncoding):
    """Additive PE ``p_i = A[i] W^T`` with low-rank factors (hook ``embed``; absolute).

    Built by the registry from :class:`MDSOptions` and the model context (``n = max_len``,
    ``d = d_model``), or by :meth:`create` from explicit sizes. The ``params`` stream of ``rngs``
    draws the lift (``init="mds"``) or ``A`` then ``W`` (``init="random"``).
    """

    name = "mds"
    is_relative = False

    def __init__(self, options: MDSOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("mds", "d_model", "max_len")
        n, d = ctx.max_len, ctx.d_model
        init, rank = options.resolved_init, options.rank
        if init == "mds":
            given = np.asarray(options.coords, np.float32)
            X = np.zeros((n, given.shape[1]), np.float32)
            X[: len(given)] = given
            rank = min(X.shape[1], d) if rank is None else rank
            A = jnp.asarray(X[:, :rank])
            W = lift_matrix(d, rank, lift=options.lift, key=rngs.params(), dtype=jnp.float32)
        else:
            rank = min(8, d) if rank is None else rank
            A = options.init_std * jax.random.normal(rngs.params(), (n, rank), jnp.float32)
            W = lift_matrix(d, rank, lift="random_orthonormal", key=rngs.params(),
                            dtype=jnp.float32)
        self.A = nnx.Param(A) if options.trainable in ("both", "A") else nnx.Variable(A)
        self.W = nnx.Param(W) if options.trainable in ("both", "W") else nnx.Variable(W)

    @classmethod
    def create(cls, num_positions: int, d_model: int, *, coords: Any = None,
               rank: int | None = None, init: str = "mds", trainable: str = "both",
               lift: str = "pad", init_std: float = 0.02, rngs: nnx.Rngs) -> "MDSEncoding":
        """The encoding of explicit sizes (no model context).

        Args:
          num_positions: ``n``, rows of the table.
          d_model: ``d``.
          coords: ``[n, r']`` MDS coordinates (required for ``init="mds"``, exactly ``n`` rows);
            the first ``rank`` columns are used.
          rank: ``r`` (default ``min(r', d)``; required for ``init="random"``).
          init, trainable, lift, init_std: as :class:`MDSOptions`.
          rngs: ``nnx.Rngs`` (its ``params`` stream).
        """
        if num_positions <= 0 or d_model <= 0:
            raise ValueError(f"MDS encoding needs positive num_positions and d_model, got "
                             f"{num_positions}, {d_model}")
        if init == "mds":
            if coords is None:
                raise ValueError("MDS encoding with init='mds' needs coords= (the MDS "
                                 "coordinates [num_positions, r])")
            shape = np.shape(coords)
            if len(shape) not in (1, 2) or shape[0] != num_positions:
                raise ValueError(f"coords must be [num_positions={num_positions}, r], got shape "
                                 f"{shape}")
        elif init == "random" and rank is None:
            raise ValueError("MDS encoding with init='random' needs rank=")
        options = MDSOptions(coords=coords, rank=rank, init=init, trainable=trainable, lift=lift,
                             init_std=init_std)
        ctx = PEContext(d_model=d_model, max_len=num_positions)
        options.validate(ctx)
        return cls(options, ctx, rngs=rngs)

    @property
    def max_positions(self) -> int:
        return int(self.ctx.max_len)

    @property
    def rank(self) -> int:
        """``r``, the number of factor columns."""
        return int(self.A.shape[1])

    def param_count(self) -> tuple[int, int]:
        """``(n d, r (n + d))``: dense-table vs factorised parameter counts."""
        n, d = self.ctx.max_len, self.ctx.d_model
        return n * d, self.rank * (n + d)

    def full_table(self) -> jax.Array:
        """The whole table ``A W^T [n, d]``."""
        return self.A[...] @ self.W[...].T

    def table(self, positions: jax.Array) -> jax.Array:
        """Rows ``A[positions] W^T``: ``[..., d]`` for integer ``positions [...]``."""
        positions = jnp.asarray(positions)
        if positions.ndim:
            check_table_length(self.name, positions, self.max_positions)
        return jnp.take(self.A[...], positions, axis=0) @ self.W[...].T

    def embed(self, x: jax.Array, positions: jax.Array, *, deterministic: bool = True,
              rngs: nnx.Rngs | None = None) -> jax.Array:
        """``x [B, T, d] + table(positions)`` with positions ``[T]`` or ``[B, T]``."""
        del deterministic, rngs
        return x + self.table(positions).astype(x.dtype)

    def __call__(self, x: jax.Array, positions: jax.Array) -> jax.Array:
        return self.embed(x, positions)


_MERGED = {"RegisteredMDS": "MDSEncoding", "MDSPEOptions": "MDSOptions"}


def __getattr__(name: str):
    if name in _MERGED:
        raise AttributeError(f"posjax.encodings.mds.{name} was merged into {_MERGED[name]} "
                             f"(MDSEncoding.create(n, d, coords=...) builds it from explicit sizes)")
    raise AttributeError(f"module 'posjax.encodings.mds' has no attribute {name!r}")
