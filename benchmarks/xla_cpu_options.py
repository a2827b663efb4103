"""What each of prefrl's XLA:CPU compile options (`prefrl.xla.CPU_STEP_OPTIONS`) buys its
training steps.

    python benchmarks/xla_cpu_options.py --rounds 12

Compiles each training step several ways: plain `jax.jit` (the baseline), with each option of
`CPU_STEP_OPTIONS` alone, and, when there are several, with all of them (what prefrl uses). Then
it times them in turns, round after round, from the same start on the same inputs. It prints each
variant's median rate and the median of its per-round ratio to the baseline, and how far its
final state is from the baseline's (0 means bitwise equal).

Steps measured:
- SAC's update: HalfCheetah's sizes, batch 256, 2x256.
- IQL's update: Hopper's sizes, 50 scanned steps a call.
- The MLP reward ensemble's training step: its defaults (3 members of 3x256, batch 128 pairs)
  on 50-step segments.

Writes nothing.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from sac_update_cost import random_batch

from prefrl.agents import SAC, SACConfig
from prefrl.agents.iql import IQL, IQLConfig, OfflineArrays
from prefrl.reward import MLPRewardEnsemble, RewardConfig
from prefrl.xla import CPU_STEP_OPTIONS


class Case(NamedTuple):
    fn: Callable  # the unjitted step
    jit_kwargs: dict
    init: Callable[[], tuple]  # fresh donated state (a tuple of the step's leading arguments)
    rest: tuple  # the step's other arguments, the same every call
    calls: int  # calls per round


def sac_case(rng: np.random.Generator) -> Case:
    sac = SAC(SACConfig(), 17, 6)
    return Case(
        sac._update,
        {"donate_argnums": 0},
        lambda: (sac.init(jax.random.PRNGKey(0)),),
        (random_batch(rng, 256, 17, 6), jax.random.key(1)),
        150,
    )


def iql_case(rng: np.random.Generator) -> Case:
    iql = IQL(IQLConfig(), 11, 3)
    n = 20_000
    data = OfflineArrays(
        jnp.asarray(rng.standard_normal((n, 11)), jnp.float32),
        jnp.asarray(rng.uniform(-1, 1, (n, 3)), jnp.float32),
        jnp.asarray(rng.standard_normal(n), jnp.float32),
        jnp.asarray(rng.standard_normal((n, 11)), jnp.float32),
        jnp.asarray(rng.random(n) < 0.01, jnp.float32),
    )
    return Case(
        lambda state, data, key: iql._update(state, data, key, steps=50),
        {"donate_argnums": 0},
        lambda: (iql.init(jax.random.PRNGKey(0)),),
        (data, jax.random.key(1)),
        6,
    )


def reward_case(rng: np.random.Generator) -> Case:
    model = MLPRewardEnsemble(RewardConfig(), 17, 6)
    pairs, length, b = 1024, 50, model.config.batch_size
    data = tuple(
        jnp.asarray(rng.standard_normal((pairs, length, dim)), jnp.float32)
        for dim in (17, 6, 17, 6)
    )
    idx = rng.choice(pairs, b, replace=False)
    target = rng.integers(0, 2, b).astype(np.float32)
    weight = np.ones((model.num_members, b), np.float32)

    def step(params, opt_state, *rest):
        return model._train_step_impl(params, opt_state, *rest)[:2]

    return Case(
        step,
        {"donate_argnums": (0, 1)},
        lambda: (jax.tree.map(jnp.copy, model.params), jax.tree.map(jnp.copy, model.opt_state)),
        (data, idx, target, weight, jax.random.key(1)),
        8,
    )


CASES = {"sac_update": sac_case, "iql_update": iql_case, "reward_train_step": reward_case}


def variants() -> dict[str, dict | None]:
    out: dict[str, dict | None] = {"plain jit": None}
    for name, value in CPU_STEP_OPTIONS.items():
        out[f"{name}={value}"] = {name: value}
    if len(CPU_STEP_OPTIONS) > 1:  # with one option, the line above already is prefrl's set
        out["all (prefrl)"] = dict(CPU_STEP_OPTIONS)
    return out


def measure(case: Case, rounds: int) -> None:
    compiled, state = {}, {}
    for name, options in variants().items():
        compiled[name] = jax.jit(case.fn, compiler_options=options, **case.jit_kwargs)
        state[name] = case.init()

    def run(name: str) -> float:
        f, s = compiled[name], state[name]
        start = time.perf_counter()
        for _ in range(case.calls):
            s = f(*s, *case.rest)[: len(s)]  # the new state; metrics, if any, follow it
        jax.block_until_ready(s)
        state[name] = s
        return case.calls / (time.perf_counter() - start)

    for name in compiled:  # compile, and warm up
        run(name)
    rates: dict[str, list[float]] = {name: [] for name in compiled}
    for _ in range(rounds):
        for name in compiled:
            rates[name].append(run(name))
    base_leaves = jax.tree.leaves(jax.device_get(state["plain jit"]))
    for name, r in rates.items():
        leaves = jax.tree.leaves(jax.device_get(state[name]))
        diff = max(
            float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)), initial=0))
            for a, b in zip(base_leaves, leaves)
        )
        paired = float(np.median(np.divide(r, rates["plain jit"])))
        print(
            f"  {name:50s} {np.median(r):8.1f} calls/s  x{paired:.3f} (paired)  "
            f"max |state - baseline's| {diff:.2g}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds={args.rounds} is invalid: expected a positive integer")
    if jax.default_backend() != "cpu":
        parser.error(f"JAX runs on {jax.default_backend()!r}: these options apply to the CPU only")
    rng = np.random.default_rng(0)
    for name in args.cases:
        print(f"{name} ({args.rounds} rounds):", flush=True)
        measure(CASES[name](rng), args.rounds)


if __name__ == "__main__":
    main()
