"""The training loop on the built-in task: learning, run directory, resume."""

import json

import jax
import numpy as np
import pytest

from prefrl.agents import SACConfig
from prefrl.data import ReplayBuffer
from prefrl.rl.config import RLConfig
from prefrl.rl.learner import train_rl
from prefrl.rundir.checkpoints import IncompatibleCheckpoint, latest_checkpoint
from prefrl.rundir.metrics import read_metrics
from prefrl.rundir.provenance import read_sessions
from prefrl.training.policies import load_policy

SMALL = SACConfig(hidden_dims=(64, 64))


def _config(tmp_path, **kw):
    base = {
        "env": "toy:point-reach",
        "steps": 3000,
        "warmstart_steps": 500,
        "eval_interval": 1000,
        "eval_episodes": 5,
        "video_interval": 3000,
        "checkpoint_interval": 1000,
        "log_interval": 500,
        "buffer_size": 10_000,
        "runs_dir": tmp_path,
        "name": "run",
        "progress": False,
        "sac": SMALL,
    }
    base.update(kw)
    return RLConfig(**base)


def test_steps_within_the_warm_start_say_that_no_update_is_made(tmp_path, capsys):
    """--steps below --warmstart-steps trains nothing: the run says so at its start (as rfcl's
    does)."""
    train_rl(_config(tmp_path, steps=200, warmstart_steps=300, eval_interval=200,
                     video_interval=200, checkpoint_interval=200, eval_episodes=1))  # fmt: skip
    out = " ".join(capsys.readouterr().out.split())
    assert ("warning: --steps 200 ends within the --warmstart-steps 300 of random actions: no "
            "updates will be made") in out  # fmt: skip
    from prefrl.online.config import OnlineConfig

    with pytest.raises(ValueError, match="queries would start at step 1,000 .*last step.*1,000"):
        OnlineConfig(steps=1000)  # (`prefrl train` refuses it: no query, no update)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    return train_rl(_config(tmp)), tmp


def test_short_run_improves_return_on_the_builtin_task(trained):
    result, _ = trained
    evals = [r["eval/return_mean"] for r in read_metrics(result.run_dir) if "eval/return_mean" in r]
    assert len(evals) == 3
    # A random policy scores about -45 on point-reach; SAC gets well below half of that.
    assert evals[-1] > -25 and evals[-1] > evals[0] + 15


