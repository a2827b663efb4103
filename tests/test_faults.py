"""Fault injection on the human labelling path (the harness of benchmarks/label_faults.py, with
a few kills): nothing acknowledged is lost, stored twice or put on another pair than the one
shown, and the trainer trains on exactly the stored pairs; a killed trainer loses little
training."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from prefrl.feedback.store import FeedbackStore, StoreError
from prefrl.rundir.checkpoints import latest_checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import label_faults  # (a benchmark script, found through the path above)


def test_killing_trainer_server_and_renderer_loses_or_misplaces_no_label(tmp_path):
    result = label_faults.run_faults(tmp_path, kills=3, seed=1, log=lambda _: None)
    assert result["trainer"] == 3 and result["server"] == 1 and result["acknowledged"] > 0, result
    assert result["lost"] == result["stored_twice"] == result["on_wrong_pair"] == 0, result
    assert result["trained_on_the_stored_pairs"], result


def _answer_first_queries(run_dir: Path, trainer: subprocess.Popen) -> int:
    """Label (as a person would, through the store) the first pairs the trainer asks."""
    deadline = time.monotonic() + 600  # (a trainer starting on a busy machine takes a while)
    while True:
        assert trainer.poll() is None, "the trainer ended"
        assert time.monotonic() < deadline, "the trainer asked nothing"
        try:  # (the store's file exists a moment before its tables: no store until then)
            store = FeedbackStore(run_dir, create=False)
        except StoreError:
            store = None
        if store is not None:
            with store:
                run = label_faults.stored_run(store, run_dir)
                open_ = [] if run is None else store.open_queries(run)
                if open_:
                    store.add_labels([q.id for q in open_], ["left"] * len(open_), "human")
                    return len(open_)
        time.sleep(0.5)


def test_a_killed_trainer_that_a_person_teaches_resumes_from_a_checkpoint_on_the_clock(tmp_path):
    """Its step cadence (1,000,000) is far off: the checkpoint comes from the clock (every 3 s
    here, every few minutes by default), so a SIGKILL loses seconds of training, not all."""
    run_dir = tmp_path / "run"
    trainer = label_faults._prefrl(
        "train", *label_faults.TRAIN, "--checkpoint-interval", "1000000", "--checkpoint-minutes",
        "0.05", "--runs-dir", str(tmp_path), "--name", "run", log=tmp_path / "trainer.log",
    )  # fmt: skip
    try:
        assert _answer_first_queries(run_dir, trainer) == 20
        deadline = time.monotonic() + 600
        while latest_checkpoint(run_dir) is None:
            assert trainer.poll() is None and time.monotonic() < deadline, "no checkpoint came"
            time.sleep(0.5)
    finally:
        trainer.send_signal(signal.SIGKILL)
        trainer.wait()
    step = json.loads((latest_checkpoint(run_dir) / "loop.json").read_text())["step"]
    assert 300 <= step < 1_000_000
    resumed = subprocess.run(
        [sys.executable, "-m", "prefrl", "train", "--resume", str(run_dir), "--steps",
         str(step + 100), "--no-progress"],
        env={**os.environ, "JAX_PLATFORMS": "cpu"}, capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"resuming from step_{step:09d} (step {step:,} of {step + 100:,})" in resumed.stdout


def test_a_killed_frames_run_that_a_person_teaches_resumes_from_a_checkpoint_on_the_clock(tmp_path):
    """The same for a run on frames: once the person's first labels are in, the clock (every 3 s
    here) checkpoints the agent long before its step cadence (1,000,000)."""
    run_dir = tmp_path / "run"
    trainer = label_faults._prefrl(
        "frames", "--env", "movingdot", "--teacher.preset", "terminal", "--steps", "10000000",
        "--segment-length", "5", "--initial-labels", "4", "--labels", "4", "--pretrain-steps",
        "2", "--pool-size", "10", "--a2c.n-envs", "4", "--a2c.n-steps", "5",
        "--checkpoint-interval", "1000000", "--checkpoint-minutes", "0.05", "--eval-interval",
        "1000000", "--no-video", "--no-progress", "--runs-dir", str(tmp_path), "--name", "run",
        log=tmp_path / "trainer.log",
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while "waiting: 4 label(s) to go" not in (tmp_path / "trainer.log").read_text():
            assert trainer.poll() is None and time.monotonic() < deadline, "no wait was said"
            time.sleep(0.5)  # (what it waits for is said, as prefrl train says it)
        assert _answer_first_queries(run_dir, trainer) == 4
        while not _agent_checkpoint(run_dir):
            assert trainer.poll() is None, (tmp_path / "trainer.log").read_text()
            assert time.monotonic() < deadline, "no checkpoint came"
            time.sleep(0.5)
    finally:
        trainer.send_signal(signal.SIGKILL)
        trainer.wait()
    step = json.loads((latest_checkpoint(run_dir) / "loop.json").read_text())["step"]
    assert 0 < step < 1_000_000


def _agent_checkpoint(run_dir: Path) -> bool:
    """Whether the run has a checkpoint of its agent's steps (after the pre-training's)."""
    latest = latest_checkpoint(run_dir)
    return latest is not None and json.loads((latest / "loop.json").read_text())["step"] > 0
