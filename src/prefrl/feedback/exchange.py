"""Sharing labels between runs and people: a run's labelled pairs as one JSON document.

The document holds everything a label needs to be trained on elsewhere: both segments' arrays
(observations, actions, true rewards where known, simulator states for re-rendering) and the
label with who gave it. Arrays are base64 of little-endian bytes with dtype and shape, so a
document is exact and about a third larger than the raw arrays.

    {"format": "prefrl-labels", "version": 1, "env": "Hopper-v5", "run": "...",
     "segments": {"obs": {"dtype": "float32", "shape": [N, H, D], "base64": "..."}, ...},
     "labels": [{"left": 0, "right": 1, "label": "left", "source": "web",
                 "annotator": "ann", "response_ms": 812, "time": "2026-..."}, ...]}

`left`/`right` index the segments (a segment in several pairs is stored once).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np

from prefrl.data.segments import Label, Segments
from prefrl.feedback.store import FeedbackStore, run_info

FORMAT = "prefrl-labels"
VERSION = 1
_ARRAYS = ("obs", "action", "reward", "state")
IMPORTED = "import:"
"""How the source of an imported label starts (then who gave it in its own run)."""


def _encode(a: np.ndarray) -> dict:
    a = np.ascontiguousarray(a)
    little = a.astype(a.dtype.newbyteorder("<"), copy=False)
    return {
        "dtype": a.dtype.name,
        "shape": list(a.shape),
        "base64": base64.b64encode(little.tobytes()).decode("ascii"),
    }


def _decode(name: str, d: dict) -> np.ndarray:
    try:
        dtype = np.dtype(d["dtype"]).newbyteorder("<")
        raw = base64.b64decode(d["base64"], validate=True)
        return np.frombuffer(raw, dtype).reshape(d["shape"]).astype(dtype.newbyteorder("="))
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(
            f"labels document: segments.{name} is unreadable ({e}); expected "
            "{'dtype': ..., 'shape': [...], 'base64': ...}"
        ) from None


def export_labels(store: FeedbackStore, run_uid: str, run_dir: Path) -> dict:
    """Every label of the run (skips included) with its pair's segments."""
    run_id = store.run_id(run_uid, create=False)
    labels = store.labels(run_id)
    doc = {"format": FORMAT, "version": VERSION, "env": store.run_env(run_id),
           "run": Path(run_dir).name, "run_uid": run_uid}  # fmt: skip
    if not labels:
        doc.update(segments={}, labels=[])
        return doc
    left, right = store.query_pairs(run_dir, [x.query_id for x in labels])
    both = Segments.concatenate([left, right])
    _, first, index = np.unique(both.id, return_index=True, return_inverse=True)
    unique = both[first]
    n = len(labels)
    doc["segments"] = {k: _encode(getattr(unique, k)) for k in _ARRAYS}
    doc["labels"] = [
        {
            "left": int(index[i]),
            "right": int(index[n + i]),
            "label": x.label.name.lower(),
            "source": x.source,
            "annotator": x.annotator,
            "response_ms": x.response_ms,
            "time": x.created_at.isoformat() if x.created_at else None,
        }
        for i, x in enumerate(labels)
    ]
    return doc


def write_labels(doc: dict, path: str | Path) -> None:
    Path(path).write_text(json.dumps(doc))


def read_labels(source: str | Path) -> dict:
    """A labels document from a .json file, or exported on the fly from a run directory."""
    path = Path(source)
    if path.is_dir():
        run = run_info(path, None)
        with FeedbackStore(run.store, create=False) as store:
            return export_labels(store, run.uid, run.run_dir)
    if not path.is_file():
        raise FileNotFoundError(
            f"labels source {str(source)!r} does not exist: expected a run directory or a "
            "labels .json file (prefrl labels export RUN_DIR)"
        )
    return read_document(path, FORMAT, VERSION, "labels document")


def read_document(path: Path, fmt: str, version: int, what: str) -> dict:
    """A prefrl JSON document of format `fmt`, refused with a clear error when it is not JSON,
    of another format or of another version."""
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        raise ValueError(f"{path} is not a prefrl {what} (no format: {fmt!r})")
    if doc.get("version") != version:
        raise ValueError(
            f"{path}: {what} version {doc.get('version')!r} is not readable by this prefrl "
            f"(reads version {version})"
        )
    return doc


