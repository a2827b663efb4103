"""SAC on several envs at once (`prefrl rl --envs N [--env-workers K]`).

Each round every env steps once, the policy acting for all of them in one call; the round's N
steps are then counted one by one, so updates (every --update-every steps), logs, evaluations
and checkpoints fall on the steps they are due at. A last round that would pass --steps counts,
and stores, only the steps up to it. Env i starts from reset seed `seed + step + i` (the step
the run starts or resumes at), then resets unseeded, like the one-env loop in `rl/run.py`,
which overlaps each update with the env step instead.
"""

from __future__ import annotations

import numpy as np

from prefrl.rl.run import EpisodeLog, RLRun, periodic_work, rl_result
from prefrl.rundir.metrics import MetricsLogger
from prefrl.training.loop import stoppable
from prefrl.training.result import TrainResult


def _reset(env, seed: int | None) -> np.ndarray:
    return env.reset(seed=seed)[0]


def _step(env, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool]:
    next_obs, reward, terminated, truncated, _ = env.step(action)
    return next_obs, float(reward), bool(terminated), bool(truncated)


def run_sac_envs(loop: RLRun, metrics: MetricsLogger) -> TrainResult:
    cfg, sac, buffer, pool = loop.config, loop.agent, loop.buffer, loop.pool
    batch_size = cfg.sac.batch_size * cfg.sac.utd_ratio
    n, update_metrics = len(pool), None
    obs = np.stack(pool.map(_reset, [(cfg.seed + loop.step + i,) for i in range(n)]))
    episodes = [EpisodeLog(loop, metrics) for _ in range(n)]
    progress, periodic = periodic_work(loop, metrics)
    with stoppable(loop, progress) as stop:
        while loop.step < cfg.steps and not stop.requested:
            first = loop.step
            if first < cfg.warmstart_steps:
                action = loop.rng.uniform(-1.0, 1.0, (n, loop.env.action_dim)).astype(np.float32)
            else:
                action = np.asarray(sac.act(loop.state.actor_params, obs, loop.key, first))
            stepped = pool.map(_step, [(a,) for a in action])
            counted = min(n, cfg.steps - first)
            for i, (next_obs, reward, terminated, truncated) in enumerate(stepped[:counted]):
                buffer.add(obs[i], action[i], reward, next_obs, terminated)
                episodes[i].add(first + i, reward, terminated or truncated)
                obs[i] = pool.call(i, _reset, None) if terminated or truncated else next_obs
            loop.step = first + counted
            for step in range(first + 1, loop.step + 1):
                if (step > cfg.warmstart_steps and step % cfg.update_every == 0
                        and len(buffer) >= cfg.sac.batch_size):  # fmt: skip
                    batch = buffer.sample_beside(loop.demos, loop.rng, batch_size)
                    loop.state, update_metrics = sac.update(loop.state, batch, loop.key)
                periodic.after_step(step, update_metrics)
    return rl_result(loop, periodic, stop.requested)
