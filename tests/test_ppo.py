"""PPO's jitted update, and PEBBLE's k-NN state-entropy reward."""

import jax
import numpy as np
import pytest

from prefrl.agents import PPO, PPOConfig, Rollout
from prefrl.data import ReplayBuffer
from prefrl.reward.knn_entropy import KnnEntropyReward


def test_ppo_moves_the_policy_towards_rewarded_actions():
    """A one-step bandit: reward = first action component. Mean action must rise."""
    cfg = PPOConfig(hidden_dims=(32,), rollout_steps=256, minibatch_size=64, epochs=4, lr=3e-3)
    ppo = PPO(cfg, obs_dim=3, action_dim=2)
    state = ppo.init(jax.random.key(0))
    key = jax.random.key(1)
    obs = np.ones((256, 3), np.float32)
    start = float(ppo.act(state.params, obs[:1], key, 0, deterministic=True)[0][0, 0])
    for i in range(15):
        _, raw, log_prob = ppo.act(state.params, obs, key, i)
        raw, log_prob = np.asarray(raw), np.asarray(log_prob)
        reward = np.clip(raw[:, 0], -1, 1)
        ones = np.ones(256, np.float32)
        rollout = Rollout(obs, raw, log_prob, reward.astype(np.float32), obs, ones, ones)
        state, metrics = ppo.update(state, rollout, key)
    end = float(ppo.act(state.params, obs[:1], key, 0, deterministic=True)[0][0, 0])
    assert end > start + 0.3
    assert np.isfinite(float(metrics["policy_loss"])) and int(state.step) == 15
    # Round trip through bytes (checkpoints).
    back = ppo.state_from_bytes(ppo.state_to_bytes(state))
    np.testing.assert_allclose(
        np.asarray(ppo.act(back.params, obs[:1], key, 0, deterministic=True)[0]),
        np.asarray(ppo.act(state.params, obs[:1], key, 0, deterministic=True)[0]),
    )


def test_knn_reward_is_larger_for_isolated_states():
    buffer = ReplayBuffer(1000, 2, 1)
    rng = np.random.default_rng(0)
    cluster = rng.normal(0, 0.01, (990, 2)).astype(np.float32)
    far = rng.normal(0, 10, (10, 2)).astype(np.float32)
    states = np.concatenate([cluster, far])
    buffer.add_batch(states, np.zeros((1000, 1)), np.zeros(1000), states, np.zeros(1000))
    knn = KnnEntropyReward(k=5, reference_size=1000)
    r = knn(np.array([[0.0, 0.0], [30.0, 30.0]], np.float32), buffer, rng)
    assert r[1] > 100 * r[0]
    # The k-th neighbour distance itself, against a sort.
    x = rng.normal(0, 1, (7, 2)).astype(np.float32)
    brute = np.sort(((x[:, None] - states[None]) ** 2).sum(-1), axis=1)[:, 5] ** 0.5
    np.testing.assert_allclose(np.asarray(knn._dist(x, states)), brute, rtol=1e-4, atol=1e-5)
    # Duplicated reference states (drawn with replacement) count once each, as in a sort.
    dup = np.concatenate([states[:3], states[:3], states[:3], far])
    brute = np.sort(((x[:, None] - dup[None]) ** 2).sum(-1), axis=1)[:, 5] ** 0.5
    np.testing.assert_allclose(np.asarray(knn._dist(x, dup)), brute, rtol=1e-4, atol=1e-5)
    state = knn.state_dict()
    assert state["count"] == 2
    again = KnnEntropyReward(k=5)
    again.load_state_dict(state)
    assert again.state_dict() == state


