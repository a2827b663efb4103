"""People's demonstrations from other projects' files, as prefrl demos (`prefrl demos
import-...`):

- `import_d4rl_demos`: D4RL's Adroit human demonstrations (per-step `qpos`, `qvel` and the
  scene each reset drew), turned into prefrl states;
- `import_dapg_demos`: the same people's demos as hand_dapg keeps them (reset state and
  actions), replayed here to get their states;
- `import_maniskill2_demos`: ManiSkill2's trajectory files, checked against the env they are
  for.

Each writes the demos to `out` (a demo folder) where given; `replace`: over the demos there,
once the new ones are made.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from prefrl.data.demos import Demo, DemoSet, read_maniskill2
from prefrl.demos.make import check_out, rollout_demo, save_demos
from prefrl.envs import make_env
from prefrl.envs.registry import UnknownEnvError
from prefrl.rundir.config import python_arguments

ADROIT_SCENE = {"door": ("door_body_pos",), "pen": ("desired_orien",), "hammer": ("board_pos",),
                "relocate": ("obj_pos", "target_pos")}  # fmt: skip
"""The D4RL infos that hold each Adroit task's randomised scene (hammer's target_pos is
derived from its board, so not read)."""


@python_arguments()
def import_d4rl_demos(file: str | Path, env: str, *, out: str | Path | None = None,
                      replace: bool = False) -> DemoSet:  # fmt: skip
    """D4RL's Adroit human demonstrations (a D4RL-layout HDF5 file) as demos of `env`
    (adroit:door, adroit:pen, adroit:hammer or adroit:relocate) with their states (`prefrl
    demos import-d4rl`); demos recorded on another simulator version may not succeed on
    replay: `check_demos` them."""
    check_out(out, replace)
    return save_demos(_read_d4rl_adroit(Path(file), env), out, replace)


@python_arguments()
def import_dapg_demos(file: str | Path, env: str, *, out: str | Path | None = None,
                      replace: bool = False, hold: int | None = None,
                      settle: int = 0) -> DemoSet:  # fmt: skip
    """hand_dapg's Adroit demos (`dapg/demonstrations/<task>-v0_demos.pickle`) as demos of
    `env`, replayed here to record their states (`prefrl demos import-dapg`); those that no
    longer reach a stable success are left out, and said so. `hold` None keeps each person's
    whole demo (as RFCL takes it); `hold`, `settle` cut them as `script_demos` does. A pickle
    runs code when it is loaded: import only files you trust."""
    check_out(out, replace)
    return save_demos(_replay_dapg_adroit(Path(file), env, hold, settle), out, replace)


@python_arguments()
def import_maniskill2_demos(file: str | Path, env: str | None = None, *,
                            out: str | Path | None = None,
                            replace: bool = False) -> DemoSet:  # fmt: skip
    """ManiSkill2 demonstrations (trajectory.h5, with the trajectory.json beside it) as demos
    of `env` (default: the file's own env id, where prefrl has that env; `prefrl demos
    import-maniskill2`), refused unless that env restores states and its sizes are the
    file's; trajectories that never succeed are left out, and said so."""
    check_out(out, replace)
    return save_demos(_convert_maniskill2(Path(file), env), out, replace)


def _read_d4rl_adroit(path: Path, env_id: str) -> DemoSet:
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


def _replay_dapg_adroit(path: Path, env_id: str, hold: int | None,
                        settle: int) -> DemoSet:  # fmt: skip
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


def _convert_maniskill2(path: Path, env_id: str | None) -> DemoSet:
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
