"""`prefrl dataset ACTION`: make, import and inspect offline datasets; sample and label queries."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro

from prefrl.cli.common import print_dataset


@dataclass(frozen=True)
class DatasetCollectArgs:
    """Make a D4RL-style dataset from a `prefrl rl` run (see prefrl.offline.datasets)."""

    run: Annotated[Path, tyro.conf.Positional]
    """The SAC run directory (train it with --keep-checkpoints 0 for medium datasets)."""
    kind: str = "medium-replay"
    """random, medium, medium-replay, expert or medium-expert."""
    out: Path = Path("datasets/dataset")
    """The Minari dataset directory to write."""
    steps: int = 200_000
    """Transitions of rollouts (not used by medium-replay: the buffer up to the medium step)."""
    medium_step: int | None = None
    """Use the checkpoint at this step as the medium policy (default: the one whose evaluation
    return is nearest half the final one)."""
    seed: int = 0


@dataclass(frozen=True)
class DatasetImportArgs:
    """Import a D4RL-layout HDF5 file as a Minari dataset."""

    file: Annotated[Path, tyro.conf.Positional]
    env: str
    """The prefrl env id the data comes from (e.g. Hopper-v5)."""
    out: Path = Path("datasets/imported")
    ref_min_score: float | None = None
    """Random-policy return for the normalised score (D4RL's REF_MIN_SCORE)."""
    ref_max_score: float | None = None
    """Expert return for the normalised score (D4RL's REF_MAX_SCORE)."""


@dataclass(frozen=True)
class DatasetQueriesArgs:
    """Sample query pairs from a dataset and label them with a scripted teacher."""

    dataset: Annotated[Path, tyro.conf.Positional]
    """The Minari dataset directory."""
    num: int = 500
    """Query pairs to sample."""
    length: int = 100
    """Steps per segment (each segment lies inside one episode)."""
    teacher: str = "oracle"
    """A scripted teacher preset (oracle, stoc, mistake, skip, equal, myopic); web or terminal
    (a person: makes a labelling run for `prefrl serve` / `prefrl label`); or none."""
    out: Path = Path("queries.json")
    seed: int = 0
    queries: Path | None = None
    """Label these queries (a query file of the same dataset) instead of sampling new ones."""
    label_dir: Path | None = None
    """With --teacher web/terminal: the labelling run to make (default: OUT without .json,
    plus -labelling)."""
    from_run: Path | None = None
    """Take the labels a person gave in this labelling run (with --queries: the file it was
    made from); unanswered queries are left out."""


@dataclass(frozen=True)
class DatasetPTArgs:
    """Import Preference Transformer's released labels (pickled indices and labels)."""

    dataset: Annotated[Path, tyro.conf.Positional]
    """The dataset the labels were made on (D4RL's flat layout)."""
    indices_1: Path
    """Pickled start indices of the first segments (PT's `indices_num*`)."""
    indices_2: Path
    """Pickled start indices of the second segments (`indices_2_num*`)."""
    labels: Path
    """Pickled labels (`label_human`): 0 first better, 1 second, -1 equal."""
    length: int = 100
    """The queries' segment length."""
    out: Path = Path("queries.json")


ACTIONS = {
    "collect": DatasetCollectArgs,
    "import-d4rl": DatasetImportArgs,
    "queries": DatasetQueriesArgs,
    "import-pt-labels": DatasetPTArgs,
    "info": None,
}


def _usage(args: list[str]) -> int:
    if args and args[0] not in ("-h", "--help"):
        print(f"prefrl dataset: unknown action {args[0]!r}", file=sys.stderr)
    said = {"info": "print a dataset's size, episodes and returns: info DATASET_DIR"}
    lines = ["usage: prefrl dataset ACTION [--help] [flags]", "", "actions:"]
    for name, spec in ACTIONS.items():
        doc = said.get(name) or (spec.__doc__ or "").strip().splitlines()[0]
        lines.append(f"  {name:<17} {doc}")
    print("\n".join(lines))
    return 0 if not args or args[0] in ("-h", "--help") else 2


def cmd_dataset(args: list[str]) -> int:
    if not args or args[0] not in ACTIONS:
        return _usage(args)
    action, rest = args[0], args[1:]
    from prefrl.data.dataset import OfflineDataset

    if action == "info":
        if not rest or rest[0].startswith("-"):
            print("usage: prefrl dataset info DATASET_DIR")
            return 0 if rest else 2
        print_dataset(OfflineDataset.load(rest[0]))
        return 0
    opts = tyro.cli(ACTIONS[action], args=rest, prog=f"prefrl dataset {action}")
    if action == "collect":
        from prefrl.offline.datasets import collect_dataset

        data = collect_dataset(opts.run, opts.kind, out=opts.out, steps=opts.steps,
                               medium_step=opts.medium_step, seed=opts.seed)  # fmt: skip
        print_dataset(data)
        print(f"written to {opts.out}")
    elif action == "import-d4rl":
        from prefrl.offline.datasets import import_d4rl_dataset

        data = import_d4rl_dataset(opts.file, opts.env, opts.out, opts.ref_min_score,
                                   opts.ref_max_score)  # fmt: skip
        print_dataset(data)
        print(f"written to {opts.out}")
    elif action == "queries":
        _queries(opts)
    else:
        from prefrl.feedback.dataset_queries import import_pt_labels

        queries = import_pt_labels(opts.dataset, opts.indices_1, opts.indices_2, opts.labels,
                                   opts.length, out=opts.out)  # fmt: skip
        print(f"{len(queries)} Preference Transformer labels written to {opts.out}")
    return 0


def _queries(opts: DatasetQueriesArgs) -> None:
    from prefrl.offline.datasets import make_queries

    made = make_queries(opts.dataset, opts.out, opts.num, opts.length, opts.teacher, opts.seed,
                        opts.queries, opts.label_dir, opts.from_run)  # fmt: skip
    queries = made.queries
    if made.label_dir is not None:
        tool = "prefrl serve" if opts.teacher == "web" else "prefrl label"
        print(
            f"{len(queries)} queries written to {opts.out} and put up for labelling in "
            f"{made.label_dir}\nlabel them: {tool} {made.label_dir}\nthen: {made.next_step}"
        )
        return
    print(f"{len(queries)} queries of {queries.length} steps, {made.how}, written to {opts.out}")
    if queries.labels is not None:
        counts = np.bincount(queries.labels, minlength=4)
        print(f"labels: left {counts[0]}, right {counts[1]}, equal {counts[2]}, skip {counts[3]}")
