"""Gram matrices of square-root distributions, dense, tiled or sparse.

All kernels compute ``G = sqrt(P_a) sqrt(P_b)^T`` (the Bhattacharyya coefficients
``BC_ij = sum_w sqrt(P_a[i, w] P_b[j, w])``) with ``precision=HIGHEST`` and never take the
square root of more than a ``[block, V]`` tile at a time when tiled:

* :func:`gram_dense` -- one GEMM on ``sqrt(P)`` (small ``n * V``);
* :func:`gram_tiled` -- a loop over ``[block, block]`` tiles; the square root of one row block
  and one column block is formed per tile, so memory beyond the input is ``O(block * V + n^2)``;
* :func:`gram_sparse` -- a BCOO ``sqrt(P_a)`` times densified row blocks of ``sqrt(P_b)``.

:func:`pair_sq_distances` evaluates ``||sqrt(P_i) - sqrt(P_j)||^2`` directly (difference form,
no cancellation) for a list of pairs; it backs the near-diagonal fix of docs/design.md.

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217, Eq. (3) and Algorithm 1 step 2.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import sparse as jsparse

__all__ = ["auto_block", "gram_dense", "gram_tiled", "gram_sparse", "pair_sq_distances",
           "bcoo_row_pointers", "bcoo_rows_dense"]

HIGHEST = lax.Precision.HIGHEST
_NT = (((1,), (1,)), ((), ()))  # contract the last axis of both operands: A @ B^T

#: Dense problems with at most this many entries in ``P`` use one GEMM (no tiling).
FULL_GEMM_MAX_ELEMENTS = 1 << 26
#: Target number of entries of one ``[block, V]`` tile.
TILE_ELEMENTS = 1 << 24
#: Symmetric products with at least this many rows are tiled to skip the lower triangle.
SYMMETRIC_TILING_MIN_N = 1024


def auto_block(n: int, V: int, block_size: int | None, *, symmetric: bool = False
               ) -> int | None:
    """Rows per tile (None: no tiling). ``block_size=0`` forces one GEMM.

    Automatic choice: tiles of at most ``TILE_ELEMENTS / V`` rows when ``n * V`` is large (memory
    bound); and for a symmetric product with ``n >= SYMMETRIC_TILING_MIN_N``, at least four row
    blocks, so that computing only the upper-triangular tiles saves about 3/8 of the GEMM flops.
    """
    if block_size is not None:
        if block_size < 0:
            raise ValueError(f"block_size must be >= 0, got {block_size}")
        return None if block_size == 0 or block_size >= n else int(block_size)
    max_rows = max(8, TILE_ELEMENTS // max(V, 1))
    if symmetric and n >= SYMMETRIC_TILING_MIN_N:
        max_rows = min(max_rows, max(256, math.ceil(n / 4)))
    elif n * V <= FULL_GEMM_MAX_ELEMENTS:
        return None
    num_blocks = math.ceil(n / max_rows)
    block = -(-math.ceil(n / num_blocks) // 8) * 8
    return None if block >= n else block


@jax.jit
def gram_dense(P_a: jax.Array, P_b: jax.Array) -> jax.Array:
    """``sqrt(P_a) @ sqrt(P_b)^T`` in one GEMM.

    Args:
      P_a: ``[n, V]`` non-negative.
      P_b: ``[m, V]`` non-negative (pass ``P_a`` again for the symmetric case).

    Returns:
      ``[n, m]`` Bhattacharyya coefficients.
    """
    return lax.dot_general(jnp.sqrt(P_a), jnp.sqrt(P_b), _NT, precision=HIGHEST)


def _block_starts(n: int, block: int) -> jax.Array:
    """Start row of every tile; the last start is clamped so each tile holds ``block`` rows
    (overlapping tiles recompute identical values, so no padding copy of P is needed)."""
    nb = math.ceil(n / block)
    return jnp.minimum(jnp.arange(nb) * block, n - block)


@functools.partial(jax.jit, static_argnames=("block", "symmetric"))
def gram_tiled(P_a: jax.Array, P_b: jax.Array, *, block: int, symmetric: bool) -> jax.Array:
    """Tiled ``sqrt(P_a) @ sqrt(P_b)^T``.

    With ``symmetric=True`` (``P_b is P_a``) only tiles with column block >= row block are
    computed and each is also written transposed. Per tile the square roots of one row block and
    one column block (``2 * block * V`` entries) exist, never the full ``sqrt(P)``.

    Args:
      P_a: ``[n, V]``.
      P_b: ``[m, V]``.
      block: rows per tile (``<= min(n, m)``).
      symmetric: whether ``P_b`` is ``P_a``.

    Returns:
      ``[n, m]``.
    """
    n, m = P_a.shape[0], P_b.shape[0]
    rows, cols = _block_starts(n, block), _block_starts(m, block)
    nb, mb = rows.shape[0], cols.shape[0]

    def row_body(b, G):
        s_b = jnp.sqrt(lax.dynamic_slice_in_dim(P_a, rows[b], block, 0))

        def col_body(c, G):
            s_c = jnp.sqrt(lax.dynamic_slice_in_dim(P_b, cols[c], block, 0))
            tile = lax.dot_general(s_b, s_c, _NT, precision=HIGHEST)
            G = lax.dynamic_update_slice(G, tile, (rows[b], cols[c]))
            if symmetric:
                G = lax.dynamic_update_slice(G, tile.T, (cols[c], rows[b]))
            return G

        return lax.fori_loop(b if symmetric else 0, mb, col_body, G)

    return lax.fori_loop(0, nb, row_body, jnp.zeros((n, m), jnp.result_type(P_a, P_b)))


def bcoo_row_pointers(S: jsparse.BCOO) -> jax.Array:
    """CSR-style row pointers ``[n + 1]`` of a row-sorted 2-D BCOO."""
    return jnp.searchsorted(S.indices[:, 0], jnp.arange(S.shape[0] + 1), side="left")


def bcoo_rows_dense(S: jsparse.BCOO, ptr: jax.Array, rows: jax.Array, max_row_nnz: int
                    ) -> jax.Array:
    """Dense copies ``[len(rows), V]`` of selected rows of a row-sorted BCOO.

    Rows may repeat. Out-of-range row ids (``>= n``) give zero rows.
    """
    n, V = S.shape
    valid_row = rows < n
    r = jnp.where(valid_row, rows, 0)
    idx = ptr[r][:, None] + jnp.arange(max_row_nnz)[None, :]
    valid = (idx < ptr[r + 1][:, None]) & valid_row[:, None]
    idx = jnp.where(valid, idx, 0)
    cols = S.indices[idx, 1]
    vals = jnp.where(valid, S.data[idx], 0)
    out = jnp.zeros((rows.shape[0], V), S.dtype)
    return out.at[jnp.arange(rows.shape[0])[:, None], cols].add(vals)


@functools.partial(jax.jit, static_argnames=("block", "max_row_nnz"))
def gram_sparse(S_a: jsparse.BCOO, S_b: jsparse.BCOO, *, block: int, max_row_nnz: int
                ) -> jax.Array:
    """``S_a @ S_b^T`` for row-sorted BCOO square-root matrices, one dense column block at a time.

    Each step densifies ``block`` rows of ``S_b`` (``[block, V]``) and multiplies the sparse
    ``S_a`` by it, costing ``O(nnz(S_a) * block)``.

    Args:
      S_a: BCOO ``[n, V]`` (already square-rooted).
      S_b: BCOO ``[m, V]`` (already square-rooted), indices sorted by row.
      block: rows of ``S_b`` per step (``<= m``).
      max_row_nnz: largest number of stored entries in one row of ``S_b``.

    Returns:
      ``[n, m]`` dense.
    """
    n, m = S_a.shape[0], S_b.shape[0]
    ptr = bcoo_row_pointers(S_b)
    cols = _block_starts(m, block)

    def body(c, G):
        dense = bcoo_rows_dense(S_b, ptr, cols[c] + jnp.arange(block), max_row_nnz)
        tile = jsparse.bcoo_dot_general(S_a, dense, dimension_numbers=_NT, precision=HIGHEST)
        return lax.dynamic_update_slice(G, tile, (0, cols[c]))

    return lax.fori_loop(0, cols.shape[0], body, jnp.zeros((n, m), S_a.dtype))


@jax.jit
def _pairs_dense(P: jax.Array, I: jax.Array, J: jax.Array) -> jax.Array:
    n = P.shape[0]
    si = jnp.sqrt(P[jnp.minimum(I, n - 1)])
    sj = jnp.sqrt(P[jnp.minimum(J, n - 1)])
    return jnp.sum(jnp.square(si - sj), axis=-1)


@functools.partial(jax.jit, static_argnames=("max_row_nnz",))
def _pairs_sparse(S: jsparse.BCOO, ptr: jax.Array, I: jax.Array, J: jax.Array, *,
                  max_row_nnz: int) -> jax.Array:
    si = bcoo_rows_dense(S, ptr, I, max_row_nnz)
    sj = bcoo_rows_dense(S, ptr, J, max_row_nnz)
    return jnp.sum(jnp.square(si - sj), axis=-1)


def pair_sq_distances(P_or_S, I: jax.Array, J: jax.Array, *, chunk: int | None = None,
                      max_row_nnz: int | None = None) -> jax.Array:
    """Exact ``||sqrt(P_i) - sqrt(P_j)||^2`` for the pairs ``(I[t], J[t])`` (difference form).

    Args:
      P_or_S: dense ``P [n, V]``, or a row-sorted BCOO holding ``sqrt(P)``.
      I, J: ``[k]`` integer row ids; ids ``>= n`` are padding (their value is meaningless).
      chunk: pairs per step (default: about ``2^23 / V``), bounding memory to
        ``2 * chunk * V`` entries.
      max_row_nnz: required for BCOO input.

    Returns:
      ``[k]`` squared chord distances.
    """
    V = P_or_S.shape[1]
    k = I.shape[0]
    chunk = chunk or max(1, (1 << 23) // max(V, 1))
    sparse = isinstance(P_or_S, jsparse.BCOO)
    ptr = bcoo_row_pointers(P_or_S) if sparse else None
    out = []
    for start in range(0, k, chunk):
        i, j = I[start:start + chunk], J[start:start + chunk]
        if sparse:
            out.append(_pairs_sparse(P_or_S, ptr, i, j, max_row_nnz=max_row_nnz))
        else:
            out.append(_pairs_dense(P_or_S, i, j))
    return jnp.concatenate(out) if out else jnp.zeros((0,), P_or_S.dtype)