def test_ppo_normalises_observations_by_their_running_moments():
    """`normalize_obs`: the networks see each observation less the mean, over the std, of every
    rollout's observations so far, updated after each update (not by its gradients), kept
    through a checkpoint's bytes; without it the params hold no statistics."""
    cfg = PPOConfig(hidden_dims=(16,), rollout_steps=64, minibatch_size=32, epochs=2,
                    normalize_obs=True)  # fmt: skip
    ppo = PPO(cfg, obs_dim=3, action_dim=1)
    state = ppo.init(jax.random.key(0))
    rng = np.random.default_rng(0)
    seen = []
    for i in range(3):
        obs = rng.normal([5.0, -20.0, 0.0], [1.0, 10.0, 0.1], (64, 3)).astype(np.float32)
        seen.append(obs)
        _, raw, log_prob = ppo.act(state.params, obs, jax.random.key(1), i)
        zeros = np.zeros(64, np.float32)
        rollout = Rollout(obs, np.asarray(raw), np.asarray(log_prob), zeros, obs, zeros, zeros)
        state, _ = ppo.update(state, rollout, jax.random.key(2))
        norm = jax.tree.map(np.asarray, state.params["obs_norm"])
        every = np.concatenate(seen)
        np.testing.assert_allclose(norm["mean"], every.mean(0), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(norm["var"], every.var(0), rtol=1e-3, atol=1e-5)
        assert norm["count"] == len(every)
    # The actor sees the normalised observation: the same as an actor given it by hand.
    x = every[:5]
    scaled = (x - norm["mean"]) / np.sqrt(norm["var"] + 1e-8)
    mean, _ = ppo.actor.apply(state.params["actor"], scaled)
    acted = ppo.act(state.params, x, jax.random.key(1), 0, deterministic=True)[1]
    np.testing.assert_allclose(np.asarray(acted), np.asarray(mean), rtol=1e-4, atol=1e-5)
    back = ppo.state_from_bytes(ppo.state_to_bytes(state))
    np.testing.assert_allclose(np.asarray(back.params["obs_norm"]["var"]), norm["var"])
    plain = PPO(PPOConfig(hidden_dims=(16,)), obs_dim=3, action_dim=1)
    assert set(plain.init(jax.random.key(0)).params) == {"actor", "value"}


def test_ppo_learning_rate_falls_to_zero_over_lr_anneal_steps():
    """`lr_anneal_steps`: updates move the policy until that many env steps' updates are done,
    then leave it as it is; the fall resumes from a checkpoint's bytes where it was; a span
    shorter than one rollout is refused."""
    cfg = {"hidden_dims": (16,), "rollout_steps": 64, "minibatch_size": 32, "epochs": 2,
           "lr": 1e-2}  # fmt: skip
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(64, 3)).astype(np.float32)
    reward = obs[:, 0].copy()

    def actor_after(ppo, state, updates):
        moves = []
        for i in range(updates):
            _, raw, log_prob = ppo.act(state.params, obs, jax.random.key(1), i)
            zeros = np.zeros(64, np.float32)
            before = jax.tree.map(np.asarray, state.params["actor"])
            state, _ = ppo.update(state, Rollout(obs, np.asarray(raw), np.asarray(log_prob),
                                                 reward, obs, zeros, zeros), jax.random.key(2))  # fmt: skip
            after = jax.tree.map(np.asarray, state.params["actor"])
            moves.append(max(float(np.abs(a - b).max()) for a, b in
                             zip(jax.tree.leaves(after), jax.tree.leaves(before))))  # fmt: skip
        return state, moves

    annealed = PPO(PPOConfig(**cfg, lr_anneal_steps=128), obs_dim=3, action_dim=1)
    state, moves = actor_after(annealed, annealed.init(jax.random.key(0)), 3)
    assert moves[0] > 1e-3 and moves[1] > 0 and moves[2] == 0.0  # the rate reached 0 after two
    back = annealed.state_from_bytes(annealed.state_to_bytes(state))
    assert actor_after(annealed, back, 1)[1] == [0.0]
    constant = PPO(PPOConfig(**cfg), obs_dim=3, action_dim=1)
    assert min(actor_after(constant, constant.init(jax.random.key(0)), 3)[1]) > 1e-3
    with pytest.raises(ValueError, match="lr_anneal_steps.*at least rollout_steps"):
        PPOConfig(**cfg, lr_anneal_steps=10)
