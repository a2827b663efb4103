"""The labelling server a trainer starts for `--teacher web`: `prefrl serve RUN_DIR` in a process
of its own (sharing only the store and the run directory with the trainer), watched, and started
again with the reason said on the trainer's console whenever it dies. It ends with its trainer,
however the trainer ends (a `kill -9` included), so it never holds the port of the next one.

`prefrl serve` binds its port before it says where it serves; a port that is taken is named
with what holds it (this run's server, another run's, another program)."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from prefrl.feedback.store import run_uid
from prefrl.rundir import workers

NAME = "server"
LOG = "serve.log"
PARENT_ENV = "PREFRL_SERVE_PARENT"
"""The trainer's process id, given to the server it starts: the server ends when it is gone."""
IDENTITY = "/api/server"
"""What a labelling server answers about itself (the run it serves, its process), so that a
port found taken can be said to be held by this run's server, another run's or another
program."""
PORTS_TRIED = 50


@dataclass(frozen=True)
class PortHolder:
    what: str
    pid: int | None = None
    """The process of the prefrl labelling server that holds the port."""
    ours: bool = False
    """It serves this run (left over from an earlier trainer or `prefrl serve`)."""


class PortTaken(RuntimeError):
    def __init__(self, host: str, port: int, holder: PortHolder):
        self.port, self.holder = port, holder
        super().__init__(f"port {port} on {host} is taken by {holder.what}")


def bind(host: str, port: int, this_run: str | None = None) -> socket.socket:
    """The listening socket of a labelling server (as uvicorn makes it: SO_REUSEADDR, so that
    connections of a server that just ended do not hold the port). `this_run` (the run's uid):
    a taken port is said to be held by this run's server where it is."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if e.errno != errno.EADDRINUSE:
            raise
        raise PortTaken(host, port, port_holder(host, port, this_run)) from None
    sock.listen(2048)  # (uvicorn's backlog: a page opened now waits, it is not refused)
    sock.set_inheritable(True)  # (`--workers N` hands it to its processes)
    return sock


def port_holder(host: str, port: int, this_run: str | None = None) -> PortHolder:
    """What listens on `port`: a prefrl labelling server (this run's or another run's) or
    another program."""
    probe = "127.0.0.1" if host in ("0.0.0.0", "", "localhost") else host
    probe = "::1" if probe == "::" else probe
    where = f"[{probe}]" if ":" in probe else probe
    try:
        with urllib.request.urlopen(f"http://{where}:{port}{IDENTITY}", timeout=5) as r:
            info = json.loads(r.read())
        if info.get("app") != "prefrl":
            raise ValueError(info)
        pid = int(info["pid"])
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        see = f" (`ss -ltnp 'sport = :{port}'` shows which)" if sys.platform == "linux" else ""
        return PortHolder(f"another program, not a prefrl labelling server{see}")
    if this_run is not None and info.get("run_uid") == this_run:
        return PortHolder(f"this run's labelling server from before (pid {pid})", pid, True)
    return PortHolder(f"the labelling server of another run, {info.get('run')!r} (pid {pid})", pid)


def take_port(port: int, this_run: str) -> tuple[int, str | None]:
    """`port` where it is free, else the next free one after it and why `port` was not used."""
    try:
        bind("127.0.0.1", port, this_run).close()
        return port, None
    except PortTaken as e:
        taken = e
    for other in range(port + 1, min(port + PORTS_TRIED, 65536)):
        try:
            bind("127.0.0.1", other).close()
        except PortTaken:
            continue
        stop = f"; stop the old one with: kill {taken.holder.pid}" if taken.holder.ours else ""
        return other, f"{taken}: serving on port {other} instead{stop}"
    raise RuntimeError(f"{taken}, and so are the {PORTS_TRIED - 1} ports after it: give a free "
                       "one with --web-port")  # fmt: skip


def follow_parent() -> None:
    """In a server that a trainer started: end (as on SIGTERM) as soon as the trainer is gone,
    whatever ended it. Linux says so at once (PR_SET_PDEATHSIG); elsewhere, and in case that
    fails, the parent is looked for every second."""
    parent = os.environ.pop(PARENT_ENV, None)
    if parent is None:
        return
    parent = int(parent)
    if sys.platform == "linux":
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != parent:  # (it ended before the line above)
        os.kill(os.getpid(), signal.SIGTERM)

    def watch() -> None:
        while os.getppid() == parent:  # (an orphan is handed to another parent)
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="prefrl-parent").start()


class LabellingServer:
    """`prefrl serve` of a run, for its trainer, on `port` or (taken) the next free port; says
    where on the trainer's console."""

    def __init__(self, run_dir: Path, port: int, store: str | None = None):
        self.run_dir = Path(run_dir)
        self.wanted, self.store = port, store
        self.uid = run_uid(self.run_dir)
        self.restarts = 0
        self.process = self._start()
        if self.taken:
            print(self.taken, flush=True)
        self._wait_until_listening()
        print(f"label at {self.url}/compare (the run page: /run)", flush=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _start(self) -> subprocess.Popen:
        self.port, self.taken = take_port(self.wanted, self.uid)
        cmd = [sys.executable, "-m", "prefrl", "serve", str(self.run_dir), "--port", str(self.port)]
        if self.store:
            cmd += ["--store", self.store]
        # Its output (the renderer's reports among it) goes to the run directory's serve.log:
        # the trainer's console keeps its progress bar, and says what matters (`check`).
        log = open(self.run_dir / LOG, "ab")  # noqa: SIM115 (the child holds it open)
        try:
            env = {**os.environ, PARENT_ENV: str(os.getpid())}
            # In a session of its own: a Ctrl-C in the terminal is the trainer's to handle (it
            # stops the server itself), not a server's death to restart it after.
            return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)  # fmt: skip
        finally:
            log.close()

    def _wait_until_listening(self, seconds: float = 300.0) -> None:
        """Until the server listens on its port (a link opened before would be refused; one
        opened once it listens waits for the page), or ends (`check` says why)."""
        deadline = time.monotonic() + seconds
        while self.process.poll() is None and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                return
            except OSError:
                time.sleep(0.1)

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
        port = self.port
        self.process = self._start()
        self._wait_until_listening()
        status = workers.read_status(self.run_dir, NAME)
        workers.report(self.run_dir, NAME, "running", restarts=self.restarts)
        moved = f"; now at {self.url}/compare" if self.port != port else ""
        moved += f" ({self.taken})" if moved and self.taken else ""
        return f"{status.describe()} (its output: {self.run_dir / LOG}){moved}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
