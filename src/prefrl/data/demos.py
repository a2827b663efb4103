"""Demonstrations: whole episodes with the simulator state at every step, for learning a
sparse-reward task from a few of them (RFCL starts episodes from demo states).

A demo holds the state before its first step (the reset state) and after each step, the
observations (one more than steps), the actions (optional: a demo of states alone still gives
reset states), the rewards and the success flag of each step, and where it came from. A demo
set is the demos of one env. On disk it is a Minari dataset directory (`minari_io`) whose
episode infos hold "state" and "success" per step (Minari's infos have a row per observation:
the first is the reset's); its metadata says whether the demos have actions, and where each
came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from prefrl.data.minari_io import read_minari, write_minari
from prefrl.data.replay import ReplayBuffer

MAKE_DEMOS = (
    "make demos with `prefrl demos plan` (Adroit), `prefrl demos script` (the mazes, MetaWorld) "
    "or "
    "`prefrl demos record RUN` (a trained policy), or bring them with `prefrl demos import-d4rl`, "
    "`import-dapg` or `import-maniskill2`"
)


@dataclass
class Demo:
    states: np.ndarray
    """(T + 1, state_dim) float64: the reset state, then the state after each step."""
    observations: np.ndarray
    """(T + 1, obs_dim) float32."""
    actions: np.ndarray | None
    """(T, action_dim) float32 in [-1, 1], or None (a demo of states alone)."""
    rewards: np.ndarray
    """(T,) float32."""
    success: np.ndarray
    """(T,) bool: the task's success flag after each step."""
    info: dict = field(default_factory=dict)
    """Where it came from: the source (scripted, a policy's checkpoint, an import), its seed."""

    def __post_init__(self) -> None:
        self.states = np.asarray(self.states, np.float64)
        self.observations = np.asarray(self.observations, np.float32)
        self.rewards = np.asarray(self.rewards, np.float32).reshape(-1)
        self.success = np.asarray(self.success, bool).reshape(-1)
        if self.actions is not None:
            self.actions = np.asarray(self.actions, np.float32)
        steps = len(self.rewards)
        if steps == 0:
            raise ValueError("a demo needs at least one step")
        rows = {"states": (len(self.states), steps + 1),
                "observations": (len(self.observations), steps + 1),
                "success": (len(self.success), steps)}  # fmt: skip
        if self.actions is not None:
            rows["actions"] = (len(self.actions), steps)
        for name, (got, want) in rows.items():
            if got != want:
                raise ValueError(f"a demo of {steps} steps has {got} {name}: expected {want}")

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def first_success(self) -> int | None:
        """The first step (0-based) after which the task is solved, or None."""
        hits = np.flatnonzero(self.success)
        return int(hits[0]) if len(hits) else None

    @property
    def ends_in_success(self) -> bool:
        """Solved at its last step (RFCL judges an episode by its last step)."""
        return bool(self.success[-1])


