"""What the run's helper processes (the clip renderer, the labelling server) report about
themselves, so that the trainer, the web page and the terminal labeller can say why nothing is
coming instead of waiting in silence.

Each worker writes `workers/<name>.json` in the run directory (atomically): its state
("running" or "failed"), the error that stopped it, how often it was restarted. A worker that
dies writes its error before it exits; its supervisor restarts it and the file says so.

A trainer holds a lock on `workers/trainer.lock` while it runs, a renderer one on
`workers/renderer.lock`: the lock goes with its process, however that ends, so whoever labels
can be told that no trainer is asking for more, and a waiting trainer that nothing renders.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # (Windows: whether a trainer runs cannot be told)
    fcntl = None

from prefrl.rundir.atomic import atomic_write

WORKER_DIR = "workers"
TRAINER_LOCK = "trainer.lock"
RENDERER_LOCK = "renderer.lock"
TITLES = {"renderer": "the clip renderer", "server": "the labelling server"}


@dataclass(frozen=True)
class WorkerStatus:
    name: str
    state: str
    """running or failed (a failed worker is restarted by its supervisor)."""
    error: str = ""
    """The last line of the failure: what went wrong, for people."""
    details: str = ""
    """The whole traceback, for whoever debugs it."""
    restarts: int = 0
    pid: int = 0
    time: float = 0.0

    @property
    def failed(self) -> bool:
        return self.state == "failed"

    def describe(self) -> str:
        again = f" (restarted {self.restarts} time(s) so far)" if self.restarts else ""
        title = TITLES.get(self.name, self.name)
        return f"{title} stopped: {self.error}; restarting it{again}"


def _path(run_dir: Path, name: str) -> Path:
    return Path(run_dir) / WORKER_DIR / f"{name}.json"


def report(run_dir: Path, name: str, state: str, error: str = "", details: str = "",
           restarts: int = 0) -> None:  # fmt: skip
    status = WorkerStatus(name, state, error, details, restarts, os.getpid(), time.time())
    with atomic_write(_path(run_dir, name), "w") as f:
        json.dump(asdict(status), f)


def read_status(run_dir: Path, name: str) -> WorkerStatus | None:
    try:
        return WorkerStatus(**json.loads(_path(run_dir, name).read_text()))
    except (FileNotFoundError, json.JSONDecodeError, TypeError):
        return None


def failures(run_dir: Path) -> list[WorkerStatus]:
    """The workers whose last report is a failure."""
    folder = Path(run_dir) / WORKER_DIR
    found = (read_status(run_dir, p.stem) for p in sorted(folder.glob("*.json")))
    return [s for s in found if s is not None and s.failed]


def hold_trainer(run_dir: Path) -> IO | None:
    """Mark the run as trained by this process until the file returned is closed (or the
    process ends)."""
    return hold(run_dir, TRAINER_LOCK)


def trainer_running(run_dir: Path) -> bool | None:
    """Whether a trainer runs on the run now (None where that cannot be told)."""
    return held(run_dir, TRAINER_LOCK)


def renderer_running(run_dir: Path) -> bool | None:
    """Whether a clip renderer (of `prefrl serve` or `prefrl label`) runs on the run now."""
    return held(run_dir, RENDERER_LOCK)


def hold(run_dir: Path, lock: str) -> IO | None:
    """Hold `workers/<lock>` (shared with others doing the same) until the file returned is
    closed or the process ends, however it ends."""
    if fcntl is None:
        return None
    path = Path(run_dir) / WORKER_DIR / lock
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a")  # noqa: SIM115 (held open while the process runs)
    fcntl.flock(f, fcntl.LOCK_SH)  # (shared: a reader's test takes it exclusively, briefly)
    return f


def held(run_dir: Path, lock: str) -> bool | None:
    """Whether a process holds `workers/<lock>` now (None where that cannot be told)."""
    path = Path(run_dir) / WORKER_DIR / lock
    if fcntl is None:
        return None
    try:
        f = open(path)  # noqa: SIM115 (closed below)
    except FileNotFoundError:
        return False
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False
