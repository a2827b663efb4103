"""Ways to arrange one SAC step (act, update, env step, replay), timed in one process.

    python benchmarks/sac_loop_variants.py --env HalfCheetah-v5 --steps 300 --rounds 12

Every variant does one gradient step per env step on batches of 256, with the same networks.
The variants run in turn, round after round, so the machine's drift hits them alike; the script
prints each round's rates and, per variant, the median of its round-by-round ratio to
`overlapped` (the order `prefrl.rl.learner` uses) and to `ceiling`. It writes nothing.

- `overlapped`: dispatch the act; dispatch the update on a batch drawn during the previous
  update (queued right behind the act); read the action; step the env and store the transition
  while the update runs; draw the next batch.
- `read_first`: as `overlapped`, but the action is read before the update is dispatched, so the
  cores idle while the host turns the action around and launches the update (the loop's order
  until 2026-11-23).
- `inline`: as `overlapped`, but the batch is drawn right before the update, on the critical path.
- `fused`: one jitted call updates and then acts on the new observation with the new parameters
  (one launch per step instead of two; the env step can no longer run during the update).
- `device_buffer`: `fused`, with the replay buffer held by JAX: the call stores the last
  transition and samples the batch itself, so no batch crosses from numpy.
- `packed`: `overlapped`, with the agent's state in two flat arrays (fewer arguments per call).
- `pebble`: the preference loop's step (`prefrl train`): `overlapped`, with the batch drawn
  inline and the step's learned reward (a 3x256 reward ensemble) dispatched after the act and
  before the update, read when the transition is stored.
- `pebble_reward_after`: `pebble`, with the reward asked for after the env step, where it waits
  for the whole update (JAX runs CPU computations in dispatch order): the loop's order until
  2026-11-23.
- `ceiling`: the update alone on batches already drawn.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from prefrl.agents import SAC, SACConfig
from prefrl.data import Batch, ReplayBuffer
from prefrl.envs import make_env
from prefrl.reward import MLPRewardEnsemble, RewardConfig
from prefrl.xla import jit_step

BATCH = 256
CAPACITY = 100_000


class Bench:
    def __init__(self, env_id: str):
        self.env = make_env(env_id, seed=0)
        self.sac = SAC(SACConfig(), self.env.obs_dim, self.env.action_dim)
        self.key = jax.random.key(1, impl="rbg")
        self.rng = np.random.default_rng(0)
        self.buf = ReplayBuffer(CAPACITY, self.env.obs_dim, self.env.action_dim)
        self.obs, _ = self.env.reset(seed=0)
        self.last = None  # the newest transition: the device-buffer call stores it next
        for _ in range(2000):
            self.env_step(self.rng.uniform(-1, 1, self.env.action_dim).astype(np.float32))
        self.device_buf = (
            tuple(jnp.asarray(getattr(self.buf, f)) for f in ReplayBuffer.FIELDS),
            jnp.asarray(self.buf.ptr, jnp.int32),
            jnp.asarray(self.buf.size, jnp.int32),
        )
        self._build_packing()
        # Compiled as prefrl's own update is (jit_step), so only the arrangement differs.
        self.fused = jit_step(self._fused, donate_argnums=0)
        self.fused_device = jit_step(self._fused_device, donate_argnums=(0, 1))
        self.packed_update = jit_step(
            lambda p, batch, key: self._packed(*self.sac._update(self.unpack(p), batch, key)),
            donate_argnums=0,
        )
        self.packed_act = jax.jit(
            lambda p, obs, key, step: self.sac._act(self.unpack(p).actor_params, obs, key, step)
        )
        init = self.sac.init(jax.random.PRNGKey(0))
        copy = jax.jit(lambda s: jax.tree.map(jnp.copy, s))  # each variant owns its buffers
        self.states = {name: copy(init) for name in VARIANTS if name != "packed"}
        self.states["packed"] = jax.jit(self.pack)(init)
        self.fixed = [self.buf.sample(self.rng, BATCH) for _ in range(16)]
        self.reward = MLPRewardEnsemble(RewardConfig(), self.env.obs_dim, self.env.action_dim)

    def env_step(self, action) -> None:
        next_obs, reward, terminated, truncated, _ = self.env.step(action)
        self.buf.add(self.obs, action, reward, next_obs, terminated)
        self.last = (self.obs, action, np.float32(reward), next_obs, np.float32(terminated))
        self.obs = self.env.reset()[0] if terminated or truncated else next_obs

    # ------------------------------------------------------------------ jitted variants
    def _fused(self, state, batch, key, obs, step):
        state, _ = self.sac._update(state, batch, key)
        return state, self.sac._act(state.actor_params, obs, key, step)

    def _fused_device(self, state, device_buf, last, key, obs, step):
        arrays, ptr, size = device_buf
        arrays = tuple(
            jax.lax.dynamic_update_index_in_dim(x, v.astype(x.dtype), ptr, 0)
            for x, v in zip(arrays, last, strict=True)
        )
        ptr, size = (ptr + 1) % CAPACITY, jnp.minimum(size + 1, CAPACITY)
        idx = jax.random.randint(jax.random.fold_in(key, state.step), (BATCH,), 0, size)
        state, _ = self.sac._update(state, Batch(*(x[idx] for x in arrays)), key)
        action = self.sac._act(state.actor_params, obs, key, step)
        return state, (arrays, ptr, size), action

    def _packed(self, state, metrics):
        return self.pack(state), metrics

    def _build_packing(self) -> None:
        template = self.sac.init(jax.random.PRNGKey(0))
        leaves, self.treedef = jax.tree.flatten(template)
        self.dtypes = [x.dtype for x in leaves]
        self.shapes = [x.shape for x in leaves]
        self.floats = [i for i, x in enumerate(leaves) if jnp.issubdtype(x.dtype, jnp.floating)]
        self.ints = [i for i in range(len(leaves)) if i not in self.floats]

    def pack(self, state):
        leaves = jax.tree.leaves(state)
        return (
            jnp.concatenate([leaves[i].reshape(-1) for i in self.floats]),
            jnp.stack([leaves[i].reshape(()) for i in self.ints]),
        )

    def unpack(self, packed):
        flat, ints = packed
        leaves, offset = [None] * len(self.shapes), 0
        for i in self.floats:
            size = int(np.prod(self.shapes[i]))
            leaves[i] = flat[offset : offset + size].reshape(self.shapes[i])
            offset += size
        for j, i in enumerate(self.ints):
            leaves[i] = ints[j].astype(self.dtypes[i])
        return jax.tree.unflatten(self.treedef, leaves)

    # ------------------------------------------------------------------ one timed stretch
    def run(self, variant: str, steps: int) -> float:
        sac, key, rng, buf = self.sac, self.key, self.rng, self.buf
        state = self.states[variant]
        start = time.perf_counter()
        if variant == "ceiling":
            for i in range(steps):
                state, _ = sac.update(state, self.fixed[i % 16], key)
        elif variant in ("overlapped", "read_first", "inline", "packed"):
            act = sac.act if variant != "packed" else self.packed_act
            batch = buf.sample(rng, BATCH)
            for step in range(steps):
                params = state if variant == "packed" else state.actor_params
                action = act(params, self.obs, key, step)
                if variant == "read_first":
                    action = np.asarray(action)
                if variant == "inline":
                    batch = buf.sample(rng, BATCH)
                if variant == "packed":
                    state, _ = self.packed_update(state, batch, key)
                else:
                    state, _ = sac.update(state, batch, key)
                self.env_step(np.asarray(action))
                if variant != "inline":
                    batch = buf.sample(rng, BATCH)
        elif variant in ("pebble", "pebble_reward_after"):
            for step in range(steps):
                obs = self.obs
                action = sac.act(state.actor_params, obs, key, step)
                if variant == "pebble":
                    pending = self.reward.dispatch_step_reward(obs, action)
                state, _ = sac.update(state, buf.sample(rng, BATCH), key)
                action = np.asarray(action)
                self.env_step(action)
                if variant == "pebble":
                    pending()
                else:
                    self.reward.predict(obs[None], action[None])
        elif variant == "fused":
            for step in range(steps):
                state, action = self.fused(state, buf.sample(rng, BATCH), key, self.obs, step)
                self.env_step(np.asarray(action))
        elif variant == "device_buffer":
            for step in range(steps):
                state, self.device_buf, action = self.fused_device(
                    state, self.device_buf, self.last, key, self.obs, step
                )
                self.env_step(np.asarray(action))
        jax.block_until_ready(state)
        self.states[variant] = state
        return steps / (time.perf_counter() - start)


VARIANTS = (
    "overlapped",
    "read_first",
    "inline",
    "fused",
    "device_buffer",
    "packed",
    "pebble",
    "pebble_reward_after",
    "ceiling",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--steps", type=int, default=300, help="steps per variant per round")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    args = parser.parse_args()
    for name in ("steps", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}={getattr(args, name)} is invalid: expected a positive integer")
    variants = list(dict.fromkeys(["overlapped", *args.variants, "ceiling"]))
    bench = Bench(args.env)
    for name in variants:
        bench.run(name, 20)  # compile
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(args.rounds):
        for name in variants if r % 2 == 0 else variants[::-1]:
            rates[name].append(bench.run(name, args.steps))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in rates.items()))
    print(f"\n{'variant':20s} {'median steps/s':>14s} {'vs overlapped':>14s} {'vs ceiling':>11s}")
    for name, r in rates.items():
        vs_loop = np.median(np.divide(r, rates["overlapped"]))
        vs_ceiling = np.median(np.divide(r, rates["ceiling"]))
        print(f"{name:20s} {np.median(r):14.1f} {vs_loop:13.2f}x {vs_ceiling:10.0%}")


if __name__ == "__main__":
    main()
