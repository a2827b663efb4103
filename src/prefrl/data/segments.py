"""Segments of behaviour, queries (pairs of segments) and preference labels.

A segment is H consecutive steps of one episode: observations, actions, the env's true rewards
(NaN where the env has none) and the simulator state before each step, so the segment can be
re-rendered later. Labels say which segment of a pair is better.
"""

from __future__ import annotations

import enum
import hashlib
import json
import zipfile
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from prefrl.rundir.atomic import atomic_write


class Label(enum.IntEnum):
    """An answer to a pair: the left segment is preferred, the right one, both equally, or
    neither can be told (`Label.parse` takes these names or their numbers)."""

    LEFT = 0
    RIGHT = 1
    EQUAL = 2
    SKIP = 3
    """Can't tell / incomparable: stored, never trained on."""

    @classmethod
    def parse(cls, value: str | int | Label) -> Label:
        if isinstance(value, Label):
            return value
        if isinstance(value, str) and value.upper() in cls.__members__:
            return cls[value.upper()]
        if isinstance(value, int | np.integer) and int(value) in cls._value2member_map_:
            return cls(int(value))
        accepted = ", ".join(m.name.lower() for m in cls)
        raise ValueError(f"label {value!r} is invalid: expected one of {accepted}")


# P(right preferred) for each label; NaN for skip (not a training target).
LABEL_TARGET = np.array([0.0, 1.0, 0.5, np.nan], np.float32)


def write_npz(f, arrays: dict[str, np.ndarray]) -> None:
    """Write `arrays` to the open binary file `f` as an .npz `np.load` reads, the uint8 ones
    (frames, emulator states) deflated: Pong's clips shrink 136x (mostly still background), for
    a few seconds of one core a GB (docs/performance.md); float arrays (states, actions) barely
    shrink and are stored as they are."""
    with zipfile.ZipFile(f, "w", allowZip64=True) as npz:
        for name, array in arrays.items():
            array = np.asanyarray(array)
            entry = zipfile.ZipInfo(f"{name}.npy")
            entry.compress_type = (
                zipfile.ZIP_DEFLATED if array.dtype == np.uint8 else zipfile.ZIP_STORED
            )
            with npz.open(entry, "w", force_zip64=True) as out:
                np.lib.format.write_array(out, array, allow_pickle=False)


