"""Checkpoints: one directory per step, made complete before it becomes visible.

A checkpoint is written to `step_N.tmp/`, fsynced, renamed to `step_N/`, and only then is the
`latest` pointer replaced (atomically). A crash at any moment leaves `latest` naming a complete
checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from prefrl.rundir.atomic import _fsync_dir, atomic_write

LATEST = "latest"


def checkpoint_root(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def begin_checkpoint(run_dir: Path, step: int) -> Path:
    """A fresh temporary directory to write checkpoint files into."""
    tmp = checkpoint_root(run_dir) / f"step_{step:09d}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def commit_checkpoint(tmp: Path, keep: int = 3) -> Path:
    """Make a checkpoint written with `begin_checkpoint` visible and point `latest` at it; keep
    the newest `keep` checkpoints (0: all)."""
    for f in tmp.iterdir():
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    final = tmp.with_name(tmp.name.removesuffix(".tmp"))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(final.parent)
    with atomic_write(final.parent / LATEST, "w") as f:
        f.write(final.name)
    _prune(final.parent, keep)
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    pointer = checkpoint_root(run_dir) / LATEST
    if not pointer.exists():
        return None
    path = pointer.parent / pointer.read_text().strip()
    return path if path.is_dir() else None


def _prune(root: Path, keep: int) -> None:
    """Keep the newest `keep` checkpoints; drop older ones and leftovers of interrupted writes."""
    steps = sorted(p for p in root.glob("step_*") if p.is_dir() and not p.name.endswith(".tmp"))
    stale = [p for p in root.glob("step_*.tmp") if p.is_dir()]
    for old in (steps[:-keep] if keep > 0 else []) + stale:
        shutil.rmtree(old, ignore_errors=True)


def write_json(path: Path, obj) -> None:
    with atomic_write(path, "w") as f:
        json.dump(obj, f, indent=2, default=str)
