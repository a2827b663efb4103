"""Behaviour cloning of a dataset's actions into a SAC-shaped actor (tanh-squashed Gaussian, by
maximum likelihood): the starting policy of offline CPL, as in the CPL paper's offline runs.

The dataset lives on the device and `update` runs `steps` minibatch steps in one jitted
`lax.scan`, as IQL does.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import struct

from prefrl.nn import TanhGaussianActor, tanh_gaussian_log_prob
from prefrl.xla import jit_step


class BCState(struct.PyTreeNode):
    params: dict
    opt_state: optax.OptState
    step: jax.Array


class BehaviourCloning:
    def __init__(self, actor: TanhGaussianActor, lr: float = 3e-4, batch_size: int = 256):
        self.actor, self.batch_size = actor, batch_size
        self.tx = optax.adam(lr)
        self.update = jit_step(self._update, static_argnames="steps", donate_argnums=0)

    def init(self, params: dict) -> BCState:
        return BCState(params=params, opt_state=self.tx.init(params), step=jnp.zeros((), int))

    def _step(self, state: BCState, obs, action, key):
        idx = jax.random.randint(key, (self.batch_size,), 0, obs.shape[0])

        def loss_fn(p):
            mean, log_std = self.actor.apply(p, obs[idx])
            return -tanh_gaussian_log_prob(mean, log_std, action[idx]).mean()

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        updates, opt_state = self.tx.update(grads, state.opt_state)
        params = optax.apply_updates(state.params, updates)
        return BCState(params=params, opt_state=opt_state, step=state.step + 1), loss

    def _update(self, state: BCState, obs, action, key, steps: int):
        """`steps` steps on minibatches of (obs, action); returns (state, mean -log π)."""
        keys = jax.random.split(jax.random.fold_in(key, state.step), steps)
        state, losses = jax.lax.scan(lambda s, k: self._step(s, obs, action, k), state, keys)
        return state, losses.mean()
