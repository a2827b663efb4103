"""Making and checking demonstrations (`prefrl demos ...`).

- `script_demos`: the built-in mazes' scripted controller (shortest path of cells, then held at
  the goal) and MetaWorld's scripted policies;
- `record_demos`: any prefrl policy (e.g. a SAC expert trained on a dense reward), keeping the
  episodes that reach a stable success;
- `check_demos`: replay each demo's actions from its first state and say which still succeed
  (a demo recorded on another version of a simulator may not), and how long its last state
  keeps success with the last action held (`success_hold`);
- `demo_video`: a demo's states rendered to an mp4.

People's demos are imported by `demos.imports`.

A demo is cut `hold` steps after its first success, provided it stayed successful for them (RFCL
judges an episode by its last step, so demos should end in a success that lasts). With `settle`
it goes on until its state would keep success that many steps with the last action held:
RFCL's first episodes start at a demo's end.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from prefrl.data.demos import Demo, DemoSet
from prefrl.data.minari_io import check_free
from prefrl.envs import PrefrlEnv, make_env
from prefrl.rundir.config import python_arguments

if TYPE_CHECKING:
    from prefrl.training.policies import LoadedPolicy


def _success(info: dict, env_id: str) -> bool:
    if "success" not in info:
        raise ValueError(
            f"{env_id} reports no success flag (info['success']): demos and RFCL need a task "
            "that says when it is solved (toy:maze*, adroit:*)"
        )
    return bool(info["success"])


def rollout_demo(env: PrefrlEnv, act, seed: int, hold: int | None, info: dict, settle: int = 0,
                 start: np.ndarray | None = None,
                 steps: int | None = None) -> Demo | None:  # fmt: skip
    """One episode from `env.reset(seed)` with `act(obs) -> action`, cut `hold` steps after its
    first success, or later, at the first state from which success lasts `settle` steps with
    the last action held (`success_hold`); None when it never succeeds, fails again before
    the cut, or reaches no such state. From the state `start` where given; for at most `steps`
    steps, past the env's time limit, where given (a person's demo may be slower than the
    task's episodes are long); `hold` None: run all `steps` and keep the demo if it ends in a
    success that lasts from the first."""
    if hold is None and steps is None:
        raise ValueError("a demo cut at its end (hold None) needs its number of steps")
    if (hold is not None and hold < 0) or settle < 0:
        bad, value = ("--settle", settle) if settle < 0 else ("--hold", hold)
        raise ValueError(f"{bad} {value} is invalid: expected an integer >= 0 (steps)")
    obs, _ = env.reset(seed=seed)
    if start is not None:
        obs = env.set_state(start)
    states, observations, actions, rewards, success = [env.get_state()], [obs], [], [], []
    first, settled = None, False
    for t in range(steps or env.max_episode_steps or 1000):
        action = np.asarray(act(obs), np.float32)
        obs, reward, terminated, truncated, step_info = env.step(action)
        states.append(env.get_state())
        observations.append(obs)
        actions.append(action)
        rewards.append(reward)
        success.append(_success(step_info, env.env_id))
        if success[-1] and first is None:
            first = t
        if first is not None and not success[-1]:
            return None  # not a stable success
        cut = t == steps - 1 if hold is None else first is not None and t - first >= hold
        if first is not None and cut:
            settled = settle == 0 or _lasts(env, states[-1], action, settle)
        if settled or terminated or (truncated and steps is None):
            break
    if not settled:
        return None
    return Demo(np.stack(states), np.stack(observations), np.stack(actions), np.array(rewards),
                np.array(success), info)  # fmt: skip


def _lasts(env: PrefrlEnv, state: np.ndarray, action: np.ndarray, steps: int) -> bool:
    """Whether success lasts `steps` steps from `state` with `action` held; the episode then
    goes on from `state` (its time limit restarts: the caller counts the steps)."""
    holds = success_hold(env, state, action, steps)
    env.set_state(state)
    return holds >= steps


def check_out(out: str | Path | None, replace: bool) -> None:
    """Refuse an `out` that holds demos (unless `replace`) or anything else, before minutes of
    making demos for it."""
    if out is not None:
        check_free(out, "demos", replace)


def save_demos(demos: DemoSet, out: str | Path | None, replace: bool) -> DemoSet:
    """`demos`, written to `out` where given."""
    if out is not None:
        demos.save(out, replace=replace)
    return demos


def _scripted_controller(env_id: str, env: PrefrlEnv):
    """A function giving a new `act(obs) -> action` for each episode: the built-in mazes'
    shortest path of cells, or MetaWorld's own scripted policy of the task."""
    from prefrl.envs.maze import PointMaze, scripted_action, shortest_path

    if env_id.startswith("metaworld:"):
        from prefrl.envs.metaworld import scripted_policy

        policy = scripted_policy(env_id.split(":", 1)[1])
        return lambda: policy.get_action
    maze = env.unwrapped
    if not isinstance(maze, PointMaze):
        raise ValueError(  # noqa: TRY004 (a bad --env, reported like other bad ids)
            f"scripted demos exist for the built-in mazes (toy:maze*) and the MetaWorld tasks "
            f"(metaworld:*), not {env_id}"
        )
    waypoints = [maze.centre(c) for c in shortest_path(maze)]

    def new_episode():
        state = {"index": 0}

        def act(obs):
            action, state["index"] = scripted_action(maze, waypoints, state["index"])
            return action

        return act

    return new_episode


