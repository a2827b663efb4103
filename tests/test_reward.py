"""The MLP reward ensemble: fitting, validation, normalisation, persistence, the Gym wrapper."""

import dataclasses

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from prefrl.data import Label, PreferenceData, Segments
from prefrl.envs import LearnedReward, make_env
from prefrl.feedback import TEACHER_PRESETS, scripted_labels
from prefrl.reward import MLPRewardEnsemble, RewardConfig, load_reward_model, pearson

OBS, ACT, H = 5, 2, 10
SMALL = RewardConfig(hidden_dims=(32, 32), max_epochs=30, batch_size=64)


def _true_reward(obs, action):
    return obs[..., 0] - 0.5 * obs[..., 1] + action[..., 0]


def _segments(rng, n):
    obs = rng.normal(size=(n, H, OBS)).astype(np.float32)
    act = rng.uniform(-1, 1, (n, H, ACT)).astype(np.float32)
    z = np.zeros(n, np.int64)
    return Segments(obs, act, _true_reward(obs, act), np.zeros((n, H, 1)), np.arange(n), z, z, z)


def _labelled(n, seed=0):
    rng = np.random.default_rng(seed)
    left, right = _segments(rng, n), _segments(rng, n)
    data = PreferenceData()
    data.add(left, right, scripted_labels(TEACHER_PRESETS["oracle"], left, right, rng, 1.0))
    return data


@pytest.fixture(scope="module")
def fitted():
    model = MLPRewardEnsemble(SMALL, OBS, ACT, seed=0)
    return model, model.fit(_labelled(300))


def test_fit_learns_the_true_reward(fitted):
    model, metrics = fitted
    assert metrics["reward/val_accuracy"] > 0.8
    assert metrics["reward/labels_val"] == pytest.approx(300 / np.e, rel=0.25)
    test = _segments(np.random.default_rng(9), 200)
    predicted = model.predict(test.obs, test.action)
    assert predicted.shape == (200, H)
    assert pearson(predicted.sum(-1), test.true_returns()) > 0.85


def test_out_of_bag_validation_trains_on_every_label_and_stays_honest():
    """val_fraction 0 (PEBBLE): every label is trained on; each is validated by the members
    whose bootstrap left it out. On random labels the training accuracy is well above chance
    (memorised) but the out-of-bag accuracy is not; on the oracle's labels it is high."""
    config = dataclasses.replace(SMALL, val_fraction=0.0, stop_accuracy=2.0, max_epochs=60)
    metrics = MLPRewardEnsemble(config, OBS, ACT, seed=0).fit(_labelled(300))
    assert metrics["reward/labels_train"] == 300
    # A label is out of bag for some member with probability 1 - (1 - 1/e)^3, about 0.75.
    assert metrics["reward/labels_val"] == pytest.approx(300 * (1 - (1 - 1 / np.e) ** 3), rel=0.1)
    assert metrics["reward/val_accuracy"] > 0.8

    rng = np.random.default_rng(1)
    left, right = _segments(rng, 300), _segments(rng, 300)
    noise = PreferenceData()
    noise.add(left, right, rng.choice([Label.LEFT, Label.RIGHT], 300))
    long = dataclasses.replace(config, max_epochs=200, lr=1e-3)
    metrics = MLPRewardEnsemble(long, OBS, ACT, seed=0).fit(noise)
    assert metrics["reward/train_accuracy"] > 0.75
    assert 0.38 < metrics["reward/val_accuracy"] < 0.62


def test_members_differ_and_outputs_are_normalised(fitted):
    model, _ = fitted
    test = _segments(np.random.default_rng(3), 100)
    members = model.member_rewards(test.obs, test.action)
    assert members.shape == (3, 100, H)
    assert np.abs(members[0] - members[1]).mean() > 1e-3  # bootstraps and inits differ
    per_member = members.reshape(3, -1)
    np.testing.assert_allclose(per_member.mean(1), 0.0, atol=0.3)
    np.testing.assert_allclose(per_member.std(1), 1.0, atol=0.3)
    probs = model.pair_probs(test.obs[:50], test.action[:50], test.obs[50:], test.action[50:])
    assert probs.shape == (3, 50) and np.all((probs >= 0) & (probs <= 1))
    assert probs.std(0).max() > 0  # the members disagree somewhere: what PEBBLE's queries rank by


