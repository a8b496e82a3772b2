"""posjax.cpu: host settings for XLA:CPU training (thread pinning, keeping freed host memory).

The settings change the whole process, so they are exercised in a fresh interpreter.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import posjax.cpu as pcpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_SCRIPT = r"""
import json, os, warnings
import posjax.cpu as c
kept = c.keep_host_memory()
cpus = c.limit_threads(1)
affinity = sorted(os.sched_getaffinity(0))
import jax, jax.numpy as jnp
total = float(jnp.arange(10.0).sum())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    c.limit_threads(1)  # JAX has started: the thread pool keeps its size
print(json.dumps({"kept": kept, "cpus": cpus, "affinity": affinity, "total": total,
                  "flags": os.environ.get("XLA_FLAGS", ""),
                  "late_warning": [str(w.message) for w in caught]}))
"""


def test_limit_threads_rejects_fewer_than_one():
    with pytest.raises(ValueError, match="n must be >= 1"):
        pcpu.limit_threads(0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and sched_setaffinity")
def test_settings_in_a_fresh_process():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["kept"] is True  # glibc mallopt applied
    assert len(res["cpus"]) == 1 and res["affinity"] == res["cpus"]
    assert "--xla_cpu_multi_thread_eigen=false" in res["flags"]
    assert res["total"] == 45.0  # JAX still computes on the pinned CPU
    assert any("after JAX started" in m for m in res["late_warning"])
