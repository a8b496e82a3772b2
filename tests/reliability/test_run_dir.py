"""The run record identifies the model, resume modes, one log row per step, one run per out_dir."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from posjax.training import RunDirLocked
from posjax.training.run_dir import lock_run_dir, record_differences, rewind_log

from _tiny import BATCHES, CFG, model, run


def test_a_different_pe_in_the_same_out_dir_is_refused_naming_the_field(tmp_path):
    run(str(tmp_path), m=model(CFG))  # learned PE
    with pytest.raises(ValueError, match=r'config\.pe: stored "learned", now "rope"'):
        run(str(tmp_path), m=model(CFG.replace(pe="rope")))
    with pytest.raises(ValueError, match=r"options\.std: stored 0\.02, now 0\.5"):
        run(str(tmp_path), m=model(CFG.replace(pe_options={"std": 0.5})))
    assert run(str(tmp_path), m=model(CFG))[1].resumed_from == 8  # the same model resumes


def test_record_differences_name_nested_fields():
    a = {"train": {"steps": 4}, "model": {"configs": {"config": {"pe": "none"}}}}
    b = {"train": {"steps": 4}, "model": {"configs": {"config": {"pe": "rope"}}}, "run": {"x": 1}}
    assert record_differences(a, b) == ['model.configs.config.pe: stored "none", now "rope"',
                                        "run.x: stored (absent), now 1"]
    assert record_differences(a, a) == []


def test_resume_modes(tmp_path):
    with pytest.raises(ValueError, match="resume='must' but .* holds no checkpoint"):
        run(str(tmp_path / "a"), resume="must")
    run(str(tmp_path / "b"), resume="never")
    with pytest.raises(ValueError, match="resume='never' but .* already holds a run"):
        run(str(tmp_path / "b"), resume="never")
    assert run(str(tmp_path / "b"), resume="must")[1].resumed_from == 8
    with pytest.raises(ValueError, match="resume must be one of"):
        run(str(tmp_path / "b"), resume="yes")


def test_log_without_checkpoints_is_an_error_not_a_restart(tmp_path):
    run(str(tmp_path))
    os.rename(tmp_path / "checkpoints", tmp_path / "moved")
    with pytest.raises(ValueError, match="checkpoints is missing: refusing to start over"):
        run(str(tmp_path))
    os.makedirs(tmp_path / "checkpoints")  # present but empty: the same refusal
    with pytest.raises(ValueError, match="holds no checkpoint to resume it from"):
        run(str(tmp_path))


def _steps(out_dir):
    return [json.loads(line)["step"] for line in open(os.path.join(out_dir, "metrics.jsonl"))]


def test_log_has_one_row_per_step_after_a_crash(tmp_path):
    def crash_at_7(step):
        if step == 7:
            raise RuntimeError("simulated crash")  # no checkpoint on the way out
        return BATCHES(step)

    with pytest.raises(RuntimeError):
        run(str(tmp_path), crash_at_7, log_every=1, checkpoint_every=4)
    assert _steps(tmp_path) == [1, 2, 3, 4, 5, 6, 7]  # rows 5-7 are past the checkpoint at 4
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 8, "lo')  # a row torn by a kill
    _, result = run(str(tmp_path), log_every=1, checkpoint_every=4)
    assert result.resumed_from == 4
    assert _steps(tmp_path) == list(range(1, 9))


def test_rewind_log_keeps_rows_up_to_the_step(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"step": s}) + "\n" for s in (2, 4, 4, 6)) + '{"st')
    assert rewind_log(str(path), 4) == 2
    assert [json.loads(l)["step"] for l in open(path)] == [2, 4, 4]


_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, f"{os.getpid()} {os.uname().nodename}\\n".encode())
print("locked", flush=True)
time.sleep(60)
"""


def test_a_second_run_on_a_locked_out_dir_fails_at_once_naming_the_pid(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path / "train.lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirLocked, match=f"in use by another training run \\(pid "
                                               f"{holder.pid}"):
            run(str(tmp_path))
    finally:
        holder.kill()
        holder.wait()
    # the holder died (as after SIGKILL): its lock file remains, but the lock is free
    assert (tmp_path / "train.lock").read_text().startswith(str(holder.pid))
    assert run(str(tmp_path))[1].step == 8
    with lock_run_dir(str(tmp_path)):
        assert (tmp_path / "train.lock").read_text().startswith(str(os.getpid()))