def test_without_normalisation_the_reward_is_the_raw_tanh_of_the_net():
    """QPA's and B-Pref's code: the agent's reward is each network's tanh output as it is (no
    shift and scale per fit), fitted by plain cross-entropy (no random answers mixed in)."""
    raw = dataclasses.replace(SMALL, normalize=False, random_response=0.0, members=1)
    model = MLPRewardEnsemble(raw, OBS, ACT, seed=0)
    assert model.fit(_labelled(300))["reward/val_accuracy"] > 0.8
    test = _segments(np.random.default_rng(3), 100)
    learned = model.predict(test.obs, test.action)
    assert np.abs(learned).max() <= 1 and learned.std() > 0.05  # (tanh's range, not std 1)
    assert pearson(learned.sum(-1), test.true_returns()) > 0.85
    np.testing.assert_allclose(learned, model._raw(test.obs.reshape(-1, OBS),
                                                   test.action.reshape(-1, ACT))[0].reshape(100, H),
                               atol=1e-6)  # fmt: skip


def test_plain_cross_entropy_stays_finite_where_the_model_is_sure():
    """With no random answers mixed in (QPA's rule), P rounds to 1 in float32 once a logit passes
    about 17, which 45 steps of tanh reward reach: a wrong answer there costs its logit, not inf
    (a walker run stopped on an infinite loss at its second fit, step 30,000)."""
    logits = jnp.asarray([[40.0, -40.0, 200.0, 0.5]])
    target, weight = jnp.asarray([0.0, 1.0, 0.0, 1.0]), jnp.ones((1, 4))
    raw = MLPRewardEnsemble(dataclasses.replace(SMALL, random_response=0.0), OBS, ACT)
    expected = (40 + 40 + 200 + np.log1p(np.exp(-0.5))) / 4  # softplus of each wrong-way logit
    np.testing.assert_allclose(raw._loss(logits, target, weight), [expected], rtol=1e-5)
    grads = jax.grad(lambda z: raw._loss(z, target, weight).sum())(logits)
    assert np.isfinite(grads).all() and grads[0, 2] == pytest.approx(0.25, rel=1e-5)
    # with random answers (Christiano's 10%): the mixture's own value, also where P rounds to 1
    mixed = MLPRewardEnsemble(SMALL, OBS, ACT)
    eps, p = SMALL.random_response, 1 / (1 + np.exp(-np.float64([40.0, -40.0, 200.0, 0.5])))
    p_right = (1 - eps) * p + eps / 2
    direct = -np.log(np.where([0, 1, 0, 1], p_right, 1 - p_right)).mean()
    np.testing.assert_allclose(mixed._loss(logits, target, weight), [direct], rtol=1e-5)
    # the validation loss of a model sure of a wrong answer is large and finite
    assert 10 < raw._scores(np.asarray([1.0, 0.0]), np.asarray([0.0, 1.0]))["reward/val_loss"] < 20


def test_a_dispatched_step_reward_equals_predict(fitted):
    model, _ = fitted
    test = _segments(np.random.default_rng(4), 4)
    for obs, action in zip(test.obs.reshape(-1, OBS)[:20], test.action.reshape(-1, ACT)[:20]):
        pending = model.dispatch_step_reward(obs, jnp.asarray(action))  # a device action
        # (one step against a batch: another computation, equal up to rounding)
        np.testing.assert_allclose(
            pending(), model.predict(obs[None], action[None]), rtol=1e-5, atol=1e-6
        )
    with pytest.raises(ValueError, match="obs of size 5 and actions of size 2; got 5 and 3"):
        model.dispatch_step_reward(obs, jnp.zeros(3))
    with pytest.raises(ValueError, match=r"one step: .* got \(2, 5\) and \(2, 2\)"):
        model.dispatch_step_reward(np.zeros((2, OBS)), jnp.zeros((2, ACT)))


def test_split_and_bootstrap_are_stable_as_labels_arrive():
    model = MLPRewardEnsemble(SMALL, OBS, ACT, seed=1)
    val_a, w_a = model._split(50)
    val_b, w_b = model._split(80)
    np.testing.assert_array_equal(val_a, val_b[:50])
    np.testing.assert_array_equal(w_a, w_b[:50])
    assert abs(w_b.mean() - 1.0) < 0.3  # Poisson(1) weights