@python_arguments()
def script_demos(env: str = "toy:maze", episodes: int = 5, *, out: str | Path | None = None,
                 replace: bool = False, seed: int = 0, hold: int = 20,
                 settle: int = 0) -> DemoSet:  # fmt: skip
    """Scripted demos (`prefrl demos script`) of a built-in maze (`toy:maze`, `toy:maze-open`,
    `toy:maze-medium`: the shortest path of cells, then held at the goal) or of a MetaWorld
    task (`metaworld:door-open`, ...: MetaWorld's own scripted policy of the task), from reset
    seeds `seed`, `seed + 1`, ...; written to `out` (a demo folder) where given (`replace`: over
    the demos there, once the new ones are made). `hold`, `settle`: where each demo is cut (the
    module's docstring)."""
    check_out(out, replace)
    made = make_env(env, seed=seed)
    demos, tried = [], 0
    try:
        controller = _scripted_controller(env, made)
        while len(demos) < episodes and tried < 10 * episodes:
            demo = rollout_demo(made, controller(), seed + tried, hold,
                                {"source": "scripted", "seed": seed + tried}, settle)  # fmt: skip
            tried += 1
            if demo is not None:
                demos.append(demo)
    finally:
        made.close()
    if len(demos) < episodes:
        raise RuntimeError(f"the scripted controller solved {len(demos)} of {tried} episodes")
    return save_demos(DemoSet(env, demos, {"source": "scripted", "seed": seed, "hold": hold,
                                           "settle": settle}), out, replace)  # fmt: skip


