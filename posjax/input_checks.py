"""Range checks of integer model inputs (token ids, table positions, labels), eager or jitted.

A value outside its range (a token id ``>= vocab_size``, a position past a learned table, a
label ``>= num_classes``) would otherwise become a NaN or silently wrap to another row. Every such
input goes through :func:`check_range`:

* with concrete values (eager calls) it raises a ``ValueError`` naming the offending value and
  the limit, e.g. ``token id 99 >= vocab_size 16``;
* with traced values (inside ``jax.jit``) it cannot raise, so it records one row
  ``[kind, min, max, limit]`` (int32) into the innermost :func:`collect` block, if any. The
  training step (:func:`posjax.training.train`) and ``evaluate_classifier`` collect these rows,
  return them next to the loss and raise the same message on the host (with the step or batch
  added). The cost is two reductions over the checked array per check.

Outside a :func:`collect` block a traced check does nothing; the model then gives the
documented fallback (NaN rows for bad token ids, see :class:`posjax.models.Transformer`).
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np

# (what, limit name) of every kind of check seen so far; a row stores the index as a constant
_KINDS: list[tuple[str, str]] = []
_ROWS: contextvars.ContextVar[list | None] = contextvars.ContextVar("posjax_input_rows",
                                                                   default=None)


def _kind(what: str, limit_name: str) -> int:
    key = (what, limit_name)
    if key not in _KINDS:
        _KINDS.append(key)
    return _KINDS.index(key)


def describe(what: str, limit_name: str, low: int, high: int, limit: int) -> str | None:
    """The error message for a checked range ``[low, high]`` against ``[0, limit)`` (None: fine)."""
    if high >= limit:
        return f"{what} {high} >= {limit_name} {limit}"
    if low < 0:
        return f"{what} {low} < 0 (valid: 0 <= {what} < {limit_name} {limit})"
    return None


def check_range(values: jax.Array, limit: int, *, what: str, limit_name: str) -> None:
    """Check ``0 <= values < limit``: raise now (concrete values) or record (traced values).

    Args:
      values: integer (or float) array of ids or positions, any shape.
      limit: exclusive upper bound (a Python int).
      what: the name of one value in messages ("token id", "position").
      limit_name: the name of the bound in messages ("vocab_size", "max_len").

    Raises:
      ValueError: concrete values out of range, e.g. ``token id 99 >= vocab_size 16``.
    """
    if isinstance(values, jax.core.Tracer):
        rows = _ROWS.get()
        if rows is not None and values.size:
            low = jnp.floor(jnp.min(values)).astype(jnp.int32)
            high = jnp.ceil(jnp.max(values)).astype(jnp.int32)
            rows.append(jnp.stack([jnp.int32(_kind(what, limit_name)), low, high,
                                   jnp.int32(limit)]))
        return
    values = np.asarray(values)
    if values.size == 0:
        return
    low, high = int(np.floor(values.min())), int(np.ceil(values.max()))
    message = describe(what, limit_name, low, high, limit)
    if message is not None:
        raise ValueError(message)


@contextlib.contextmanager
def collect() -> Iterator[list]:
    """Collect the rows of traced :func:`check_range` calls made inside the block.

    Use it inside the traced function and return ``stack_rows(rows)`` as an output; check it on
    the host with :func:`first_error`.
    """
    rows: list = []
    token = _ROWS.set(rows)
    try:
        yield rows
    finally:
        _ROWS.reset(token)


def stack_rows(rows: list) -> jax.Array:
    """The collected rows as one int32 array ``[n, 4]`` (``[0, 4]`` when nothing was checked)."""
    return jnp.stack(rows) if rows else jnp.zeros((0, 4), jnp.int32)


def rows_valid(rows: jax.Array) -> jax.Array:
    """Scalar bool (traceable): every recorded range lies inside ``[0, limit)``."""
    return jnp.all((rows[:, 1] >= 0) & (rows[:, 2] < rows[:, 3]))


def first_error(rows) -> str | None:
    """The message of the first out-of-range row of a fetched ``[n, 4]`` array (None: valid)."""
    for kind, low, high, limit in np.asarray(rows).reshape(-1, 4).tolist():
        message = describe(*_KINDS[kind], low, high, limit)
        if message is not None:
            return message
    return None