@dataclass
class Segments:
    """A batch of N segments of H steps (all arrays share the leading N)."""

    obs: np.ndarray  # (N, H, obs_dim) float32; frames: (N, H + 3, 84, 84) uint8 (frame_clips)
    action: np.ndarray  # (N, H, action_dim) float32
    reward: np.ndarray  # (N, H) float32: true reward, NaN where the env has none
    state: np.ndarray  # (N, H, state_dim) float64: simulator state before each step
    id: np.ndarray  # (N,) int64: unique within a run
    step: np.ndarray  # (N,) int64: global env step of the segment's first step
    episode: np.ndarray  # (N,) int64
    start: np.ndarray  # (N,) int64: index of the first step within its episode

    def __len__(self) -> int:
        return self.obs.shape[0]

    @property
    def length(self) -> int:
        return self.reward.shape[1]

    def __getitem__(self, idx) -> Segments:
        idx = np.atleast_1d(np.asarray(idx)) if not isinstance(idx, slice) else idx
        return Segments(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    @staticmethod
    def concatenate(parts: list[Segments]) -> Segments:
        return Segments(
            **{
                f.name: np.concatenate([getattr(p, f.name) for p in parts])
                for f in fields(Segments)
            }
        )

    def fingerprints(self) -> list[bytes]:
        """A digest of each segment's steps (observations, actions, rewards, states), not of
        its id or place: the same behaviour cut twice has the same one."""
        arrays = [np.ascontiguousarray(a) for a in (self.obs, self.action, self.reward, self.state)]
        out = []
        for i in range(len(self)):
            digest = hashlib.blake2b(digest_size=16)
            for a in arrays:
                digest.update(a[i].tobytes())
            out.append(digest.digest())
        return out

    def true_returns(self, discount: float = 1.0) -> np.ndarray:
        """Sum of true rewards; with discount γ < 1, step t of H weighted γ^(H-1-t) (myopia)."""
        weights = discount ** np.arange(self.length - 1, -1, -1, dtype=np.float64)
        return (self.reward.astype(np.float64) * weights).sum(-1)


class SegmentRecorder:
    """Collects the steps of the running episode and cuts them into segments when it ends.

    Segments do not overlap; the first starts at a random offset so that segment boundaries do
    not always fall on the same phase of the episode. Episodes shorter than H give none, unless
    they ended early and are padded (`end_episode`'s `final`).
    """

    def __init__(self, length: int, next_id: int = 0):
        if length < 1:
            raise ValueError(f"segment length {length} is invalid: expected >= 1")
        self.length = length
        self.next_id = next_id
        self._steps: list[tuple[np.ndarray, np.ndarray, float, np.ndarray]] = []
        self._first_step = 0

    def record(self, global_step: int, obs, action, reward: float, state) -> None:
        if not self._steps:
            self._first_step = global_step
        self._steps.append((obs, action, reward, state))

    def end_episode(
        self, rng: np.random.Generator, episode: int, final: tuple | None = None
    ) -> Segments | None:
        """Cut the episode's steps into segments. `final` = (observation, simulator state) after
        the last step, for an episode that ended early: its steps are then padded to a whole
        number of segments with that state held still (zero action, true reward 0, the
        "absorbing" state), so the last segment shows the end, and the first starts at step 0."""
        steps, self._steps = self._steps, []
        h, n = self.length, len(steps)
        if final is not None and n:
            obs_end, state_end = final
            reward = 0.0 if np.isfinite(steps[-1][2]) else np.nan  # (NaN: no true reward)
            still = (obs_end, np.zeros_like(steps[0][1]), reward, state_end)
            steps += [still] * ((-n) % h)
            n = len(steps)
        if n < h:
            return None
        count = n // h
        offset = 0 if final is not None else int(rng.integers(0, n - count * h + 1))
        starts = offset + h * np.arange(count)
        obs, action, reward, state = (np.asarray(x) for x in zip(*steps, strict=True))
        window = starts[:, None] + np.arange(h)[None]
        ids = self.next_id + np.arange(count)
        self.next_id += count
        return Segments(
            obs=obs[window].astype(np.float32),
            action=action[window].astype(np.float32),
            reward=reward[window].astype(np.float32),
            state=state[window].astype(np.float64),
            id=ids.astype(np.int64),
            step=(self._first_step + starts).astype(np.int64),
            episode=np.full(count, episode, np.int64),
            start=starts.astype(np.int64),
        )


def pair_keys(left_ids, right_ids) -> list[tuple[int, int]]:
    """Each pair of segment ids as (smaller, larger): the same key in either order."""
    left_ids, right_ids = np.asarray(left_ids), np.asarray(right_ids)
    low, high = np.minimum(left_ids, right_ids), np.maximum(left_ids, right_ids)
    return list(zip(low.tolist(), high.tolist(), strict=True))


class SegmentPool:
    """The most recent `capacity` segments (a ring), from which query candidates are drawn."""

    def __init__(self, capacity: int):
        if capacity < 2:
            raise ValueError(f"segment pool capacity {capacity} is invalid: expected >= 2")
        self.capacity = capacity
        self._data: Segments | None = None
        self.size = 0
        self.ptr = 0

    def __len__(self) -> int:
        return self.size

    def add(self, segments: Segments) -> None:
        if self._data is None:
            self._data = Segments(
                **{
                    f.name: np.zeros(
                        (self.capacity, *getattr(segments, f.name).shape[1:]),
                        getattr(segments, f.name).dtype,
                    )
                    for f in fields(Segments)
                }
            )
        for f in fields(Segments):
            idx = (self.ptr + np.arange(len(segments))) % self.capacity
            getattr(self._data, f.name)[idx] = getattr(segments, f.name)
        self.ptr = int((self.ptr + len(segments)) % self.capacity)
        self.size = min(self.size + len(segments), self.capacity)

    def all(self) -> Segments:
        if self._data is None:
            raise ValueError("the segment pool is empty")
        return self._data[: self.size]

    def newest(self, n: int) -> Segments:
        """The newest `n` segments (all of them if fewer), oldest first."""
        if self._data is None:
            raise ValueError("the segment pool is empty")
        return self._data[(self.ptr - np.arange(min(n, self.size), 0, -1)) % self.capacity]

    def sample_pairs(
        self, rng: np.random.Generator, n: int, exclude: set[tuple[int, int]] | None = None,
        newest: int | None = None,
    ) -> tuple[Segments, Segments]:  # fmt: skip
        """`n` random pairs of two different segments. With `exclude` (the `pair_keys` of pairs
        asked before), no pair is one of those or drawn twice, in either order: fewer than `n`
        come back when the pool has fewer such pairs. With `newest`, both segments of every pair
        are among the newest `newest` (QPA's policy-aligned queries: what the policy does now)."""
        window = self.size if newest is None else min(newest, self.size)
        if window < 2:
            raise ValueError(f"need at least 2 segments to make a pair, the pool has {window}"
                             + ("" if newest is None else f" among its newest {newest}"))  # fmt: skip
        left, right = self._draw(rng, n, window)
        if exclude is not None:
            left, right = self._new_pairs(rng, left, right, exclude, window)
        return self._data[left], self._data[right]

    def _draw(self, rng: np.random.Generator, n: int, window: int) -> tuple[np.ndarray, ...]:
        """Pool slots of `n` pairs among the newest `window` segments."""
        left = rng.integers(0, window, n)
        right = (left + rng.integers(1, window, n)) % window  # never the same segment
        return self._slot(left, window), self._slot(right, window)

    def _slot(self, k: np.ndarray, window: int) -> np.ndarray:
        """The slot of the k-th newest segment (any order of them all: the slot itself)."""
        return k if window == self.size else (self.ptr - 1 - k) % self.capacity

    def _new_pairs(self, rng, left, right, exclude, window: int, rounds: int = 10):
        """Redraw the repeats among pairs (pool indices) drawn: only they take more draws, so a
        draw without repeats is the plain one. What redrawing does not find is looked for among
        every pair the pool holds."""
        ids = self._data.id
        taken = set(exclude)
        repeats = list(range(len(left)))  # (checked once each, then only the repeats)
        for attempt in range(rounds + 1):
            if attempt:
                left[repeats], right[repeats] = self._draw(rng, len(repeats), window)
            keys = pair_keys(ids[left[repeats]], ids[right[repeats]])
            still = []
            for i, key in zip(repeats, keys, strict=True):
                if key in taken:
                    still.append(i)
                taken.add(key)
            repeats = still
            if not repeats:
                return left, right
        a, b = (self._slot(k, window) for k in np.triu_indices(window, 1))
        free = [j for j, key in enumerate(pair_keys(ids[a], ids[b])) if key not in taken]
        found = rng.permutation(np.asarray(free, np.int64))[: len(repeats)]
        left[repeats[: len(found)]], right[repeats[: len(found)]] = a[found], b[found]
        keep = np.setdiff1d(np.arange(len(left)), repeats[len(found) :])
        return left[keep], right[keep]

    def save(self, path: str | Path) -> None:
        data = self.all() if self.size else None
        meta = {"capacity": self.capacity, "size": self.size, "ptr": self.ptr}
        arrays = {f.name: getattr(data, f.name) for f in fields(Segments)} if data else {}
        with atomic_write(path, "wb") as f:
            write_npz(f, {"meta": np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays})

    @classmethod
    def load(cls, path: str | Path) -> SegmentPool:
        with np.load(path) as data:
            meta = json.loads(bytes(data["meta"]).decode())
            pool = cls(meta["capacity"])
            if meta["size"]:
                pool.add(Segments(**{f.name: data[f.name] for f in fields(Segments)}))
        pool.ptr = meta["ptr"]
        return pool


class PreferenceData:
    """Labelled pairs, with their own copies of the segments' observations and actions (a
    segment may leave the pool long before its label stops being used).

    The pairs live in arrays with a quarter of their rows to spare: adding a few pairs, or
    dropping the oldest, copies the rows already there only when the room runs out, so a run
    that fits after every few labels does not copy all its clips' frames each time (1.2 GB for
    3000 labelled pairs of Atari clips)."""

    FIELDS = (
        "obs_left",
        "action_left",
        "obs_right",
        "action_right",
        "label",
        "return_left",
        "return_right",
        "id_left",
        "id_right",
    )

    def __init__(self) -> None:
        self._rows: dict[str, np.ndarray] | None = None  # (capacity, ...) per field
        self._start = self._stop = 0  # the live rows: _rows[f][_start:_stop]

    def add(self, left: Segments, right: Segments, labels) -> None:
        labels = np.asarray([Label.parse(x) for x in np.atleast_1d(labels)], np.int8)
        if not (len(left) == len(right) == len(labels)):
            raise ValueError(
                f"{len(left)} left segments, {len(right)} right and {len(labels)} labels: "
                "expected one label per pair"
            )
        if len(labels) == 0:
            return
        new = {
            "obs_left": left.obs,
            "action_left": left.action,
            "obs_right": right.obs,
            "action_right": right.action,
            "label": labels,
            "return_left": left.reward.sum(-1),
            "return_right": right.reward.sum(-1),
            "id_left": left.id,
            "id_right": right.id,
        }
        self._append({k: np.asarray(v) for k, v in new.items()})

    def _append(self, new: dict[str, np.ndarray]) -> None:
        k = len(new["label"])
        if self._rows is not None:
            for f, rows in self._rows.items():
                if rows.shape[1:] != new[f].shape[1:]:
                    raise ValueError(
                        f"{f} of shape {new[f].shape[1:]} per pair cannot join the earlier "
                        f"pairs' {rows.shape[1:]}"
                    )
        fits = self._rows is not None and self._stop + k <= len(self._rows["label"])
        if not fits or any(np.result_type(r, new[f]) != r.dtype for f, r in self._rows.items()):
            self._regrow(new, k)
        for f, rows in self._rows.items():
            rows[self._stop : self._stop + k] = new[f]
        self._stop += k

    def _regrow(self, new: dict[str, np.ndarray], k: int) -> None:
        """Fresh arrays (arrays handed out earlier keep their rows) holding the live rows, with
        room for `k` more and a quarter of the rows to spare."""
        n = len(self)
        capacity = n + k + max(1, (n + k) // 4)
        old = self._rows or {}
        rows = {}
        for f, v in new.items():
            dtype = np.result_type(old[f], v) if f in old else v.dtype
            rows[f] = np.empty((capacity, *v.shape[1:]), dtype)
            if n:
                rows[f][:n] = old[f][self._start : self._stop]
        self._rows, self._start, self._stop = rows, 0, n

    def arrays(self) -> dict[str, np.ndarray]:
        """The labelled pairs, oldest first (views: pairs added later are not in them)."""
        if not len(self):
            raise ValueError("no labelled pairs yet")
        return {f: v[self._start : self._stop] for f, v in self._rows.items()}

    def __len__(self) -> int:
        return self._stop - self._start

    @property
    def nbytes(self) -> int:
        """Memory held, spare rows included."""
        return sum(v.nbytes for v in (self._rows or {}).values())

    def keep_newest(self, n: int) -> None:
        """Drop all but the newest `n` labelled pairs (their room is reused at the next
        regrowth)."""
        self._start = max(self._start, self._stop - n)

    def counts(self) -> dict[str, int]:
        if not len(self):
            return {m.name.lower(): 0 for m in Label}
        labels = self.arrays()["label"]
        return {m.name.lower(): int((labels == m).sum()) for m in Label}

    def save(self, path: str | Path, count: int | None = None) -> None:
        """Write the labelled pairs (the first `count` of them if given) to one .npz file."""
        arrays = self.arrays() if len(self) else {}
        if count is not None:
            arrays = {k: v[:count] for k, v in arrays.items()}
        with atomic_write(path, "wb") as f:
            write_npz(f, arrays)

    @classmethod
    def load(cls, path: str | Path) -> PreferenceData:
        data = cls()
        with np.load(path) as f:
            if "label" in f:
                data._append({k: f[k] for k in cls.FIELDS})
        return data


def save_segments(path: str | Path, segments: Segments) -> None:
    """Write segments to one .npz file, atomically (a reader never sees half of it)."""
    with atomic_write(path, "wb") as f:
        write_npz(f, {fld.name: getattr(segments, fld.name) for fld in fields(Segments)})


def load_segments(path: str | Path) -> Segments:
    with np.load(path) as data:
        return Segments(**{fld.name: data[fld.name] for fld in fields(Segments)})
