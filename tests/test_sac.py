import dataclasses
import re

import jax
import numpy as np
import pytest

from prefrl.agents import SAC, SACConfig
from prefrl.data import Batch

OBS, ACT = 5, 2


def _batch(n, seed=0):
    rng = np.random.default_rng(seed)
    return Batch(
        rng.standard_normal((n, OBS), dtype=np.float32),
        rng.uniform(-1, 1, (n, ACT)).astype(np.float32),
        rng.standard_normal(n).astype(np.float32),
        rng.standard_normal((n, OBS), dtype=np.float32),
        (rng.random(n) < 0.1).astype(np.float32),
    )


def _leaves_changed(a, b):
    return [not np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))]


@pytest.mark.parametrize(
    "config",
    [
        SACConfig(hidden_dims=(32, 32), batch_size=16),
        SACConfig(
            hidden_dims=(32, 32, 32),
            batch_size=16,
            utd_ratio=4,
            critic_dropout=0.01,
            critic_layer_norm=True,
        ),  # DroQ
        SACConfig(hidden_dims=(16,), batch_size=8, num_critics=10, num_min_critics=2),
    ],  # RFCL-style
    ids=["sac", "droq", "ensemble10"],
)
def test_update_moves_every_network_and_reports_scalar_metrics(config):
    sac = SAC(config, OBS, ACT)
    state = sac.init(jax.random.PRNGKey(0))
    before = jax.device_get(state)
    critic_shapes = [x.shape for x in jax.tree.leaves(state.critic_params)]
    assert all(s[0] == config.num_critics for s in critic_shapes)  # vmapped ensemble
    state, metrics = sac.update(
        state, _batch(config.batch_size * config.utd_ratio), jax.random.PRNGKey(1)
    )
    metrics = jax.device_get(metrics)
    assert set(metrics) == {
        "critic_loss",
        "q_mean",
        "actor_loss",
        "entropy",
        "temperature",
        "temperature_loss",
    }
    assert all(np.shape(v) == () and np.isfinite(v) for v in metrics.values())
    assert all(_leaves_changed(before.actor_params, state.actor_params))
    assert all(_leaves_changed(before.critic_params, state.critic_params))
    assert all(_leaves_changed(before.target_critic_params, state.target_critic_params))
    assert float(state.log_temperature) != float(before.log_temperature)
    assert int(state.step) == 1


def test_a_fixed_temperature_stays_while_the_networks_learn():
    config = SACConfig(
        hidden_dims=(16,), batch_size=8, init_temperature=0.2, learn_temperature=False
    )
    sac = SAC(config, OBS, ACT)
    state = sac.init(jax.random.PRNGKey(0))
    before = jax.device_get(state)
    for i in range(3):
        state, metrics = sac.update(state, _batch(8, seed=i), jax.random.PRNGKey(i))
    np.testing.assert_allclose(float(jax.numpy.exp(state.log_temperature)), 0.2, rtol=1e-6)
    np.testing.assert_allclose(float(metrics["temperature"]), 0.2, rtol=1e-6)
    assert all(_leaves_changed(before.actor_params, state.actor_params))
    assert all(_leaves_changed(before.critic_params, state.critic_params))


def test_target_network_follows_with_tau():
    config = SACConfig(hidden_dims=(8,), batch_size=4, tau=0.25)
    sac = SAC(config, OBS, ACT)
    state = sac.init(jax.random.PRNGKey(0))
    old_target = jax.device_get(state.target_critic_params)
    state, _ = sac.update(state, _batch(4), jax.random.PRNGKey(1))
    expected = jax.tree.map(
        lambda new, old: 0.25 * new + 0.75 * old, jax.device_get(state.critic_params), old_target
    )
    for e, t in zip(jax.tree.leaves(expected), jax.tree.leaves(state.target_critic_params)):
        np.testing.assert_allclose(t, e, rtol=1e-5, atol=1e-6)


def test_update_is_deterministic_given_key_and_state():
    config = SACConfig(hidden_dims=(16, 16), batch_size=8, critic_dropout=0.1)
    sac = SAC(config, OBS, ACT)
    outs = []
    for _ in range(2):
        state = sac.init(jax.random.PRNGKey(0))
        for i in range(3):
            state, _ = sac.update(state, _batch(8, seed=i), jax.random.PRNGKey(5))
        outs.append(jax.device_get(state.actor_params))
    for a, b in zip(jax.tree.leaves(outs[0]), jax.tree.leaves(outs[1])):
        np.testing.assert_array_equal(a, b)


def test_act_is_bounded_and_deterministic_mode_is_repeatable():
    sac = SAC(SACConfig(hidden_dims=(16,)), OBS, ACT)
    state = sac.init(jax.random.PRNGKey(0))
    obs = np.random.default_rng(0).standard_normal((7, OBS)).astype(np.float32)
    key = jax.random.PRNGKey(3)
    sampled = np.asarray(sac.act(state.actor_params, obs, key, 0))
    assert sampled.shape == (7, ACT) and np.all(np.abs(sampled) < 1)
    assert not np.array_equal(sampled, np.asarray(sac.act(state.actor_params, obs, key, 1)))
    det = np.asarray(sac.act(state.actor_params, obs, key, 0, deterministic=True))
    np.testing.assert_array_equal(det, sac.act(state.actor_params, obs, key, 9, deterministic=True))
    assert np.asarray(sac.act(state.actor_params, obs[0], key, 0)).shape == (ACT,)


