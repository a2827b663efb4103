"""Where and with what a run was made: one line per start or resume in `sessions.jsonl`, since a
resumed run may continue on another machine (a CPU run resumed on a GPU, say)."""

from __future__ import annotations

import json
import os
import platform
import socket
import time
from importlib import metadata
from pathlib import Path

PACKAGES = ("prefrl", "jax", "jaxlib", "flax", "optax", "mujoco", "gymnasium", "numpy")


def session_record() -> dict:
    import jax

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    devices = jax.devices()
    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "python": platform.python_version(),
        "backend": jax.default_backend(),
        "devices": [d.device_kind for d in devices],
        "versions": versions,
    }


def record_session(run_dir: Path) -> None:
    """Append this process's record to run_dir/sessions.jsonl."""
    with open(Path(run_dir) / "sessions.jsonl", "a") as f:
        f.write(json.dumps(session_record()) + "\n")


def read_sessions(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / "sessions.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
