"""Trained policies side by side (`prefrl eval`): each evaluated with deterministic actions on the
same seeded episodes, and one video of all of them (with the piano's sound)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prefrl.feedback.clips import side_by_side
from prefrl.render import write_video
from prefrl.training.evaluate import EvalResult, evaluate, make_eval_envs
from prefrl.training.policies import load_policy


@dataclass
class Comparison:
    env_id: str
    names: list[str]
    """Each policy's checkpoint, in the order given."""
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
        results = [evaluate(p, envs, seed=seed, record=video is not None) for p in policies]
        if video is not None:
            frames = results[0].frames
            for result in results[1:]:
                frames = side_by_side(frames, result.frames)
            write_video(video, frames, fps=envs[0].fps, audio=_sound(results))
    finally:
        for env in envs:
            env.close()
    return Comparison(env_id, [str(p.checkpoint) for p in policies], results, video)


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
