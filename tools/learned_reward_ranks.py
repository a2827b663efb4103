"""Does a preference run's learned reward know what better behaviour looks like? Compares, by its
final reward model, the run's own recent segments (its pool) with segments of a run of SAC on the
true reward (the last steps of its replay buffer): the learned and true returns of each, and in
what share of (own, reference) pairs each reward prefers the reference's segment.

    python tools/learned_reward_ranks.py ~/prefrl-logs/bench-labels/runs/dmc-walker-walk_oracle_l100_qpa_s{0,1,2} \
        --reference ~/prefrl-logs/bench-labels/runs/dmc-walker-walk_true_s0

A reference without a replay buffer (PPO) is played instead: its best policy, `--last` steps. The
backflip's (its env registered by examples/backflip.py, hence the path):

    PYTHONPATH=examples python tools/learned_reward_ranks.py ~/prefrl-logs/bench-backflip-ppo/pref-ppo-norm_s0 \
        --reference ~/prefrl-logs/bench-backflip-ppo/rule-reward-ppo_s0

Where the learned reward prefers the reference's walking about as often as the true reward does,
the agent did not find behaviour its own reward rates higher (the agent is what stops it); where
it rates the run's own segments as high, the reward learnt from its labels is.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from prefrl.offline.datasets import rollouts
from prefrl.reward.base import pearson
from prefrl.reward.saved import load_reward_model
from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.training.best import BEST
from prefrl.training.policies import load_policy


def reference_segments(run: Path, length: int, last: int) -> tuple[np.ndarray, ...]:
    """Windows of `length` steps, end to end, over the last `last` steps of a run's replay
    buffer (its latest checkpoint): observations, actions and true rewards. A run without one
    (PPO keeps no replay buffer) plays `last` steps of its best-evaluated policy instead (its
    latest without one), each episode from a seeded reset, windows cut within each episode."""
    buffer = latest_checkpoint(run) / "buffer.npz"
    config = run / "config.json"  # (a PrefPPO run's buffer.npz is its last rollout: not kept)
    ppo = config.exists() and json.loads(config.read_text()).get("algo") == "ppo"
    if buffer.exists() and not ppo:
        with np.load(buffer) as kept:
            obs, action, reward = (kept[k][-last:] for k in ("obs", "action", "reward"))
        n = len(reward) // length
        return tuple(a[: n * length].reshape(n, length, *a.shape[1:])
                     for a in (obs, action, reward))  # fmt: skip
    policy = load_policy(run / BEST if (run / BEST).exists() else run)
    played = rollouts(policy.config.env, lambda obs, _: policy(obs), last, 0, run.name)
    ends = np.flatnonzero(played.terminals | played.timeouts) + 1
    windows = []
    for start, end in zip(np.r_[0, ends], np.r_[ends, len(played.rewards)], strict=True):
        windows += [slice(t, t + length) for t in range(start, end - length + 1, length)]
    if not windows:
        raise SystemExit(f"--last {last}: {run.name}'s played steps hold no whole episode "
                         f"stretch of {length} steps (the pool's clip length); play more")  # fmt: skip
    return tuple(np.stack([col[w] for w in windows])
                 for col in (played.observations, played.actions, played.rewards))  # fmt: skip


def compare(run: Path, reference: tuple[np.ndarray, ...], pairs: int, rng) -> dict:
    ckpt = latest_checkpoint(run)
    model = load_reward_model(ckpt / "reward_model")
    with np.load(ckpt / "segments.npz") as pool:
        own = pool["obs"], pool["action"], pool["reward"]
    learned = [model.predict(o, a).sum(-1) for o, a, _ in (own, reference)]
    true = [r.sum(-1) for *_, r in (own, reference)]
    i = rng.integers(0, len(true[0]), pairs)
    j = rng.integers(0, len(true[1]), pairs)
    return {
        "true": [float(t.mean()) for t in true],
        "learned": [float(x.mean()) for x in learned],
        "true prefers the reference": float(np.mean(true[1][j] > true[0][i])),
        "learned prefers the reference": float(np.mean(learned[1][j] > learned[0][i])),
        "learned vs true, both": pearson(np.concatenate(learned), np.concatenate(true)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "runs", nargs="+", type=Path, help="preference runs (their latest checkpoints)"
    )
    parser.add_argument("--reference", type=Path, required=True,
                        help="a run on the true reward of the same env (SAC, or PPO: played)")  # fmt: skip
    parser.add_argument("--last", type=int, default=20_000,
                        help="the reference's last steps cut into segments")  # fmt: skip
    parser.add_argument("--pairs", type=int, default=10_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for run in args.runs:
        with np.load(latest_checkpoint(run) / "segments.npz") as pool:
            length = pool["reward"].shape[1]
        out = compare(run, reference_segments(args.reference, length, args.last), args.pairs, rng)
        print(f"{run.name}: segment returns, own / reference: true {out['true'][0]:.1f} / "
              f"{out['true'][1]:.1f}, learned {out['learned'][0]:.1f} / {out['learned'][1]:.1f}; "
              f"the reference preferred in {out['true prefers the reference']:.0%} of pairs by "
              f"the true reward, {out['learned prefers the reference']:.0%} by the learned one; "
              f"learned vs true over both {out['learned vs true, both']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
