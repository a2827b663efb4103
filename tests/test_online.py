"""The online preference loop (PEBBLE / PrefPPO) on the built-in task."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from prefrl.agents import PPOConfig, SACConfig
from prefrl.cli import main
from prefrl.data import PreferenceData, ReplayBuffer, SegmentPool, SegmentRecorder
from prefrl.data.segments import pair_keys
from prefrl.feedback import ScheduleConfig, TeacherConfig, select_pairs
from prefrl.online.agents import absorbing_value
from prefrl.online.learner import OnlineConfig, make_training_env, train_online
from prefrl.reward import RewardConfig, load_reward_model
from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.rundir.metrics import read_fit_scatter, read_metrics


def _config(tmp_path, **kw):
    base = {
        "env": "toy:point-reach",
        "steps": 1500,
        "warmstart_steps": 300,
        "segment_length": 10,
        "schedule": ScheduleConfig(budget=80, session_size=20, interval=300),
        "reward": RewardConfig(hidden_dims=(32, 32), max_epochs=5, min_steps=10),
        "sac": SACConfig(hidden_dims=(32, 32)),
        "eval_interval": 750,
        "eval_episodes": 3,
        "video": False,
        "checkpoint_interval": 300,
        "log_interval": 300,
        "buffer_size": 5_000,
        "runs_dir": tmp_path,
        "name": "run",
        "progress": False,
    }
    base.update(kw)
    return OnlineConfig(**base)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("online")
    return train_online(_config(tmp))


def test_labels_follow_the_schedule_and_metrics_are_logged(finished):
    assert finished.steps == 1500 and finished.labels == 80
    rows = read_metrics(finished.run_dir)
    labels = [(r["step"], r["feedback/labels"]) for r in rows if "feedback/labels" in r]
    # 20 at the first query step (300), then 20 per 300 steps until the budget of 80.
    assert labels == [(300, 20.0), (600, 40.0), (900, 60.0), (1200, 80.0)]
    fits = [r for r in rows if "reward/val_accuracy" in r]
    assert fits and all(0 <= r["reward/val_accuracy"] <= 1 for r in fits)
    assert all(-1 <= r["reward/segment_return_corr"] <= 1 for r in fits)
    assert all(r["feedback/seconds"] > 0 for r in fits)  # query selection and labelling timed
    evals = [r for r in rows if "eval/return_mean" in r]
    assert [r["step"] for r in evals] == [750, 1500]
    assert all("eval/learned_return_mean" in r for r in evals)
    assert any("train/critic_loss" in r for r in rows)  # SAC trained on the learned reward
    assert (finished.run_dir / "learning_curve.png").exists()
    # The run page's scatter: segment returns under both rewards, at the last fit.
    scatter = read_fit_scatter(finished.run_dir)
    assert scatter["step"] == fits[-1]["step"] and len(scatter["true"]) == len(scatter["learned"])
    assert 10 <= len(scatter["true"]) <= 200
    corr = np.corrcoef(scatter["true"], scatter["learned"])[0, 1]
    assert corr == pytest.approx(fits[-1]["reward/segment_return_corr"], abs=0.3)


def test_checkpoint_holds_labels_model_and_a_relabelled_buffer(finished):
    ckpt = latest_checkpoint(finished.run_dir)
    labels = PreferenceData.load(ckpt / "labels.npz")
    assert len(labels) == 80
    model = load_reward_model(ckpt / "reward_model")
    buffer = ReplayBuffer.load(ckpt / "buffer.npz")
    n = len(buffer)
    # The last fit was at step 1200: everything stored was relabelled then or predicted after.
    expected = model.predict(buffer.obs[:n], buffer.action[:n])
    np.testing.assert_allclose(buffer.reward[:n], expected, rtol=1e-4, atol=1e-4)
    loop = json.loads((ckpt / "loop.json").read_text())
    assert loop["step"] == 1500 and loop["requested"] == 80 and loop["fitted"]


def test_no_pair_is_asked_twice_in_either_order(finished):
    """Sessions of 20 from a pool of a few dozen segments, then 200 candidates a session for
    disagreement: drawn at random, some pair came up twice."""
    labels = PreferenceData.load(latest_checkpoint(finished.run_dir) / "labels.npz").arrays()
    assert len(set(pair_keys(labels["id_left"], labels["id_right"]))) == 80


def test_a_small_pool_gives_each_new_pair_once_then_runs_out():
    pool = SegmentPool(capacity=10)
    rec = SegmentRecorder(2)
    for t in range(8):
        rec.record(t, np.full(3, t, np.float32), np.zeros(1), 0.0, np.zeros(2))
    pool.add(rec.end_episode(np.random.default_rng(0), 0))  # 4 segments: 6 pairs
    asked = {(0, 1)}
    left, right = select_pairs("uniform", pool, 10, np.random.default_rng(1), asked=asked)
    keys = pair_keys(left.id, right.id)
    assert len(keys) == 5 and len(set(keys)) == 5 and (0, 1) not in keys


def test_resume_keeps_labels_model_buffer_and_agent(tmp_path):
    first = train_online(_config(tmp_path, steps=900))
    assert first.labels == 60
    before = PreferenceData.load(latest_checkpoint(first.run_dir) / "labels.npz").arrays()
    model_before = json.loads(
        (latest_checkpoint(first.run_dir) / "reward_model" / "config.json").read_text()
    )
    resumed = train_online(_config(tmp_path, steps=1500, resume=first.run_dir))
    assert resumed.steps == 1500 and resumed.labels == 80
    ckpt = latest_checkpoint(resumed.run_dir)
    after = PreferenceData.load(ckpt / "labels.npz").arrays()
    np.testing.assert_array_equal(after["label"][:60], before["label"])
    np.testing.assert_array_equal(after["obs_left"][:60], before["obs_left"])
    model_after = json.loads((ckpt / "reward_model" / "config.json").read_text())
    assert model_after["fits"] == model_before["fits"] + 1  # fit continued, not restarted
    assert len(ReplayBuffer.load(ckpt / "buffer.npz")) == 1500
    steps = [r["step"] for r in read_metrics(resumed.run_dir) if "feedback/labels" in r]
    assert steps == [300, 600, 900, 1200]  # no duplicated rows after the resume


def test_refit_growth_skips_small_additions_but_fits_the_last_labels(tmp_path):
    # Sessions of 20 at 300, 600, 900, 1200. Growth 1.5: the first fit (20 labels); 20 new on 20
    # fitted is too few; 40 new on 20 is enough; the last 20 on 60 are the budget's end.
    result = train_online(_config(tmp_path, steps=1350, refit_growth=1.5))
    fits = [(r["step"], r["feedback/labels"]) for r in read_metrics(result.run_dir)
            if "feedback/labels" in r]  # fmt: skip
    assert fits == [(300, 20.0), (900, 60.0), (1200, 80.0)]
    assert (
        json.loads((latest_checkpoint(result.run_dir) / "loop.json").read_text())["unfitted_labels"]
        == 0
    )


def test_ppo_and_unsupervised_pretraining(tmp_path):
    result = train_online(
        _config(
            tmp_path,
            algo="ppo",
            steps=1536,
            warmstart_steps=256,
            unsupervised_steps=256,
            ppo=PPOConfig(hidden_dims=(32, 32), rollout_steps=256, minibatch_size=64, epochs=2),
            log_interval=256,
        )
    )
    assert result.labels == 80
    rows = read_metrics(result.run_dir)
    ppo_rows = [r for r in rows if "train/policy_loss" in r]
    # Updates start after the warm start: on the k-NN reward first, then on the learned one.
    assert ppo_rows and min(r["step"] for r in ppo_rows) <= 512
    assert max(r["step"] for r in ppo_rows) > 1024


def test_sac_unsupervised_pretraining_updates_before_the_first_query(tmp_path):
    result = train_online(_config(tmp_path, steps=900, unsupervised_steps=300, log_interval=100))
    rows = read_metrics(result.run_dir)
    first_fit = min(r["step"] for r in rows if "feedback/labels" in r)
    assert first_fit == 600
    assert any("train/critic_loss" in r and r["step"] < first_fit for r in rows)


def test_update_every_three_steps_makes_a_third_of_the_updates(finished, tmp_path):
    from prefrl.training.policies import load_policy

    every_step = int(load_policy(finished.run_dir).state.step)
    result = train_online(_config(tmp_path, update_every=3))
    assert every_step > 900  # updates from the first fit (step 300) on
    assert abs(int(load_policy(result.run_dir).state.step) - every_step / 3) <= 1


def test_training_episodes_go_on_after_a_fall_only_with_termination_continue(tmp_path):
    push = np.ones(3, np.float32)  # the hopper falls at once
    for termination, ends_early in (("continue", False), ("absorbing", True), ("end", True)):
        cfg = _config(tmp_path, env="Hopper-v5", termination=termination)
        env = make_training_env(cfg, 0)
        env.reset(seed=0)
        for _ in range(100):
            _, _, terminated, _, _ = env.step(push)
            if terminated:
                break
        assert terminated == ends_early
    with pytest.raises(ValueError, match="toy:point-reach has none"):
        _config(tmp_path, termination="continue")
    with pytest.raises(ValueError, match="end, absorbing, continue"):
        _config(tmp_path, termination="stop")


def test_absorbing_value_holds_the_final_states_reward_to_the_time_limit():
    class Constant:
        def predict(self, obs, action):
            assert np.all(action == 0)
            return np.full(len(obs), -2.0, np.float32)

    value = absorbing_value(Constant(), np.zeros((3, 4)), 2, discount=0.5, horizon=3)
    np.testing.assert_allclose(value, -2.0 * (0.5 + 0.25 + 0.125))


def test_absorbing_runs_label_early_ends_and_charge_the_last_step(tmp_path):
    """Hopper's random-action episodes end early (it falls): their segments are padded with the
    final state held still, and each episode's last transition carries the end's value."""
    cfg = _config(
        tmp_path, env="Hopper-v5", termination="absorbing", steps=900, checkpoint_interval=900
    )
    result = train_online(cfg)
    ckpt = latest_checkpoint(result.run_dir)
    pool = SegmentPool.load(ckpt / "segments.npz").all()
    still = np.all(pool.action[:, -2:] == 0, axis=(1, 2))  # padded: ends held still
    assert still.any()
    np.testing.assert_array_equal(pool.reward[still, -1], 0.0)
    np.testing.assert_array_equal(pool.state[still, -1], pool.state[still, -2])
    buffer = ReplayBuffer.load(ckpt / "buffer.npz")
    ends = np.flatnonzero(buffer.terminated[: len(buffer)])
    assert len(ends) > 5
    model = load_reward_model(ckpt / "reward_model")
    step = model.predict(buffer.obs[ends], buffer.action[ends])
    end = absorbing_value(model, buffer.next_obs[ends], 3, 0.99, 1000)
    assert np.abs(end).max() > 1.0  # the end's value is not negligible next to a step's
    np.testing.assert_allclose(buffer.reward[ends], step + end, rtol=1e-4, atol=1e-3)


def test_queries_wait_for_segments(tmp_path):
    """Queries due before any episode has ended are asked as soon as segments exist, each pair
    once: an episode is one segment, so 2 segments make 1 pair at step 100, 4 make 6 at 200,
    and the 10 due are asked by 300."""
    config = _config(
        tmp_path,
        steps=400,
        warmstart_steps=30,
        segment_length=50,
        schedule=ScheduleConfig(budget=20, session_size=10, interval=1000),
    )
    result = train_online(config)
    rows = read_metrics(result.run_dir)
    assert [(r["step"], r["feedback/labels"]) for r in rows if "feedback/labels" in r] == [
        (100, 1.0), (200, 6.0), (300, 10.0)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"segment_length": 60}, "--segment-length=60 is longer than toy:point-reach's episodes"),
        ({"env": "toy:point-free"}, "has no true reward"),
        ({"selection": "best"}, "query selection 'best' is unknown"),
        ({"warmstart_steps": 2000}, "after the run's last step"),
        ({"refit_growth": -0.1}, r"--refit-growth=-0.1 is invalid: expected a number >= 0"),
        ({"refit_growth": float("nan")}, r"--refit-growth=nan is invalid"),
        ({"update_every": 0}, r"--update-every=0 is invalid: expected a positive integer"),
        ({"web_port": 70000}, r"--web-port=70000 is invalid: expected a port number \(1-65535\)"),
    ],
)
def test_bad_input_fails_before_training(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        train_online(_config(tmp_path, **overrides))
    assert not (tmp_path / "run").exists()


def test_cli_reports_bad_input(tmp_path, capsys):
    code = main(
        ["train", "--env", "toy:point-free", "--runs-dir", str(tmp_path), "--steps", "3000"]
    )
    assert code == 2
    assert "has no true reward" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--teacher.preset", "perfect", "--runs-dir", str(tmp_path)])
    assert "'perfect' does not exist" in capsys.readouterr().err
    assert TeacherConfig("mistake").resolved().eps_mistake == 0.1


def test_cli_train_prints_agreement_and_return(tmp_path, capsys):
    code = main(
        [
            "train", "--env", "toy:point-reach", "--steps", "600", "--warmstart-steps", "200",
            "--segment-length", "10", "--schedule.budget", "40", "--schedule.session-size", "20",
            "--schedule.interval", "200", "--reward.hidden-dims", "32", "32",
            "--sac.hidden-dims", "32", "32", "--eval-episodes", "2", "--no-video",
            "--runs-dir", str(tmp_path), "--name", "cli", "--no-progress",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "labels: 40 from the oracle teacher" in out and "validation accuracy" in out
    assert "final return: true" in out


def test_background_fits_land_at_their_step_and_survive_a_resume(tmp_path):
    """With fit_lag the fit runs in a worker process and is used exactly fit_lag steps after it
    began (the first at once: the agent has no reward to train on before it); a run stopped
    while a fit ran begins it again on resume and uses it at the same step, with the same
    weights as a run that never stopped."""
    lagged = {"fit_lag": 150, "checkpoint_interval": 150, "steps": 900}
    straight = train_online(_config(tmp_path, name="straight", **lagged))
    rows = [r for r in read_metrics(straight.run_dir) if "feedback/labels" in r]
    # Labels at 300, 600 and 900 (20 each): fits begin there; the first is used at once, the
    # second 150 steps later, the third is still running when the run ends.
    assert [(r["step"], r["reward/fit_started"], r["feedback/labels"]) for r in rows] == [
        (300, 300.0, 20.0),
        (750, 600.0, 40.0),
    ]
    assert all(r["reward/fit_wait_seconds"] >= 0 and r["reward/fit_seconds"] > 0 for r in rows)
    end = json.loads((latest_checkpoint(straight.run_dir) / "loop.json").read_text())
    assert end["pending_fit"] == {"start": 900, "labels": 60}
    assert not (straight.run_dir / "fit_job").exists()  # the worker's scratch is gone

    # Stopped at 700, while the second fit ran; resumed to 900.
    stopped = train_online(_config(tmp_path, name="stopped", **{**lagged, "steps": 700}))
    loop = json.loads((latest_checkpoint(stopped.run_dir) / "loop.json").read_text())
    assert loop["step"] == 700 and loop["pending_fit"] == {"start": 600, "labels": 40}
    train_online(_config(tmp_path, name="stopped", **lagged, resume=stopped.run_dir))
    rows = [r for r in read_metrics(stopped.run_dir) if "feedback/labels" in r]
    assert [(r["step"], r["feedback/labels"]) for r in rows] == [(300, 20.0), (750, 40.0)]
    a = load_reward_model(straight.run_dir / "checkpoints" / "step_000000750" / "reward_model")
    b = load_reward_model(stopped.run_dir / "checkpoints" / "step_000000750" / "reward_model")
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(64, a.obs_dim)).astype(np.float32)
    action = rng.uniform(-1, 1, size=(64, a.action_dim)).astype(np.float32)
    np.testing.assert_array_equal(a.predict(obs, action), b.predict(obs, action))
    # A lag of one label interval: each fit lands where the next begins, at the same step.
    interval = train_online(_config(tmp_path, name="interval", fit_lag=300, steps=1200))
    rows = [r for r in read_metrics(interval.run_dir) if "feedback/labels" in r]
    assert [(r["step"], r["reward/fit_started"]) for r in rows] == [
        (300, 300.0),
        (900, 600.0),
        (1200, 900.0),
    ]
    end = json.loads((latest_checkpoint(interval.run_dir) / "loop.json").read_text())
    assert end["pending_fit"] == {"start": 1200, "labels": 80}
    # A run begun with a lag resumes with one.
    with pytest.raises(ValueError, match="resume it with --fit-lag"):
        train_online(_config(tmp_path, name="stopped", steps=1200, resume=stopped.run_dir))


def test_the_commands_people_label_with_say_that_a_finished_run_has_finished(finished):
    """`prefrl label` and `prefrl serve` of a finished run, as people start them: no "the agent
    asks for more", but that it finished, with its labels and what to run next."""
    import httpx2
    from conftest import free_port

    said = (f"The run has finished (1,500 steps) with 80 label(s). Next: see what it learned "
            f"with `prefrl eval {finished.run_dir}`")  # fmt: skip
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    label = subprocess.run(
        [sys.executable, "-m", "prefrl", "label", str(finished.run_dir), "--no-render"],
        input="q\n", env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert label.returncode == 0 and said in label.stdout, label.stdout + label.stderr
    assert "asks for more" not in label.stdout
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "prefrl", "serve", str(finished.run_dir), "--port", str(port),
         "--no-render"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert server.stdout.readline().startswith(f"label at http://127.0.0.1:{port}/compare")
        nothing = httpx2.get(f"http://127.0.0.1:{port}/api/next?n=3", timeout=60).json()
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert nothing["queries"] == [] and nothing["waiting"].startswith(said), nothing
