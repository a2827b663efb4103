"""A run's key in its feedback store, kept in the run directory's run.json, so that a renamed or
copied run directory still finds its own record."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from prefrl.rundir.atomic import atomic_write

RUN_FILE = "run.json"


class RunFileDamaged(RuntimeError):
    """run.json cannot be read."""


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
        raise RunFileDamaged(
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
