"""The labelling server a trainer starts for `--teacher web`: `prefrl serve RUN_DIR` in a process
of its own (sharing only the store and the run directory with the trainer), watched, and started
again with the reason said on the trainer's console whenever it dies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from prefrl.rundir import workers

NAME = "server"
LOG = "serve.log"


class LabellingServer:
    def __init__(self, run_dir: Path, port: int, store: str | None = None):
        self.run_dir = Path(run_dir)
        self.cmd = [sys.executable, "-m", "prefrl", "serve", str(run_dir), "--port", str(port)]
        if store:
            self.cmd += ["--store", store]
        self.restarts = 0
        self.process = self._start()

    def _start(self) -> subprocess.Popen:
        # Its output (the renderer's reports among it) goes to the run directory's serve.log:
        # the trainer's console keeps its progress bar, and says what matters (`check`).
        log = open(self.run_dir / LOG, "ab")  # noqa: SIM115 (the child holds it open)
        try:
            return subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()

    def _last_error(self) -> str:
        try:
            lines = (self.run_dir / LOG).read_text(errors="replace").strip().splitlines()
        except FileNotFoundError:
            return ""
        errors = [x for x in lines[-50:] if "Error" in x or "error" in x]
        return (errors or lines[-1:] or [""])[-1].strip()

    def check(self) -> str | None:
        """None while the server runs; when it died, start it again and say why it died."""
        code = self.process.poll()
        if code is None:
            return None
        why = self._last_error() or f"exit code {code}"
        workers.report(self.run_dir, NAME, "failed", why, restarts=self.restarts)
        self.restarts += 1
        self.process = self._start()
        status = workers.read_status(self.run_dir, NAME)
        workers.report(self.run_dir, NAME, "running", restarts=self.restarts)
        return f"{status.describe()} (its output: {self.run_dir / LOG})"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
