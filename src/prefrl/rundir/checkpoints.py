"""Checkpoints: one directory per step, made complete before it becomes visible.

A checkpoint is written to `step_N.tmp/`, given a manifest (every file's size and CRC-32),
fsynced, renamed to `step_N/`, and only then is the `latest` pointer replaced (atomically). A
crash at any moment leaves `latest` naming a complete checkpoint. Disks and people still damage
files afterwards (a full disk, a file deleted or truncated by hand): `usable_checkpoints` checks
each against its manifest, so a resume can say what is damaged and go back to the newest whole
one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import zlib
from collections.abc import Iterator
from pathlib import Path

from prefrl.rundir.atomic import _fsync_dir, atomic_write

LATEST = "latest"
MANIFEST = "manifest.json"


class IncompatibleCheckpoint(ValueError):
    """A whole checkpoint that this run's settings cannot continue (not damage: the user's
    flags must change, so a resume stops here rather than trying an older checkpoint)."""


_STEP_DIR = re.compile(r"step_(\d+)")


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
    files = sorted(f for f in tmp.rglob("*") if f.is_file() and f.name != MANIFEST)
    manifest = {
        str(f.relative_to(tmp)): {"size": f.stat().st_size, "crc32": _crc32(f)} for f in files
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
    for f in [*files, tmp / MANIFEST, *(d for d in tmp.rglob("*") if d.is_dir())]:
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


def _crc32(path: Path, chunk: int = 1 << 22) -> int:
    crc = 0
    with open(path, "rb") as f:
        while block := f.read(chunk):
            crc = zlib.crc32(block, crc)
    return crc


def checkpoints(run_dir: Path) -> list[Path]:
    """The run's committed checkpoints, newest first."""
    root = checkpoint_root(run_dir)
    found = [p for p in root.glob("step_*") if p.is_dir() and _STEP_DIR.fullmatch(p.name)]
    return sorted(found, key=lambda p: int(p.name[5:]), reverse=True)


def damage(ckpt: Path) -> list[str]:
    """What is wrong with a checkpoint's files, by its manifest (nothing when whole). A
    checkpoint from before manifests is taken as whole: loading it tells."""
    path = Path(ckpt) / MANIFEST
    if not path.exists():
        return [] if any(Path(ckpt).iterdir()) else ["it is empty"]
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return [f"{MANIFEST} is unreadable ({e})"]
    problems = []
    for name, want in manifest.items():
        f = Path(ckpt) / name
        if not f.is_file():
            problems.append(f"{name} is missing")
        elif f.stat().st_size != want["size"]:
            problems.append(f"{name} has {f.stat().st_size} bytes, not {want['size']}")
        elif _crc32(f) != want["crc32"]:
            problems.append(f"{name} is corrupt (its checksum differs)")
    return problems


def usable_checkpoints(run_dir: Path) -> Iterator[tuple[Path, list[str]]]:
    """(checkpoint, its damage) newest first; a whole one has no damage."""
    for ckpt in checkpoints(run_dir):
        yield ckpt, damage(ckpt)


def set_aside(ckpt: Path) -> Path:
    """Move a damaged checkpoint out of the way (kept, for whoever wants to look at it)."""
    target = ckpt.with_name(f"{ckpt.name}.damaged")
    n = 1
    while target.exists():
        n += 1
        target = ckpt.with_name(f"{ckpt.name}.damaged{n}")
    os.replace(ckpt, target)
    return target


def checkpoint_at(run_dir: Path, step: int) -> Path | None:
    """The checkpoint of `step` if one is committed (None otherwise)."""
    ckpt = checkpoint_root(run_dir) / f"step_{step:09d}"
    return ckpt if ckpt.is_dir() else None


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest whole checkpoint (the `latest` pointer's, unless that one is damaged)."""
    pointer = checkpoint_root(run_dir) / LATEST
    if pointer.exists():
        path = pointer.parent / pointer.read_text().strip()
        if path.is_dir() and not damage(path):
            return path
    return next((c for c, problems in usable_checkpoints(run_dir) if not problems), None)


def _prune(root: Path, keep: int) -> None:
    """Keep the newest `keep` checkpoints; drop older ones and leftovers of interrupted writes."""
    steps = sorted(p for p in root.glob("step_*") if p.is_dir() and _STEP_DIR.fullmatch(p.name))
    stale = [p for p in root.glob("step_*.tmp") if p.is_dir()]
    for old in (steps[:-keep] if keep > 0 else []) + stale:
        shutil.rmtree(old, ignore_errors=True)


def write_json(path: Path, obj) -> None:
    with atomic_write(path, "w") as f:
        json.dump(obj, f, indent=2, default=str)