def test_run_directory_holds_everything(trained):
    result, _ = trained
    run = result.run_dir
    config = json.loads((run / "config.json").read_text())
    assert config["env"] == "toy:point-reach" and config["sac"]["hidden_dims"] == [64, 64]
    assert list((run / "tb").glob("events.out.tfevents.*"))
    assert (run / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result.video == run / "videos" / "eval_000003000.mp4" and result.video.stat().st_size > 0
    ckpt = latest_checkpoint(run)
    assert ckpt.name == "step_000003000"
    assert {p.name for p in ckpt.iterdir()} == {
        "agent.msgpack",
        "buffer.npz",
        "config.json",
        "manifest.json",
        "loop.json",
    }
    assert len(ReplayBuffer.load(ckpt / "buffer.npz")) == 3000
    train_rows = [r for r in read_metrics(run) if "train/critic_loss" in r]
    assert train_rows and all(np.isfinite(r["train/critic_loss"]) for r in train_rows)


def test_the_best_evaluated_policy_is_kept_and_loads(trained):
    result, _ = trained
    evals = [r for r in read_metrics(result.run_dir) if "eval/return_mean" in r]
    top = max(evals, key=lambda r: r["eval/return_mean"])
    best = result.best_eval
    assert best.step == top["step"] and best.success_rate is None
    assert best.mean == pytest.approx(top["eval/return_mean"], rel=1e-6)
    assert best.path == result.run_dir / "best"
    policy = load_policy(best.path)  # (prefrl eval RUN/best)
    same = load_policy(result.run_dir / "checkpoints" / f"step_{best.step:09d}")
    obs = np.random.default_rng(0).normal(size=(16, policy.agent.obs_dim)).astype(np.float32)
    np.testing.assert_allclose(policy(obs), same(obs), atol=1e-6)
    np.testing.assert_allclose(result.best_policy(obs), same(obs), atol=1e-6)


def test_resume_continues_from_the_checkpoint_with_its_buffer(tmp_path, capsys):
    first = train_rl(_config(tmp_path, steps=1000))
    assert first.steps == 1000
    resumed = train_rl(_config(tmp_path, steps=1500, resume=first.run_dir, eval_interval=500))
    assert resumed.steps == 1500
    said = capsys.readouterr().out
    assert "resuming from step_000001000 (step 1,000 of 1,500)" in said
    ckpt = latest_checkpoint(first.run_dir)
    assert ckpt.name == "step_000001500"
    assert len(ReplayBuffer.load(ckpt / "buffer.npz")) == 1500
    assert json.loads((ckpt / "loop.json").read_text())["step"] == 1500
    eval_steps = [r["step"] for r in read_metrics(first.run_dir) if "eval/return_mean" in r]
    assert eval_steps == [1000, 1500]  # nothing logged twice
    # Each start and resume says where it ran (a run may be resumed on another machine).
    sessions = read_sessions(first.run_dir)
    assert len(sessions) == 2
    assert all(s["backend"] == jax.default_backend() for s in sessions)
    assert sessions[0]["versions"]["jax"] == jax.__version__
    assert sessions[0]["devices"] == [d.device_kind for d in jax.devices()]
    # A resume asked for fewer steps than the run has made says so (and trains nothing).
    assert train_rl(_config(tmp_path, steps=1200, resume=first.run_dir)).steps == 1500
    assert "--steps 1,200 leaves nothing to train" in capsys.readouterr().out


def test_resume_drops_metrics_logged_after_the_last_checkpoint(tmp_path):
    first = train_rl(_config(tmp_path, steps=1000, checkpoint_interval=1000, eval_interval=500))
    with open(first.run_dir / "metrics.jsonl", "a") as f:  # as if the run went on, then died
        f.write(json.dumps({"step": 1200, "eval/return_mean": 0.0}) + "\n")
    train_rl(_config(tmp_path, steps=1500, resume=first.run_dir, eval_interval=500))
    eval_steps = [r["step"] for r in read_metrics(first.run_dir) if "eval/return_mean" in r]
    assert eval_steps == [500, 1000, 1500]


def test_new_run_refuses_to_overwrite_an_existing_directory(trained):
    _, tmp = trained
    with pytest.raises(FileExistsError, match="--resume"):
        train_rl(_config(tmp))


def test_resume_refuses_other_networks_or_env_and_keeps_the_run(trained):
    """A resume with flags that change the networks' sizes, or with another env, stops before it
    trains or rewrites config.json; the run then resumes as it was."""
    result, tmp = trained
    stored = (result.run_dir / "config.json").read_text()
    other_sizes = _config(
        tmp, steps=3500, resume=result.run_dir, sac=SACConfig(hidden_dims=(32, 32))
    )
    with pytest.raises(
        IncompatibleCheckpoint,
        match=r"Dense_0/kernel has shape \(\d+, 64\) there and \(\d+, 32\) with",
    ):
        train_rl(other_sizes)
    fewer_layers = _config(tmp, steps=3500, resume=result.run_dir, sac=SACConfig(hidden_dims=(64,)))
    with pytest.raises(
        IncompatibleCheckpoint,
        match="actor_params/params/MLP_0/Dense_1/bias is only in the checkpoint",
    ):
        train_rl(fewer_layers)
    with pytest.raises(
        ValueError, match="--env Pendulum-v1: .* was run with --env toy:point-reach, and"
    ):
        train_rl(_config(tmp, env="Pendulum-v1", steps=3500, resume=result.run_dir))
    with pytest.raises(
        ValueError, match="--algo ppo: .* was run with --algo sac, and a resumed run keeps"
    ):
        train_rl(_config(tmp, algo="ppo", steps=3500, resume=result.run_dir))
    assert (result.run_dir / "config.json").read_text() == stored
    assert latest_checkpoint(result.run_dir).name == "step_000003000"  # none set aside


def test_load_policy_from_run_or_checkpoint(trained):
    result, _ = trained
    by_run = load_policy(result.run_dir)
    by_ckpt = load_policy(latest_checkpoint(result.run_dir))
    assert by_run.checkpoint == by_ckpt.checkpoint
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_policy(result.run_dir / "nope")


def test_a_loaded_policy_samples_noisy_actions_reproducibly(trained):
    import jax

    policy = load_policy(trained[0].run_dir)
    obs = np.zeros((5, policy.agent.obs_dim), np.float32)
    key = jax.random.key(3, impl="rbg")
    sampled = policy.sample(obs, key, 7)
    assert sampled.shape == (5, policy.agent.action_dim) and np.abs(sampled).max() <= 1
    np.testing.assert_allclose(policy.sample(obs, key, 7), sampled)
    assert not np.allclose(policy.sample(obs, key, 8), sampled)  # the step draws new noise
    assert not np.allclose(sampled, policy(obs))  # the same rows, all noisy


@pytest.mark.parametrize(
    "field, value", [("steps", 0), ("eval_episodes", -1), ("warmstart_steps", -5)]
)
def test_bad_loop_values_are_named(tmp_path, field, value):
    with pytest.raises(ValueError, match=field.replace("_", "-")):
        _config(tmp_path, **{field: value})


def test_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    from prefrl.envs.toy import PointReach

    step = PointReach.step

    def nan_after_700(self, action):
        obs, reward, terminated, truncated, info = step(self, action)
        self._calls = getattr(self, "_calls", 0) + 1
        return obs, (float("nan") if self._calls > 700 else reward), terminated, truncated, info

    monkeypatch.setattr(PointReach, "step", nan_after_700)
    config = _config(
        tmp_path, steps=3000, checkpoint_interval=500, log_interval=500, eval_interval=10_000
    )
    with pytest.raises(FloatingPointError, match="critic_loss.*NaN or inf by step 1000"):
        train_rl(config)
    ckpt = latest_checkpoint(tmp_path / "run")
    assert ckpt.name == "step_000000500"  # the state at 1000 was not saved
    import jax

    state = load_policy(ckpt).state
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(state.actor_params))


