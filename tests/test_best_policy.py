"""Keeping a run's best-evaluated policy (`prefrl.training.best`) on a fake loop: which
evaluations replace the kept one, what a resumed run starts from, what is never kept."""

from __future__ import annotations

import json

import numpy as np
import pytest

from prefrl.rundir.checkpoints import begin_checkpoint, commit_checkpoint
from prefrl.training.best import BestPolicy, read_best
from prefrl.training.evaluate import EvalResult
from prefrl.training.loop import TrainingLoop
from prefrl.training.policies import load_policy
from prefrl.training.result import TrainResult


class FakeLoop:
    """What `BestPolicy` uses of a loop: its run directory, its state, and the writing."""

    check_savable = TrainingLoop.check_savable

    def __init__(self, run_dir):
        self.run_dir, self.step = run_dir, 0
        self.state = {"w": np.zeros(3, np.float32)}

    def write_policy(self, folder):
        (folder / "weights.json").write_text(json.dumps(self.state["w"].tolist()))


def _eval(returns, success=None) -> EvalResult:
    returns = np.asarray(returns, np.float64)
    done = None if success is None else np.asarray(success, bool)
    return EvalResult(returns, np.full(len(returns), 10), success=done)


def _kept(run_dir) -> list[float]:
    best = read_best(run_dir)
    (folder,) = (best.path / "checkpoints").glob("step_*")
    return json.loads((folder / "weights.json").read_text())


def test_a_better_or_equal_evaluation_replaces_the_kept_policy_a_worse_one_does_not(tmp_path):
    loop = FakeLoop(tmp_path)
    best = BestPolicy(loop)
    for step, returns, w in [(100, [1, 3], 1), (200, [0, 2], 2), (300, [2, 2], 3), (400, [5], 4)]:
        loop.state["w"][:] = w
        best.consider(step, _eval(returns))
        if step == 200:
            assert read_best(tmp_path).step == 100 and _kept(tmp_path) == [1, 1, 1]
        if step == 300:  # (equal to the best: the newer is kept)
            assert read_best(tmp_path).step == 300 and _kept(tmp_path) == [3, 3, 3]
    assert read_best(tmp_path).step == 400 and read_best(tmp_path).mean == 5
    assert _kept(tmp_path) == [4, 4, 4]
    assert len(list((tmp_path / "best" / "checkpoints").glob("step_*"))) == 1
    # A resumed run goes on from the kept one: a lower evaluation leaves it.
    again = BestPolicy(loop)
    again.consider(500, _eval([4.5]))
    assert read_best(tmp_path).step == 400


def test_success_decides_before_the_return_and_the_return_breaks_its_ties(tmp_path):
    loop = FakeLoop(tmp_path)
    best = BestPolicy(loop)
    best.consider(100, _eval([9, 9], success=[False, True]))
    best.consider(200, _eval([1, 1], success=[True, True]))  # more success, less return
    assert read_best(tmp_path).step == 200 and read_best(tmp_path).success_rate == 1.0
    best.consider(300, _eval([0, 0], success=[True, True]))  # as successful, less return
    best.consider(400, _eval([2, 2], success=[True, True]))
    assert read_best(tmp_path).step == 400 and read_best(tmp_path).mean == 2.0


def test_a_policy_with_nan_or_a_nan_evaluation_is_never_kept(tmp_path):
    loop = FakeLoop(tmp_path)
    best = BestPolicy(loop)
    best.consider(100, _eval([np.nan]))
    assert read_best(tmp_path) is None
    loop.state["w"][0] = np.nan
    best.consider(200, _eval([3.0]))
    assert read_best(tmp_path) is None
    loop.state["w"][0] = 0.0
    best.consider(300, _eval([3.0]))
    assert read_best(tmp_path).step == 300


def test_the_summary_names_the_best_policy_where_it_beats_the_last(tmp_path):
    loop = FakeLoop(tmp_path)
    BestPolicy(loop).consider(480, _eval([1, 1], success=[True, False]))
    best = read_best(tmp_path)
    worse = TrainResult(tmp_path, 500, _eval([0, 0], success=[False, False]), best_eval=best,
                        title="RFCL on x")  # fmt: skip
    assert f"best success 0.50 at step 480 (its policy: {tmp_path / 'best'})" in worse.summary()
    same = TrainResult(tmp_path, 480, _eval([1, 1], success=[True, False]), best_eval=best)
    assert "best" not in same.summary().replace(str(tmp_path), "")


def test_loading_the_best_policy_of_a_run_that_keeps_none_says_so(tmp_path):
    tmp = begin_checkpoint(tmp_path, 100)
    (tmp / "agent.msgpack").write_bytes(b"")
    commit_checkpoint(tmp)
    with pytest.raises(FileNotFoundError, match="keeps no best-evaluated policy"):
        load_policy(tmp_path / "best")
    with pytest.raises(FileNotFoundError, match="expected a run directory or a checkpoint"):
        load_policy(tmp_path / "elsewhere" / "best")
