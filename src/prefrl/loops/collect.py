"""Segments from rollouts outside training (demos, screenshots, tests)."""

from __future__ import annotations

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
