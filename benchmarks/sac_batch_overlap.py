"""Why the SAC loop draws its next batch while the update runs: the two orders, interleaved in one
process so the machine's drift hits both alike.

    python benchmarks/sac_batch_overlap.py --env HalfCheetah-v5 --steps 1500 --rounds 4

`inline`: draw the batch right before dispatching the update (on the critical path, since the
action of each step waits for the previous update). `overlapped`: draw it after the env step,
while the update runs (what `prefrl.loops.rl` does). `ceiling`: the update alone. Prints steps/s
per round, the medians and the round-by-round ratio (the drift cancels in it); writes nothing.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from prefrl.agents import SAC, SACConfig
from prefrl.data import ReplayBuffer
from prefrl.envs import make_env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    env = make_env(args.env, seed=0)
    sac = SAC(SACConfig(), env.obs_dim, env.action_dim)
    state, key = sac.init(jax.random.PRNGKey(0)), jax.random.key(1, impl="rbg")
    rng = np.random.default_rng(0)
    buf = ReplayBuffer(100_000, env.obs_dim, env.action_dim)
    obs, _ = env.reset(seed=0)

    def env_step(action):
        nonlocal obs
        next_obs, reward, terminated, truncated, _ = env.step(action)
        buf.add(obs, action, reward, next_obs, terminated)
        obs = env.reset()[0] if terminated or truncated else next_obs

    for _ in range(1000):
        env_step(rng.uniform(-1, 1, env.action_dim).astype(np.float32))

    def loop(overlapped: bool) -> float:
        nonlocal state
        start, batch = time.perf_counter(), buf.sample(rng, 256)
        for step in range(args.steps):
            action = np.asarray(sac.act(state.actor_params, obs, key, step))
            state, _ = sac.update(state, batch if overlapped else buf.sample(rng, 256), key)
            env_step(action)
            if overlapped:
                batch = buf.sample(rng, 256)
        jax.block_until_ready(state)
        return args.steps / (time.perf_counter() - start)

    def ceiling() -> float:
        nonlocal state
        batches = [buf.sample(rng, 256) for _ in range(16)]
        start = time.perf_counter()
        for i in range(args.steps):
            state, _ = sac.update(state, batches[i % 16], key)
        jax.block_until_ready(state)
        return args.steps / (time.perf_counter() - start)

    loop(False)  # compile
    rates: dict[str, list[float]] = {"inline": [], "overlapped": [], "ceiling": []}
    for r in range(args.rounds):
        rates["inline"].append(loop(False))
        rates["overlapped"].append(loop(True))
        rates["ceiling"].append(ceiling())
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in rates.items()))
    med = {k: float(np.median(v)) for k, v in rates.items()}
    paired = np.array(rates["overlapped"]) / np.array(rates["inline"])
    print("overlapped / inline, round by round: " + ", ".join(f"{x:.2f}" for x in paired))
    print(f"median of those: {np.median(paired):.2f}")
    print(
        f"median steps/s: inline {med['inline']:.1f}, overlapped {med['overlapped']:.1f} "
        f"({med['overlapped'] / med['inline']:.2f}x inline; {med['overlapped'] / med['ceiling']:.0%}"
        f" of the ceiling {med['ceiling']:.1f}, inline {med['inline'] / med['ceiling']:.0%})"
    )


if __name__ == "__main__":
    main()
