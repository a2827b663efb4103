"""Making and checking demonstrations (`prefrl demos ...`).

- `script_demos`: the built-in mazes' scripted controller (shortest path of cells, then held at
  the goal);
- `record_demos`: any prefrl policy (e.g. a SAC expert trained on a dense reward), keeping the
  episodes that reach a stable success;
- `check_demos`: replay each demo's actions from its first state and say which still succeed
  (a demo recorded on another version of a simulator may not), and how long its last state
  keeps success with the last action held (`success_hold`);
- `demo_video`: a demo's states rendered to an mp4;
- `import_d4rl_adroit`: D4RL's Adroit human demonstrations (per-step `qpos`, `qvel` and the
  scene each reset drew), turned into prefrl states;
- `import_dapg_adroit`: the same people's demos as hand_dapg keeps them (reset state and
  actions), replayed here to get their states;
- `import_maniskill2`: ManiSkill2's trajectory files, checked against the env they are for.

A demo is cut `hold` steps after its first success, provided it stayed successful for them (RFCL
judges an episode by its last step, so demos should end in a success that lasts). With `settle`
it goes on until its state would keep success that many steps with the last action held:
RFCL's first episodes start at a demo's end.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prefrl.data.demos import Demo, DemoSet, read_maniskill2
from prefrl.envs import PrefrlEnv, make_env
from prefrl.envs.registry import UnknownEnvError


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


def script_demos(env_id: str, episodes: int, seed: int = 0, hold: int = 20,
                 settle: int = 0) -> DemoSet:  # fmt: skip
    """Scripted demos of a built-in maze (`toy:maze`, `toy:maze-open`, `toy:maze-medium`)."""
    from prefrl.envs.maze import PointMaze, scripted_action, shortest_path

    env = make_env(env_id, seed=seed)
    maze = env.unwrapped
    if not isinstance(maze, PointMaze):
        env.close()
        raise ValueError(  # noqa: TRY004 (a bad --env, reported like other bad ids)
            f"scripted demos exist for the built-in mazes (toy:maze*), not {env_id}"
        )
    demos, tried = [], 0
    try:
        waypoints = [maze.centre(c) for c in shortest_path(maze)]
        while len(demos) < episodes and tried < 10 * episodes:
            state = {"index": 0}

            def act(obs, state=state):
                action, state["index"] = scripted_action(maze, waypoints, state["index"])
                return action

            demo = rollout_demo(env, act, seed + tried, hold,
                                {"source": "scripted", "seed": seed + tried}, settle)  # fmt: skip
            tried += 1
            if demo is not None:
                demos.append(demo)
    finally:
        env.close()
    if len(demos) < episodes:
        raise RuntimeError(f"the scripted controller solved {len(demos)} of {tried} episodes")
    return DemoSet(env_id, demos, {"source": "scripted", "seed": seed, "hold": hold,
                                   "settle": settle})  # fmt: skip


def record_demos(policy_path: Path, episodes: int, seed: int = 0, hold: int = 20,
                 max_tries: int | None = None, settle: int = 0) -> DemoSet:  # fmt: skip
    """Demos from a trained prefrl policy (deterministic actions): the first `episodes`
    episodes (seeds `seed`, `seed + 1`, ...) that reach a stable success."""
    from prefrl.loops.policies import load_policy

    policy = load_policy(policy_path)
    env_id = policy.config.env
    env = make_env(env_id, seed=seed)
    demos, tried, limit = [], 0, max_tries or 10 * episodes
    try:
        while len(demos) < episodes and tried < limit:
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
    if len(demos) < episodes:
        print(f"warning: {len(demos)} of {tried} episodes reached a stable success "
              f"({episodes} asked for)")  # fmt: skip
    return DemoSet(env_id, demos, {"source": "policy", "checkpoint": str(policy.checkpoint),
                                   "seed": seed, "hold": hold, "settle": settle})  # fmt: skip


@dataclass
class DemoCheck:
    index: int
    steps: int
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


def check_demos(demos: DemoSet, env_id: str | None = None, env: PrefrlEnv | None = None,
                horizon: int = 50) -> list[DemoCheck]:  # fmt: skip
    """Replay every demo's actions from its first state; whether each still ends in success
    (beside whether its stored flags say it does), and how long its last state holds success
    (`success_hold`, up to `horizon` steps). In `env` (an env of the demos' id, left open)
    where given, else in one made here."""
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
            holds = success_hold(env, demo.states[-1], demo.actions[-1], horizon)
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


ADROIT_SCENE = {"door": ("door_body_pos",), "pen": ("desired_orien",), "hammer": ("board_pos",),
                "relocate": ("obj_pos", "target_pos")}  # fmt: skip
"""The D4RL infos that hold each Adroit task's randomised scene (hammer's target_pos is
derived from its board, so not read)."""


def import_d4rl_adroit(path: Path, env_id: str) -> DemoSet:
    """A D4RL-layout Adroit HDF5 file (`observations`, `actions`, `timeouts`, `infos/qpos`,
    `infos/qvel` and the scene infos of `ADROIT_SCENE`) as demos of `env_id` (adroit:door, ...):
    each step's state is rebuilt from its qpos, qvel and scene, the success flags come from
    stepping each state with its action, and the episode's last state is where that step
    ends. Demos recorded on another simulator version may not succeed on replay: check them."""
    import h5py

    task = _adroit_task(env_id, "D4RL")
    with h5py.File(path, "r") as f:
        needed = ["observations", "actions", "infos/qpos", "infos/qvel"]
        needed += [f"infos/{k}" for k in ADROIT_SCENE[task]]
        missing = [k for k in needed if k not in f]
        if missing:
            raise ValueError(f"{path} lacks {', '.join(missing)}: not a D4RL {env_id} file")
        data = {k: np.asarray(f[k]) for k in needed}
        bad = [k for k, v in data.items() if not np.isfinite(v).all()]
        if bad:
            raise ValueError(f"{path}: {', '.join(bad)} hold NaN or inf; not imported")
        n = len(data["actions"])
        ends = np.zeros(n, bool)
        for key in ("timeouts", "terminals"):  # (human demos: timeouts mark each episode's end)
            if key in f:
                ends |= np.asarray(f[key], bool).reshape(-1)
    ends[-1] = True
    env = make_env(env_id, seed=0)
    base = env.unwrapped
    demos = []
    try:
        env.reset(seed=0)
        if env.obs_dim != data["observations"].shape[1]:
            raise ValueError(f"{path}: observations of size {data['observations'].shape[1]}; "
                             f"{env_id} has {env.obs_dim}")  # fmt: skip
        start = 0
        for end in np.flatnonzero(ends) + 1:
            states, observations, success = [], [], []
            for t in range(start, end):
                _set_adroit_scene(
                    base, task, {k: data[f"infos/{k}"][t] for k in ADROIT_SCENE[task]}
                )
                base.set_state(data["infos/qpos"][t], data["infos/qvel"][t])
                states.append(env.get_state())
                observations.append(data["observations"][t])
                obs, _, _, _, info = env.step(data["actions"][t])
                success.append(bool(info["success"]))
            states.append(env.get_state())
            observations.append(obs)
            demos.append(Demo(np.stack(states), np.stack(observations),
                              data["actions"][start:end], np.asarray(success, np.float32),
                              np.asarray(success), {"source": f"d4rl:{Path(path).name}",
                                                    "first_step": int(start)}))  # fmt: skip
            start = end
    finally:
        env.close()
    return DemoSet(env_id, demos, {"source": f"d4rl:{Path(path).name}"})


def import_dapg_adroit(path: Path, env_id: str, hold: int | None = None,
                       settle: int = 0) -> DemoSet:  # fmt: skip
    """hand_dapg's Adroit demos (`dapg/demonstrations/<task>-v0_demos.pickle`: per demo the
    person's actions and `init_state_dict`, the reset's qpos, qvel and scene; no states along
    the way) as demos of `env_id`: each is replayed open-loop from its reset state on this
    simulator and its states recorded, to the person's last action (`hold` None: RFCL trims
    what runs past 50 steps of success itself) or cut like a recorded demo (`hold`, `settle`).
    They were recorded on mujoco-py's MuJoCo 1.5, so the replays drift; those that no longer
    end in a success that lasts from the first are left out, and said so. A pickle runs code
    when it is loaded: import only files you trust."""
    import pickle

    task = _adroit_task(env_id, "DAPG")
    with open(path, "rb") as f:
        raw = pickle.load(f)  # (the user's own file; the docstring warns)
    needed = ("qpos", "qvel", *ADROIT_SCENE[task])
    if (
        not isinstance(raw, list)
        or not raw
        or not all(isinstance(d, dict) and "actions" in d and "init_state_dict" in d for d in raw)
    ):
        raise ValueError(f"{path} is not a DAPG demo pickle (a list of dicts with 'actions' and "
                         "'init_state_dict')")  # fmt: skip
    missing = sorted({k for d in raw for k in needed if k not in d["init_state_dict"]})
    if missing:
        raise ValueError(f"{path}: init_state_dict lacks {', '.join(missing)}: not DAPG "
                         f"{env_id} demos")  # fmt: skip
    env = make_env(env_id, seed=0)
    base, demos, dropped = env.unwrapped, [], []
    try:
        for i, d in enumerate(raw):
            actions = np.asarray(d["actions"], np.float32)
            if actions.ndim != 2 or actions.shape[1] != env.action_dim:
                raise ValueError(f"{path}: demo {i}'s actions have shape {actions.shape}; "
                                 f"{env_id} takes actions of size {env.action_dim}")  # fmt: skip
            init = {k: np.asarray(d["init_state_dict"][k], np.float64) for k in needed}
            bad = [k for k, v in {"actions": actions, **init}.items() if not np.isfinite(v).all()]
            if bad:
                raise ValueError(f"{path}: demo {i}'s {', '.join(bad)} hold NaN or inf; "
                                 "not imported")  # fmt: skip
            env.reset(seed=0)
            _set_adroit_scene(base, task, {k: init[k] for k in ADROIT_SCENE[task]})
            base.set_state(init["qpos"], init["qvel"])
            steps = iter(actions)
            demo = rollout_demo(env, lambda obs, steps=steps: next(steps), 0, hold,
                                {"source": f"dapg:{Path(path).name}", "index": i}, settle,
                                start=env.get_state(), steps=len(actions))  # fmt: skip
            if demo is None:
                dropped.append(i)
            else:
                demos.append(demo)
    finally:
        env.close()
    if not demos:
        cut = "to the end" if hold is None else f"--hold {hold}"
        raise ValueError(f"{path}: none of its {len(raw)} demos reaches a stable success "
                         f"when replayed here ({cut}, --settle {settle})")  # fmt: skip
    if dropped:
        print(f"warning: {len(dropped)} of {len(raw)} demos reach no stable success when "
              f"replayed here, left out: {', '.join(map(str, dropped))}")  # fmt: skip
    left_out = ", ".join(map(str, dropped)) or None
    return DemoSet(env_id, demos, {"source": f"dapg:{Path(path).name}",
                                   "hold": "to the end" if hold is None else hold,
                                   "settle": settle, "left_out": left_out})  # fmt: skip


def import_maniskill2(path: Path, env_id: str | None = None) -> DemoSet:
    """ManiSkill2's trajectory files (`read_maniskill2`, which checks the file itself) as demos
    of a prefrl env: `env_id`, or the file's own id where prefrl has such an env. Refused unless
    that env restores states and its action, state and observation sizes are the file's;
    trajectories without observations get the env's, made from their states. Trajectories that
    never succeed are left out, and said so; a file with none that succeeds is refused."""
    raw = read_maniskill2(path)
    target = env_id or raw.env_id
    try:
        env = make_env(target, seed=0)
    except UnknownEnvError:
        if env_id is not None:
            raise
        raise ValueError(
            f"{path} holds demos of {raw.env_id} (its .json's env_info.env_id), which is no env "
            "prefrl has: give --env, the prefrl env whose states the file holds (e.g. your own "
            "module:EnvId)"
        ) from None
    flag = f"--env {env_id}" if env_id else f"{target} (the file's env_info.env_id)"
    try:
        env.reset(seed=0)
        if not env.restores_state:
            raise ValueError(f"{flag} cannot restore a saved state: RFCL starts episodes from "
                             "demo states")  # fmt: skip
        sizes = {"actions": (raw.action_dim, env.action_dim),
                 "states": (raw.state_dim, len(env.get_state()))}  # fmt: skip
        if raw.obs_dim:
            sizes["observations"] = (raw.obs_dim, env.obs_dim)
        wrong = [(name, a, b) for name, (a, b) in sizes.items() if a != b]
        if wrong:
            held = " and ".join(f"{name} of size {a}" for name, a, _ in wrong)
            wanted = " and ".join(f"{name} of size {b}" for name, _, b in wrong)
            fix = "" if env_id else ": give --env, the prefrl env whose states the file holds"
            raise ValueError(f"{path} holds {held}, where {flag} has {wanted}: these are demos "
                             f"of another env{fix}")  # fmt: skip
        demos = []
        for demo in raw.demos:
            if not raw.obs_dim:  # (ManiSkill2 files recorded without state observations)
                observations = np.stack([env.set_state(state) for state in demo.states])
                demo = Demo(demo.states, observations, demo.actions, demo.rewards, demo.success,
                            demo.info)  # fmt: skip
            demos.append(demo)
    finally:
        env.close()
    kept = [d for d in demos if d.first_success is not None]
    dropped = [d.info["episode"] for d in demos if d.first_success is None]
    if not kept:
        raise ValueError(f"{path}: none of its {len(demos)} trajectories succeeds (their success "
                         "flags are all False): RFCL learns from demos that solve the task")  # fmt: skip
    if dropped:
        print(f"warning: {len(dropped)} of {len(demos)} trajectories of {path} never succeed "
              f"(their success flags are all False), left out: {', '.join(dropped)}")  # fmt: skip
    info = {**raw.info, "maniskill2_env": raw.env_id, "left_out": ", ".join(dropped) or None}
    return DemoSet(target, kept, info)


def _adroit_task(env_id: str, what: str) -> str:
    task = env_id.removeprefix("adroit:")
    if not env_id.startswith("adroit:") or task not in ADROIT_SCENE:
        raise ValueError(f"--env {env_id}: {what} Adroit demos are of adroit:door, adroit:pen, "
                         "adroit:hammer or adroit:relocate")  # fmt: skip
    return task


def _set_adroit_scene(base, task: str, scene: dict) -> None:
    m = base.model
    if task == "door":
        m.body_pos[base.door_body_id] = scene["door_body_pos"]
    elif task == "pen":
        m.body_quat[base.target_obj_body_id] = scene["desired_orien"]
    elif task == "hammer":
        m.body_pos[base.target_body_id] = scene["board_pos"]
    else:
        m.body_pos[base.obj_body_id] = scene["obj_pos"]
        m.site_pos[base.target_obj_site_id] = scene["target_pos"]