@python_arguments()
def record_demos(policy: LoadedPolicy | str | Path, episodes: int = 5, *, out: str | Path | None = None,
                 replace: bool = False, seed: int = 0, hold: int = 20, settle: int = 0,
                 max_tries: int | None = None, env: str | None = None,
                 spread_from: int = 0) -> DemoSet:  # fmt: skip
    """Demos from a trained prefrl policy (`prefrl demos record`; deterministic actions): the
    first `episodes` episodes (seeds `seed`, `seed + 1`, ..., `max_tries` at most, default 10
    x the episodes recorded) that reach a stable success. `policy`: a `LoadedPolicy`, or a run
    directory or checkpoint of `prefrl rl`, `train` or `rfcl`; `out`, `replace`, `hold`,
    `settle`: as `script_demos`. `env`: the task to record on, where not the one the policy was
    trained on: the same observations and actions with another reward (a policy trained on
    `adroit:pen-dense` records demos of `adroit:pen`, whose reward is the success).
    `spread_from`: record that many successes and keep the `episodes` of them whose first
    observations lie farthest apart (`spread_out`), so that the demos cover the task's
    starts (the pen's goals) rather than the ones the policy solves first."""
    from prefrl.training.policies import LoadedPolicy, load_policy

    if spread_from < 0 or 0 < spread_from < episodes:
        raise ValueError(f"--spread-from {spread_from} is invalid: expected 0 (off) or at "
                         f"least --episodes ({episodes}), the demos kept")  # fmt: skip
    check_out(out, replace)
    policy = policy if isinstance(policy, LoadedPolicy) else load_policy(policy)
    env_id = env or policy.config.env
    env = make_env(env_id, seed=seed)
    trained = (policy.agent.obs_dim, policy.agent.action_dim)
    if (env.obs_dim, env.action_dim) != trained:
        env.close()
        raise ValueError(
            f"--env {env_id} has {env.obs_dim} observations and {env.action_dim} actions; the "
            f"policy, trained on {policy.config.env}, takes {trained[0]} and gives {trained[1]}: "
            "record on a task with the same observations and actions"
        )
    wanted = max(episodes, spread_from)
    demos, tried, limit = [], 0, max_tries or 10 * wanted
    try:
        while len(demos) < wanted and tried < limit:
            info = {"source": "policy", "checkpoint": str(policy.checkpoint), "seed": seed + tried}
            demo = rollout_demo(env, policy, seed + tried, hold, info, settle)
            tried += 1
            if demo is not None:
                demos.append(demo)
    finally:
        env.close()
    if not demos:
        raise RuntimeError(f"{policy.checkpoint} reached no stable success in {tried} episodes: "
                           "train it longer, or look at it with prefrl eval --video")  # fmt: skip
    if len(demos) < wanted:
        print(f"warning: {len(demos)} of {tried} episodes reached a stable success "
              f"({wanted} asked for)")  # fmt: skip
    demos = spread_out(demos, episodes)
    made = {"source": "policy", "checkpoint": str(policy.checkpoint), "seed": seed,
            "hold": hold, "settle": settle, "trained_on": policy.config.env,
            "spread_from": spread_from or None}  # fmt: skip
    return save_demos(DemoSet(env_id, demos, made), out, replace)


def spread_out(demos: list[Demo], keep: int) -> list[Demo]:
    """The `keep` demos whose first observations lie farthest apart (greedy farthest-point:
    the start farthest from the mean first, then each time the one farthest from those
    already kept), in their recorded order. Distances are plain Euclidean on observations: the
    dimensions a task randomises at reset (the pen's goal, relocate's ball and target) are the
    only ones that differ between starts, so no scaling is needed."""
    if len(demos) <= keep:
        return demos
    starts = np.stack([d.observations[0] for d in demos]).astype(np.float64)
    kept = [int(np.argmax(np.linalg.norm(starts - starts.mean(0), axis=1)))]
    nearest = np.linalg.norm(starts - starts[kept[0]], axis=1)  # distance to the kept set
    while len(kept) < keep:
        kept.append(int(np.argmax(nearest)))
        nearest = np.minimum(nearest, np.linalg.norm(starts - starts[kept[-1]], axis=1))
        nearest[kept] = -np.inf  # (starts that repeat one kept are never kept twice)
    return [demos[i] for i in sorted(kept)]


@dataclass
class DemoCheck:
    """What `check_demos` found of one demo."""

    index: int
    """The demo's place in its demo set."""
    steps: int
    """Its length in steps."""
    success_at_end: bool
    """Its actions, replayed from its first state, still end in success."""
    max_state_error: float
    """The largest difference between a replayed state and the stored one."""
    holds: int
    """Steps the demo's last state keeps success with its last action held (at most the
    horizon asked for)."""
    stored_success: bool = True
    """The demo's own success flag at its last step, as the file stores it."""

    @property
    def usable(self) -> bool:
        """Ends in success both as stored and replayed: the demos `prefrl rfcl` takes."""
        return self.stored_success and self.success_at_end

    @property
    def ends(self) -> str:
        """How it ends by each of the two: its stored success flags, its replay here."""
        return ends_in(self.stored_success, self.success_at_end)


