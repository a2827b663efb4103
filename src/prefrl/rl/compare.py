"""Trained policies evaluated (`evaluate`) and side by side (`prefrl eval`): each with
deterministic actions on the same seeded episodes, and one video of all of them (with the
piano's sound)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np

from prefrl.feedback.clips import side_by_side
from prefrl.render import write_video
from prefrl.rundir.config import python_arguments
from prefrl.training.best import BEST
from prefrl.training.evaluate import EvalResult, make_eval_envs
from prefrl.training.evaluate import evaluate as run_episodes
from prefrl.training.loop import env_argument
from prefrl.training.policies import LoadedPolicy, load_policy


@python_arguments()
def evaluate(
    policy: LoadedPolicy | Callable[[np.ndarray], np.ndarray] | str | Path,
    env: str | gym.Env | None = None,
    episodes: int = 10,
    seed: int = 0,
) -> EvalResult:
    """Evaluate a trained policy with deterministic actions on `episodes` episodes seeded
    `seed`, `seed + 1`, ... (a run's policy gets the returns `prefrl eval` reports).

    Args:
        policy: a `LoadedPolicy` (`load_policy(run)`), a run directory or checkpoint, or any
            function from one observation (obs_dim,) to its action (action_dim,) in [-1, 1].
        env: an env id, an env made by `prefrl.make_env` or by `gymnasium.make` (its episodes
            run one after another; it is left open); default: a loaded policy's own env.

    Returns:
        The `EvalResult`: each episode's `returns`, `lengths` and `success` (tasks that report
        it), summed up as `mean`, `std` and `success_rate`.
    """
    if episodes < 1:
        raise ValueError(f"--episodes={episodes} is invalid: expected >= 1")
    if isinstance(policy, str | os.PathLike):
        policy = load_policy(policy)
    if not callable(policy):
        raise TypeError(f"policy={policy!r} is not a policy: expected a LoadedPolicy, a run "
                        "directory or a function from an observation to an action")  # fmt: skip
    loaded = isinstance(policy, LoadedPolicy)  # (it takes batches; a function one at a time)
    act = policy if loaded else lambda obs: np.stack([np.asarray(policy(o)) for o in obs])
    env = policy.config.env if loaded and env is None else env
    if env is None:
        raise TypeError("env=None: give the env to evaluate in (a function has no env of its "
                        "own; a policy of load_policy has)")  # fmt: skip
    given, env_id = env_argument(env)
    if given is not None:
        parts = [run_episodes(act, [given], seed=seed + i) for i in range(episodes)]
        return EvalResult(
            np.concatenate([p.returns for p in parts]),
            np.concatenate([p.lengths for p in parts]),
            extra={k: float(np.mean([p.extra[k] for p in parts])) for k in parts[0].extra},
            success=None if parts[0].success is None else np.concatenate(
                [p.success for p in parts]),
        )  # fmt: skip
    envs = make_eval_envs(env_id, episodes, None)
    try:
        return run_episodes(act, envs, seed=seed)
    finally:
        for made in envs:
            made.close()


@dataclass
class Comparison:
    env_id: str
    names: list[str]
    """Each policy's name, in the order given: its run and step (`policy_names`)."""
    results: list[EvalResult]
    video: Path | None


def compare_policies(
    targets: list[Path],
    episodes: int = 10,
    seed: int = 0,
    video: Path | None = None,
    render_size: int = 256,
) -> Comparison:
    """Evaluate run directories (their latest checkpoint) or checkpoints of one env on episodes
    seeded `seed`, `seed + 1`, ...; with `video`, the first episode of each, left to right."""
    if episodes <= 0:
        raise ValueError(f"--episodes={episodes} is invalid: expected >= 1")
    if not targets:
        raise ValueError("give one or more run directories or checkpoints to evaluate")
    policies = [load_policy(t) for t in targets]
    env_id = policies[0].config.env
    for target, loaded in zip(targets, policies, strict=True):
        if loaded.config.env != env_id:
            raise ValueError(
                f"{target} is a {loaded.config.env} policy and {targets[0]} a {env_id} one: "
                "policies compared side by side must share an env"
            )
    envs = make_eval_envs(env_id, episodes, render_size if video else None)
    try:
        results = [run_episodes(p, envs, seed=seed, record=video is not None) for p in policies]
        if video is not None:
            frames = results[0].frames
            for result in results[1:]:
                frames = side_by_side(frames, result.frames)
            write_video(video, frames, fps=envs[0].fps, audio=_sound(results))
    finally:
        for env in envs:
            env.close()
    return Comparison(env_id, policy_names([p.checkpoint for p in policies]), results, video)


def policy_names(checkpoints: list[Path]) -> list[str]:
    """What a table calls each checkpoint: its run's folder and step ("RUN step 480,000"; a
    kept best policy "RUN best, step 480,000"), short enough for a terminal; the checkpoints'
    paths where those names would not tell them apart."""
    names = []
    for ckpt in checkpoints:
        ckpt = Path(ckpt).absolute()
        found = re.fullmatch(r"step_(\d+)", ckpt.name)
        if found is None or ckpt.parent.name != "checkpoints":
            names.append(str(ckpt))
            continue
        step, run = int(found[1]), ckpt.parent.parent
        best = run.name == BEST
        names.append(
            f"{run.parent.name} best, step {step:,}" if best else f"{run.name} step {step:,}"
        )
    if len(set(names)) < len(names):
        return [str(c) for c in checkpoints]
    return names


def _sound(results: list[EvalResult]):
    """The recorded episodes' sound (piano): one policy's as it is; two side by side in stereo,
    each on the side of its picture; more have none (a mix would be noise)."""
    sounds = [r.audio for r in results]
    if any(s is None for s in sounds) or len(sounds) > 2:
        return None
    if len(sounds) == 1:
        return sounds[0]
    (left, rate), (right, _) = sounds
    n = max(len(left), len(right))
    stereo = np.zeros((n, 2), np.int16)
    stereo[: len(left), 0], stereo[: len(right), 1] = left, right
    return stereo, rate
