"""The outer loop shared by :func:`posjax.training.train` and
:func:`posjax.training.train_ensemble`.

* :func:`open_run` -- the run directory: its lock, the run record compared on resumption, the
  resume mode, the restore from the latest verified checkpoint (falling back to the previous valid
  one) and ``metrics.jsonl`` rewound to the restored step;
* :func:`drive` -- the loop skeleton: one step at a time, flushing the queued step outputs at log,
  checkpoint and eval boundaries, saving on schedule, at the end and on SIGTERM/Ctrl-C.

What each caller owns is the step itself and what a flush does with its outputs (a logged row, a
halt on divergence or on a bad input). See ``docs/reliability.md`` for the guarantees.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from typing import Any, Callable, Iterator, Mapping

from posjax._json import jsonable
from posjax.training.checkpoint import Checkpointer
from posjax.training.run_dir import (check_run_record, last_logged_row, lock_run_dir,
                                     logged_steps, rewind_log)

RESUME_MODES = ("auto", "never", "must")


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Turn SIGTERM into KeyboardInterrupt while training (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def check_resume_mode(resume: str, out_dir: str | None) -> None:
    """Refuse an unknown ``resume`` mode, or ``"must"`` without an ``out_dir``."""
    if resume not in RESUME_MODES:
        raise ValueError(f"resume must be one of {RESUME_MODES}, got {resume!r}")
    if out_dir is None and resume == "must":
        raise ValueError("resume='must' needs an out_dir")


class Run:
    """An opened run directory (or none: every method then does nothing).

    Attributes:
      ckpt: the :class:`Checkpointer` of ``out_dir/checkpoints`` (None without ``out_dir``).
      start: the step the run starts from (the restored checkpoint's, else 0).
      resumed: the restored step (None: fresh run).
      last_row: the last step row of ``metrics.jsonl`` up to ``start`` (None: fresh run), the
        metrics a run resumed at its end returns.
    """

    def __init__(self, ckpt: Checkpointer | None = None, log_path: str | None = None,
                 start: int = 0, main: bool = True):
        self.ckpt, self.start = ckpt, start
        self.resumed = start if ckpt is not None and start else None
        self._log = None
        self.last_row = None  # the last step row logged before `start` (a resumed run)
        if log_path is not None and main:
            rewind_log(log_path, start)
            self._log = open(log_path, "a")
        if log_path is not None and self.resumed:
            self.last_row = last_logged_row(log_path)

    def write(self, row: Mapping[str, Any]) -> None:
        """Append one JSON row to ``metrics.jsonl`` (process 0 only)."""
        if self._log is not None:
            self._log.write(json.dumps(jsonable(dict(row))) + "\n")
            self._log.flush()

    def save(self, step: int, state: Any) -> None:
        """Checkpoint ``state`` as ``step`` (not step 0, not a step already saved)."""
        if self.ckpt is not None and step > 0 and self.ckpt.latest_step() != step:
            self.ckpt.save(step, state)

    def where(self, step: int) -> str:
        """Where the state after ``step`` lives, for error messages."""
        if self.ckpt is not None:
            return f"; last good checkpoint: step {step} in {self.ckpt.directory}"
        return f"; the model holds the state after step {step}"

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.ckpt is not None:
            self.ckpt.close()


def _check_dir(out_dir: str, record: Mapping[str, Any], resume: str, main: bool, keep: int
               ) -> tuple[Checkpointer, str]:
    """Check ``out_dir`` against ``record`` and ``resume``; returns its checkpointer and log
    path."""
    log_path = os.path.join(out_dir, "metrics.jsonl")
    ck_dir = os.path.join(out_dir, "checkpoints")
    had_ck_dir = os.path.isdir(ck_dir)
    rows = logged_steps(log_path)
    if resume == "never" and (rows or os.path.exists(os.path.join(out_dir, "config.json"))
                              or (had_ck_dir and os.listdir(ck_dir))):
        raise ValueError(f"resume='never' but {out_dir} already holds a run; use another "
                         "out_dir, delete it, or pass resume='auto'")
    check_run_record(out_dir, record, write=main)
    if rows and not had_ck_dir:
        raise ValueError(f"{log_path} logs a run but {ck_dir} is missing: refusing to start "
                         f"over silently; restore the checkpoints or delete {out_dir}")
    return Checkpointer(ck_dir, keep=keep), log_path


@contextlib.contextmanager
def open_run(out_dir: str | None, record: Callable[[], Mapping[str, Any]], state: Any, *,
             resume: str, keep: int, main: bool) -> Iterator[tuple[Run, Any]]:
    """Open ``out_dir`` for a run whose state looks like ``state``; yields ``(run, state)``
    with ``state`` restored from the latest valid checkpoint when there is one.

    Args:
      out_dir: the run directory, or None (no files: a :class:`Run` that does nothing).
      record: ``() -> run record`` (called only with an ``out_dir``), compared with the stored
        ``config.json`` by :func:`posjax.training.run_dir.check_run_record`.
      state: the live state pytree (restored leaves take the shardings of its leaves).
      resume: "auto", "must" or "never" (see :func:`posjax.training.train`).
      keep: checkpoints to keep.
      main: whether this is process 0 (lock, run record and log).

    Raises:
      ValueError: another run's record (fields named), a log without checkpoints, or
        ``out_dir`` contradicts ``resume``.
      posjax.training.run_dir.RunDirLocked: another process is training in ``out_dir``.
    """
    check_resume_mode(resume, out_dir)
    with contextlib.ExitStack() as stack:
        if out_dir is None:
            yield Run(), state
            return
        if main:
            stack.enter_context(lock_run_dir(out_dir))
        ckpt, log_path = _check_dir(out_dir, record(), resume, main, keep)
        try:
            start = 0
            if ckpt.all_steps():
                start, state = ckpt.restore(state)
            elif resume == "must":
                raise ValueError(f"resume='must' but {ckpt.directory} holds no checkpoint")
            elif logged_steps(log_path):
                raise ValueError(f"{log_path} logs a run but {ckpt.directory} holds no "
                                 f"checkpoint to resume it from: refusing to start over "
                                 f"silently; delete {out_dir} to start over")
            run = Run(ckpt, log_path, start, main)
        except BaseException:
            ckpt.close()
            raise
        stack.callback(run.close)  # closed before the lock is released
        yield run, state


def drive(run: Run, config: Any, *, step: Callable[[int], None], flush: Callable[[Any], None],
          save: Callable[[int], None], evaluate: Callable[[int], None],
          publish: Callable[[], None], halts: tuple[type[BaseException], ...] = (),
          desc: str = "train", main: bool = True) -> int:
    """Run steps ``run.start .. config.steps - 1``; returns the number of completed steps.

    Args:
      run: the opened run directory (:func:`open_run`).
      config: the :class:`posjax.training.TrainConfig` (``steps``, ``log_every``,
        ``checkpoint_every``, ``eval_every``, ``progress``).
      step: ``s -> None`` runs step ``s`` (dispatch only; its outputs are queued by the caller).
      flush: ``bar -> None`` handles the queued outputs (log row, progress postfix); it may
        raise one of ``halts`` after saving the last good state.
      save: ``s -> None`` checkpoints the current state as step ``s``.
      evaluate: ``s -> None`` runs the evaluation after step ``s``.
      publish: ``() -> None`` writes the current state into the caller's model(s).
      halts: exceptions a flush raises to stop the run (the state is published first).
      desc: progress-bar label.
      main: whether this is process 0 (progress bar, interrupt message).

    Raises:
      KeyboardInterrupt: on SIGTERM/Ctrl-C, after flushing, saving and publishing.
    """
    from tqdm.auto import tqdm

    s = run.start
    bar = tqdm(total=config.steps, initial=s, desc=desc, disable=not (config.progress and main),
               leave=False, dynamic_ncols=True)
    try:
        with sigterm_as_interrupt():
            while s < config.steps:
                step(s)
                s += 1
                bar.update(1)
                boundary = s % config.log_every == 0 or s == config.steps
                ck = config.checkpoint_every and s % config.checkpoint_every == 0
                ev = config.eval_every and s % config.eval_every == 0
                if boundary or ck or ev:
                    flush(bar)
                if ck:
                    save(s)
                if ev and s != config.steps:
                    evaluate(s)
        flush(bar)
        save(s)
        publish()
        evaluate(s)
    except halts:
        publish()
        raise
    except KeyboardInterrupt:
        # the state is the one after `s` completed steps (or the last good one, saved by flush)
        try:
            flush(bar)
            save(s)
        finally:
            publish()
        if run.ckpt is not None and main:
            print(f"\ninterrupted at step {s}; checkpoint saved in {run.ckpt.directory}; "
                  "rerun the same command to resume", flush=True)
        raise
    finally:
        bar.close()
    return s
