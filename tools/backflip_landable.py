"""Whether a Hopper backflip run's flips can be landed at all: from states of its own leaps,
mid-flip, search action sequences for a landing, and compare with what its policy does there.

    python tools/backflip_landable.py ~/prefrl-logs/bench-backflip-practice/rule-reward_s0
    python tools/backflip_landable.py RUN --starts 20 --episodes 5 --iterations 8

The run's policy plays `--episodes` episodes from standing (seeded, no exploration noise), and
the env (`backflip.HopperBackflip`) keeps the states of its leaps (0.4 of a turn or more in, the
whole body in the air). From `--starts` of them, spread over the turns they were kept at, the
policy plays one clip, and a cross-entropy search (`--iterations` rounds of `--population`
action sequences, each action held `--hold` steps, the best `--elites` refitting a Gaussian
over them; the first round around the policy's own actions) looks for the sequence of the
clip's first `--horizon` steps that the rule scores best. Prints how saturated the actor's
actions are in the air (`--starts 0`: that alone) and, for each start, its turns so far and the
rule's score and landings of the policy and of the best sequence found: if the search lands
flips from most starts where the policy lands none, the landing is within reach of the Hopper
and its learning is what fails; if not even the search lands, the rule's landing is out of
reach from those flips.
"""

from __future__ import annotations

import argparse
import sys
from collections import deque
from pathlib import Path

import jax
import numpy as np

from prefrl.training.policies import load_policy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))  # (not a package)
import backflip

SATURATED = 3.0
"""A pre-tanh mean beyond which the action is saturated: tanh's slope there is under 0.01."""


def collect_starts(policy, episodes: int) -> tuple[list[tuple[np.ndarray, np.ndarray]], list]:
    """The leap states the env kept while the policy played `episodes` episodes from standing,
    and, for each step of a leap, the SAC actor's pre-tanh Gaussian there (mean, std)."""
    env = backflip.HopperBackflip(practice=0.0)
    actor = jax.jit(lambda obs: policy.sac.nets.actor.apply(policy.state.actor_params, obs))
    in_flight = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=1000 + episode)
        for _ in range(backflip.EPISODE_STEPS):
            if env._rule.leap > 0:
                mean, log_std = actor(obs.astype(np.float32))
                in_flight.append((np.asarray(mean), np.exp(np.asarray(log_std))))
            obs, *_ = env.step(policy(obs))
    return list(env.practice_starts), in_flight


def play(env, start, actions) -> tuple[float, int]:
    """The rule's score and flips landed of `actions` from `start` (a clip that starts there)."""
    env.practice_starts = deque([start])
    env.reset()
    score = 0.0
    for action in actions:
        _, reward, _, truncated, info = env.step(action)
        score += reward
        if truncated:
            break
    return score, info["episode_metrics"]["landed_flips"]


def policy_play(env, policy, start, horizon: int) -> tuple[np.ndarray, float, int]:
    """The policy's own actions over a clip from `start` (what the search starts around), and
    their rule score and flips landed, as `play` counts them."""
    env.practice_starts = deque([start])
    obs, _ = env.reset()
    actions, score = [], 0.0
    for _ in range(horizon):
        actions.append(policy(obs))
        obs, reward, _, truncated, info = env.step(actions[-1])
        score += reward
        if truncated:
            break
    return np.array(actions), score, info["episode_metrics"]["landed_flips"]


def search(env, start, own, args, rng) -> tuple[float, int]:
    """The best rule score (and its landings) the cross-entropy search finds from `start`,
    over sequences of actions each held `args.hold` steps, starting around the policy's `own`
    actions (their means over each held stretch)."""
    mean = own[: len(own) // args.hold * args.hold].reshape(-1, args.hold, own.shape[-1]).mean(1)
    std = np.full_like(mean, args.std)
    best = (-np.inf, 0)
    for round_ in range(args.iterations):
        plans = np.clip(mean + std * rng.standard_normal((args.population, *mean.shape)), -1, 1)
        if round_ == 0:  # (the policy's own plan is one of the first round's: never worse)
            plans[0] = np.clip(mean, -1, 1)
        results = [play(env, start, np.repeat(plan, args.hold, axis=0)) for plan in plans]
        scores = np.array([s for s, _ in results])
        top = np.argsort(scores)[-args.elites :]
        mean, std = plans[top].mean(0), plans[top].std(0) + 0.05
        best = max(best, results[top[-1]])
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a backflip run directory (or checkpoint)")
    parser.add_argument("--episodes", type=int, default=6, help="episodes to collect starts in")
    parser.add_argument("--starts", type=int, default=12, help="starts to search from")
    parser.add_argument("--horizon", type=int, default=150, help="steps a searched sequence")
    parser.add_argument("--population", type=int, default=64)
    parser.add_argument("--elites", type=int, default=6)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--hold", type=int, default=5, help="steps each searched action lasts")
    parser.add_argument("--std", type=float, default=0.6, help="the first round's spread")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name in ("episodes", "horizon", "population", "iterations"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} {getattr(args, name)}: must be at least 1")
    if args.starts < 0:
        parser.error(f"--starts {args.starts}: must be 0 (the saturation figures alone) or more")
    if not args.std > 0:  # (NaN fails too)
        parser.error(f"--std {args.std}: must be a positive number")
    if not 0 < args.hold <= args.horizon:
        parser.error(f"--hold {args.hold}: must be within 1..--horizon ({args.horizon})")
    if not 0 < args.elites <= args.population:
        parser.error(f"--elites {args.elites}: must be within 1..--population ({args.population})")

    try:
        policy = load_policy(args.run)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f"backflip_landable.py: {error}") from None
    starts, in_flight = collect_starts(policy, args.episodes)
    if not starts:
        raise SystemExit(f"{args.run}: its policy made no leap of {backflip.PRACTICE_FROM} of a "
                         f"turn in {args.episodes} episodes: nothing to land")  # fmt: skip
    means = np.abs([mean for mean, _ in in_flight])
    stds = [std for _, std in in_flight]
    print(f"in the air ({len(in_flight)} steps) the actor's pre-tanh means are "
          f"{np.median(means):.2f} from 0 at the median, {np.mean(means > SATURATED):.0%} beyond "
          f"{SATURATED:.0f} (saturated); their standard deviations "
          f"{np.median(stds):.2f}")  # fmt: skip
    env = backflip.HopperBackflip(practice=1.0)
    env.reset(seed=args.seed)
    rng = np.random.default_rng(args.seed)
    turns = [np.mod(-qpos[2] / backflip.TURN, 1.0) for qpos, _ in starts]
    order = np.argsort(turns)
    picked = order[np.linspace(0, len(order) - 1, min(args.starts, len(order))).astype(int)]
    print(
        f"{len(starts)} leap states kept in {args.episodes} episodes; searching from "
        f"{len(picked)} (turns back from upright, policy's score and landings, search's)"
    )
    found = own = 0
    for i in picked:
        mine, score, landed = policy_play(env, policy, starts[i], args.horizon)
        best_score, best_landed = search(env, starts[i], mine, args, rng)
        found, own = found + (best_landed > 0), own + (landed > 0)
        print(
            f"  {turns[i]:.2f} turns: policy {score:6.2f} ({landed} landed)"
            f"   search {best_score:6.2f} ({best_landed} landed)"
        )
    print(f"landed from {own} of {len(picked)} starts by the policy, {found} by the search")


if __name__ == "__main__":
    main()