def ends_in(stored: bool, replayed: bool | None) -> str:
    """A demo's end as its stored success flags and (None: no actions to replay) its replay
    say it."""
    words = {True: "success", False: "no success", None: "no actions to replay"}
    return f"stored flags: {words[stored]} at the end; replayed here: {words[replayed]}" + (
        " at the end" if replayed is not None else "")  # fmt: skip


def success_hold(env: PrefrlEnv, state: np.ndarray, action: np.ndarray, horizon: int) -> int:
    """Steps that `state` keeps success with `action` held, at most `horizon`. RFCL's first
    episodes start at a demo's last state and must end in success some steps later, so a demo
    that ends while the task is slipping away (a ball about to fall) gives its reverse
    curriculum little to learn from."""
    env.reset(seed=0)
    env.set_state(state)
    for t in range(horizon):
        *_, info = env.step(action)
        if not _success(info, env.env_id):
            return t
    return horizon


@python_arguments()
def check_demos(demos: DemoSet | str | Path, env: str | PrefrlEnv | None = None,
                hold_horizon: int = 50) -> list[DemoCheck]:  # fmt: skip
    """Replay every demo's actions from its first state (`prefrl demos check`); whether each
    still ends in success (beside whether its stored flags say it does), and how long its last
    state holds success with the last action held (`success_hold`, up to `hold_horizon`
    steps). `demos`: a `DemoSet` or a demo folder; `env`: the env id the demos must be of
    (default: theirs), or an env of theirs to replay in (left open)."""
    if not isinstance(demos, DemoSet):
        demos = DemoSet.load(demos)
    if hold_horizon < 1:
        raise ValueError(f"--hold-horizon {hold_horizon} is invalid: expected an integer >= 1 "
                         "(steps)")  # fmt: skip
    env, env_id = (env, env.env_id) if isinstance(env, PrefrlEnv) else (None, env)
    env_id = env_id or demos.env_id
    if env_id != demos.env_id:
        raise ValueError(f"the demos are of {demos.env_id}, not {env_id}")
    if not demos.has_actions:
        raise ValueError("these demos have no actions to replay (states alone)")
    owned = env is None
    env = make_env(env_id, seed=0) if owned else env
    try:
        if env.obs_dim != demos.obs_dim or env.action_dim != demos.action_dim:
            raise ValueError(
                f"the demos have observations of size {demos.obs_dim} and actions of size "
                f"{demos.action_dim}; {env_id} has {env.obs_dim} and {env.action_dim}"
            )
        out = []
        for i, demo in enumerate(demos.demos):
            env.reset(seed=0)
            env.set_state(demo.states[0])
            error, success = 0.0, False
            for t, action in enumerate(demo.actions):
                _, _, _, _, info = env.step(action)
                error = max(error, float(np.abs(env.get_state() - demo.states[t + 1]).max()))
                success = _success(info, env_id)
            holds = success_hold(env, demo.states[-1], demo.actions[-1], hold_horizon)
            out.append(DemoCheck(i, len(demo), success, error, holds, demo.ends_in_success))
    finally:
        if owned:
            env.close()
    return out


def demo_video(demos: DemoSet, index: int, out: Path, size: int = 256) -> Path:
    """Demo `index` rendered from its stored states."""
    from prefrl.envs import RenderSettings
    from prefrl.render import write_video

    if not 0 <= index < len(demos):
        raise ValueError(f"--index {index} is invalid: the file holds demos 0 to {len(demos) - 1}")
    env = make_env(demos.env_id, seed=0, render=RenderSettings(size, size))
    try:
        env.reset(seed=0)
        frames = []
        for state in demos[index].states:
            env.set_state(state)
            frames.append(env.render())
        return write_video(out, frames, fps=env.fps)
    finally:
        env.close()
