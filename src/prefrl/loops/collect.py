"""Segments from rollouts outside training: random actions (demos, screenshots, tests) and a
trained policy's checkpoints at several action-noise levels (clips to rate for CPL)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from prefrl.data import SegmentRecorder, Segments
from prefrl.envs import make_env


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


def policy_segments(
    checkpoints: list[Path],
    noises: list[float],
    count: int,
    length: int = 50,
    seed: int = 0,
) -> tuple[Segments, list[dict]]:
    """About `count` segments in all, an equal share from each (checkpoint, action-noise) pair:
    the policy's deterministic action with Gaussian noise of that std added before its tanh.
    Returns the segments (with simulator states) and, per segment, where it came from."""
    from prefrl.loops.rl import load_policy

    if not checkpoints:
        raise ValueError("give one or more --checkpoints (run directories or checkpoints)")
    if any(n < 0 for n in noises) or not noises:
        raise ValueError(f"--noise {noises} is invalid: expected one or more values >= 0")
    policies = [load_policy(Path(c)) for c in checkpoints]
    envs = {p.config.env for p in policies}
    if len(envs) > 1:
        raise ValueError(
            f"the checkpoints are of different environments ({', '.join(sorted(envs))}); "
            "collect from one environment at a time"
        )
    env_id = policies[0].config.env
    combos = [(p, n) for p in policies for n in noises]
    share = -(-count // len(combos))
    recorder, rng = SegmentRecorder(length), np.random.default_rng([seed, 17])
    parts, infos, episode = [], [], 0
    env = make_env(env_id, seed=seed)
    try:
        for policy, noise in combos:
            params, got = policy.state.actor_params, 0
            while got < share:
                obs, _ = env.reset(seed=seed + episode)
                done = False
                while not done:
                    state = env.get_state()
                    action = np.asarray(policy.sac.act(params, obs, None, 0, deterministic=True))
                    # Noise before the policy's tanh: actions stay inside (-1, 1), where the
                    # tanh-Gaussian's log-likelihood (CPL's advantage) is finite and smooth;
                    # noise added after it and clipped puts actions on the bounds, where
                    # log π -> -inf and CPL's gradient pushes the mean off to infinity.
                    u = np.arctanh(np.clip(action, -1 + 1e-6, 1 - 1e-6))
                    action = np.tanh(u + noise * rng.normal(size=action.shape))
                    nxt, reward, term, trunc, _ = env.step(action.astype(np.float32))
                    recorder.record(0, obs, action, reward, state)
                    obs, done = nxt, term or trunc
                episode += 1
                seg = recorder.end_episode(rng, episode)
                if seg is None:
                    continue
                seg = seg[: share - got]
                parts.append(seg)
                got += len(seg)
                infos += [
                    {"checkpoint": str(policy.checkpoint), "noise": float(noise),
                     "episode": episode, "collected_at": time.time()}
                    for _ in range(len(seg))
                ]  # fmt: skip
    finally:
        env.close()
    return Segments.concatenate(parts), infos