def test_refits_take_at_most_refit_epochs_but_min_steps():
    cfg = RewardConfig(hidden_dims=(16,), max_epochs=12, refit_epochs=2, min_steps=10,
                       stop_accuracy=2.0, batch_size=32)  # fmt: skip
    model = MLPRewardEnsemble(cfg, OBS, ACT, seed=0)
    data = _labelled(100)
    first = model.fit(data)
    assert first["reward/epochs"] == 12  # the first fit: max_epochs
    batches = -(-int(first["reward/labels_train"]) // 32)
    assert batches < 5  # so 2 epochs are fewer than min_steps
    assert model.fit(data)["reward/epochs"] == -(-10 // batches)  # a refit: min_steps rule
    model = MLPRewardEnsemble(dataclasses.replace(cfg, min_steps=0), OBS, ACT, seed=0)
    model.fit(data)
    assert model.fit(data)["reward/epochs"] == 2
    with pytest.raises(ValueError, match="refit_epochs=0 is invalid"):
        RewardConfig(refit_epochs=0)


def test_skip_is_ignored_and_equal_is_trained_towards_one_half():
    rng = np.random.default_rng(0)
    left, right = _segments(rng, 40), _segments(rng, 40)
    data = PreferenceData()
    data.add(left, right, [Label.SKIP] * 40)
    model = MLPRewardEnsemble(SMALL, OBS, ACT)
    with pytest.raises(ValueError, match="no labels to train on: 40 labels, 40 of them skipped"):
        model.fit(data)
    data.add(left, left, [Label.EQUAL] * 40)  # identical segments, equal: loss at its minimum
    metrics = model.fit(data)
    eps = SMALL.random_response
    p = (1 - eps) * 0.5 + eps / 2
    assert metrics["reward/train_loss"] == pytest.approx(-np.log(p), rel=1e-3)


def test_save_load_roundtrip(fitted, tmp_path):
    model, _ = fitted
    model.save(tmp_path / "rm")
    back = load_reward_model(tmp_path / "rm")
    test = _segments(np.random.default_rng(5), 20)
    np.testing.assert_allclose(
        back.predict(test.obs, test.action),
        model.predict(test.obs, test.action),
        rtol=1e-5,
        atol=1e-5,
    )
    with pytest.raises(FileNotFoundError, match="not a saved reward model"):
        load_reward_model(tmp_path)


def test_wrong_input_size_is_a_clear_error(fitted):
    model, _ = fitted
    with pytest.raises(ValueError, match="obs of size 5 and actions of size 2; got 4 and 2"):
        model.predict(np.zeros((3, 4)), np.zeros((3, 2)))


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="RewardConfig.output='relu'"):
        RewardConfig(output="relu")
    with pytest.raises(ValueError, match="RewardConfig.members=0"):
        RewardConfig(members=0)


class _ActionReward:
    """Reward = the first action component, as the model sees it (in [-1, 1])."""

    def predict(self, obs, action):
        return action[..., 0]


def test_learned_reward_wrapper_rescales_actions_like_prefrl():
    raw = gym.make("Pendulum-v1")  # torque in [-2, 2]
    env = LearnedReward(raw, _ActionReward())
    env.reset(seed=0)
    _, reward, _, _, info = env.step(np.array([2.0], np.float32))
    assert reward == pytest.approx(1.0)
    assert "true_reward" in info and info["true_reward"] < 0
    _, reward, *_ = env.step(np.array([-1.0], np.float32))
    assert reward == pytest.approx(-0.5)

    wrapped = LearnedReward(make_env("Pendulum-v1", seed=0), _ActionReward())  # already [-1, 1]
    wrapped.reset()
    assert wrapped.step(np.array([0.25], np.float32))[1] == pytest.approx(0.25)


def test_learned_reward_wrapper_with_a_fitted_model(fitted):
    model, _ = fitted
    env = LearnedReward(make_env("toy:point-reach", seed=0), _SliceModel(model))
    obs, _ = env.reset()
    _, reward, *_ = env.step(np.zeros(2, np.float32))
    assert reward == pytest.approx(
        float(model.predict(obs[None, : OBS - 0][:, :5], np.zeros((1, 2)))[0]), rel=1e-5
    )


class _SliceModel:
    """Feeds the toy env's 6-dim observation to the 5-input test model (first 5 entries)."""

    def __init__(self, model):
        self.model = model

    def predict(self, obs, action):
        return self.model.predict(obs[..., :5], action)


def test_learned_reward_ranks_compares_a_runs_own_segments_with_a_references(tmp_path, monkeypatch):
    """tools/learned_reward_ranks.py on made-up runs: the reference's buffer cut into segments of
    the pool's length from its last steps; a learned reward that pays what the true one does not
    prefers the run's own segments where the true reward prefers the reference's."""
    import sys
    from pathlib import Path

    from prefrl.rundir.checkpoints import begin_checkpoint, commit_checkpoint

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import learned_reward_ranks as tool

    rng = np.random.default_rng(0)
    run, reference = tmp_path / "pref_s0", tmp_path / "true_s0"
    ckpt = begin_checkpoint(run, 100)
    obs = rng.normal(size=(40, 5, 3))
    obs[..., 0] = 1.0  # (what the stand-in learned reward pays)
    np.savez(ckpt / "segments.npz", obs=obs, action=rng.normal(size=(40, 5, 2)),
             reward=np.zeros((40, 5)))  # fmt: skip
    (ckpt / "reward_model").mkdir()
    commit_checkpoint(ckpt)
    ckpt = begin_checkpoint(reference, 100)
    steps = np.arange(103)  # (the last 100: 20 segments of 5; the first 3 left out)
    buffer_obs = np.zeros((103, 3))
    np.savez(ckpt / "buffer.npz", obs=buffer_obs, action=np.zeros((103, 2)),
             reward=np.where(steps >= 3, 1.0, -50.0))  # fmt: skip
    commit_checkpoint(ckpt)

    class FirstEntry:  # the learned reward: the observation's first entry
        def predict(self, obs, action):
            return obs[..., 0]

    monkeypatch.setattr(tool, "load_reward_model", lambda path: FirstEntry())
    segments = tool.reference_segments(reference, 5, 100)
    assert segments[0].shape == (20, 5, 3) and np.all(segments[2] == 1.0)
    out = tool.compare(run, segments, 1000, np.random.default_rng(1))
    assert out["true"] == [0.0, 5.0] and out["learned"] == [5.0, 0.0]
    assert out["true prefers the reference"] == 1.0 and out["learned prefers the reference"] == 0.0
    assert out["learned vs true, both"] == pytest.approx(-1.0)


def test_learned_reward_ranks_plays_a_reference_that_keeps_no_replay_buffer(tmp_path):
    """A PPO run keeps no replay buffer: its policy is played from seeded resets instead, and
    cut into windows within each episode, its rewards the env's."""
    import sys
    from pathlib import Path

    import gymnasium

    from prefrl import PPO, PPOConfig, RLLearner

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import learned_reward_ranks as tool

    small = PPOConfig(hidden_dims=(8,), rollout_steps=200, minibatch_size=100, epochs=1)
    RLLearner("Pendulum-v1", agent=PPO(small, 3, 1), steps=400, eval_interval=400,
              eval_episodes=1, runs_dir=tmp_path, name="ppo").train()  # fmt: skip
    obs, action, reward = tool.reference_segments(tmp_path / "ppo", 60, 600)
    assert obs.shape == (9, 60, 3) and action.shape == (9, 60, 1)  # 3 episodes of 200: 3 x 3
    env = gymnasium.make("Pendulum-v1")
    first, _ = env.reset(seed=0)
    np.testing.assert_allclose(obs[0, 0], first, rtol=1e-5, atol=1e-6)  # the first seeded reset
    theta, speed = np.arctan2(obs[..., 1], obs[..., 0]), obs[..., 2]
    torque = 2.0 * np.clip(action[..., 0], -1, 1)  # (Pendulum's [-2, 2], prefrl's [-1, 1])
    np.testing.assert_allclose(
        reward, -(theta**2 + 0.1 * speed**2 + 0.001 * torque**2), rtol=1e-4, atol=1e-4
    )  # Pendulum's own reward of each step
