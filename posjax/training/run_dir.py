"""The run directory of a training: its lock, its run record and its metrics log.

* :func:`lock_run_dir` -- one training per ``out_dir`` at a time (an ``fcntl`` lock the kernel
  drops when its holder dies, so a killed run never leaves a stale lock behind);
* :func:`run_record` / :func:`check_run_record` -- what identifies a run (training
  configuration, model structure and configuration, PE options, caller's extras), stored in
  ``config.json`` and compared field by field on resumption;
* :func:`rewind_log` -- cut ``metrics.jsonl`` back to the step a run resumes from, so the log
  holds exactly one row per step after any interruption.
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import socket
from typing import Any, Iterator, Mapping

import numpy as np
from flax import nnx

from posjax._json import jsonable

LOCK_FILE = "train.lock"


class RunDirLocked(RuntimeError):
    """Raised when another process is training in the same ``out_dir``."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip() or "unknown"
    except OSError:
        return "unknown"


@contextlib.contextmanager
def lock_run_dir(out_dir: str) -> Iterator[str]:
    """Hold the lock of ``out_dir`` for the duration of the block.

    The lock file ``out_dir/train.lock`` holds ``"<pid> <host>"`` of its holder. On file systems
    without ``flock`` the pid in the file decides: a dead holder's lock is taken over.

    Raises:
      RunDirLocked: another live process holds the lock (the message names its pid and host).
    """
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                holder = _holder(path).split()  # no flock here: trust a live pid on this host
                if (len(holder) == 2 and holder[1] == socket.gethostname()
                        and holder[0].isdigit() and _pid_alive(int(holder[0]))
                        and int(holder[0]) != os.getpid()):
                    raise RunDirLocked(_locked_message(out_dir, path)) from None
            else:
                raise RunDirLocked(_locked_message(out_dir, path)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # closing drops the flock


def _locked_message(out_dir: str, path: str) -> str:
    pid, _, host = _holder(path).partition(" ")
    return (f"{out_dir} is in use by another training run (pid {pid}"
            f"{' on ' + host if host else ''}, lock file {path}); wait for it to finish, stop "
            "it, or use another out_dir")


def describe_model(model: nnx.Module) -> dict[str, Any]:
    """What identifies a model's structure: its class, every dataclass-valued attribute of its
    modules (model configuration, PE options and context), every plain attribute (str, number,
    bool, dtype: ``Classifier.pooling``, ``LanguageModel.tie_embeddings``) and the shape and dtype
    of every variable, keyed by path."""
    configs: dict[str, Any] = {}
    variables: dict[str, Any] = {}
    attributes: dict[str, Any] = {}
    for path, node in nnx.iter_graph(model):
        if any(str(p).startswith("_") for p in path):
            continue
        key = "/".join(map(str, path))
        if isinstance(node, nnx.Module) and type(node).__module__.split(".")[0] != "flax":
            for name, value in vars(node).items():  # flax layers: set by the config
                plain = _plain_attribute(value)
                if not name.startswith("_") and plain is not _NOT_PLAIN:
                    attributes[f"{key}/{name}" if key else name] = plain
        if isinstance(node, nnx.Variable):
            value = node.get_value() if hasattr(node, "get_value") else node.value
            variables[key] = [type(node).__name__, list(getattr(value, "shape", ())),
                              str(getattr(value, "dtype", type(value).__name__))]
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            configs[key] = node
    return jsonable({"class": type(model).__qualname__, "configs": configs,
                     "variables": variables, "attributes": attributes})


_NOT_PLAIN = object()


def _plain_attribute(value: Any) -> Any:
    """A module attribute that shapes the computation without being a config or a variable
    (``Classifier.pooling``, ``num_classes``, ``tie_embeddings``, a dtype) as JSON, or
    ``_NOT_PLAIN`` for anything else (submodules, variables, dataclasses, callables)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.dtype):
        return str(value)
    if isinstance(value, (tuple, list)) and all(
            v is None or isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return _NOT_PLAIN


def run_record(train_config: Any, model: nnx.Module | None,
               run_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The record stored in ``config.json``: ``{"train", "model", "run"}`` as plain JSON."""
    record = jsonable({"train": train_config, "run": dict(run_config or {})})
    record["train"].pop("progress", None)  # display only
    if model is not None:
        record["model"] = describe_model(model)
    return json.loads(json.dumps(record))


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out or {prefix: {}}
    return {prefix: value}


def record_differences(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Human-readable differences ``"field: stored X, now Y"`` between two run records."""
    a, b = _flatten(dict(stored)), _flatten(dict(current))
    missing = object()
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key, missing), b.get(key, missing)
        if x != y:
            show = lambda v: "(absent)" if v is missing else json.dumps(v)
            out.append(f"{key}: stored {show(x)}, now {show(y)}")
    return out


def check_run_record(out_dir: str, record: Mapping[str, Any], *, write: bool = True) -> bool:
    """Refuse ``out_dir`` when its ``config.json`` holds another run; store ``record`` there when
    it holds none and ``write`` (process 0 of a multi-process run). Returns whether a record was
    already there. The file is replaced atomically.

    Raises:
      ValueError: the stored record differs; the message names every differing field.
    """
    path = os.path.join(out_dir, "config.json")
    if os.path.exists(path):
        try:
            with open(path) as f:
                old = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"{path} is unreadable ({e}); delete {out_dir} to start "
                             "over") from None
        diff = record_differences(old, record)
        if diff:
            shown = "; ".join(diff[:8]) + (f"; and {len(diff) - 8} more" if len(diff) > 8 else "")
            raise ValueError(f"{out_dir} holds a run with a different configuration ({shown}); "
                             f"use another out_dir, or delete {out_dir} to start over")
        return True
    if write:
        os.makedirs(out_dir, exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(record, f, indent=2, sort_keys=True)
        os.replace(tmp, path)
    return False


def logged_steps(path: str) -> int:
    """Number of complete metric rows in the log at ``path`` (0 when absent)."""
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return sum(1 for line in f if line.endswith("\n") and line.strip())


def rewind_log(path: str, step: int) -> int:
    """Keep the rows of ``path`` with ``row["step"] <= step`` (and drop a torn last line), so a
    run resumed at ``step`` appends each later step exactly once. Returns the rows dropped."""
    if not os.path.exists(path):
        return 0
    keep, dropped = [], 0
    with open(path) as f:
        for line in f:
            try:
                row = json.loads(line) if line.endswith("\n") else None
            except ValueError:
                row = None
            if isinstance(row, dict) and isinstance(row.get("step"), int) and row["step"] <= step:
                keep.append(line)
            else:
                dropped += 1
    if dropped:
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            f.writelines(keep)
        os.replace(tmp, path)
    return dropped


def last_logged_row(path: str) -> dict | None:
    """The last step row of the log at ``path`` (a row with ``step`` and ``loss``, not an
    eval or a per-member divergence row); None when there is none. A resumed run starts from it,
    so a run resumed at its end returns the metrics it logged last."""
    if not os.path.exists(path):
        return None
    last = None
    with open(path) as f:
        for line in f:
            try:
                row = json.loads(line) if line.endswith("\n") else None
            except ValueError:
                continue
            if isinstance(row, dict) and "loss" in row and "member" not in row:
                last = row
    return last

