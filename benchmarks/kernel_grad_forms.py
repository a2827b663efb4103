"""Why prefrl's actor heads use `prefrl.nn.dense.narrow_dot_general`: two forms of a Dense
layer's kernel gradient, alone and inside SAC's update.

    python benchmarks/kernel_grad_forms.py --rounds 14

Part 1 times the kernel gradient of a batch-256 layer for several (inputs, outputs) sizes, in
autodiff's form x^T @ g and as (g^T @ x)^T behind an optimisation barrier (the form
`narrow_dot_general` uses when a layer has fewer outputs than inputs). Each call chains 20 of
them, so the call's own cost vanishes.

Part 2 times SAC's update (HalfCheetah's sizes, batch 256, 2x256) with the actor's heads as plain
`nn.Dense` and as prefrl builds them, in turns, round after round. It prints the median of the
per-round ratio and checks that both give the same state, bit for bit. Writes nothing.
"""

from __future__ import annotations

import argparse
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from sac_update_cost import random_batch

from prefrl.agents import SAC, SACConfig
from prefrl.nn import MLP, TanhGaussianActor
from prefrl.xla import jit_step

CHAIN = 20
SHAPES = [(256, 6), (256, 12), (256, 1), (256, 256), (17, 256)]  # (inputs, outputs)


class PlainHeadsActor(TanhGaussianActor):
    """TanhGaussianActor with plain `nn.Dense` heads (the same parameters)."""

    @nn.compact
    def __call__(self, obs):
        h = MLP(self.hidden_dims)(obs)
        mean = nn.Dense(self.action_dim)(h)
        log_std = nn.Dense(self.action_dim)(h)
        return mean, jnp.clip(log_std, self.log_std_min, self.log_std_max)


def interleave(fns: dict, args: tuple, calls: int, rounds: int) -> dict[str, list[float]]:
    """Calls per second of each function, `rounds` times, taking turns."""
    for f in fns.values():
        jax.block_until_ready(f(*args))
    rates: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, f in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                out = f(*args)
            jax.block_until_ready(out)
            rates[name].append(calls / (time.perf_counter() - start))
    return rates


def kernel_gradients(rounds: int) -> None:
    rng = np.random.default_rng(0)
    print(f"kernel gradient of a batch-256 Dense layer, µs each (median of {rounds} rounds):")
    for n_in, n_out in SHAPES:
        x = jnp.asarray(rng.standard_normal((256, n_in)), jnp.float32)
        g = jnp.asarray(rng.standard_normal((256, n_out)), jnp.float32)

        def autodiff(x, g):
            acc = jnp.zeros((x.shape[1], g.shape[1]))
            for i in range(CHAIN):
                acc = acc + jnp.einsum("bi,bo->io", x + i, g)
            return acc

        def wide(x, g):
            acc = jnp.zeros((x.shape[1], g.shape[1]))
            for i in range(CHAIN):
                acc = acc + lax.optimization_barrier(jnp.einsum("bo,bi->oi", g, x + i)).T
            return acc

        fns = {"x^T g": jax.jit(autodiff), "(g^T x)^T": jax.jit(wide)}
        rates = interleave(fns, (x, g), 10, rounds)
        times = {k: 1e6 / CHAIN / float(np.median(v)) for k, v in rates.items()}
        print(
            f"  {n_in:4d} inputs, {n_out:4d} outputs: x^T g {times['x^T g']:6.1f}, "
            f"(g^T x)^T {times['(g^T x)^T']:6.1f}"
        )


def sac_update(rounds: int) -> None:
    batch = random_batch(np.random.default_rng(0), 256, 17, 6)
    key = jax.random.key(1, impl="rbg")
    agents = {"plain heads": SAC(SACConfig(), 17, 6), "prefrl": SAC(SACConfig(), 17, 6)}
    plain = agents["plain heads"]
    plain.nets = plain.nets._replace(actor=PlainHeadsActor(6, plain.config.hidden_dims))
    plain.update = jit_step(plain._update, donate_argnums=0)
    states = {k: a.init(jax.random.PRNGKey(0)) for k, a in agents.items()}
    rates: dict[str, list[float]] = {k: [] for k in agents}
    for r in range(rounds + 1):  # round 0 compiles and warms up
        for name, agent in agents.items():
            state, start = states[name], time.perf_counter()
            for _ in range(150):
                state, _ = agent.update(state, batch, key)
            jax.block_until_ready(state)
            states[name] = state
            if r:
                rates[name].append(150 / (time.perf_counter() - start))
    same = all(
        np.array_equal(a, b)
        for a, b in zip(*(jax.tree.leaves(jax.device_get(s)) for s in states.values()))
    )
    ratio = float(np.median(np.divide(rates["prefrl"], rates["plain heads"])))
    print(
        f"SAC update ({rounds} rounds of 150): plain heads "
        f"{np.median(rates['plain heads']):.1f}/s, prefrl {np.median(rates['prefrl']):.1f}/s, "
        f"x{ratio:.3f} (median of the per-round ratios); same state bit for bit: {same}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=14)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds={args.rounds} is invalid: expected a positive integer")
    kernel_gradients(min(args.rounds, 7))
    sac_update(args.rounds)


if __name__ == "__main__":
    main()
