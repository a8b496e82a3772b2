"""The MDS positional encoding of arXiv 2604.05217 (Algorithm 1), registered as ``"mds"``.

The table is stored as low-rank factors ``P = A W^T`` (``A [n, r]``, ``W [d, r]``): ``r (n + d)``
parameters instead of ``n d`` (the paper's minimal parametrisation). Either factor can be
trainable (``nnx.Param``) or frozen (a plain ``nnx.Variable``, which optimisers filtering on
``nnx.Param`` leave alone). The lift ``W`` comes from :func:`posjax.geometry.lift_matrix`.

:class:`MDSEncoding` is the module built from explicit arguments; :class:`RegisteredMDS` builds it
from registry options and the model context, so a model can be built with
``TransformerConfig(pe="mds", pe_options={"coords": X_r, ...})``.

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

__all__ = ["MDSOptions", "MDSEncoding", "MDSPEOptions", "RegisteredMDS", "mds_model_coords"]

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
    """Options of the MDS encoding (recorded in results; the coordinates themselves are not).

    Attributes:
      num_positions: ``n``, rows of the table.
      d_model: ``d``, model width.
      rank: ``r`` (None: the number of columns of ``coords``).
      init: ``"mds"`` (``A = X_r``, ``W`` from ``lift``) or ``"random"`` (``A ~ N(0, init_std^2)``,
        random orthonormal ``W``).
      trainable: which factors are ``nnx.Param``: ``"both"``, ``"A"``, ``"W"`` or ``"none"``.
      lift: ``"pad"`` (``W = [I_r; 0]``) or ``"random_orthonormal"``, for ``init="mds"``.
      init_std: standard deviation of ``A`` for ``init="random"``.
    """

    num_positions: int
    d_model: int
    rank: int | None = None
    init: str = "mds"
    trainable: str = "both"
    lift: str = "pad"
    init_std: float = 0.02

    def validate(self, ctx: PEContext | None = None) -> None:
        del ctx
        if self.num_positions <= 0 or self.d_model <= 0:
            raise ValueError(f"MDS encoding needs positive num_positions and d_model, got "
                             f"{self.num_positions}, {self.d_model}")
        if self.init not in _INITS:
            raise ValueError(f"MDS encoding init must be one of {_INITS}, got {self.init!r}")
        if self.trainable not in _TRAINABLE:
            raise ValueError(f"MDS encoding trainable must be one of {_TRAINABLE}, got "
                             f"{self.trainable!r}")
        if self.lift not in LIFTS:
            raise ValueError(f"MDS encoding lift must be one of {LIFTS}, got {self.lift!r}")
        if self.rank is not None and not 0 < self.rank <= self.d_model:
            raise ValueError(f"MDS encoding rank must be in [1, d_model={self.d_model}], got "
                             f"{self.rank}")
        if self.init_std < 0:
            raise ValueError(f"init_std must be >= 0, got {self.init_std}")


class MDSEncoding(PositionalEncoding):
    """Additive PE ``p_i = A[i] W^T`` with low-rank factors (hook ``embed``; absolute).

    Args:
      num_positions: ``n``.
      d_model: ``d``.
      coords: ``[n, r']`` MDS coordinates (required for ``init="mds"``); the first ``rank``
        columns are used.
      rank: ``r`` (default ``coords.shape[1]``; required for ``init="random"``).
      init: ``"mds"`` or ``"random"``.
      trainable: ``"both"`` (default), ``"A"``, ``"W"`` or ``"none"``.
      lift: ``"pad"`` or ``"random_orthonormal"``.
      init_std: std of ``A`` for ``init="random"``.
      rngs: ``nnx.Rngs`` (uses the ``params`` stream for random factors).
    """

    name = "mds"
    is_relative = False

    def __init__(self, num_positions: int, d_model: int, *, coords: Any = None,
                 rank: int | None = None, init: str = "mds", trainable: str = "both",
                 lift: str = "pad", init_std: float = 0.02, rngs: nnx.Rngs):
        if init == "mds":
            if coords is None:
                raise ValueError("MDS encoding with init='mds' needs coords= (the MDS "
                                 "coordinates [num_positions, r])")
            X = jnp.asarray(coords, jnp.float32)
            X = X[:, None] if X.ndim == 1 else X
            if X.ndim != 2 or X.shape[0] != num_positions:
                raise ValueError(f"coords must be [num_positions={num_positions}, r], got shape "
                                 f"{X.shape}")
            rank = min(X.shape[1], d_model) if rank is None else rank
            if rank > X.shape[1]:
                raise ValueError(f"rank={rank} exceeds the {X.shape[1]} columns of coords")
        elif rank is None:
            raise ValueError("MDS encoding with init='random' needs rank=")
        options = MDSOptions(num_positions, d_model, rank, init, trainable, lift, init_std)
        options.validate()
        super().__init__(options, PEContext(d_model=d_model, max_len=num_positions))
        if init == "mds":
            A = X[:, :rank]
            W = lift_matrix(d_model, rank, lift=lift, key=rngs.params(), dtype=jnp.float32)
        else:
            A = init_std * jax.random.normal(rngs.params(), (num_positions, rank), jnp.float32)
            W = lift_matrix(d_model, rank, lift="random_orthonormal", key=rngs.params(),
                            dtype=jnp.float32)
        train_a = trainable in ("both", "A")
        train_w = trainable in ("both", "W")
        self.A = nnx.Param(A) if train_a else nnx.Variable(A)
        self.W = nnx.Param(W) if train_w else nnx.Variable(W)

    @property
    def max_positions(self) -> int:
        return int(self.options.num_positions)

    @property
    def rank(self) -> int:
        """``r``, the number of factor columns."""
        return int(self.A.shape[1])

    def param_count(self) -> tuple[int, int]:
        """``(n d, r (n + d))``: dense-table vs factorised parameter counts."""
        n, d = self.options.num_positions, self.options.d_model
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



@dataclasses.dataclass(frozen=True)
class MDSPEOptions:
    """Options of the registered MDS encoding.

    Attributes:
      coords: ``[n', r']`` MDS coordinates (e.g. ``classical_mds(D).coords``), stored as nested
        tuples so the options stay hashable and JSON-recordable; rows beyond ``n'`` up to the
        model's ``max_len`` are zero. None: random init (``init="random"``, needs ``rank``).
      rank: ``r`` (default: the columns of ``coords``, capped at d_model; with random init,
        ``min(8, d_model)``).
      init: "mds" (A = X_r) or "random"; default "mds" when ``coords`` is given.
      trainable: which factors train: "both", "A", "W" or "none".
      lift: "pad" (W = [I_r; 0]) or "random_orthonormal".
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

    def validate(self, ctx: PEContext) -> None:
        init = self.init or ("mds" if self.coords is not None else "random")
        if init == "mds" and self.coords is None:
            raise ValueError("PE 'mds' with init='mds' needs coords= (MDS coordinates [n, r])")
        if self.rank is not None and self.rank <= 0:
            raise ValueError(f"PE 'mds' rank must be positive, got {self.rank}")
        if self.coords is not None and ctx.max_len is not None and len(self.coords) > ctx.max_len:
            raise ValueError(f"mds coords have {len(self.coords)} rows, more than max_len={ctx.max_len}")


@register("mds", options=MDSPEOptions,
          paper="Cirrincione, On the Geometry of Positional Encodings in Transformers, arXiv 2604.05217")
class RegisteredMDS(MDSEncoding):
    """:class:`MDSEncoding` built from registry options and the model context."""

    def __init__(self, options: MDSPEOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        ctx.require("mds", "d_model", "max_len")
        init = options.init or ("mds" if options.coords is not None else "random")
        coords = None
        if options.coords is not None:
            given = np.asarray(options.coords, np.float32)
            coords = np.zeros((ctx.max_len, given.shape[1]), np.float32)
            coords[: len(given)] = given
        rank = options.rank
        if rank is None:
            rank = min(coords.shape[1] if coords is not None else 8, ctx.d_model)
        super().__init__(ctx.max_len, ctx.d_model, coords=coords, rank=rank, init=init,
                         trainable=options.trainable, lift=options.lift,
                         init_std=options.init_std, rngs=rngs)
        self.ctx = ctx
