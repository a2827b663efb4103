"""A run's labels in and out as a JSON document (`prefrl labels export|import`): the store's
side is `feedback.exchange`; this adds the run directory and its env."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from prefrl.envs import is_pixel_env, make_env
from prefrl.envs.frames import FRAME_SIZE
from prefrl.feedback.exchange import (
    document_origin,
    export_labels,
    import_labels,
    read_labels,
    write_labels,
)
from prefrl.feedback.store import FeedbackStore, run_info


def export_run_labels(run_dir: str | Path, out: str | Path | None = None,
                      store: str | None = None) -> dict:  # fmt: skip
    """Write a run's labelled pairs, with their segments, to the JSON file `out` (default:
    labels.json in the run directory; `prefrl labels export`); returns the document, its
    destination under "path". `store`: the run's feedback store URL (default: its config's)."""
    run = run_info(run_dir, store)
    with FeedbackStore(run.store, create=False) as feedback:
        doc = export_labels(feedback, run.uid, run.run_dir)
    out = Path(out) if out is not None else run.run_dir / "labels.json"
    write_labels(doc, out)
    return {**doc, "path": str(out)}


@dataclass
class Imported:
    """What `import_run_labels` added."""

    count: int
    """Labelled pairs added to the run."""
    why_none: str = ""
    """When nothing was added: the document is the run's own, or was imported before."""


def import_run_labels(source: str | Path, run_dir: str | Path,
                      store: str | None = None) -> Imported:  # fmt: skip
    """Add the labelled pairs of `source`, a labels file (`export_run_labels`) or a run
    directory, to the run `run_dir` (checked against the run's env; `prefrl labels import`); a
    resumed run trains on them. Importing them twice, or a run's own labels, adds nothing
    (`Imported.why_none` says which)."""
    run = run_info(run_dir, store)
    doc = read_labels(source)
    if is_pixel_env(run.env):
        with FeedbackStore(run.store, create=False) as feedback:
            n = import_labels(feedback, run.uid, run.run_dir, doc, None, None, FRAME_SIZE)
    else:
        env = make_env(run.env, seed=0)
        try:
            with FeedbackStore(run.store, create=False) as feedback:
                n = import_labels(feedback, run.uid, run.run_dir, doc, env.obs_dim,
                                  env.action_dim)  # fmt: skip
        finally:
            env.close()
    if n:
        return Imported(n)
    if document_origin(doc) == run.uid:
        return Imported(0, "these are the run's own labels")
    return Imported(0, f"the labels of {doc.get('run')!r} were imported before")


def label_sources(run_dir: str | Path, store: str | None = None) -> Counter:
    """How many of a run's labels came from where: `web`, `terminal`, a scripted teacher's
    name, or other runs (`import:...`: `--load-labels`, `prefrl labels import`)."""
    run = run_info(run_dir, store)
    with FeedbackStore(run.store, create=False) as feedback:
        labels = feedback.labels(feedback.run_id(run.uid, create=False))
    return Counter(x.source for x in labels)