def test_an_act_queued_before_an_update_reads_the_parameters_before_it():
    """The loops dispatch `act`, then the update that donates the parameters `act` reads, and only
    then read the action: the actions and states must equal those of reading each action first."""
    sac = SAC(SACConfig(hidden_dims=(64, 64), batch_size=32), OBS, ACT)
    obs = np.random.default_rng(1).standard_normal((12, OBS)).astype(np.float32)
    key = jax.random.PRNGKey(4)
    runs = []
    for queued in (False, True):
        state, actions = sac.init(jax.random.PRNGKey(0)), []
        for t in range(12):
            action = sac.act(state.actor_params, obs[t], key, t)
            if not queued:
                action = np.asarray(action)
            state, _ = sac.update(state, _batch(32, seed=t), key)
            actions.append(np.asarray(action))
        runs.append((np.stack(actions), jax.device_get(state)))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    for a, b in zip(jax.tree.leaves(runs[0][1]), jax.tree.leaves(runs[1][1])):
        np.testing.assert_array_equal(a, b)


def test_state_serialisation_round_trip():
    sac = SAC(SACConfig(hidden_dims=(8,), batch_size=4), OBS, ACT)
    state, _ = sac.update(sac.init(jax.random.PRNGKey(0)), _batch(4), jax.random.PRNGKey(1))
    restored = sac.state_from_bytes(sac.state_to_bytes(state))
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(restored)):
        np.testing.assert_array_equal(a, b)


def test_tanh_gaussian_log_prob_matches_its_sampler():
    from prefrl.nn import tanh_gaussian_log_prob, tanh_gaussian_sample

    mean = jax.numpy.array([[0.3, -1.2]])
    log_std = jax.numpy.array([[-0.5, 0.1]])
    action, logp = tanh_gaussian_sample(mean, log_std, jax.random.PRNGKey(0))
    np.testing.assert_allclose(tanh_gaussian_log_prob(mean, log_std, action), logp, rtol=1e-4)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("discount", 1.5, "discount=1.5"),
        ("tau", 0.0, "tau=0.0"),
        ("num_min_critics", 3, "between 1 and num_critics"),
        ("critic_dropout", 1.0, "[0, 1)"),
        ("hidden_dims", (), "positive widths"),
        ("utd_ratio", 0, "utd_ratio=0"),
    ],
)
def test_bad_config_values_are_named(field, value, message):
    with pytest.raises(
        ValueError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")
    ):
        dataclasses.replace(SACConfig(), **{field: value})


def _param_copies(compiled_text: str) -> int:
    """Copies of whole parameter arrays (2-D or larger) in a compiled module's entry."""
    entry = compiled_text[compiled_text.index("ENTRY") :]
    return len(re.findall(r"= f32\[\d+(?:,\d+)+\]\{[\d,]+\} copy\(", entry))


@pytest.mark.parametrize(
    "config",
    [
        SACConfig(hidden_dims=(32, 32), batch_size=16),
        SACConfig(hidden_dims=(32, 32), batch_size=16, utd_ratio=3, critic_dropout=0.01),
    ],
)
def test_cpu_step_options_drop_parameter_copies_and_change_nothing(config):
    """`jit_step` (prefrl's compile options) against plain `jax.jit` on the same update. Two
    compilations may order float operations differently on another CPU (AVX-512): compared
    with a tolerance."""
    sac = SAC(config, OBS, ACT)
    plain = jax.jit(sac._update, donate_argnums=0)
    batch, key = _batch(config.batch_size * config.utd_ratio), jax.random.PRNGKey(1)
    template = sac.init(jax.random.PRNGKey(0))
    assert _param_copies(plain.lower(template, batch, key).compile().as_text()) > 0
    assert _param_copies(sac.update.lower(template, batch, key).compile().as_text()) == 0
    states = []
    for update in (plain, sac.update):
        state = sac.init(jax.random.PRNGKey(0))
        for _ in range(5):
            state, _ = update(state, batch, key)
        states.append(jax.device_get(state))
    for a, b in zip(jax.tree.leaves(states[0]), jax.tree.leaves(states[1]), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert any(_leaves_changed(jax.device_get(template), states[1]))  # the updates did something


def test_target_entropy_as_a_share_of_the_action_size():
    from prefrl.agents import SAC, SACConfig

    assert SAC(SACConfig(), 3, 6).target_entropy == -6.0
    assert SAC(SACConfig(target_entropy_scale=0.5), 3, 6).target_entropy == -3.0
    assert (
        SAC(SACConfig(target_entropy=-1.0, target_entropy_scale=0.5), 3, 6).target_entropy == -1.0
    )
    with pytest.raises(ValueError, match="target_entropy_scale.*positive"):
        SACConfig(target_entropy_scale=0.0)
