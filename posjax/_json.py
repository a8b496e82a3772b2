"""JSON-friendly conversion shared by the training loop and the experiment scripts."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np


def jsonable(value: Any) -> Any:
    """Convert dataclasses, numpy/jax arrays and scalars to JSON-friendly values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "__array__") and not isinstance(value, (str, bytes)):
        arr = np.asarray(value)
        return arr.item() if arr.ndim == 0 else arr.tolist()
    if isinstance(value, float) and not np.isfinite(value):
        return None if np.isnan(value) else ("inf" if value > 0 else "-inf")
    return value