def test_a_state_with_nan_is_never_checkpointed(tmp_path):
    import jax
    import jax.numpy as jnp

    from prefrl.rl.run import RLRun

    loop = RLRun(_config(tmp_path), tmp_path / "run")
    loop.state = loop.state.replace(
        actor_params=jax.tree.map(lambda x: jnp.full_like(x, jnp.nan), loop.state.actor_params)
    )
    with pytest.raises(FloatingPointError, match="not checkpointing"):
        loop.save()
    assert latest_checkpoint(tmp_path / "run") is None
    loop.close()


def test_ppo_on_the_true_reward_learns_resumes_and_loads_as_a_policy(tmp_path):
    from prefrl.agents import PPOConfig

    ppo = PPOConfig(hidden_dims=(32, 32), rollout_steps=512, minibatch_size=128, epochs=4, lr=3e-3)
    kw = {"algo": "ppo", "eval_interval": 2048, "checkpoint_interval": 4096, "log_interval": 1024,
          "video": False, "ppo": ppo}  # fmt: skip
    first = train_rl(_config(tmp_path, steps=4096, **kw))
    assert not (latest_checkpoint(first.run_dir) / "buffer.npz").exists()  # on-policy: no buffer
    result = train_rl(_config(tmp_path, steps=8192, resume=first.run_dir, **kw))
    rows = read_metrics(result.run_dir)
    evals = [r["eval/return_mean"] for r in rows if "eval/return_mean" in r]
    assert len(evals) == 4
    # A random policy scores about -45 on point-reach; PPO's 16 updates get well above it.
    assert evals[-1] > -20 and evals[-1] > evals[0] + 8
    assert any("train/policy_loss" in r for r in rows)
    policy = load_policy(result.run_dir)
    obs = np.zeros((3, policy.agent.obs_dim), np.float32)
    assert policy(obs).shape == (3, 2) and np.all(np.abs(policy(obs)) <= 1)
    with pytest.raises(ValueError, match="steps=300 is invalid: expected at least one PPO"):
        _config(tmp_path, algo="ppo", steps=300, ppo=ppo, name="short")
    with pytest.raises(TypeError, match="is a PPO policy; this needs a SAC one"):
        _ = policy.sac


