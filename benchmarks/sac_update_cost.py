"""Where the SAC update's time goes: its FLOPs against this machine's bare matmul rate.

    python benchmarks/sac_update_cost.py --obs-dim 17 --action-dim 6 --rounds 5

Prints the compiled update's FLOPs (XLA's cost analysis), its rate (updates/s and GFLOP/s), and
the GFLOP/s of a plain chain of batch x width x width matmuls with ReLU, the same shapes as the
hidden layers; the ratio of the two is the share of the update's time its FLOPs explain. The two
measurements alternate, round after round. Defaults: HalfCheetah's sizes, batch 256, 2x256.
Writes nothing.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from prefrl.agents import SAC, SACConfig
from prefrl.data import Batch

CHAIN = 40  # matmuls per call of the chain: long enough that the call's own cost vanishes


def random_batch(rng: np.random.Generator, n: int, obs_dim: int, action_dim: int) -> Batch:
    """A batch of `n` random transitions, none terminal: timing inputs for an update."""
    return Batch(
        rng.standard_normal((n, obs_dim)).astype(np.float32),
        rng.uniform(-1, 1, (n, action_dim)).astype(np.float32),
        rng.standard_normal(n).astype(np.float32),
        rng.standard_normal((n, obs_dim)).astype(np.float32),
        np.zeros(n, np.float32),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--obs-dim", type=int, default=17)
    parser.add_argument("--action-dim", type=int, default=6)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--updates", type=int, default=300, help="updates per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for name in ("obs_dim", "action_dim", "width", "batch", "updates", "rounds"):
        if getattr(args, name) < 1:
            flag = name.replace("_", "-")
            parser.error(f"--{flag}={getattr(args, name)} is invalid: expected a positive integer")

    config = SACConfig(hidden_dims=(args.width, args.width), batch_size=args.batch)
    sac = SAC(config, args.obs_dim, args.action_dim)
    state, key = sac.init(jax.random.PRNGKey(0)), jax.random.key(1, impl="rbg")
    rng = np.random.default_rng(0)
    batch = random_batch(rng, args.batch, args.obs_dim, args.action_dim)
    cost = sac.update.lower(state, batch, key).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    update_flops = float(cost["flops"])

    x = jnp.asarray(rng.standard_normal((args.batch, args.width)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((args.width, args.width)) / args.width**0.5, jnp.float32)

    @jax.jit
    def chain(x, w):
        for _ in range(CHAIN):  # unrolled: a loop around it would add its own overhead
            x = jax.nn.relu(x @ w)
        return x

    chain_flops = CHAIN * 2 * args.batch * args.width * args.width

    def time_updates() -> float:
        nonlocal state
        start = time.perf_counter()
        for _ in range(args.updates):
            state, _ = sac.update(state, batch, key)
        jax.block_until_ready(state)
        return args.updates / (time.perf_counter() - start)

    def time_chain() -> float:
        calls = max(1, args.updates // 20)
        start = time.perf_counter()
        for _ in range(calls):
            chain(x, w).block_until_ready()
        return calls * chain_flops / (time.perf_counter() - start) / 1e9

    time_updates(), time_chain()  # compile
    updates, matmul = [], []
    for r in range(args.rounds):
        updates.append(time_updates())
        matmul.append(time_chain())
        print(
            f"round {r + 1}: {updates[-1]:.1f} updates/s "
            f"({updates[-1] * update_flops / 1e9:.1f} GFLOP/s), matmul chain {matmul[-1]:.1f} GFLOP/s"
        )
    rate, chain_rate = float(np.median(updates)), float(np.median(matmul))
    share = np.median(np.divide(updates, matmul)) * update_flops / 1e9
    print(
        f"\nupdate: {update_flops / 1e6:.0f} MFLOP, {rate:.1f} updates/s = "
        f"{rate * update_flops / 1e9:.1f} GFLOP/s; bare matmuls {chain_rate:.1f} GFLOP/s; "
        f"the FLOPs at the matmul rate explain {share:.0%} of the update's time (median of rounds)"
    )


if __name__ == "__main__":
    main()
