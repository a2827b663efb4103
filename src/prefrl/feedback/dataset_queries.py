"""Preference queries on a fixed dataset: pairs of segments named by their start indices.

A query file (JSON, format "prefrl-dataset-queries") names the dataset and env it was sampled
from, the segment length, both segments' start indices (flat transition indices, as in
Preference Transformer's query files) and, once labelled, one label per pair with where the
labels came from. Scripted teachers label a file in place of a person; Preference
Transformer's released human labels (pickled index arrays + labels) import into the same format.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from prefrl.data.dataset import OfflineDataset
from prefrl.data.segments import Label, PreferenceData, Segments
from prefrl.feedback.exchange import read_document
from prefrl.feedback.teachers import TeacherConfig, scripted_labels
from prefrl.rundir.atomic import atomic_write
from prefrl.rundir.config import python_arguments

FORMAT = "prefrl-dataset-queries"
VERSION = 1


@dataclass
class DatasetQueries:
    dataset: str
    env_id: str
    length: int
    start_left: np.ndarray  # (n,) int64
    start_right: np.ndarray  # (n,) int64
    labels: np.ndarray | None = None  # (n,) int8 Label values, None until labelled
    source: str = ""
    """Who labelled them: a teacher preset, "pt-human", ..."""
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.start_left = np.asarray(self.start_left, np.int64).reshape(-1)
        self.start_right = np.asarray(self.start_right, np.int64).reshape(-1)
        if len(self.start_left) != len(self.start_right):
            raise ValueError(
                f"{len(self.start_left)} left and {len(self.start_right)} right start indices: "
                "expected one of each per query"
            )
        if self.labels is not None:
            labels = np.asarray(self.labels).reshape(-1)
            if len(labels) != len(self.start_left):
                raise ValueError(
                    f"{len(labels)} labels for {len(self.start_left)} queries: expected one "
                    "label per query"
                )
            self.labels = np.asarray([Label.parse(x) for x in labels.tolist()], np.int8)

    def __len__(self) -> int:
        return len(self.start_left)

    def check(self, dataset: OfflineDataset) -> None:
        """Refuse queries made for another env or another dataset (by its `fingerprint`, where
        the queries recorded one), or whose segments do not fit the dataset."""
        if self.env_id != dataset.env_id:
            raise ValueError(
                f"the queries were made on env {self.env_id!r} (dataset {self.dataset!r}); this "
                f"dataset is {dataset.name!r} on {dataset.env_id!r}"
            )
        made_on = self.info.get("dataset_sha")
        if made_on is not None and made_on != dataset.fingerprint():
            if self.dataset == dataset.name:
                raise ValueError(
                    f"dataset {dataset.name!r} changed since these queries were made on it "
                    f"(fingerprint then {made_on}, now {dataset.fingerprint()}): their labels "
                    "would land on segments that are no longer the ones labelled. Sample (and "
                    "label) queries on the dataset as it is now, or use it as it was"
                )
            raise ValueError(
                f"the queries were made on another dataset ({self.dataset!r}, fingerprint "
                f"{made_on}) than this one ({dataset.name!r}, {dataset.fingerprint()}): their "
                "labels would land on unrelated segments. Sample queries on this dataset"
            )
        dataset.check_segments(self.start_left, self.length)
        dataset.check_segments(self.start_right, self.length)

    def preference_data(self, dataset: OfflineDataset) -> PreferenceData:
        """The labelled pairs with their segments' arrays (true rewards where the dataset has
        them, for reporting only)."""
        if self.labels is None:
            raise ValueError(
                "the queries are not labelled yet: label them with `prefrl dataset label` or "
                "import labels"
            )
        self.check(dataset)
        data = PreferenceData()
        data.add(
            _segments(dataset, self.start_left, self.length),
            _segments(dataset, self.start_right, self.length),
            self.labels,
        )
        return data

    # ------------------------------------------------------------------------------- files
    def save(self, path: str | Path) -> None:
        doc = {
            "format": FORMAT,
            "version": VERSION,
            "dataset": self.dataset,
            "env": self.env_id,
            "length": self.length,
            "start_left": self.start_left.tolist(),
            "start_right": self.start_right.tolist(),
            "labels": None if self.labels is None else [Label(x).name.lower() for x in self.labels],
            "source": self.source,
            "info": self.info,
        }
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(Path(path), "w") as f:
            json.dump(doc, f)

    @classmethod
    def load(cls, path: str | Path) -> DatasetQueries:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"no such query file: {path}")
        doc = read_document(path, FORMAT, VERSION, "dataset query file")
        missing = [
            k for k in ("dataset", "env", "length", "start_left", "start_right") if k not in doc
        ]
        if missing:
            raise ValueError(f"{path} lacks the field(s) {missing}")
        return cls(
            dataset=doc["dataset"],
            env_id=doc["env"],
            length=int(doc["length"]),
            start_left=np.asarray(doc["start_left"], np.int64),
            start_right=np.asarray(doc["start_right"], np.int64),
            labels=None if doc.get("labels") is None else np.asarray(doc["labels"]),
            source=doc.get("source", ""),
            info=doc.get("info", {}),
        )


def _segments(dataset: OfflineDataset, starts: np.ndarray, length: int) -> Segments:
    obs, action, reward = dataset.segments(starts, length)
    n = len(starts)
    zeros = np.zeros(n, np.int64)
    if dataset.states is not None:
        state = dataset.states[np.asarray(starts)[:, None] + np.arange(length)[None, :]]
    else:
        state = np.zeros((n, length, 0))
    return Segments(
        obs=obs,
        action=action,
        reward=reward,
        state=state,
        id=np.asarray(starts, np.int64),
        step=np.asarray(starts, np.int64),
        episode=zeros,
        start=zeros,
    )


def sample_queries(
    dataset: OfflineDataset, num: int, length: int = 100, seed: int = 0
) -> DatasetQueries:
    """`num` pairs of `length`-step segments, each inside one episode, uniformly over the
    dataset's possible start indices; never a segment against itself. Warns (stderr) when the
    dataset has fewer possible segments than the pairs need, so segments repeat across pairs."""
    if num < 1:
        raise ValueError(f"--num={num} is invalid: expected a positive number of queries")
    if length < 1:
        raise ValueError(f"--length={length} is invalid: expected a positive integer")
    valid = dataset.valid_segment_starts(length)
    if len(valid) == 0:
        longest = int(np.max(np.subtract(*dataset.episode_bounds()[::-1])))
        raise ValueError(
            f"no episode of dataset {dataset.name!r} is {length} steps long (the longest has "
            f"{longest}); use a shorter --length"
        )
    if len(valid) < 2:
        raise ValueError(
            f"dataset {dataset.name!r} has a single possible {length}-step segment: a pair needs "
            "two; use a shorter --length"
        )
    if len(valid) < 2 * num:
        import sys

        print(
            f"warning: dataset {dataset.name!r} has {len(valid)} possible {length}-step segments "
            f"for {num} pairs ({2 * num} segments): segments repeat across pairs, and held-out "
            "pairs share segments with trained ones. Use fewer --num or a shorter --length",
            file=sys.stderr,
        )
    rng = np.random.default_rng([seed, 11])
    left, right = rng.choice(valid, num), rng.choice(valid, num)
    while np.any(same := left == right):  # (redrawn alone: other pairs stay as they were)
        right[same] = rng.choice(valid, int(same.sum()))
    return DatasetQueries(
        dataset=dataset.name,
        env_id=dataset.env_id,
        length=length,
        start_left=left,
        start_right=right,
        info={"seed": seed, "dataset_sha": dataset.fingerprint()},
    )


def label_queries(
    queries: DatasetQueries, dataset: OfflineDataset, teacher: TeacherConfig, seed: int = 0
) -> DatasetQueries:
    """The queries labelled by a scripted B-Pref teacher from the dataset's true rewards. The
    teachers' thresholds scale with the dataset's mean episode return (R̄ · H / T_ep)."""
    if teacher.is_human:
        raise ValueError(
            f"teacher {teacher.preset!r} is a person; a dataset's queries are labelled by a "
            "scripted teacher here (oracle, stoc, mistake, skip, equal, myopic), or exported "
            "and labelled elsewhere"
        )
    queries.check(dataset)
    starts, ends = dataset.episode_bounds()
    scale = float(dataset.episode_returns().mean() * queries.length / np.mean(ends - starts))
    labels = scripted_labels(
        teacher.resolved(),
        _segments(dataset, queries.start_left, queries.length),
        _segments(dataset, queries.start_right, queries.length),
        np.random.default_rng([seed, 7]),
        scale,
    )
    return DatasetQueries(
        dataset=queries.dataset,
        env_id=queries.env_id,
        length=queries.length,
        start_left=queries.start_left,
        start_right=queries.start_right,
        labels=labels,
        source=teacher.preset,
        info={**queries.info, "label_seed": seed},
    )


def send_to_store(
    queries: DatasetQueries, dataset: OfflineDataset, run_dir: Path, next_step: str | None = None
) -> Path:
    """Make `run_dir` a labelling run holding the queries as open pairs, for `prefrl serve` (the
    browser) or `prefrl label` (the terminal); clips are rendered from the dataset's states.
    `next_step`: what to run once every pair is answered (shown to the person labelling)."""
    from prefrl.feedback.store import FeedbackStore, claim_run_uid

    if dataset.states is None:
        raise ValueError(
            f"dataset {dataset.name!r} has no simulator states, so its segments cannot be "
            "rendered for a person (datasets rolled out by `prefrl dataset collect` have them; "
            "medium-replay comes from a replay buffer, which keeps none)"
        )
    queries.check(dataset)
    run_dir = Path(run_dir)
    if (run_dir / "config.json").exists():
        raise FileExistsError(f"{run_dir} already holds a run; choose another --label-dir")
    run_dir.mkdir(parents=True, exist_ok=True)
    doc = {"env": dataset.env_id, "dataset": dataset.name, "queries": len(queries)}
    if next_step:
        doc["next"] = next_step
    with atomic_write(run_dir / "config.json", "w") as f:
        json.dump(doc, f, indent=2)
    with FeedbackStore(run_dir) as store:
        run_id = store.run_id(claim_run_uid(run_dir, new=True), env=dataset.env_id)
        store.add_queries(
            run_id,
            run_dir,
            np.arange(len(queries)),
            _segments(dataset, queries.start_left, queries.length),
            _segments(dataset, queries.start_right, queries.length),
        )
    return run_dir


def labels_from_store(queries: DatasetQueries, run_dir: Path) -> DatasetQueries:
    """The queries a person answered in a labelling run (`send_to_store`), with their labels
    (the latest per query); unanswered queries are left out."""
    from prefrl.feedback.store import FeedbackStore, run_info

    run = run_info(run_dir)
    with FeedbackStore(run.store, create=False) as store:
        run_id = store.run_id(run.uid, env=run.env, create=False)
        latest = {x.query_key: (x.label, x.source) for x in store.labels(run_id)}
    if run.env != queries.env_id:
        raise ValueError(f"{run_dir} labels env {run.env!r}; the queries are {queries.env_id!r}")
    keys = np.asarray(sorted(k for k in latest if 0 <= k < len(queries)), np.int64)
    if len(keys) == 0:
        raise ValueError(f"no query of {run_dir} is answered yet")
    return DatasetQueries(
        dataset=queries.dataset,
        env_id=queries.env_id,
        length=queries.length,
        start_left=queries.start_left[keys],
        start_right=queries.start_right[keys],
        labels=np.asarray([latest[int(k)][0] for k in keys], np.int8),
        source="human",
        info={
            **queries.info,
            "labelled_in": str(run_dir),
            "answered": len(keys),
            "asked": len(queries),
        },
    )


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles numpy arrays and plain containers only: a query file from elsewhere must not
    be able to run code."""

    ALLOWED: ClassVar[set[tuple[str, str]]] = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }

    def find_class(self, module, name):
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a label file")


