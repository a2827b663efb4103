"""Envs stepped together in worker processes give what the same envs give in this process."""

import numpy as np
import pytest

from prefrl.envs import FrameVectorEnv, make_env, make_pixel_env
from prefrl.envs.pool import EnvPool, seeded


def _steps(vec: FrameVectorEnv, n: int, steps: int):
    """Observations, rewards, ends and the states of envs 0 and n-1 over `steps` random steps
    (long enough for MovingDot's episodes of 250 steps to end and restart)."""
    rng = np.random.default_rng(0)
    seen = [vec.reset()]
    for _ in range(steps):
        obs, reward, terminated, truncated, final = vec.step(rng.integers(0, vec.n_actions, n))
        seen += [obs, reward, terminated, truncated, final]
    states = vec.get_states([0, n - 1])
    vec.close()
    return seen, states


def test_pixel_envs_in_workers_step_as_in_this_process():
    here, here_states = _steps(FrameVectorEnv(seeded(make_pixel_env, "movingdot", 7), 3), 3, 260)
    there, there_states = _steps(
        FrameVectorEnv(seeded(make_pixel_env, "movingdot", 7), 3, workers=2), 3, 260
    )
    assert any(t.any() for t in here[4::5])  # (an episode was cut by its time limit)
    for a, b in zip(here, there, strict=True):
        np.testing.assert_array_equal(a, b)
    assert sorted(here_states) == sorted(there_states) == [0, 2]
    for i in (0, 2):
        np.testing.assert_array_equal(here_states[i], there_states[i])


def _reset(env, seed):
    return env.reset(seed=seed)[0]


def _fail_on_env(env, i):
    if i == 1:
        raise KeyError("the env said no")
    return i


def test_a_worker_failure_names_the_worker_and_the_error():
    pool = EnvPool(seeded(make_env, "toy:maze", 0), 2, workers=2)
    first = pool.map(_reset, [(3,), (3,)])
    np.testing.assert_array_equal(first[0], first[1])  # (same reset seed, same maze start)
    with pytest.raises(
        RuntimeError, match="(?s)env worker 1 failed while _fail_on_env.*the env said no"
    ):
        pool.map(_fail_on_env, [(0,), (1,)])
    pool.close()


def test_bad_pool_sizes():
    with pytest.raises(ValueError, match="at least 1 env, not 0"):
        EnvPool(seeded(make_env, "toy:maze", 0), 0)
    with pytest.raises(ValueError, match="env workers must be >= 0.*not -1"):
        EnvPool(seeded(make_env, "toy:maze", 0), 2, workers=-1)
    pool = EnvPool(seeded(make_env, "toy:maze", 0), 2)
    with pytest.raises(ValueError, match="1 argument tuples for 2 envs"):
        pool.map(_reset, [(0,)])
    pool.close()


def test_workers_leave_ctrl_c_to_the_parent():
    """Ctrl-C in a terminal signals the whole process group; a worker that died of it would
    take the run down before it could save. The workers ignore it (and SIGTERM)."""
    import os
    import signal

    pool = EnvPool(seeded(make_env, "toy:maze", 0), 2, workers=2)
    for proc in pool._procs:
        os.kill(proc.pid, signal.SIGINT)
        os.kill(proc.pid, signal.SIGTERM)
    first = pool.map(_reset, [(3,), (3,)])
    np.testing.assert_array_equal(first[0], first[1])
    procs = list(pool._procs)
    pool.close()
    assert procs and not any(proc.is_alive() for proc in procs)
