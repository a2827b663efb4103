"""Segments from rollouts outside training: random actions (demos, screenshots, tests) and a
trained policy's checkpoints at several action-noise levels (clips to rate for CPL)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from prefrl.data import SegmentRecorder, Segments
from prefrl.envs import make_env
from prefrl.feedback.store import FeedbackStore, claim_run_uid
from prefrl.rundir.atomic import atomic_write
from prefrl.rundir.config import python_arguments


def random_segments(
    env_id: str, count: int, length: int, seed: int = 0, action_scale: float = 1.0
) -> Segments:
    """At least `count` segments of `length` steps from uniform-random actions in
    [-action_scale, action_scale], with the simulator states to re-render them."""
    env, rng, rec = (
        make_env(env_id, seed=seed),
        np.random.default_rng(seed),
        SegmentRecorder(length),
    )
    parts, step, episode = [], 0, 0
    try:
        while sum(len(p) for p in parts) < count:
            obs, _ = env.reset(seed=seed + episode)
            done = False
            while not done:
                state = env.get_state()
                action = rng.uniform(-action_scale, action_scale, env.action_dim)
                nxt, reward, term, trunc, _ = env.step(action.astype(np.float32))
                rec.record(step, obs, action, reward, state)
                obs, done, step = nxt, term or trunc, step + 1
            episode += 1
            seg = rec.end_episode(rng, episode)
            if seg is not None:
                parts.append(seg)
    finally:
        env.close()
    return Segments.concatenate(parts)


MAX_SHORT_EPISODES = 50
"""Episodes in a row without a segment (all shorter than its length) before collecting gives up."""


def policy_segments(
    checkpoints: list[Path],
    noises: list[float],
    count: int,
    length: int = 50,
    seed: int = 0,
    siblings: int = 1,
) -> tuple[Segments, list[dict]]:
    """`count` segments in all, shared as evenly as can be among the (checkpoint, action-noise)
    pairs (the first ones one more where it does not divide): the policy's deterministic action
    with Gaussian noise of that std added before its tanh. Returns the segments (with simulator
    states) and, per segment, where it came from.

    With `siblings` > 1, segments come in families: a family holds `siblings` segments of every
    (checkpoint, noise) pair, all started from one simulator state that the first checkpoint
    (at the first noise level) reached, so they differ only by their actions: by the noise, and
    by the policy where there are several checkpoints. Rated segments of a rollout mostly differ
    by where the policy was, and CPL can only learn from how the rated actions differ from the
    policy's own; between siblings, what differs is the actions. Families are whole: `count`
    rounds up to a multiple of a family's size. A sibling whose episode ends before `length`
    steps is dropped, as a short episode gives no segment. Each segment's info names its family
    (`family`)."""
    from prefrl.training.policies import load_policy

    if not checkpoints:
        raise ValueError("give one or more --checkpoints (run directories or checkpoints)")
    if any(n < 0 for n in noises) or not noises:
        raise ValueError(f"--noise {noises} is invalid: expected one or more values >= 0")
    if count < 1:
        raise ValueError(f"--segments {count} is invalid: expected a positive integer")
    if siblings < 1:
        raise ValueError(f"--siblings {siblings} is invalid: expected a positive integer")
    if siblings > 1 and min(noises) == 0:
        raise ValueError(
            f"--siblings {siblings} needs every --noise above 0 (got {noises}): siblings "
            "without action noise are one segment repeated"
        )
    policies = [load_policy(Path(c)) for c in checkpoints]
    envs = {p.config.env for p in policies}
    if len(envs) > 1:
        raise ValueError(
            f"the checkpoints are of different environments ({', '.join(sorted(envs))}); "
            "collect from one environment at a time"
        )
    env_id = policies[0].config.env
    combos = [(p, n) for p in policies for n in noises]
    recorder, rng = SegmentRecorder(length), np.random.default_rng([seed, 17])
    parts, infos, episode, families = [], [], 0, 0
    env = make_env(env_id, seed=seed)

    def act(policy, noise, obs):
        action = np.asarray(
            policy.sac.act(policy.state.actor_params, obs, None, 0, deterministic=True)
        )
        # Noise before the policy's tanh: actions stay inside (-1, 1), where the tanh-Gaussian's
        # log-likelihood (CPL's advantage) is finite and smooth; noise added after it and
        # clipped puts actions on the bounds, where log π -> -inf and CPL's gradient pushes
        # the mean off to infinity.
        u = np.arctanh(np.clip(action, -1 + 1e-6, 1 - 1e-6))
        return np.tanh(u + noise * rng.normal(size=action.shape)).astype(np.float32)

    def rollout(policy, noise, obs, steps: int | None) -> int:
        """Record up to `steps` steps (None: to the episode's end) into `recorder`; returns the
        steps taken."""
        done, taken = False, 0
        while not done and (steps is None or taken < steps):
            state, action = env.get_state(), act(policy, noise, obs)
            nxt, reward, term, trunc, _ = env.step(action)
            recorder.record(0, obs, action, reward, state)
            obs, done, taken = nxt, term or (trunc and steps is None), taken + 1
        return taken

    def add(part: Segments, policy, noise: float, family: int | None) -> None:
        parts.append(part)
        infos.extend(
            {"checkpoint": str(policy.checkpoint), "noise": float(noise), "episode": episode,
             "collected_at": time.time()} | ({} if family is None else {"family": family})
            for _ in range(len(part))
        )  # fmt: skip

    short = []  # lengths of the episodes in a row too short for a segment

    def parent_episode(policy, noise) -> Segments | None:
        """One whole episode; its segments (None if it was shorter than one). Too many short
        episodes in a row fail, rather than roll out for ever."""
        nonlocal episode
        obs, _ = env.reset(seed=seed + episode)
        taken = rollout(policy, noise, obs, None)
        episode += 1
        segments = recorder.end_episode(rng, episode)
        short[:] = [] if segments is not None else [*short, taken]
        if len(short) == MAX_SHORT_EPISODES:
            raise ValueError(
                f"{len(short)} episodes in a row of {policy.checkpoint} (noise {noise:g}) ended "
                f"before --length {length} steps (the longest lasted {max(short)}): give a "
                "shorter --length, or a checkpoint whose episodes last longer"
            )
        return segments

    try:
        if siblings == 1:
            for i, (policy, noise) in enumerate(combos):
                share, got = count // len(combos) + (i < count % len(combos)), 0
                while got < share:
                    seg = parent_episode(policy, noise)
                    if seg is not None:
                        piece = seg[: share - got]
                        add(piece, policy, noise, None)
                        got += len(piece)
        else:  # one family per segment of the first checkpoint's episodes, until enough
            wanted = -(-count // (siblings * len(combos)))
            while families < wanted:
                seg = parent_episode(*combos[0])
                if seg is None:
                    continue
                episode_seed = seed + episode - 1
                for state, start in list(zip(seg.state[:, 0], seg.start, strict=True))[
                    : wanted - families
                ]:
                    for policy, noise in combos:
                        for _ in range(siblings):
                            env.reset(seed=episode_seed)
                            rollout(policy, noise, env.set_state(state), length)
                            child = recorder.end_episode(rng, episode)
                            if child is not None:
                                child.start[:] = start
                                add(child, policy, noise, families)
                    families += 1
    finally:
        env.close()
    return Segments.concatenate(parts), infos


def make_rating_run(
    out: Path, env_id: str, segments: Segments, infos: list[dict], render_size: int | None = 128
) -> Path:
    """A rating run at `out`: the segments (with where each came from) in a store, and their
    clips rendered when `render_size` is given."""
    out = Path(out)
    if (out / "config.json").exists():
        raise FileExistsError(f"{out} already holds a run; choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / "config.json", "w") as f:
        json.dump({"env": env_id, "kind": "ratings", "segments": len(segments)}, f, indent=2)
    with FeedbackStore(out) as store:
        run_id = store.run_id(claim_run_uid(out, new=True), env=env_id)
        ids = store.add_segments(run_id, out, segments, infos)
        if render_size:
            from prefrl.feedback.clips import CLIP_DIR, ClipRenderer

            renderer = ClipRenderer(env_id, size=render_size)
            for seg_id, states in zip(ids, segments.state, strict=True):
                rel = f"{CLIP_DIR}/seg{seg_id:09d}.mp4"
                frames = renderer.write(out / rel, states)
                store.add_clip(seg_id, rel, render_size, render_size, frames, renderer.fps)
    return out


class RatingRun(NamedTuple):
    """What `collect_rating_run` made."""

    run_dir: Path
    """The rating run: rate it with `rate_scripted`, `prefrl rate` or `prefrl serve` (/rate)."""
    segments: Segments
    """The segments put up for rating (with their simulator states)."""

    def __repr__(self) -> str:
        return f"RatingRun({self.run_dir}, {len(self.segments)} segments)"


@python_arguments()
def collect_rating_run(
    checkpoints: str | Path | Sequence[str | Path],
    out: str | Path,
    *,
    noise: Sequence[float] = (0.0, 0.1, 0.3),
    segments: int = 150,
    length: int = 50,
    siblings: int = 1,
    clip_size: int = 256,
    seed: int = 0,
) -> RatingRun:
    """A rating run at `out` (`prefrl collect`): `segments` segments of `length` steps
    rolled out by `checkpoints` (SAC run directories, their latest checkpoint, or checkpoint
    directories, of one env) at each action-noise std in `noise`, an equal share each, with
    their clips (`clip_size` pixels; 0: none, scripted raters need none). `siblings` > 1:
    families of segments that start from one state and differ by their actions alone
    (`policy_segments`; every noise above 0; whole families, so `segments` rounds up to a
    multiple of a family's size), for `FinetuneConfig(pairs="siblings")`."""
    if isinstance(checkpoints, str | Path):
        checkpoints = [checkpoints]
    segs, infos = policy_segments(list(checkpoints), list(noise), segments, length, seed, siblings)
    from prefrl.training.policies import load_policy

    env_id = load_policy(Path(checkpoints[0])).config.env
    return RatingRun(make_rating_run(out, env_id, segs, infos, clip_size or None), segs)