@dataclass
class DemoSet:
    """Demonstrations of one env, as a demo folder holds them (`DemoSet.load(path)`,
    `save(path)`): each `Demo` with its simulator states, observations, actions, rewards and
    success flags."""

    env_id: str
    """The env the demos were made in (its prefrl id)."""
    demos: list[Demo]
    """The demonstrations, in the file's order."""
    info: dict = field(default_factory=dict)
    """How the set was made (the command, the policy, the scripted controller...)."""

    def __post_init__(self) -> None:
        if not self.demos:
            raise ValueError(f"a demo set of {self.env_id} needs at least one demo")
        shapes = {(d.states.shape[1], d.observations.shape[1]) for d in self.demos}
        if len(shapes) > 1:
            raise ValueError(f"the demos of one set differ in state/observation sizes: {shapes}")
        with_actions = {d.actions is not None for d in self.demos}
        if len(with_actions) > 1:
            raise ValueError("some demos have actions and some do not: a set is one or the other")

    def __len__(self) -> int:
        return len(self.demos)

    def __getitem__(self, i: int) -> Demo:
        return self.demos[i]

    @property
    def has_actions(self) -> bool:
        return self.demos[0].actions is not None

    @property
    def state_dim(self) -> int:
        return self.demos[0].states.shape[1]

    @property
    def obs_dim(self) -> int:
        return self.demos[0].observations.shape[1]

    @property
    def action_dim(self) -> int | None:
        return self.demos[0].actions.shape[1] if self.has_actions else None

    # ------------------------------------------------------------------ Minari I/O
    def save(self, path: str | Path, action_dim: int | None = None, replace: bool = False) -> Path:
        """A Minari dataset directory at `path` (refused if one is there, unless `replace`; a
        folder holding anything else is refused either way). Without actions,
        Minari still needs an action array: zeros of `action_dim` are stored, and the metadata
        says they are none."""
        width = self.action_dim or action_dim
        if width is None:
            raise ValueError("demos without actions: give action_dim (the env's action size)")
        episodes = [
            {
                "observations": d.observations,
                "actions": d.actions if d.actions is not None else np.zeros((len(d), width)),
                "rewards": d.rewards,
                "terminations": np.zeros(len(d), bool),  # (RFCL's tasks never end early)
                "truncations": np.arange(len(d)) == len(d) - 1,
                "infos": {"state": d.states, "success": np.concatenate([[False], d.success])},
            }
            for d in self.demos
        ]  # fmt: skip
        meta = {
            "algorithm_name": self.info.get("source", "prefrl demos"),
            "description": f"{len(self)} demonstrations of {self.env_id} with simulator states",
            "prefrl": {"env": self.env_id, "kind": "demos", "actions": self.has_actions,
                       "demo_info": [d.info for d in self.demos], **self.info},
        }  # fmt: skip
        return write_minari(path, episodes, self.obs_dim, width, self.env_id, meta, "demos",
                            replace)  # fmt: skip

    @classmethod
    def load(cls, path: str | Path) -> DemoSet:
        env_id, ours, _, episodes = read_minari(path, MAKE_DEMOS)
        has_actions = bool(ours.pop("actions", True))
        ours.pop("kind", None)
        infos_of = ours.pop("demo_info", None) or [{}] * len(episodes)
        demos = []
        for i, e in enumerate(episodes):
            infos = e.get("infos") or {}
            if "state" not in infos:
                raise ValueError(
                    f"{path}: episode {i} has no simulator states; RFCL starts episodes from "
                    "demo states: record demos with `prefrl demos record` or bring states"
                )
            success = infos.get("success")
            success = (np.asarray(success, bool)[1:] if success is not None
                       else np.asarray(e["rewards"]) > 0)  # fmt: skip
            demos.append(Demo(
                states=infos["state"], observations=e["observations"],
                actions=e["actions"] if has_actions else None, rewards=e["rewards"],
                success=success, info=dict(infos_of[i]) if i < len(infos_of) else {},
            ))  # fmt: skip
        return cls(env_id, demos, ours)


def read_maniskill2(path: str | Path) -> DemoSet:
    """ManiSkill2's demonstration format: `trajectory.h5` (groups `traj_<id>` with `actions`,
    `env_states` and, where recorded, `obs` and `success`) beside `trajectory.json` (the env id
    and each episode's id and final success). The states are ManiSkill's own: usable with an
    env that restores them (`prefrl.demos.imports.import_maniskill2_demos` checks them against one).
    Refused, naming the trajectory (and step): values that are not finite, sizes that differ
    between trajectories, a trajectory without steps, states or success flags."""
    import json

    import h5py

    path = Path(path)
    _check_h5(path)
    meta_path = path.with_suffix(".json")
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path} is missing: ManiSkill2 keeps each trajectory.h5's "
                                "episodes and env in the .json beside it")  # fmt: skip
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{meta_path} is not JSON ({e}): not ManiSkill2's") from None
    env_id = meta.get("env_info", {}).get("env_id") if isinstance(meta, dict) else None
    if env_id is None or not meta.get("episodes"):
        raise ValueError(f"{meta_path} names no env_info.env_id or episodes: not ManiSkill2's")
    demos, sizes = [], {}  # (the first trajectory's sizes, which every other must have)
    with h5py.File(path, "r") as f:
        for episode in meta["episodes"]:
            key = f"traj_{episode['episode_id']}"
            where = f"{path}: {key}"
            if key not in f:
                raise ValueError(f"{path} has no {key}, which {meta_path.name} lists")
            group = f[key]
            if "env_states" not in group:
                raise ValueError(f"{where} has no simulator states (env_states); RFCL starts "
                                 "episodes from demo states: record the demos with states")  # fmt: skip
            if "actions" not in group:
                raise ValueError(f"{where} has no actions")
            states, actions = np.asarray(group["env_states"]), np.asarray(group["actions"])
            if len(actions) == 0:
                raise ValueError(f"{where} has no steps (0 actions): remove it from "
                                 f"{meta_path.name}, or record it again")  # fmt: skip
            steps = len(actions)
            obs = group.get("obs")
            obs = (np.asarray(obs) if isinstance(obs, h5py.Dataset)
                   else np.zeros((steps + 1, 0), np.float32))  # fmt: skip
            if "success" in group:
                success = np.asarray(group["success"], bool).reshape(-1)
            elif "success" in episode.get("info", {}):  # (older files: the json's final one)
                success = np.zeros(steps, bool)
                success[-1] = bool(episode["info"]["success"])
            else:
                raise ValueError(f"{where} has no success flags (its `success`, or `info.success` "
                                 f"in {meta_path.name}): RFCL learns when a task is solved "
                                 "from them")  # fmt: skip
            rewards = np.asarray(group["rewards"]) if "rewards" in group else success
            arrays = {"env_states": states, "actions": actions, "obs": obs, "rewards": rewards}
            for name, values in arrays.items():
                _check_rows(where, name, values, sizes)
            try:
                demos.append(Demo(states, obs, actions, rewards, success,
                                  {"source": f"maniskill2:{path.name}", "episode": key,
                                   "seed": episode.get("episode_seed")}))  # fmt: skip
            except ValueError as e:  # (rows that do not match: a demo of n steps has ...)
                raise ValueError(f"{where}: {e}") from None
    return DemoSet(env_id, demos, {"source": "maniskill2", "file": str(path.resolve()),
                                   "control_mode": meta["episodes"][0].get("control_mode")})  # fmt: skip


