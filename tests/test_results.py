"""One result type for every learner (`TrainResult`: its summary line, repr and policy) and the
callbacks `train(callback=...)` calls (`TrainEvent`): a custom logger, early stops."""

import json
from pathlib import Path

import numpy as np
import pytest

from prefrl import (
    PreferenceLearner,
    RewardConfig,
    RLLearner,
    SACConfig,
    ScheduleConfig,
    TrainEvent,
    TrainResult,
)
from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.rundir.metrics import read_metrics

RL = {
    "steps": 900, "warmstart_steps": 200, "eval_interval": 300, "eval_episodes": 2,
    "checkpoint_interval": 900, "log_interval": 300, "buffer_size": 2_000, "video": False,
    "progress": False, "sac": SACConfig(hidden_dims=(16, 16), batch_size=32),
}  # fmt: skip


def test_a_run_ends_with_its_summary_line_and_returns_it_with_its_policy(tmp_path, capsys):
    result = RLLearner("toy:point-reach", runs_dir=tmp_path, name="rl", **RL).train()
    assert isinstance(result, TrainResult)
    assert (result.steps, result.interrupted, result.labels, result.agreement) == (
        900, False, None, None)  # fmt: skip
    evals = [r for r in read_metrics(result.run_dir) if "eval/return_mean" in r]
    assert result.final_eval.mean == pytest.approx(evals[-1]["eval/return_mean"])
    assert result.final_eval.std == pytest.approx(evals[-1]["eval/return_std"])
    summary = result.summary()
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == summary == str(result)
    described = result.final_eval.describe()
    assert summary == f"SAC on toy:point-reach after 900 steps: {described}; {result.run_dir}"
    assert described.startswith("return -") and described.endswith(" over 2 episodes")
    shown = repr(result)
    assert shown.startswith(f"TrainResult(run_dir='{result.run_dir}', steps=900, final_eval="
                            "EvalResult(return ")  # fmt: skip
    assert "array(" not in shown and len(shown) < 400
    obs = np.zeros((3, 6), np.float32)
    assert result.policy(obs).shape == (3, 2)
    assert result.policy is result.policy  # (loaded once)


def test_a_callback_logs_every_event_and_stops_the_run_at_a_return_threshold(tmp_path, capsys):
    """A custom logger sees each metrics row, evaluation and checkpoint; an early stop on the
    evaluation's return ends the run as Ctrl-C does: a checkpoint at that step,
    `interrupted`, and a resume goes on from there."""
    seen: list[tuple[str, int]] = []

    def logger(event: TrainEvent) -> None:
        seen.append((event.kind, event.step))
        assert event.run_dir == tmp_path / "stop"
        if event.kind == "eval":
            assert event.metrics["eval/return_mean"] == pytest.approx(event.eval.mean)
        if event.kind == "checkpoint":
            assert event.checkpoint == latest_checkpoint(event.run_dir)

    def good_enough(event: TrainEvent):
        return not (event.kind == "eval" and event.eval.mean > -1e9)  # (the first evaluation)

    result = RLLearner("toy:point-reach", runs_dir=tmp_path, name="stop", **RL).train(
        callback=[logger, good_enough]
    )
    assert result.interrupted and result.steps == 300
    assert seen == [("log", 300), ("eval", 300), ("checkpoint", 300)]
    assert "a callback stopped the run at its eval event of step 300" in capsys.readouterr().out
    ckpt = latest_checkpoint(result.run_dir)
    assert json.loads((ckpt / "loop.json").read_text())["step"] == 300
    resumed = RLLearner("toy:point-reach", resume=result.run_dir, runs_dir=tmp_path,
                        **RL).train(callback=logger)  # fmt: skip
    assert resumed.steps == 900 and not resumed.interrupted
    assert seen[3:] == [("log", 600), ("eval", 600), ("log", 900), ("eval", 900),
                        ("checkpoint", 900)]  # fmt: skip


def test_a_callback_stops_the_run_once_the_success_rate_is_reached(tmp_path):
    """`event.stop()` on an evaluation's success rate (tasks that report success: the maze)."""

    def solved(event: TrainEvent) -> None:
        if event.kind == "eval" and event.eval.success_rate >= 0.0:
            event.stop()

    result = RLLearner("toy:maze", runs_dir=tmp_path, name="maze", **RL).train(solved)
    assert result.interrupted and result.steps == 300
    assert result.final_eval.success_rate is not None
    # (with a return of its own, or alone where the returns are the successes, as all 0 are)
    assert f"success {result.final_eval.success_rate:.2f} " in result.summary()


def test_a_preference_run_tells_its_callbacks_of_labels_and_fits(tmp_path):
    """Labels that come and reward fits are events too, with their figures; a stop at the first
    fit checkpoints that step."""
    events: list[TrainEvent] = []

    def first_fit(event: TrainEvent):
        events.append(event)
        return event.kind != "fit"

    result = PreferenceLearner(
        "toy:point-reach", "oracle", runs_dir=tmp_path, name="pref", segment_length=10,
        schedule=ScheduleConfig(budget=40, session_size=20, interval=300),
        reward=RewardConfig(hidden_dims=(16,), max_epochs=3, min_steps=5),
        **{k: v for k, v in RL.items() if k != "sac"}, sac=SACConfig(hidden_dims=(16, 16)),
    ).train(callback=first_fit)  # fmt: skip
    kinds = [e.kind for e in events]
    labels, fit = events[kinds.index("labels")], events[kinds.index("fit")]
    assert labels.metrics == {"labels/new": 20.0, "labels/total": 20.0}
    assert "reward/val_accuracy" in fit.metrics and labels.step <= fit.step
    after = events[kinds.index("fit") :]  # (then what else that step does, its checkpoint)
    assert {e.step for e in after} == {fit.step} and after[-1].kind == "checkpoint"
    assert result.interrupted and result.steps == fit.step and result.labels == 20
    assert result.agreement == fit.metrics["reward/segment_return_corr"]
    assert result.details["reward_metrics"]["reward/val_accuracy"] == fit.metrics[
        "reward/val_accuracy"]  # fmt: skip


def test_a_callback_that_is_not_a_function_is_refused_before_any_run(tmp_path):
    with pytest.raises(TypeError, match="callback=42 is not a function or a list of functions"):
        RLLearner("toy:point-reach", runs_dir=tmp_path, **RL).train(callback=42)
    with pytest.raises(TypeError, match="callback=\\[.*'x'\\] is not a function"):
        RLLearner("toy:point-reach", runs_dir=tmp_path, **RL).train(callback=[print, "x"])
    assert not any(tmp_path.iterdir())


def test_a_summary_compares_each_figure_with_the_same_figure_before():
    """A policy trained from another (offline CPL from its BC policy, fine-tuning): the return
    beside the return before, the normalised score beside the score before, never one beside
    the other."""
    from prefrl.training.evaluate import EvalResult
    from prefrl.training.result import TrainResult

    def scored(returns, score, std):
        return EvalResult(np.array(returns, float), np.array([1000, 1000]),
                          extra={"eval/score_mean": score, "eval/score_std": std})  # fmt: skip

    result = TrainResult(Path("run"), 300, final_eval=scored([30, 32], 28.8, 0.8),
                         title="CPL", details={"start_eval": scored([11, 12], 11.5, 0.2)})  # fmt: skip
    assert result.summary() == (
        "CPL after 300 steps: return 31.0 +- 1.0 (from 11.5 +- 0.5) over 2 episodes, normalised "
        "score 28.8 +- 0.8 (from 11.5 +- 0.2); run"
    )