def _load_array(path: Path) -> np.ndarray:
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    with path.open("rb") as f:
        try:
            return np.asarray(_ArrayUnpickler(f).load())
        except (pickle.UnpicklingError, EOFError, ValueError) as e:
            raise ValueError(f"{path} is not a pickled array: {e}") from None


@python_arguments()
def import_pt_labels(
    dataset: OfflineDataset | str | Path,
    indices_1: str | Path,
    indices_2: str | Path,
    labels: str | Path,
    length: int = 100,
    out: str | Path | None = None,
) -> DatasetQueries:
    """Preference Transformer's released human labels as queries on `dataset` (one in D4RL's
    flat layout, or its Minari directory) with their labels, written to the query file `out`
    where given (`prefrl dataset import-pt-labels`): two pickled arrays of segment start
    indices (`indices_num*`, `indices_2_num*`) and one of labels (`label_human`: 0 = the first
    segment is better, 1 = the second, -1 = equal), of `length`-step segments."""
    if not isinstance(dataset, OfflineDataset):
        dataset = OfflineDataset.load(dataset)
    left = _load_array(Path(indices_1)).reshape(-1)
    right = _load_array(Path(indices_2)).reshape(-1)
    raw = _load_array(Path(labels)).reshape(-1)
    if not (len(left) == len(right) == len(raw)):
        raise ValueError(
            f"{len(left)} first indices, {len(right)} second indices and {len(raw)} labels: "
            "expected one of each per query"
        )
    bad = sorted(set(np.unique(raw).tolist()) - {0, 1, -1})
    if bad:
        raise ValueError(f"Preference Transformer labels are 0, 1 or -1; found {bad}")
    mapping = {0: Label.LEFT, 1: Label.RIGHT, -1: Label.EQUAL}
    queries = DatasetQueries(
        dataset=dataset.name,
        env_id=dataset.env_id,
        length=length,
        start_left=left,
        start_right=right,
        labels=np.asarray([mapping[int(x)] for x in raw], np.int8),
        source="pt-human",
        info={
            "imported_from": [str(indices_1), str(indices_2), str(labels)],
            "dataset_sha": dataset.fingerprint(),
        },
    )
    queries.check(dataset)
    if out is not None:
        queries.save(out)
    return queries
