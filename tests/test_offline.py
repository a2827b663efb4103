"""Offline preferences: MR, NMR and PT reward models, IQL, offline runs and the CLI (the datasets
and their queries: test_offline_data.py)."""

from __future__ import annotations

import dataclasses
import json
import re

import jax
import numpy as np
import pytest

from prefrl.agents.iql import IQL, IQLConfig
from prefrl.cli import main
from prefrl.data.dataset import OfflineDataset
from prefrl.data.segments import Label
from prefrl.feedback.dataset_queries import (
    DatasetQueries,
    label_queries,
    sample_queries,
)
from prefrl.feedback.teachers import TeacherConfig
from prefrl.offline.learner import OfflineConfig, scale_rewards
from prefrl.reward.saved import load_reward_model
from prefrl.reward.segment_models import SegmentRewardConfig, SegmentRewardModel
from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.rundir.metrics import read_metrics


def synthetic(n_episodes=12, length=40, obs_dim=4, action_dim=2, seed=0, env="toy:point-reach"):
    """Episodes of random transitions whose reward is obs[0] + action[0] (some end early)."""
    rng = np.random.default_rng(seed)
    n = n_episodes * length
    obs = rng.normal(size=(n, obs_dim)).astype(np.float32)
    action = rng.uniform(-1, 1, (n, action_dim)).astype(np.float32)
    timeouts = np.zeros(n, bool)
    timeouts[length - 1 :: length] = True
    terminals = np.zeros(n, bool)
    terminals[length // 2] = True  # the first episode ends early, on a terminal state
    return OfflineDataset(
        observations=obs,
        actions=action,
        rewards=obs[:, 0] + action[:, 0],
        next_observations=np.roll(obs, -1, 0),
        terminals=terminals,
        timeouts=timeouts,
        env_id=env,
        name="synthetic",
        ref_min_score=-50.0,
        ref_max_score=10.0,
    )


# ------------------------------------------------------------------------------ reward models
@pytest.mark.parametrize("kind", ["mr", "nmr", "pt"])
def test_reward_models_learn_and_relabel_consistently(kind, tmp_path):
    data = synthetic(n_episodes=16, length=30)
    queries = label_queries(sample_queries(data, 256, length=8, seed=2), data, TeacherConfig())
    cfg = SegmentRewardConfig(kind=kind, embed_dim=32, heads=2, epochs=40, batch_size=64)
    model = SegmentRewardModel(cfg, data.obs_dim, data.action_dim, seq_len=8, seed=0)
    metrics = model.fit(queries.preference_data(data))
    assert metrics["reward/val_accuracy"] >= 0.75, metrics
    assert 1 <= metrics["reward/best_epoch"] <= 40
    learned = model.relabel(data)
    if kind != "pt":
        # (PT's score is an attention-weighted mean of r̂, so r̂ of single steps need not follow
        # the true reward; the paper's relabelling uses r̂ all the same.)
        assert np.corrcoef(learned, data.rewards)[0, 1] > 0.5
    # Windowed relabelling = the model run on the window alone: a full window ending at t...
    t = 40  # episode 2, position 19
    window = slice(t - 7, t + 1)
    r = model.member_rewards(data.observations[None, window], data.actions[None, window])
    np.testing.assert_allclose(learned[t], r[0, 0, -1], rtol=1e-4, atol=1e-4)
    # ...and, at an episode's start, padding in front changes nothing: the unpadded prefix.
    t = 33  # episode 2 starts at 31 (the first ended early at 20, the second at 30)
    starts = data.episode_bounds()[0]
    s = starts[starts <= t].max()
    r = model.member_rewards(data.observations[None, s : t + 1], data.actions[None, s : t + 1])
    np.testing.assert_allclose(learned[t], r[0, 0, -1], rtol=1e-4, atol=1e-4)
    # Saved and loaded on its own, it predicts the same.
    model.save(tmp_path / "rm")
    back = load_reward_model(tmp_path / "rm")
    np.testing.assert_allclose(back.relabel(data), learned, rtol=1e-5, atol=1e-5)


def test_reward_scaling():
    data = synthetic()
    scaled = scale_rewards(data, data.rewards, shift=0.5)
    returns = data.episode_returns(scaled - 0.5)
    np.testing.assert_allclose(returns.max() - returns.min(), 1000.0, rtol=1e-4)
    # A preference loss leaves a reward's constant free: centred, it no longer matters, so a
    # reward learned 3 below the true one gets the same mean +0.5 per step and the same ranking.
    offset = data.rewards - 3.0
    centred = scale_rewards(data, offset, shift=0.5, center=True)
    np.testing.assert_allclose(centred.mean(), 0.5, atol=1e-5)
    np.testing.assert_allclose(
        centred, scale_rewards(data, data.rewards, 0.5, center=True), atol=1e-4
    )
    assert scale_rewards(data, offset, shift=0.5).mean() < 0  # as learned: mostly negative


# ------------------------------------------------------------------------------------ IQL
def test_iql_prefers_the_rewarded_actions_of_the_data():
    """A one-step problem: uniform-random actions, reward -(a - 0.5)^2. IQL's policy must move
    towards the data's best actions (behaviour cloning would stay near 0)."""
    rng = np.random.default_rng(0)
    n = 4096
    obs = rng.normal(size=(n, 3)).astype(np.float32)
    action = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
    reward = -((action[:, 0] - 0.5) ** 2) * 10
    iql = IQL(IQLConfig(hidden_dims=(64, 64), steps=3000, batch_size=128), 3, 1)
    state = iql.init(jax.random.key(0))
    data = IQL.to_device(obs, action, reward, obs, np.ones(n))
    state, metrics = iql.update(state, data, jax.random.key(1), steps=3000)
    assert all(np.isfinite(float(v)) for v in metrics.values())
    mean_action = float(np.asarray(iql.act(state.actor_params, obs[:256])).mean())
    assert 0.3 < mean_action < 0.7, mean_action
    restored = iql.state_from_bytes(iql.state_to_bytes(state))
    np.testing.assert_allclose(
        np.asarray(iql.act(restored.actor_params, obs[:4])),
        np.asarray(iql.act(state.actor_params, obs[:4])),
    )


def test_a_stopped_fit_saves_at_an_epoch_boundary_and_goes_on_as_if_never_stopped(tmp_path):
    from prefrl.reward.fit_state import FitStopped

    data = synthetic(n_episodes=8, length=30)
    prefs = label_queries(sample_queries(data, 64, length=8, seed=2), data, TeacherConfig())
    prefs = prefs.preference_data(data)
    cfg = SegmentRewardConfig(kind="nmr", epochs=6, batch_size=16)

    def model():
        return SegmentRewardModel(cfg, data.obs_dim, data.action_dim, seq_len=8, seed=0)

    straight = model()
    want = straight.fit(prefs)
    stopped, epochs = model(), []
    with pytest.raises(FitStopped, match="after epoch 3 of 6"):
        stopped.fit(prefs, lambda e, _: epochs.append(e), lambda: len(epochs) >= 3, tmp_path)
    got = stopped.fit(prefs, lambda e, _: epochs.append(e), None, tmp_path)
    assert epochs == [1, 2, 3, 4, 5, 6]
    assert got["reward/best_epoch"] == want["reward/best_epoch"]
    for a, b in zip(jax.tree.leaves(straight.params), jax.tree.leaves(stopped.params)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_offline_run_stopped_in_its_reward_fit_checkpoints_and_resumes(tmp_path, monkeypatch):
    import contextlib

    from prefrl.offline import learner as offline

    data = synthetic(n_episodes=20, length=50, obs_dim=6, action_dim=2)
    data.save(tmp_path / "ds")
    queries = label_queries(sample_queries(data, 64, length=10, seed=1), data, TeacherConfig())
    queries.save(tmp_path / "q.json")

    class StopAfter:  # Ctrl-C, as the stop flag sees it: during the third epoch
        def __init__(self, reads):
            self.reads = reads

        @property
        def requested(self):
            self.reads -= 1
            return self.reads < 0

        @requested.setter
        def requested(self, value):
            pass

    from prefrl.training import loop as common

    monkeypatch.setattr(common, "graceful_stop", lambda **_: contextlib.nullcontext(StopAfter(3)))
    config = OfflineConfig(
        dataset=tmp_path / "ds", labels=tmp_path / "q.json", reward="nmr", steps=1000,
        steps_per_call=500, eval_interval=500, checkpoint_interval=500, eval_episodes=1,
        video=False, runs_dir=tmp_path / "runs", name="r", progress=False,
        reward_model=SegmentRewardConfig(epochs=5, batch_size=16),
    )  # fmt: skip
    result = offline.train_offline(config)
    run = result.run_dir
    assert result.interrupted and latest_checkpoint(run) is not None
    assert (run / "reward_fit" / "fit_state.json").exists() and not (run / "rewards.npy").exists()
    monkeypatch.undo()
    resumed = offline.train_offline(dataclasses.replace(config, resume=run))
    assert not resumed.interrupted and resumed.steps == 1000 and (run / "rewards.npy").exists()
    fit_rows = [r for r in read_metrics(run) if "reward_fit/train_loss" in r]
    # every epoch once, named: the fit went on where it stopped
    assert [r["reward_fit/epoch"] for r in fit_rows] == [1, 2, 3, 4, 5]
    assert {r["step"] for r in fit_rows} == {0}  # (before IQL's first step: as the guide says)


def test_the_offline_guide_says_where_the_reward_fits_rows_are():
    """The fit's rows in metrics.jsonl are all at IQL's step 0: the guide says so, and what
    to read them by."""
    from pathlib import Path

    guide = " ".join((Path(__file__).parent.parent / "docs/guides/offline.md").read_text().split())
    assert "are all at step 0, each with its `reward_fit/epoch`" in guide


# ------------------------------------------------------------------------------------ the CLI
def test_offline_cli_end_to_end(tmp_path, capsys):
    data = synthetic(n_episodes=20, length=50, obs_dim=6, action_dim=2)  # toy:point-reach's sizes
    data.save(tmp_path / "ds")
    synthetic(obs_dim=4).save(tmp_path / "wrong-size")
    assert main(["dataset", "info", str(tmp_path / "ds")]) == 0
    assert "1,000 transitions in 21 episodes" in capsys.readouterr().out
    q = tmp_path / "q.json"
    assert (
        main(
            [
                "dataset",
                "queries",
                str(tmp_path / "ds"),
                "--num",
                "64",
                "--length",
                "10",
                "--out",
                str(q),
            ]
        )
        == 0
    )
    common = [
        "--dataset",
        str(tmp_path / "ds"),
        "--steps",
        "2000",
        "--steps-per-call",
        "500",
        "--eval-interval",
        "1000",
        "--checkpoint-interval",
        "1000",
        "--eval-episodes",
        "2",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--no-progress",
        "--iql.hidden-dims",
        "32",
        "32",
    ]
    assert (
        main(
            [
                "offline",
                *common,
                "--reward",
                "pt",
                "--labels",
                str(q),
                "--name",
                "pt",
                "--reward-model.epochs",
                "3",
                "--reward-model.embed-dim",
                "32",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert re.search(r"IQL \(pt reward\) on \S+ after 2,000 steps: return \S+ \+- \S+ over 2 "
                     r"episodes, normalised score \S+ \+- \S+, 64 labels, learned vs true reward "
                     r"\S+; " + re.escape(str(tmp_path / "runs" / "pt")), out), out  # fmt: skip
    run = tmp_path / "runs" / "pt"
    assert (run / "reward_model" / "config.json").exists() and (run / "rewards.npy").exists()
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "eval/score_mean" in r] == [1000, 2000]
    fitted = json.loads((run / "reward_metrics.json").read_text())
    assert abs(fitted["reward/scaled_mean"] - 0.5) < 1e-4  # centred by default
    # The control: the true reward treated as a learned one (centred, scaled, +0.5).
    args = ["offline", *common, "--reward", "true", "--steps", "1000", "--eval-interval", "1000"]
    assert main([*args, "--true-like-learned", "--name", "true-like"]) == 0
    out = capsys.readouterr().out
    assert "IQL (true reward) on" in out and "after 1,000 steps" in out and "labels" not in out
    logged = [r for r in read_metrics(tmp_path / "runs/true-like") if "reward/scaled_mean" in r]
    assert abs(logged[0]["reward/scaled_mean"] - 0.5) < 1e-4
    with pytest.raises(ValueError, match="--true-like-learned treats the true reward"):
        OfflineConfig(reward="mr", true_like_learned=True)
    # Resumed at its last step: nothing to do, and its last evaluation is what it reports.
    assert main(["offline", "--resume", str(run), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "at step 2,000: nothing left to train" in out and "nan" not in out
    assert "its last evaluation: normalised score" in out
    # Resumed with more steps: the reward model is reused, IQL continues from step 2000.
    before = np.load(run / "rewards.npy")
    assert main(["offline", "--resume", str(run), "--steps", "3000", "--no-progress"]) == 0
    np.testing.assert_array_equal(np.load(run / "rewards.npy"), before)
    assert "after 3,000 steps" in capsys.readouterr().out
    # Bad input: a query file of another length than the model can take, labels missing.
    assert main(["offline", *common, "--reward", "mr", "--name", "x"]) == 2
    assert "give --labels" in capsys.readouterr().err
    assert (
        main(
            [
                "offline",
                *common,
                "--dataset",
                str(tmp_path / "wrong-size"),
                "--reward",
                "true",
                "--name",
                "y",
            ]
        )
        == 2
    )
    assert "has obs/action sizes 4/2; its env 'toy:point-reach' has 6/2" in capsys.readouterr().err
    assert not (tmp_path / "runs" / "x").exists() and not (tmp_path / "runs" / "y").exists()


def test_collect_datasets_from_a_sac_run(tmp_path):
    from conftest import short_sac_run

    from prefrl.offline.datasets import collect_dataset

    run = short_sac_run(tmp_path, "sac", steps=1500)
    replay = collect_dataset(run, "medium-replay", medium_step=1000, reference_episodes=3)
    # The buffer up to the medium step, cut into the run's 50-step episodes.
    assert len(replay) == 1000 and replay.info["medium_step"] == 1000
    starts, ends = replay.episode_bounds()
    assert set(ends - starts) == {50}
    np.testing.assert_array_equal(
        replay.next_observations[:-1][replay.episode_index()[1:] > 0],
        replay.observations[1:][replay.episode_index()[1:] > 0],
    )
    assert replay.ref_min_score < replay.ref_max_score
    rand = collect_dataset(run, "random", steps=120, reference_episodes=3)
    assert len(rand) == 120 and rand.timeouts[-1]  # cut mid-episode: ends there
    both = collect_dataset(run, "medium-expert", steps=200, medium_step=1000, reference_episodes=3)
    assert len(both) == 200 and both.info["medium_step"] == 1000
    with pytest.raises(ValueError, match="no checkpoint there"):
        collect_dataset(run, "medium", steps=10, medium_step=700)
    with pytest.raises(ValueError, match="dataset kind 'meduim' is invalid"):
        collect_dataset(run, "meduim")


def test_the_medium_policy_is_chosen_among_every_kept_checkpoint(tmp_path, capsys):
    """Checkpoints the SAC run kept but did not evaluate are evaluated, not passed over."""
    from prefrl.offline.datasets import choose_medium, eval_returns
    from prefrl.rl.config import RLConfig
    from prefrl.rl.learner import train_rl

    config = RLConfig(
        env="toy:point-reach", steps=1500, warmstart_steps=500, eval_interval=1500,
        eval_episodes=2, checkpoint_interval=500, keep_checkpoints=0, video=False,
        progress=False, runs_dir=tmp_path, name="sparse-evals",
    )  # fmt: skip
    run = train_rl(config).run_dir
    choice = choose_medium(run, random_return=-100.0, step=1000)
    assert choice.step == 1000 and np.isfinite(choice.eval_return)
    assert "evaluating 2 checkpoint(s) the run did not evaluate: steps [500, 1000]" in (
        capsys.readouterr().out
    )
    # None near halfway: a run that kept every checkpoint is told to keep them more often.
    final = eval_returns(run)[1500]
    with pytest.raises(ValueError, match="none near") as refused:
        choose_medium(run, random_return=final - 1e6)
    assert "kept every checkpoint (every 500 steps)" in str(refused.value)
    assert "--checkpoint-interval" in str(refused.value)
    assert "--keep-checkpoints" not in str(refused.value)


def test_a_person_labels_dataset_queries_through_the_store(tmp_path, capsys):
    """`--teacher web` makes a labelling run whose clips render from the dataset's states; the
    answers come back as a query file (unanswered queries left out)."""
    from prefrl.feedback.clips import ClipRenderer, render_pending
    from prefrl.feedback.store import FeedbackStore, run_uid
    from prefrl.offline.datasets import rollouts

    env = "toy:point-reach"
    data = rollouts(env, None, 300, seed=0, label="random")
    data.ref_min_score, data.ref_max_score = -50.0, 0.0
    data.save(tmp_path / "ds")
    back = OfflineDataset.load(tmp_path / "ds")
    np.testing.assert_array_equal(back.states, data.states)  # kept as Minari infos
    q, run = tmp_path / "q.json", tmp_path / "q-labelling"
    assert main(["dataset", "queries", str(tmp_path / "ds"), "--num", "5", "--length", "10",
                 "--teacher", "web", "--out", str(q)]) == 0  # fmt: skip
    assert f"prefrl serve {run}" in capsys.readouterr().out
    queries = DatasetQueries.load(q)
    with FeedbackStore(run) as store:
        run_id = store.run_id(run_uid(run))
        open_queries = store.open_queries(run_id)
        assert [x.key for x in open_queries] == [0, 1, 2, 3, 4]
        left, _ = store.query_pairs(run, [open_queries[2].id])
        start = queries.start_left[2]
        np.testing.assert_array_equal(left.state[0], data.states[start : start + 10])
        counts = render_pending(store, run_id, run, ClipRenderer(env, size=32), queue=5)
        assert counts["rendered"] >= 5
        store.add_label(open_queries[1].id, "right", "human")
        store.add_label(open_queries[3].id, "equal", "human")
    out = tmp_path / "labelled.json"
    assert main(["dataset", "queries", str(tmp_path / "ds"), "--queries", str(q), "--from-run",
                 str(run), "--out", str(out)]) == 0  # fmt: skip
    labelled = DatasetQueries.load(out)
    assert list(labelled.labels) == [Label.RIGHT, Label.EQUAL] and labelled.source == "human"
    np.testing.assert_array_equal(labelled.start_left, queries.start_left[[1, 3]])
    # A dataset without states (e.g. medium-replay, from a replay buffer) cannot be shown.
    synthetic(obs_dim=6).save(tmp_path / "no-states")
    assert main(["dataset", "queries", str(tmp_path / "no-states"), "--num", "2", "--length",
                 "5", "--teacher", "web", "--out", str(tmp_path / "x.json")]) == 2  # fmt: skip
    assert "has no simulator states" in capsys.readouterr().err


def test_offline_presets_hold_the_published_iql_settings():
    from prefrl.cli.common import parse_config
    from prefrl.presets import OFFLINE_PRESETS

    args = ["--preset", "iql-adroit", "--iql.temperature", "0.7"]
    config = parse_config(OfflineConfig, OFFLINE_PRESETS, args, "prefrl offline", "")
    assert (config.iql.expectile, config.iql.actor_dropout) == (0.7, 0.1)
    assert config.iql.temperature == 0.7  # a flag after the preset overrides it
    antmaze = OFFLINE_PRESETS["iql-antmaze"].config.iql
    assert (antmaze.expectile, antmaze.temperature) == (0.9, 10.0)


def test_offline_cpl_moves_the_cloned_policy_towards_the_preferred_actions(tmp_path, capsys):
    from prefrl.offline.cpl import OfflineCPLConfig, train_offline_cpl
    from prefrl.training.policies import load_policy

    # Reward obs[0] + action[0]: the oracle prefers segments with larger first actions, which the
    # uniform random data's BC policy does not favour.
    data = synthetic(n_episodes=30, length=50, obs_dim=6, action_dim=2)
    data.save(tmp_path / "ds")
    queries = label_queries(sample_queries(data, 300, length=10, seed=0), data,
                            TeacherConfig("oracle"))  # fmt: skip
    queries.save(tmp_path / "q.json")
    config = OfflineCPLConfig(
        dataset=tmp_path / "ds", labels=tmp_path / "q.json", hidden_dims=(32, 32), bc_steps=500,
        steps=300, eval_episodes=2, runs_dir=tmp_path / "runs", name="cpl", progress=False,
    )  # fmt: skip
    result = train_offline_cpl(config)
    m = result.details["metrics"]
    assert m["pairs"] == 300 and m["cpl/val_accuracy"] > m["cpl/val_accuracy_start"] + 0.1
    assert m["cpl/train_accuracy"] > m["cpl/train_accuracy_start"] + 0.1
    assert m["cpl/train_loss"] < m["cpl/train_loss_start"]
    assert np.isfinite(m["cpl/train_advantage_median"])
    # The saved policy is a SAC checkpoint `prefrl eval` plays; its first action went up.
    policy = load_policy(result.run_dir)
    obs = data.observations[:500]
    action = np.asarray(policy.sac.act(policy.state.actor_params, obs, None, 0, True)).mean(0)
    # (BC on the uniform data's actions alone gives means near 0.)
    assert action[0] > 0.1 and action[0] > 2 * abs(action[1]), action
    assert main(["eval", str(result.run_dir), "--episodes", "1"]) == 0
    args = ["offline-cpl", "--dataset", str(tmp_path / "ds"), "--labels", str(tmp_path / "q.json"),
            "--hidden-dims", "16", "--bc-steps", "100", "--steps", "20", "--eval-episodes", "1",
            "--runs-dir", str(tmp_path / "runs"), "--name", "cli", "--no-progress"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "CPL on 300 pairs (20 steps): " in out and "(BC policy " in out
    assert "after 20 steps: return " in out and ", normalised score " in out
    # Bad input fails before a run directory is made: queries without labels.
    sample_queries(data, 20, length=10).save(tmp_path / "unlabelled.json")
    with pytest.raises(ValueError, match="without labels"):
        train_offline_cpl(dataclasses.replace(config, labels=tmp_path / "unlabelled.json",
                                              name="bad"))  # fmt: skip
    assert not (tmp_path / "runs" / "bad").exists()
