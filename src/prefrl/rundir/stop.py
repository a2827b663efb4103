"""Ctrl-C and `kill` stop a run at the next step boundary, so the checkpoint written on the way
out is always consistent. A second signal stops at once (without a new checkpoint)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class StopRequest:
    def __init__(self) -> None:
        self.requested = False


@contextlib.contextmanager
def graceful_stop() -> Iterator[StopRequest]:
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop  # signal handlers can only be installed from the main thread
        return

    def handler(signum, frame):
        if stop.requested:
            raise KeyboardInterrupt
        stop.requested = True

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
