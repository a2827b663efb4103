"""Ctrl-C on a trainer: said at once (also while the main thread is in compiled code), a
checkpoint written that no further Ctrl-C cuts short, the run ended with a last line; during the
set-up too (a resumed run keeps its checkpoint), never a traceback."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import PREFRL_WITH_CTRL_C

from prefrl.rundir.checkpoints import checkpoints, latest_checkpoint
from prefrl.rundir.stop import graceful_stop


def _until(condition, what: str, seconds: float = 300):
    deadline = time.monotonic() + seconds  # (generous: a loaded machine starts JAX slowly)
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen"
        time.sleep(0.05)


def test_each_signal_is_said_from_its_own_thread_and_a_checkpoint_being_written_is_not_cut():
    said = []
    with graceful_stop(say=lambda m: said.append((threading.current_thread().name, m))) as stop:
        stop.doing = "a checkpoint soon, then the end"
        os.kill(os.getpid(), signal.SIGINT)
        _until(lambda: said, "the acknowledgement")
        assert stop.requested
        stop.saving = True
        os.kill(os.getpid(), signal.SIGINT)  # (no KeyboardInterrupt while it is written)
        _until(lambda: len(said) == 2, "the second acknowledgement")
        stop.saving = False
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            _until(lambda: False, "the KeyboardInterrupt", seconds=30)
        _until(lambda: len(said) == 3, "the third acknowledgement")
    assert {thread for thread, _ in said} == {"prefrl-stop"}
    assert [message for _, message in said] == [
        (
            "Ctrl-C: stopping: a checkpoint soon, then the end. Ctrl-C again stops at once, "
            "without a new checkpoint"
        ),
        "Ctrl-C: writing the checkpoint to resume from; the run ends when it is written",
        "Ctrl-C again: stopping at once, without a new checkpoint",
    ]
    assert signal.getsignal(signal.SIGINT) is not None and signal.set_wakeup_fd(-1) == -1


TRAIN = [
    "train", "--env", "toy:point-reach", "--steps", "1000000", "--warmstart-steps", "300",
    "--segment-length", "10", "--schedule.budget", "20", "--schedule.session-size", "10",
    "--schedule.interval", "300", "--reward.hidden-dims", "16", "--reward.max-epochs", "2",
    "--sac.hidden-dims", "16", "16", "--eval-interval", "1000000", "--no-video",
    "--checkpoint-interval", "1000000", "--log-interval", "100", "--buffer-size", "5000",
]  # fmt: skip


def _prefrl(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([*PREFRL_WITH_CTRL_C, *args], stdout=log.open("w"),
                            stderr=subprocess.STDOUT,
                            env={**os.environ, "JAX_PLATFORMS": "cpu"})  # fmt: skip


def _ctrl_c_once(proc: subprocess.Popen, log: Path, when) -> str:
    """Ctrl-C once `when(output)` holds; the output once the process has ended."""
    try:
        _until(lambda: when(log.read_text()) or proc.poll() is not None, "the moment")
        assert proc.poll() is None, log.read_text()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=600) == 130, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log.read_text()
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    return out


def test_ctrl_c_while_training_and_while_setting_up_a_resume(tmp_path):
    run = tmp_path / "run"
    out = _ctrl_c_once(_prefrl([*TRAIN, "--runs-dir", str(tmp_path), "--name", "run"],
                               tmp_path / "train.log"),
                       tmp_path / "train.log", lambda out: "step 600/" in out)  # fmt: skip
    # What the stop does at the moment it is said: step 600 is also a reward fit's (the fit ends
    # first), and on a loaded machine the watcher may say it once the checkpoint is under way.
    assert re.search(r"Ctrl-C: (stopping: a checkpoint once the step under way ends|stopping: the "
                     r"reward model's fit on [\d,]+ labels ends first \(it cannot stop midway\), "
                     r"then a checkpoint|writing the checkpoint to resume from)", out), out  # fmt: skip
    step = json.loads((latest_checkpoint(run) / "loop.json").read_text())["step"]
    assert step >= 600 and len(checkpoints(run)) == 1  # (its step cadence is far off)
    assert out.index("Ctrl-C: ") < out.index(f"stopped at step {step:,}: its checkpoint")
    assert f"PEBBLE on toy:point-reach: stopped at step {step:,}" in out
    assert f"\ncontinue with: prefrl train --resume {run}\n" in out

    # While the resumed run loads its checkpoint: it ends once set up, its checkpoint as it was.
    before = latest_checkpoint(run)
    out = _ctrl_c_once(_prefrl(["train", "--resume", str(run)], tmp_path / "resume.log"),
                       tmp_path / "resume.log", lambda out: "loading step_" in out)  # fmt: skip
    assert ("Ctrl-C: stopping: the run ends once set up (loading, compiling), before training: "
            "its latest checkpoint stays the one to resume from") in out  # fmt: skip
    assert f"stopped before training, at step {step:,}" in out
    assert checkpoints(run) == [before]


def test_ctrl_c_before_a_command_takes_it_ends_it_without_a_traceback(monkeypatch, capsys):
    import prefrl.cli

    def starting(args):  # (Ctrl-C while the command's modules are imported)
        raise KeyboardInterrupt

    monkeypatch.setattr(prefrl.cli, "handler", lambda name: starting)
    assert prefrl.cli.main(["train"]) == 130
    assert capsys.readouterr().err == "prefrl train: stopped\n"