def _check_h5(path: Path) -> None:
    """`path` is an HDF5 file, else an error saying what it is instead."""
    import h5py

    give = "give ManiSkill2's trajectory .h5 file (beside its .json)"
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.h5"))
        raise ValueError(f"{path} is a folder: {give}" + (
            f"; it holds {', '.join(inside)}" if inside else "; it holds no .h5 file"))  # fmt: skip
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: {give}")
    if not h5py.is_hdf5(path):
        raise ValueError(f"{path} is not an HDF5 file: {give}")


def _check_rows(where: str, name: str, values: np.ndarray, sizes: dict) -> None:
    """A trajectory's `name` rows: numbers, finite (else the first bad step is named), and as
    wide as the first trajectory's (`sizes` remembers them)."""
    if values.dtype.kind not in "biuf" or (values.ndim != 2 and name != "rewards"):
        raise ValueError(f"{where}'s {name} have shape {values.shape} and type {values.dtype}: "
                         "expected rows of numbers, one a step")  # fmt: skip
    bad = np.argwhere(~np.isfinite(values.reshape(len(values), -1)))
    if len(bad):
        step, column = bad[0]
        raise ValueError(f"{where}'s {name} hold {values.reshape(len(values), -1)[step, column]} "
                         f"at step {step} (column {column}): not imported")  # fmt: skip
    if name == "rewards":
        return
    first = sizes.setdefault(name, (where.rsplit(": ", 1)[-1], values.shape[1]))
    if values.shape[1] != first[1]:
        raise ValueError(f"{where}'s {name} are {values.shape[1]} wide and {first[0]}'s "
                         f"{first[1]}: a file's demos are of one env, every one the same size")  # fmt: skip


def load_demos_of(path: Path | str, env_id: str, env) -> DemoSet:
    """The demo file at `path` (`--demos` of `prefrl rl` and `prefrl rfcl`), refused unless it
    holds demos of `env_id` with the observation and action sizes of `env` (an env of that id)."""
    try:
        demos = DemoSet.load(path)
    except FileNotFoundError as e:  # (a default the user never typed, a run moved: say the flag)
        raise FileNotFoundError(f"--demos: {e}") from None
    if demos.env_id != env_id:
        raise ValueError(
            f"{path} holds demos of {demos.env_id}, not of {env_id}: give demos of {env_id} "
            f"(`prefrl demos plan|script|record`), or --env {demos.env_id}"
        )
    if demos.obs_dim != env.obs_dim or (demos.has_actions and demos.action_dim != env.action_dim):
        raise ValueError(
            f"{path}: observations of size {demos.obs_dim} and actions of size "
            f"{demos.action_dim}; {env_id} has {env.obs_dim} and {env.action_dim}"
        )
    return demos


def demo_buffer(demos: DemoSet, reward: str = "success",
                bound: np.ndarray | None = None) -> ReplayBuffer:  # fmt: skip
    """The demos' transitions as a replay buffer, never terminal (a demo ends at its success or
    its time limit, not at a termination). `reward`: "success" (the 0/1 flag, RFCL's) or
    "rewards" (what the env gave). Actions in the agent's units: divided by `bound` where the
    agent's actions are bounded (RFCL's --demo-action-scale)."""
    if reward not in ("success", "rewards"):
        raise ValueError(f"reward={reward!r}: success or rewards")
    total = sum(len(d) for d in demos.demos)
    buffer = ReplayBuffer(total, demos.obs_dim, demos.action_dim)
    for d in demos.demos:
        actions = d.actions if bound is None else np.divide(
            d.actions, bound, out=np.zeros_like(d.actions), where=bound > 0)  # fmt: skip
        rewards = d.success if reward == "success" else d.rewards
        buffer.add_batch(d.observations[:-1], actions, np.asarray(rewards, np.float32),
                         d.observations[1:], np.zeros(len(d), bool))  # fmt: skip
    return buffer