def test_an_update_every_other_step_with_demos_in_half_of_each_batch(tmp_path):
    """--update-every 2 makes one update per two env steps; with --demos, every other row of
    every batch is a demo transition (and the rows between the run's own)."""
    from prefrl.agents import SAC
    from prefrl.data.demos import DemoSet
    from prefrl.demos.make import script_demos
    from prefrl.rl.learner import RLLearner

    script_demos("toy:maze", 2, seed=0).save(tmp_path / "demos")
    demos = DemoSet.load(tmp_path / "demos")
    demo_obs = {tuple(o) for d in demos.demos for o in d.observations}
    agent = SAC(SACConfig(hidden_dims=(16, 16), batch_size=8), demos.obs_dim, demos.action_dim)
    batches, update = [], agent.update

    def recording(state, batch, key):
        batches.append(np.asarray(batch.obs))
        return update(state, batch, key)

    agent.update = recording
    RLLearner("toy:maze", agent=agent, steps=300, warmstart_steps=100, update_every=2,
              demos=tmp_path / "demos", eval_interval=300, eval_episodes=1, video=False,
              runs_dir=tmp_path, name="r", progress=False).train()  # fmt: skip
    assert len(batches) == 100  # steps 100, 102, ..., 298
    assert all(all(tuple(o) in demo_obs for o in obs[1::2]) for obs in batches)
    assert not all(all(tuple(o) in demo_obs for o in obs[0::2]) for obs in batches)


def test_demos_that_do_not_fit_are_refused_before_a_run_exists(tmp_path):
    from prefrl.demos.make import script_demos

    script_demos("toy:maze", 1, seed=0).save(tmp_path / "demos")
    with pytest.raises(ValueError, match="holds demos of toy:maze, not of toy:point-reach"):
        train_rl(_config(tmp_path, demos=tmp_path / "demos"))
    assert not (tmp_path / "run").exists()
    with pytest.raises(
        ValueError, match="demos=.*demos is invalid: expected no demos with --algo ppo"
    ):
        RLConfig(env="toy:maze", algo="ppo", demos=tmp_path / "demos")
    with pytest.raises(ValueError, match="update.every"):
        RLConfig(env="toy:maze", update_every=0)


def test_several_envs_update_on_the_steps_they_are_due_at(tmp_path):
    """--envs 3: a round steps every env; its steps are counted one by one, so --update-every 2
    updates on every even step past the warm start, and a last round that would pass --steps
    counts (and stores) only the steps up to it: 301 steps are 100 rounds and one step."""
    from prefrl.agents import SAC
    from prefrl.rl.learner import RLLearner

    agent = SAC(SACConfig(hidden_dims=(16, 16), batch_size=8), 6, 2)
    updates, update = [], agent.update

    def recording(state, batch, key):
        updates.append(len(batch.obs))
        return update(state, batch, key)

    agent.update = recording
    result = RLLearner("toy:point-reach", agent=agent, steps=301, warmstart_steps=100, envs=3,
                       update_every=2, eval_interval=301, eval_episodes=1, video=False,
                       checkpoint_interval=301, runs_dir=tmp_path, name="r",
                       progress=False).train()  # fmt: skip
    assert result.steps == 301 and len(updates) == 100  # steps 102, 104, ..., 300
    buffer = ReplayBuffer.load(latest_checkpoint(result.run_dir) / "buffer.npz")
    assert len(buffer) == 301


