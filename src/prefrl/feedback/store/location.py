"""Where a run keeps its feedback: the store's URL, and the run's key in it (run.json), so a
renamed or copied run directory still finds its own record."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from prefrl.feedback.store.schema import StoreError
from prefrl.rundir import uid

STORE_FILE = "feedback.db"


@dataclass(frozen=True)
class RunInfo:
    run_dir: Path
    name: str
    store: str
    env: str
    uid: str
    """The run's key in its feedback store (`run_uid`)."""


def run_uid(run_dir: str | Path) -> str:
    """`prefrl.rundir.uid.run_uid`, a damaged run.json said as a store error."""
    try:
        return uid.run_uid(run_dir)
    except uid.RunFileDamaged as e:
        raise StoreError(str(e)) from None


def run_info(run_dir: str | Path, store: str | None = None) -> RunInfo:
    """Where a run keeps its feedback: from its config.json (or the defaults)."""
    run_dir = Path(run_dir)
    config_path = run_dir / "config.json"
    if not config_path.exists():
        raise FileNotFoundError(f"{run_dir} is not a prefrl run directory (no config.json)")
    try:
        config = json.loads(config_path.read_text())
    except json.JSONDecodeError as e:
        raise StoreError(f"{config_path} is damaged ({e})") from None
    return RunInfo(run_dir, run_dir.name, store or config.get("store") or str(run_dir),
                   config.get("env", ""), run_uid(run_dir))  # fmt: skip


def store_url(target: str | Path) -> str:
    """A SQLAlchemy URL for a run directory, a file path or a database URL (postgresql:// is
    taken through psycopg 3)."""
    target = str(target)
    if "://" not in target:
        path = Path(target)
        if path.is_dir():
            path = path / STORE_FILE
        return f"sqlite:///{path.resolve()}"
    if target.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + target.split("://", 1)[1]
    return target


def redacted(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url
