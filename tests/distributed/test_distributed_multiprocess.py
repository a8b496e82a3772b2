"""Sharded training and checkpoints across two real JAX processes on this machine.

Two worker processes, each with 2 fake CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=2``), join one run through
:func:`posjax.distributed.initialize` (a coordinator on ``127.0.0.1``) and exchange data with
JAX's CPU cross-process collectives (gloo), so the global mesh has 4 devices, 2 per process.
Each worker runs this file as a script and prints one JSON line of results; the tests assert on
them. The pair is launched (with a time limit) up to three times:

* launch 1: an uninterrupted tensor-parallel run (``make_mesh(data=2, model=2)``: the data axis
  spans the two processes, the model axis the devices of one process) and, in another
  directory, the same run interrupted at step 3 (``KeyboardInterrupt`` from ``batches(3)`` in
  both processes);
* launch 2: the interrupted run resumed from its step-3 checkpoint;
* launch 3 (the last test only): a run whose ``model`` axis spans the two processes (each process
  holds, saves and restores only half of every split weight), started once more to restore its
  final checkpoint.

Final parameters are gathered with ``multihost_utils.process_allgather`` and written by each
process to an ``.npz`` file, then compared here with a run of the same configuration in this
process on one device (tolerance 1e-5: the gradient all-reduce sums in another order; see
:func:`_close_to_reference` for the one exception), and step by step through the losses in
``metrics.jsonl``.

The test skips only when this JAX has no CPU cross-process collectives (no gloo), which a worker
detects explicitly before joining and reports.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

# Launches of two JAX processes: about 40 s for the first four tests, 60 s for all, on 2 CPU cores
pytestmark = pytest.mark.slow

from _sharded_run import tp_train  # noqa: E402  (tests/distributed on sys.path)
from posjax.training.run_dir import LOCK_FILE  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOL = 1e-5
STEPS, EVERY, INTERRUPT = 6, 2, 3
LAUNCH_TIMEOUT = 300  # seconds for one launch of both workers
QUERY = "transformer/blocks/0/attn/query/kernel"
KEY_BIAS = "attn/key/bias"


# --- the run (workers and the single-device reference) -----------------------------------------
def _train(out_dir: str | None, mesh, interrupt_at: int | None = None):
    """The shared tensor-parallel run, 6 steps, checkpoints every 2 steps (all kept)."""
    return tp_train(out_dir, mesh, interrupt_at, steps=STEPS, every=EVERY, keep=10)


def _gloo_missing() -> str:
    """Why this JAX cannot run CPU collectives across processes ("" when it can)."""
    import jax

    try:
        jax.config.jax_cpu_collectives_implementation
    except AttributeError:
        return f"jax {jax.__version__} has no jax_cpu_collectives_implementation option"
    try:
        from jax._src.lib import _jax
    except ImportError:  # another layout of jaxlib: let initialize() decide
        return ""
    if not hasattr(_jax, "make_gloo_tcp_collectives"):
        return f"the jaxlib of jax {jax.__version__} on {sys.platform} has no gloo collectives"
    return ""


def _report(name: str, tmp: str, result, params: dict) -> dict:
    """Gather ``params`` to every process, save them as ``<name>_<process>.npz``, describe
    the run and the layout of the query kernel."""
    import jax
    from jax.experimental import multihost_utils

    full = multihost_utils.process_allgather(params, tiled=True)
    np.savez(os.path.join(tmp, f"{name}_{jax.process_index()}.npz"),
             **{k.replace("/", "|"): np.asarray(v) for k, v in full.items()})
    q = params[QUERY]
    return {"step": result.step, "resumed_from": result.resumed_from,
            "loss": result.metrics.get("loss"),
            "query_spec": [a for a in q.sharding.spec],
            "query_fully_addressable": bool(q.is_fully_addressable),
            "query_columns": sorted({(s.index[1].start or 0, s.index[1].stop or q.shape[1])
                                     for s in q.addressable_shards})}


def worker(launch: int, pid: int, port: int, tmp: str) -> dict:
    import jax

    reason = _gloo_missing()
    if reason:
        return {"skip": reason}
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    from posjax import distributed as dist

    joined = dist.initialize(f"127.0.0.1:{port}", 2, pid)
    mesh = dist.make_mesh(2, 2)
    out: dict = {"joined": joined, "process": jax.process_index(),
                 "processes": jax.process_count(), "devices": jax.device_count(),
                 "local_devices": jax.local_device_count(), "main": dist.is_main_process(),
                 "mesh_processes": [[d.process_index for d in row] for row in mesh.devices]}
    if launch == 1:
        out["full"] = _report("full", tmp, *_train(os.path.join(tmp, "full"), mesh))
        try:
            _train(os.path.join(tmp, "run"), mesh, interrupt_at=INTERRUPT)
            out["interrupted"] = False
        except KeyboardInterrupt:
            out["interrupted"] = True
    elif launch == 2:
        out["resumed"] = _report("resumed", tmp, *_train(os.path.join(tmp, "run"), mesh))
    else:  # the model axis across the processes: each holds half of every split weight
        d = jax.devices()
        across = dist.make_mesh(2, 2, devices=[d[0], d[2], d[1], d[3]])
        out["across_mesh_processes"] = [[x.process_index for x in row] for row in across.devices]
        out["across"] = _report("across", tmp, *_train(os.path.join(tmp, "across"), across))
        # the finished run again: nothing left to train, its last checkpoint (each process
        # wrote and now reads only its half of the split weights) is restored into the model
        out["across_again"] = _report("across_again", tmp,
                                      *_train(os.path.join(tmp, "across"), across))
    return out


# --- launching the pair -------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(launch: int, tmp: str) -> tuple:
    """Start both workers of ``launch``."""
    env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip(),
               JAX_PLATFORMS="cpu", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    port, t0 = _free_port(), time.perf_counter()
    logs = [open(os.path.join(tmp, f"launch{launch}_worker{i}.log"), "w+") for i in range(2)]
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(launch),
                               str(i), str(port), tmp], env=env, cwd=ROOT, stdout=logs[i],
                              stderr=subprocess.STDOUT, text=True) for i in range(2)]
    return launch, procs, logs, t0


def _finish(started: tuple) -> list[dict]:
    """Wait for the workers (killed LAUNCH_TIMEOUT s after their start, or as soon as the other
    one fails); their JSON results, process 0 first. Skips the test when the workers report
    that gloo is missing."""
    launch, procs, logs, t0 = started
    try:  # wait until both are done, one has failed (its peer would wait for it) or time is up
        while (any(p.poll() is None for p in procs) and not any(p.poll() for p in procs)
               and time.perf_counter() - t0 < LAUNCH_TIMEOUT):
            time.sleep(0.1)
    finally:
        for p in procs:  # a worker still running is stopped
            if p.poll() is None:
                p.kill()
                p.wait()
    texts = []
    for f in logs:
        f.seek(0)
        texts.append(f.read())
        f.close()
    codes = [p.returncode for p in procs]
    assert codes == [0, 0], (  # both outputs: the root cause may be in either one
        f"launch {launch}: workers exited with {codes} (negative: killed, after "
        f"{LAUNCH_TIMEOUT} s or when the other failed)\n"
        + "\n".join(f"--- worker {i}:\n{t[-3000:]}" for i, t in enumerate(texts)))
    results = [json.loads([ln for ln in t.splitlines() if ln.startswith("{")][-1]) for t in texts]
    skips = sorted({r["skip"] for r in results if "skip" in r})
    if skips:
        pytest.skip("no CPU cross-process collectives: " + "; ".join(skips))
    return results


def _load(tmp: str, name: str, process: int) -> dict:
    with np.load(os.path.join(tmp, f"{name}_{process}.npz")) as z:
        return {k.replace("|", "/"): z[k] for k in z.files}


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("dist_multiprocess"))


def _reference(tmp: str) -> dict:
    """The same run in this process on one CPU device: final parameters and per-step losses."""
    import jax

    out_dir = os.path.join(tmp, "reference")
    with jax.default_device(jax.devices("cpu")[0]):
        _, params = _train(out_dir, None)
    return {"params": {k: np.asarray(v) for k, v in params.items()},
            "losses": _metrics(os.path.join(out_dir, "metrics.jsonl"), "loss")}


@pytest.fixture(scope="module")
def runs(tmp) -> dict:
    """Launches 1 and 2, and the one-device reference (computed while launch 1 runs)."""
    first = _start(1, tmp)
    try:
        reference = _reference(tmp)
    finally:
        first = _finish(first)
    return {"first": first, "second": _finish(_start(2, tmp)), "reference": reference}


def _close_to_reference(params: dict, reference: dict) -> None:
    """Every parameter within TOL of the one-device run, except the attention key bias: its
    exact gradient is zero (it adds the same score to every key of a query, which the softmax
    ignores), so Adam turns round-off of ~1e-9 into steps of ~learning rate whose sign depends
    on the summation order. It is checked in the loss, which it does not change."""
    ref = reference["params"]
    assert sorted(params) == sorted(ref)
    diffs = {k: float(np.max(np.abs(params[k] - ref[k]))) for k in ref if not k.endswith(KEY_BIAS)}
    assert max(diffs.values()) <= TOL, diffs


def _metrics(path: str, field: str = "step") -> list:
    with open(path) as f:
        return [json.loads(line)[field] for line in f if line.strip()]


def _checkpoint_steps(path: str) -> list[int]:
    return sorted(int(n) for n in os.listdir(path) if n.isdigit())


def _check_run_dir(run_dir: str, saved: list[int]) -> None:
    """Process 0 alone wrote the run record and one metrics row per step; every checkpoint
    step is there, each with the shards of both processes."""
    assert sorted(os.listdir(run_dir)) == sorted(["checkpoints", "config.json", "metrics.jsonl",
                                                  LOCK_FILE])
    assert _metrics(os.path.join(run_dir, "metrics.jsonl")) == list(range(1, STEPS + 1))
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["train"]["steps"] == STEPS
    assert _checkpoint_steps(os.path.join(run_dir, "checkpoints")) == saved
    for step in saved:
        item = os.path.join(run_dir, "checkpoints", str(step), "default")
        assert {"ocdbt.process_0", "ocdbt.process_1"} <= set(os.listdir(item))


# --- the tests ----------------------------------------------------------------------------------
def test_two_processes_form_one_four_device_mesh(runs):
    for launch in ("first", "second"):
        for i, r in enumerate(runs[launch]):
            assert r["joined"] and r["process"] == i and r["processes"] == 2
            assert r["devices"] == 4 and r["local_devices"] == 2
            assert r["main"] == (i == 0)
            assert r["mesh_processes"] == [[0, 0], [1, 1]]  # data axis across the processes


def test_tensor_parallel_run_matches_one_device(runs, tmp):
    for i, r in enumerate(runs["first"]):
        full = r["full"]
        assert full["step"] == STEPS and full["resumed_from"] is None
        assert full["query_spec"] == [None, "model"] and not full["query_fully_addressable"]
        assert full["query_columns"] == [[0, 8], [8, 16]]  # split over this process's devices
        _close_to_reference(_load(tmp, "full", i), runs["reference"])
    # both processes gathered the same global parameters
    a, b = _load(tmp, "full", 0), _load(tmp, "full", 1)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    losses = _metrics(os.path.join(tmp, "full", "metrics.jsonl"), "loss")
    np.testing.assert_allclose(losses, runs["reference"]["losses"], rtol=TOL, atol=TOL)


def test_interrupted_and_resumed_run_matches_uninterrupted(runs, tmp):
    assert all(r["interrupted"] for r in runs["first"])
    full = _load(tmp, "full", 0)
    for i, r in enumerate(runs["second"]):
        resumed = r["resumed"]
        assert resumed["resumed_from"] == INTERRUPT and resumed["step"] == STEPS
        assert resumed["query_spec"] == [None, "model"]
        back = _load(tmp, "resumed", i)
        assert all(np.array_equal(back[k], full[k]) for k in full)  # bit-identical on CPU
    assert (_metrics(os.path.join(tmp, "run", "metrics.jsonl"), "loss")
            == _metrics(os.path.join(tmp, "full", "metrics.jsonl"), "loss"))


def test_only_process_zero_logs_and_checkpoints_hold_the_steps(runs, tmp):
    _check_run_dir(os.path.join(tmp, "full"), [2, 4, 6])
    _check_run_dir(os.path.join(tmp, "run"), [2, INTERRUPT, 4, 6])


def test_model_axis_across_processes(runs, tmp):
    """Each process holds, saves and restores only half of every split weight."""
    reference, results = runs["reference"], _finish(_start(3, tmp))
    for i, r in enumerate(results):
        assert r["across_mesh_processes"] == [[0, 1], [0, 1]]
        across = r["across"]
        assert across["step"] == STEPS and across["query_spec"] == [None, "model"]
        assert across["query_columns"] == [[8 * i, 8 * i + 8]]  # this process: half the columns
        final = _load(tmp, "across", i)
        _close_to_reference(final, reference)
        again = r["across_again"]
        assert again["resumed_from"] == STEPS and again["step"] == STEPS
        assert again["query_columns"] == [[8 * i, 8 * i + 8]]
        restored = _load(tmp, "across_again", i)
        assert all(np.array_equal(restored[k], final[k]) for k in final)
    _check_run_dir(os.path.join(tmp, "across"), [2, 4, 6])
    losses = _metrics(os.path.join(tmp, "across", "metrics.jsonl"), "loss")
    np.testing.assert_allclose(losses, reference["losses"], rtol=TOL, atol=TOL)


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")
    if sys.argv[1:2] != ["--worker"]:
        sys.exit("usage: test_distributed_multiprocess.py --worker LAUNCH PROCESS PORT TMP")
    launch, pid, port, tmp = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    print(json.dumps(worker(launch, pid, port, tmp)), flush=True)
