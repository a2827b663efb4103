"""Offline datasets: whole episodes of transitions, stored in the Minari format.

In memory a dataset is D4RL's `qlearning_dataset` layout: transitions of every episode laid end
to end (observations, actions, rewards, next observations, terminals, timeouts), so a flat index
names one transition, as in Preference Transformer's query files. On disk it is a Minari dataset
directory (`<dir>/data/main_data.hdf5` + `metadata.json`), readable by `minari.MinariDataset`
and, placed under `MINARI_DATASETS_PATH`, by `minari.load_dataset`. Nothing here makes a remote
call.

The reference returns of the D4RL normalised score (0 = random policy, 100 = expert policy) are
stored with the dataset as Minari's `ref_min_score` / `ref_max_score`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from prefrl.data.minari_io import first_non_finite, read_minari, write_minari

D4RL_KEYS = ("observations", "actions", "rewards", "terminals", "timeouts")


@dataclass
class OfflineDataset:
    observations: np.ndarray  # (N, obs_dim) float32
    actions: np.ndarray  # (N, action_dim) float32
    rewards: np.ndarray  # (N,) float32
    next_observations: np.ndarray  # (N, obs_dim) float32
    terminals: np.ndarray  # (N,) bool: a true terminal state (no bootstrap)
    timeouts: np.ndarray  # (N,) bool: the episode was cut here (time limit, end of data)
    env_id: str
    name: str = "dataset"
    ref_min_score: float | None = None
    ref_max_score: float | None = None
    info: dict = field(default_factory=dict)
    """How the dataset was made (source run, policy steps, noise...), stored in its metadata."""
    states: np.ndarray | None = None
    """(N, state_dim) simulator state before each step, where the dataset was rolled out by
    prefrl (stored as Minari infos "state"): what re-renders a segment's clip for a person."""

    def __post_init__(self) -> None:
        self.observations = np.asarray(self.observations, np.float32)
        self.actions = np.asarray(self.actions, np.float32)
        self.rewards = np.asarray(self.rewards, np.float32).reshape(-1)
        self.next_observations = np.asarray(self.next_observations, np.float32)
        self.terminals = np.asarray(self.terminals, bool).reshape(-1)
        self.timeouts = np.asarray(self.timeouts, bool).reshape(-1)
        n = len(self.observations)
        if n == 0:
            raise ValueError(f"dataset {self.name!r} has no transitions")
        for key in ("actions", "rewards", "next_observations", "terminals", "timeouts"):
            if len(getattr(self, key)) != n:
                raise ValueError(
                    f"dataset {self.name!r}: {key} has {len(getattr(self, key))} rows, "
                    f"observations {n}; every key needs one row per transition"
                )
        if self.states is not None:
            self.states = np.asarray(self.states, np.float64)
            if len(self.states) != n:
                raise ValueError(
                    f"dataset {self.name!r}: states has {len(self.states)} rows, observations {n}"
                )
        if self.next_observations.shape[1:] != self.observations.shape[1:]:
            raise ValueError(
                f"dataset {self.name!r}: next_observations have shape "
                f"{self.next_observations.shape[1:]}, observations {self.observations.shape[1:]}"
            )
        # Every episode ends somewhere: data that stops mid-episode ends it there.
        if not (self.terminals[-1] or self.timeouts[-1]):
            self.timeouts = self.timeouts.copy()
            self.timeouts[-1] = True
        for key in ("observations", "actions", "rewards", "next_observations", "states"):
            at = first_non_finite(getattr(self, key))
            if at is not None:
                episode = int(np.searchsorted(self.episode_bounds()[1], at[0], side="right"))
                raise ValueError(
                    f"dataset {self.name!r}: {key}[{', '.join(map(str, at))}] (episode "
                    f"{episode}, its step {self.episode_index()[at[0]]}) is "
                    f"{getattr(self, key)[at]}; every value must be finite"
                )

    # ------------------------------------------------------------------------------- structure
    def fingerprint(self) -> str:
        """A hash of the transitions (observations, actions, rewards, ends): the dataset's
        identity, whatever its name or where it lies; queries record it (`DatasetQueries`)."""
        import hashlib

        h = hashlib.sha256()
        for a in (self.observations, self.actions, self.rewards, self.terminals, self.timeouts):
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()[:16]

    def __len__(self) -> int:
        return len(self.observations)

    @property
    def obs_dim(self) -> int:
        return self.observations.shape[1]

    @property
    def action_dim(self) -> int:
        return self.actions.shape[1]

    def episode_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(first index, one past the last index) of every episode."""
        ends = np.flatnonzero(self.terminals | self.timeouts) + 1
        starts = np.concatenate([[0], ends[:-1]])
        return starts, ends

    def episode_returns(self, rewards: np.ndarray | None = None) -> np.ndarray:
        starts, _ = self.episode_bounds()
        r = self.rewards if rewards is None else rewards
        return np.add.reduceat(np.asarray(r, np.float64), starts)

    def episode_index(self) -> np.ndarray:
        """For each transition, its position within its episode (0 at the episode's start)."""
        starts, ends = self.episode_bounds()
        return np.arange(len(self)) - np.repeat(starts, ends - starts)

    # ------------------------------------------------------------------------------- scores
    def normalized_score(self, returns) -> np.ndarray:
        """D4RL's normalised score: 100 * (return - random) / (expert - random)."""
        if self.ref_min_score is None or self.ref_max_score is None:
            raise ValueError(
                f"dataset {self.name!r} has no reference returns (ref_min_score, ref_max_score); "
                "give them when collecting or importing it (--ref-min-score, --ref-max-score)"
            )
        span = self.ref_max_score - self.ref_min_score
        return 100.0 * (np.asarray(returns, np.float64) - self.ref_min_score) / span

    # ------------------------------------------------------------------------------- segments
    def valid_segment_starts(self, length: int) -> np.ndarray:
        """Every index where `length` steps fit inside one episode."""
        starts, ends = self.episode_bounds()
        parts = [np.arange(s, e - length + 1) for s, e in zip(starts, ends) if e - s >= length]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def check_segments(self, starts, length: int) -> np.ndarray:
        """The start indices as an int array, or a ValueError naming the first bad one."""
        starts = np.asarray(starts).reshape(-1)
        if starts.dtype.kind == "f" and np.all(np.mod(starts, 1) == 0):
            starts = starts.astype(np.int64)
        if starts.dtype.kind not in "iu":
            raise ValueError(f"segment start indices must be integers; got {starts[:5]}")
        if length < 1:
            raise ValueError(f"segment length={length} is invalid: expected a positive integer")
        bad = np.flatnonzero((starts < 0) | (starts + length > len(self)))
        if len(bad):
            i = bad[0]
            raise ValueError(
                f"segment start index {int(starts[i])} (query {i}) is out of range: dataset "
                f"{self.name!r} has {len(self)} transitions, segments are {length} long, so a "
                f"start must lie in [0, {len(self) - length}]"
            )
        episode_end = np.flatnonzero(self.terminals | self.timeouts)
        # The first episode end at or after each start must not come before its last step.
        first_end = episode_end[np.searchsorted(episode_end, starts)]
        crosses = np.flatnonzero(first_end < starts + length - 1)
        if len(crosses):
            i = crosses[0]
            raise ValueError(
                f"segment start index {int(starts[i])} (query {i}) runs past the end of its "
                f"episode at index {int(first_end[i])}: a {length}-step segment must lie inside "
                "one episode (shorter --length, or queries sampled from this dataset)"
            )
        return starts.astype(np.int64)

    def segments(self, starts, length: int, rewards: np.ndarray | None = None):
        """(obs, action, reward) of segments, shapes (n, length, ...)."""
        starts = self.check_segments(starts, length)
        idx = starts[:, None] + np.arange(length)[None, :]
        r = self.rewards if rewards is None else rewards
        return self.observations[idx], self.actions[idx], np.asarray(r)[idx]

    # ------------------------------------------------------------------------------- building
    @classmethod
    def from_episodes(cls, episodes: list[dict], env_id: str, **kw) -> OfflineDataset:
        """From episodes as Minari stores them: observations T+1 rows, the rest T rows."""
        episodes = [e for e in episodes if len(e["actions"]) > 0]
        if not episodes:
            raise ValueError(f"dataset {kw.get('name', '')!r} has no non-empty episode")
        obs = np.concatenate([e["observations"][:-1] for e in episodes])
        nxt = np.concatenate([e["observations"][1:] for e in episodes])
        trunc = []
        for e in episodes:
            t = np.asarray(e["truncations"], bool).copy()
            t[-1] = t[-1] or not bool(e["terminations"][-1])  # the episode ends here either way
            trunc.append(t)
        has_states = all("state" in (e.get("infos") or {}) for e in episodes)
        states = (
            np.concatenate([np.asarray(e["infos"]["state"])[:-1] for e in episodes])
            if has_states
            else None
        )
        return cls(
            states=states,
            observations=obs,
            actions=np.concatenate([e["actions"] for e in episodes]),
            rewards=np.concatenate([e["rewards"] for e in episodes]),
            next_observations=nxt,
            terminals=np.concatenate([e["terminations"] for e in episodes]),
            timeouts=np.concatenate(trunc),
            env_id=env_id,
            **kw,
        )

    def episodes(self) -> list[dict]:
        out = []
        for s, e in zip(*self.episode_bounds()):
            out.append(
                {
                    "observations": np.concatenate(
                        [self.observations[s:e], self.next_observations[e - 1 : e]]
                    ),
                    "actions": self.actions[s:e],
                    "rewards": self.rewards[s:e],
                    "terminations": self.terminals[s:e],
                    "truncations": self.timeouts[s:e] & ~self.terminals[s:e],
                    # Minari infos have a row per observation: the last state is repeated.
                    "infos": {}
                    if self.states is None
                    else {"state": np.concatenate([self.states[s:e], self.states[e - 1 : e]])},
                }
            )
        return out

    @classmethod
    def concatenate(cls, parts: list[OfflineDataset], name: str, **kw) -> OfflineDataset:
        envs = {p.env_id for p in parts}
        if len(envs) != 1:
            raise ValueError(f"cannot join datasets of different envs: {sorted(envs)}")
        cat = {k: np.concatenate([getattr(p, k) for p in parts]) for k in _ARRAY_KEYS}
        if all(p.states is not None for p in parts):
            cat["states"] = np.concatenate([p.states for p in parts])
        return cls(**cat, env_id=parts[0].env_id, name=name, **kw)

    # ------------------------------------------------------------------------------- Minari I/O
    def save(self, path: str | Path) -> Path:
        """Write a Minari dataset directory at `path` (refused if one is there already; written
        whole or not at all, see `minari_io.write_minari`)."""
        meta = {
            "algorithm_name": self.info.get("algorithm", "prefrl"),
            "description": self.info.get("description", f"{self.name} ({self.env_id})"),
            "prefrl": {"env": self.env_id, "name": self.name, **self.info},
        }
        if self.ref_min_score is not None and self.ref_max_score is not None:
            meta["ref_min_score"] = float(self.ref_min_score)
            meta["ref_max_score"] = float(self.ref_max_score)
        return write_minari(path, self.episodes(), self.obs_dim, self.action_dim, self.env_id,
                            meta)  # fmt: skip

    @classmethod
    def load(cls, path: str | Path) -> OfflineDataset:
        """Read a Minari dataset directory (the one holding `data/`, or `data/` itself)."""
        env_id, ours, meta, episodes = read_minari(
            path, "make one with `prefrl dataset collect` or `prefrl dataset import-d4rl`"
        )
        data = Path(path).resolve()
        name = ours.pop("name", (data if (data / "data").is_dir() else data.parent).name)
        return cls.from_episodes(
            episodes,
            env_id,
            name=name,
            ref_min_score=meta.get("ref_min_score"),
            ref_max_score=meta.get("ref_max_score"),
            info=ours,
        )


_ARRAY_KEYS = ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts")


def _check_d4rl_values(path: Path, arrays: dict, env_id: str, dims) -> None:
    for key, value in arrays.items():
        if not np.issubdtype(value.dtype, np.number) and value.dtype != bool:
            raise ValueError(f"{path}: {key} holds {value.dtype} values; expected numbers")
        if np.issubdtype(value.dtype, np.floating):
            bad = np.flatnonzero(~np.isfinite(value.reshape(len(value), -1)).all(axis=1))
            if len(bad):
                raise ValueError(
                    f"{path}: {key} holds NaN or inf in {len(bad)} row(s), the first at row "
                    f"{bad[0]}; a dataset must be finite"
                )
    if dims is None:
        return
    for key, want in (("observations", dims[0]), ("actions", dims[1]),
                      ("next_observations", dims[0])):  # fmt: skip
        if key in arrays:
            got = int(np.prod(arrays[key].shape[1:]))
            if got != want:
                raise ValueError(
                    f"{path}: {key} have {got} values per step; {env_id}'s have {want}. Is "
                    "--env the env this data comes from?"
                )


def import_d4rl_hdf5(
    path: str | Path,
    env_id: str,
    name: str | None = None,
    ref_min_score: float | None = None,
    ref_max_score: float | None = None,
    dims: tuple[int, int] | None = None,
) -> OfflineDataset:
    """A D4RL-layout HDF5 file (observations, actions, rewards, terminals, timeouts; optionally
    next_observations) as a dataset. Refused before anything is written: a file that is not
    HDF5, missing keys, NaN or inf values, and (given `dims`, the env's (obs_dim, action_dim))
    observations or actions of another size than the env's.

    Without next_observations, the next observation of step i is observations[i+1], and steps
    where `timeouts` is set are dropped (their successor is the next episode's first
    observation), as D4RL's `qlearning_dataset` does; so flat indices match Preference
    Transformer's query files made on D4RL data."""
    import h5py

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such HDF5 file: {path}")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise ValueError(f"{path} is not an HDF5 file (h5py: {e}); expected a D4RL .hdf5") from None
    with f:
        missing = [k for k in D4RL_KEYS if k not in f]
        if missing:
            raise ValueError(
                f"{path} lacks the D4RL key(s) {missing}; a D4RL file holds {list(D4RL_KEYS)} "
                f"(found: {sorted(f.keys())})"
            )
        arrays = {k: np.asarray(f[k]) for k in D4RL_KEYS}
        nxt = np.asarray(f["next_observations"]) if "next_observations" in f else None
    n = len(arrays["observations"])
    for k, v in arrays.items():
        if len(v) != n:
            raise ValueError(f"{path}: {k} has {len(v)} rows, observations {n}")
    _check_d4rl_values(path, {**arrays, **({"next_observations": nxt} if nxt is not None else {})},
                       env_id, dims)  # fmt: skip
    terminals = arrays["terminals"].astype(bool).reshape(-1)
    timeouts = arrays["timeouts"].astype(bool).reshape(-1)
    if nxt is not None:
        keep = np.arange(n)
        next_obs = nxt
    else:
        keep = np.flatnonzero(~timeouts[:-1])
        next_obs = arrays["observations"][keep + 1]
        # The step before a dropped timeout ends its episode.
        timeouts = np.zeros(n, bool)
        dropped = np.flatnonzero(arrays["timeouts"].astype(bool).reshape(-1)[:-1])
        timeouts[dropped[dropped > 0] - 1] = True
    return OfflineDataset(
        observations=arrays["observations"][keep],
        actions=arrays["actions"][keep],
        rewards=arrays["rewards"].reshape(-1)[keep],
        next_observations=next_obs,
        terminals=terminals[keep],
        timeouts=timeouts[keep],
        env_id=env_id,
        name=name or path.stem,
        ref_min_score=ref_min_score,
        ref_max_score=ref_max_score,
        info={"source": f"D4RL HDF5 {path.name}"},
    )
