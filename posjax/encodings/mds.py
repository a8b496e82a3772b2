"""The MDS positional encoding of arXiv 2604.05217 (Algorithm 1), registered as ``"mds"``.

The math and the module live in :mod:`posjax.geometry.mds_encoding` (low-rank factors
``P = A W^T``: ``r (n + d)`` parameters); this module only plugs it into the registry, so a model
can be built with ``TransformerConfig(pe="mds", pe_options={"coords": X_r, ...})``.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from flax import nnx

from posjax.encodings.base import PEContext
from posjax.encodings.registry import register
from posjax.geometry.mds_encoding import MDSEncoding


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
    """:class:`posjax.geometry.MDSEncoding` built from registry options and the model context."""

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
