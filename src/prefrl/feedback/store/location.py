"""Where a run keeps its feedback: the store's URL, and the run's key in it (run.json), so a
renamed or copied run directory still finds its own record."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from prefrl.feedback.store.schema import StoreError
from prefrl.rundir.atomic import atomic_write

STORE_FILE = "feedback.db"
RUN_FILE = "run.json"


@dataclass(frozen=True)
class RunInfo:
    run_dir: Path
    name: str
    store: str
    env: str
    uid: str
    """The run's key in its feedback store (`run_uid`)."""


def run_uid(run_dir: str | Path) -> str:
    """The run's key in its feedback store, kept in the run directory's run.json, so that a
    renamed or copied run directory still finds its own record. A run directory from before
    run.json (or one made by hand) is keyed by its name."""
    path = Path(run_dir) / RUN_FILE
    try:
        return str(json.loads(path.read_text())["uid"])
    except FileNotFoundError:
        return Path(run_dir).name
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise StoreError(
            f"{path} is damaged ({type(e).__name__}: {e}); it names the run's record in the "
            'feedback store: restore it from a copy of the run, or write {"uid": "<name>"} '
            "with the name of the run's row in the store's runs table"
        ) from None


def claim_run_uid(run_dir: str | Path, new: bool) -> str:
    """`run_uid`, written to run.json the first time: a fresh random id for a new run, the
    directory's name for one made before run.json existed (its record is under that name)."""
    path = Path(run_dir) / RUN_FILE
    if path.exists():
        return run_uid(run_dir)
    uid = uuid.uuid4().hex if new else Path(run_dir).name
    with atomic_write(path, "w") as f:
        json.dump({"uid": uid, "name": Path(run_dir).name}, f)
    return uid


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