def _pairs(doc: dict, obs_dim, action_dim, frames=None) -> tuple[Segments, Segments]:
    arrays = {k: _decode(k, doc["segments"][k]) for k in _ARRAYS}
    obs, action = arrays["obs"], arrays["action"]
    if (
        frames is not None
    ):  # clips of frames: (clips, length + 3 stacked, H, W) and one action a step
        _check_frame_clips(obs, action, arrays["reward"], frames)
    elif obs.ndim != 3 or obs.shape[2] != obs_dim or action.shape[2:] != (action_dim,):
        raise ValueError(
            f"labels document: segments have observations {obs.shape[2:]} and actions "
            f"{action.shape[2:]}; this environment has ({obs_dim},) and ({action_dim},)"
        )
    for name, a in (("observations", obs), ("actions", action)):
        if not np.isfinite(a).all():
            raise ValueError(f"labels document: segment {name} hold NaN or infinite values")
    n_seg = obs.shape[0]
    idx = np.array([[x["left"], x["right"]] for x in doc["labels"]], np.int64).reshape(-1, 2)
    bad = idx[(idx < 0) | (idx >= n_seg)]
    if bad.size:
        raise ValueError(
            f"labels document: segment index {int(bad[0])} is out of range (0..{n_seg - 1})"
        )
    zeros = np.zeros(n_seg, np.int64)
    segs = Segments(**arrays, id=np.arange(n_seg), step=zeros, episode=zeros, start=zeros)
    return segs[idx[:, 0]], segs[idx[:, 1]]


def _check_frame_clips(obs, action, reward, frames: tuple[int, int]) -> None:
    if obs.ndim != 4 or reward.ndim != 2:
        raise ValueError(
            f"labels document: its segments hold observations of shape {obs.shape[1:]}, not "
            f"clips of frames; this environment's are clips of {frames[0]}x{frames[1]} frames"
        )
    if obs.shape[2:] != tuple(frames):
        raise ValueError(
            f"labels document: its clips have frames of {obs.shape[2]}x{obs.shape[3]}; this "
            f"environment's are {frames[0]}x{frames[1]}"
        )
    if obs.shape[1] != reward.shape[1] + 3 or action.shape[1:] != (reward.shape[1], 1):
        raise ValueError(
            f"labels document: clips of {reward.shape[1]} steps should hold "
            f"{reward.shape[1] + 3} frames and one action a step; they hold {obs.shape[1]} "
            f"frames and actions of shape {action.shape[1:]}"
        )


def check_same_env(doc: dict, env: str, receiver: str, source: str = "labels document") -> None:
    """Labels are only shared between runs of the same environment."""
    if doc["env"] != env:
        raise ValueError(
            f"{source}: its labels are of {doc['env']!r}, {receiver} is of {env!r}; labels are "
            "only shared between runs of the same environment"
        )


def _check_fields(doc: dict) -> None:
    problems = []
    if not isinstance(doc.get("env"), str):
        problems.append("'env' (the environment id) is missing")
    entries = doc.get("labels")
    if not isinstance(entries, list) or not all(isinstance(x, dict) for x in entries):
        problems.append("'labels' must be a list of objects")
    elif entries and not all(k in x for x in entries for k in ("left", "right", "label")):
        problems.append("every label needs 'left', 'right' and 'label'")
    elif entries and not all(k in doc.get("segments", {}) for k in _ARRAYS):
        problems.append(f"'segments' needs {', '.join(_ARRAYS)}")
    if problems:
        raise ValueError(f"labels document: {'; '.join(problems)}")


def document_origin(doc: dict) -> str:
    """The run a labels document came from: its store key where the export recorded one."""
    return str(doc.get("run_uid") or doc.get("run") or "unnamed")


def import_labels(
    store: FeedbackStore,
    run_uid: str,
    run_dir: Path,
    doc: dict,
    obs_dim: int | None,
    action_dim: int | None,
    frames: tuple[int, int] | None = None,
) -> int:
    """Add a document's labelled pairs to a run; returns how many were added (0 when the run
    already holds this document's run's labels: importing twice, or a run's own export into
    itself, adds nothing). `frames` (height, width): the run's segments are clips of frames
    (a pixel env; then `obs_dim` and `action_dim` are not used)."""
    _check_fields(doc)
    run_id = store.run_id(run_uid, create=False)
    check_same_env(doc, store.run_env(run_id), f"the run {Path(run_dir).name!r}")
    origin = document_origin(doc)
    entries = doc["labels"]
    if not entries or origin == run_uid or origin in store.imported_from(run_id):
        return 0
    labels = [Label.parse(x.get("label")) for x in entries]  # names a bad value before storing
    left, right = _pairs(doc, obs_dim, action_dim, frames)
    sources = [f"{IMPORTED}{x.get('annotator') or x.get('source') or origin}" for x in entries]
    ms = [x.get("response_ms") for x in entries]
    return store.add_imported_pairs(run_id, run_dir, left, right, labels, sources, ms, origin)
