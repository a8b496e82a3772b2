"""Host-side settings that speed up XLA:CPU training steps (call before the first JAX call).

:func:`keep_host_memory` stops glibc from returning large freed blocks to the kernel. XLA:CPU
allocates each execution's temporary buffer (tens of MB for a small Transformer training step,
hundreds for a larger one) with ``malloc`` and frees it afterwards. glibc serves blocks above its
mmap threshold (at most 32 MiB) with a fresh ``mmap`` and unmaps them on ``free``, so every step
touches the whole buffer anew: one page fault per 4 KiB page, zero-filled by the kernel. For the
``--quick`` benchmark model (46.5 MB of temporaries) that was ~12,000 page faults and ~20 ms of
kernel time per ~85 ms step on one thread. With mmap off and trimming raised, the block is reused
from the heap on the next step. The cost: freed memory stays mapped (the peak, not more).

:func:`limit_threads` confines the process to ``n`` CPUs. The XLA:CPU client sizes its thread
pool from the process's CPU affinity (jax-ml/jax#1539); ``--xla_cpu_multi_thread_eigen=false``
alone does not stop the step from running on every core, and ``intra_op_parallelism_threads=1``
in ``XLA_FLAGS`` is not an XLA flag (without a leading ``--`` it is silently ignored).

XLA:CPU flags tried on jaxlib 0.10.2 (one thread, the ``--quick`` encoder step, same process):
``xla_cpu_use_onednn`` and ``xla_cpu_experimental_onednn_fusion_type`` (no oneDNN ops appear:
this jaxlib is built without it), ``xla_cpu_experimental_xnn_fusion_type``,
``xla_cpu_experimental_xnn_graph_fusion_mode=XNN_GRAPH_FUSION_MODE_GREEDY``,
``xla_cpu_enable_fast_math`` and ``xla_cpu_prefer_vector_width=512`` changed nothing measurable;
adding ``LIBRARY_FUSION_TYPE_DOT`` (+ eltwise/reduce) to
``xla_cpu_experimental_ynn_fusion_type`` was 15-75% slower and clearing it (Eigen for every dot)
~15% slower. The defaults (YNNPACK for individual dots) are kept; no flag is set here.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import warnings

_M_TRIM_THRESHOLD = -1  # glibc mallopt parameters (malloc.h)
_M_MMAP_MAX = -4


def keep_host_memory(trim_threshold: int = 2**31 - 1) -> bool:
    """Serve large ``malloc`` blocks from the heap and keep freed ones (glibc only).

    Sets ``M_MMAP_MAX=0`` (no per-block ``mmap``) and ``M_TRIM_THRESHOLD=trim_threshold`` (do not
    hand the freed top of the heap back to the kernel), so XLA:CPU's per-execution temporary
    buffer is reused instead of page-faulted in again on every step. Affects every library in the
    process (PyTorch too). Returns True when applied, False where glibc's ``mallopt`` is absent
    (macOS, musl, Windows).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    trim = min(int(trim_threshold), 2**31 - 1)  # an int in mallopt's signature
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, trim))


def limit_threads(n: int) -> list[int]:
    """Confine this process to ``n`` of its allowed CPUs (before JAX is imported); returns them.

    Also sets ``--xla_cpu_multi_thread_eigen=false`` in ``XLA_FLAGS`` when ``n == 1``. Must run
    before the first JAX call: the CPU client reads the affinity when it starts.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if _jax_started():
        warnings.warn("limit_threads() after JAX started its CPU client: the thread pool keeps "
                      "its size", RuntimeWarning, stacklevel=2)
    cpus = sorted(os.sched_getaffinity(0))[:n] if hasattr(os, "sched_getaffinity") else []
    if cpus:
        os.sched_setaffinity(0, cpus)
    if n == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_cpu_multi_thread_eigen" not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()
    return cpus


def _jax_started() -> bool:
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge
        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # noqa: BLE001 - a private API: unknown means "not started"
        return False
