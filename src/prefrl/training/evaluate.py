"""Evaluation episodes, run side by side so the policy sees one batch per step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from prefrl.envs import PrefrlEnv, RenderSettings, make_like
from prefrl.fielddocs import document_fields

Policy = Callable[[np.ndarray], np.ndarray]
"""Maps a batch of observations (n, obs_dim) to actions (n, action_dim) in [-1, 1]."""


@document_fields
@dataclass(repr=False)
class EvalResult:
    """Evaluation episodes: per-episode `returns`, `lengths` and (tasks that report it)
    `success`; `mean`, `std` and `success_rate` sum them up."""

    returns: np.ndarray
    """Each episode's return."""
    lengths: np.ndarray
    """Each episode's length in steps."""
    frames: list[np.ndarray] = field(default_factory=list)
    """The recorded episode's frames (evaluations with a video)."""
    learned_returns: np.ndarray | None = None
    """Returns under a learned reward, when `evaluate` was given one."""
    extra: dict[str, float] = field(default_factory=dict)
    """More figures to log with the evaluation (e.g. the D4RL-normalised score, the piano's
    key-press F1)."""
    success: np.ndarray | None = None
    """Each episode's success at its last step, for tasks that report `info["success"]`."""
    audio: tuple[np.ndarray, int] | None = None
    """The recorded episode's sound (mono int16 samples, sample rate), for envs that make
    sound (the piano)."""
    fps: float | None = None
    """The frames' rate where it is not the env's steps per second (pixel envs record every
    emulator frame)."""

    @property
    def mean(self) -> float:
        """The mean return over the episodes."""
        return float(self.returns.mean())

    @property
    def std(self) -> float:
        """The returns' standard deviation over the episodes."""
        return float(self.returns.std())

    @property
    def success_rate(self) -> float | None:
        """The share of episodes that ended in success (None: the task reports none)."""
        return None if self.success is None else float(self.success.mean())

    def describe(self, before: EvalResult | None = None) -> str:
        """One phrase: the return (and the normalised score, the success rate, where there
        are); the success rate alone where the returns are the successes (RFCL's). `before`:
        an evaluation of the policy it started from, each figure followed by its own there."""

        def was(figure: str) -> str:
            return f" (from {figure})" if figure else ""

        episodes = f"over {len(self.returns)} episodes"
        success_then = f"{before.success_rate:.2f}" if before and before.success is not None else ""
        if self.success is not None and np.array_equal(self.returns, self.success):
            return f"success {self.success_rate:.2f}{was(success_then)} {episodes}"
        then = plus_minus(before.mean, before.std) if before else ""
        out = f"return {plus_minus(self.mean, self.std)}{was(then)} {episodes}"
        if "eval/score_mean" in self.extra:
            out += f", normalised score {self._score()}"
            out += was(before._score() if before and "eval/score_mean" in before.extra else "")
        if self.success_rate is not None:
            out += f", success {self.success_rate:.2f}{was(success_then)}"
        return out

    def _score(self) -> str:
        return (f"{self.extra['eval/score_mean']:.1f} +- "
                f"{self.extra.get('eval/score_std', float('nan')):.1f}")  # fmt: skip

    def __repr__(self) -> str:
        return f"EvalResult({self.describe()})"

    @property
    def summary(self) -> dict[str, float]:
        out = {
            "eval/return_mean": float(self.returns.mean()),
            "eval/return_std": float(self.returns.std()),
            "eval/length_mean": float(self.lengths.mean()),
        }
        if self.learned_returns is not None:
            out["eval/learned_return_mean"] = float(self.learned_returns.mean())
        return {**out, **self.extra}


def plus_minus(mean: float, std: float) -> str:
    """`mean +- std` as people read it: two decimals for figures below 1 (success rates), one
    for larger ones."""
    digits = 2 if max(abs(mean), std) < 1 else 1
    return f"{mean:.{digits}f} +- {std:.{digits}f}"


def make_eval_envs(env: str | PrefrlEnv, episodes: int,
                   render_size: int | None) -> list[PrefrlEnv]:  # fmt: skip
    """One env per evaluation episode, like `env` (an id, or an env: `make_like`); with
    `render_size`, the first renders (for the video)."""
    render = RenderSettings(render_size, render_size) if render_size else False
    return [make_like(env, seed=None, render=render if i == 0 else False) for i in range(episodes)]


def evaluate(
    policy: Policy,
    envs: list[PrefrlEnv],
    seed: int,
    record: bool = False,
    max_frames: int = 2000,
    learned_reward: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> EvalResult:
    """One episode in each env (seeded `seed + i`); with `record`, the frames of the first one
    (that env must be made with rendering). With `learned_reward(obs, actions)`, the returns
    under it are summed too. Tasks that report `info["success"]` get their success rate at the
    episode's last step and at any step."""
    n = len(envs)
    obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
    returns, lengths, learned = np.zeros(n), np.zeros(n, np.int64), np.zeros(n)
    done = np.zeros(n, bool)
    frames = [envs[0].render()] if record else []
    episode_metrics: list[dict[str, float]] = []
    success: dict[int, list[bool]] = {}  # (tasks that say when they are solved: each step's flag)
    while not done.all():
        actions = np.asarray(policy(obs))
        if learned_reward is not None:
            learned += np.where(done, 0.0, np.asarray(learned_reward(obs, actions)))
        for i, env in enumerate(envs):
            if done[i]:
                continue
            o, r, terminated, truncated, info = env.step(actions[i])
            obs[i] = o
            returns[i] += r
            lengths[i] += 1
            done[i] = terminated or truncated
            if "success" in info:
                success.setdefault(i, []).append(bool(info["success"]))
            if done[i] and "episode_metrics" in info:
                episode_metrics.append(info["episode_metrics"])
            if i == 0 and record and len(frames) < max_frames:
                frames.append(env.render())
    result = EvalResult(returns, lengths, frames, learned if learned_reward is not None else None)
    for name in episode_metrics[0] if episode_metrics else ():
        result.extra[f"eval/{name}_mean"] = float(np.mean([m[name] for m in episode_metrics]))
    if success:  # at the episode's last step (RFCL's headline), and at any step
        result.success = np.array([f[-1] for f in success.values()])
        result.extra["eval/success_at_end"] = float(result.success.mean())
        result.extra["eval/success_once"] = float(np.mean([any(f) for f in success.values()]))
    sound = getattr(envs[0].unwrapped, "episode_audio", None)
    if record and sound is not None:
        result.audio = sound(len(frames))
    return result
