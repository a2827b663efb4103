"""The renderer worker: a process of its own beside the trainer and the web server, sharing only
the feedback store and the run directory with them. It ends with the process that started it,
however that one ended (a `kill -9` included): it never outlives its server.

A renderer that fails reports why (`prefrl.rundir.workers`) before it exits, and the
`RendererSupervisor` that started it starts it again after a pause that grows with each failure,
so a person labelling is told what went wrong and is never left waiting on a dead worker.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from prefrl.feedback.clips import make_clip_renderer, render_pending
from prefrl.feedback.store import FeedbackStore, RunInfo
from prefrl.rundir import workers

NAME = "renderer"


def run_renderer(
    store_target: str,
    run_dir: str,
    run_uid: str,
    size: int = 256,
    queue: int = 20,
    poll_seconds: float = 1.0,
    once: bool = False,
    pairs: bool = False,
    restarts: int = 0,
    parent: int | None = None,
) -> None:
    """Render until killed or orphaned (or one pass with `once`). A failure is reported in the
    run directory, then raised."""
    # pygame's SDL (classic-control rendering) otherwise turns SIGTERM into a quit event that
    # nobody reads, and the renderer would outlive the `terminate` of whoever started it.
    os.environ.setdefault("SDL_NO_SIGNAL_HANDLERS", "1")
    parent = parent or os.getppid()
    lock = workers.hold(run_dir, workers.RENDERER_LOCK)  # (a waiting trainer: clips come)
    try:
        with FeedbackStore(store_target, create=False) as store:
            run_id = store.run_id(run_uid, create=False)
            renderer = make_clip_renderer(store.run_env(run_id), size)
            reported = False
            try:
                while True:
                    counts = render_pending(store, run_id, Path(run_dir), renderer, queue, pairs)
                    if not reported:  # a pass went through: whatever failed before is mended
                        workers.report(run_dir, NAME, "running", restarts=restarts)
                        reported = True
                    if once or os.getppid() != parent:  # (orphans are re-parented)
                        return
                    if not counts["rendered"] and not counts["pairs"]:
                        time.sleep(poll_seconds)
            finally:
                renderer.close()
    except Exception as e:
        error = f"{type(e).__name__}: {e}".splitlines()[0]
        workers.report(run_dir, NAME, "failed", error, traceback.format_exc(), restarts)
        raise
    finally:
        if lock is not None:
            lock.close()


def _renderer_process(*args, **kwargs) -> None:
    """`run_renderer` as the supervisor's child: Ctrl-C in the terminal reaches the whole
    process group, and it is the supervisor's to stop the renderer (no traceback of its own)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    run_renderer(*args, **kwargs)


class RendererSupervisor:
    """Runs the renderer in a spawned process (never fork a process that may hold a GL context)
    and starts it again whenever it dies, saying why on stderr."""

    def __init__(self, run: RunInfo, size: int = 256, queue: int = 20, pairs: bool = False,
                 max_pause: float = 60.0):  # fmt: skip
        self.run, self.size, self.queue, self.pairs = run, size, queue, pairs
        self.max_pause = max_pause
        self.restarts = 0
        self._stop = threading.Event()
        self.process = self._start()
        self._watch = threading.Thread(target=self._supervise, daemon=True, name=NAME)
        self._watch.start()

    def _start(self):
        ctx = multiprocessing.get_context("spawn")
        proc = ctx.Process(
            target=_renderer_process,
            args=(self.run.store, str(self.run.run_dir), self.run.uid, self.size, self.queue),
            kwargs={"pairs": self.pairs, "restarts": self.restarts, "parent": os.getpid()},
            daemon=True,
            name=f"prefrl-{NAME}",
        )
        main = threading.current_thread() is threading.main_thread()
        # (started ignoring Ctrl-C, which Python keeps: a Ctrl-C while it is still starting up
        # reaches none of its code either; only the main thread may change a handler)
        before = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            proc.start()
        finally:
            if before is not None:
                signal.signal(signal.SIGINT, before)
        return proc

    def _supervise(self) -> None:
        while not self._stop.is_set():
            self.process.join(timeout=0.5)
            if self.process.exitcode is None or self._stop.is_set():
                continue
            status = workers.read_status(self.run.run_dir, NAME)
            if status is None or not status.failed:  # died without a word (killed)
                error = f"the process ended with exit code {self.process.exitcode}"
                workers.report(self.run.run_dir, NAME, "failed", error, restarts=self.restarts)
                status = workers.read_status(self.run.run_dir, NAME)
            print(f"prefrl: {status.describe()}", file=sys.stderr, flush=True)
            self.restarts += 1
            if self._stop.wait(min(self.max_pause, 2.0**self.restarts)):
                return
            self.process = self._start()

    def terminate(self) -> None:
        self._stop.set()
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=5)
        if self.process.is_alive():  # (stuck in a library call that ignores SIGTERM)
            self.process.kill()
            self.process.join(timeout=5)

    def pid(self) -> int | None:
        return self.process.pid