def test_several_envs_in_workers_run_as_here_learn_and_resume(tmp_path):
    """Three envs in two worker processes make the run the envs here make (same losses, same
    evaluations); the run learns the built-in task and resumes from its checkpoint."""
    runs = {}
    for workers in (0, 2):
        result = train_rl(_config(tmp_path, envs=3, env_workers=workers, steps=2000,
                                  name=f"w{workers}", video=False))  # fmt: skip
        assert result.steps == 2000
        runs[workers] = read_metrics(result.run_dir)
    for a, b in zip(runs[0], runs[2], strict=True):
        assert a["step"] == b["step"]
        for key in a.keys() & {"train/critic_loss", "eval/return_mean", "train/episode_return"}:
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-5), key
    evals = [r["eval/return_mean"] for r in runs[0] if "eval/return_mean" in r]
    assert evals[-1] > -35 and evals[-1] > evals[0] + 15  # (a random policy: about -45)
    resumed = train_rl(_config(tmp_path, envs=3, steps=2500, video=False,
                               resume=tmp_path / "w0"))  # fmt: skip
    assert resumed.steps == 2500 and not resumed.interrupted
    evals = [r["step"] for r in read_metrics(resumed.run_dir) if "eval/return_mean" in r]
    assert evals == [1000, 2000, 2500]


def test_several_envs_are_for_sac_on_states(tmp_path):
    with pytest.raises(ValueError, match="envs=2 is invalid: expected 1, or more for SAC on"):
        RLConfig(env="toy:point-reach", algo="ppo", envs=2)
    with pytest.raises(ValueError, match="env-workers=2 is invalid: .* worker processes step "
                       "several, with --envs N"):  # fmt: skip
        RLConfig(env="toy:point-reach", env_workers=2)
    with pytest.raises(ValueError, match="env-workers=-1 is invalid: expected >= 0"):
        RLConfig(env="toy:point-reach", envs=4, env_workers=-1)
    assert RLConfig(env="toy:point-reach", envs=4, env_workers=2).envs == 4


def test_a_full_disk_says_what_to_do_and_the_run_resumes_from_its_last_whole_checkpoint(
    tmp_path, monkeypatch
):
    """The disk fills while the second checkpoint is written: the error names the device, the
    last whole checkpoint and the resume; once there is room, the run resumes from there."""
    import errno

    real_save, saves = ReplayBuffer.save, []

    def save(buffer, path):
        saves.append(path)
        if len(saves) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real_save(buffer, path)

    monkeypatch.setattr(ReplayBuffer, "save", save)
    run_dir = tmp_path / "run"
    with pytest.raises(RuntimeError) as failed:
        train_rl(_config(tmp_path))
    said = str(failed.value)
    assert said.startswith("no space left on the device (writing ") and "buffer.npz" in said
    assert (f"at step 2,000: free some, then resume the run from its last whole checkpoint, "
            f"step_000001000: --resume {run_dir}") in said  # fmt: skip
    assert latest_checkpoint(run_dir).name == "step_000001000"
    monkeypatch.setattr(ReplayBuffer, "save", real_save)  # (room again)
    resumed = train_rl(_config(tmp_path, resume=run_dir))
    assert resumed.steps == 3000 and latest_checkpoint(run_dir).name == "step_000003000"
    assert not list((run_dir / "checkpoints").glob("*.tmp"))  # (the cut one cleared)

    # Other errors of the disk are not taken for a full one.
    def refused(buffer, path):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(ReplayBuffer, "save", refused)
    with pytest.raises(PermissionError):
        train_rl(_config(tmp_path, name="other"))
