"""Ctrl-C and `kill` stop a run at the next step boundary, so the checkpoint written on the way
out is always consistent. The first signal is acknowledged at once, saying what the stop will
do; a second one stops at once (without a new checkpoint)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator


class StopRequest:
    def __init__(self) -> None:
        self.requested = False
        self.doing = "a checkpoint at the next step, then the end"
        """What a stop does now, said when one is asked for: a loop busy with something long (a
        reward fit) says how that ends."""


@contextlib.contextmanager
def graceful_stop(say: Callable[[str], None] | None = None) -> Iterator[StopRequest]:
    """`say`: prints the acknowledgement of the first signal (none without it)."""
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop  # signal handlers can only be installed from the main thread
        return

    def handler(signum, frame):
        if stop.requested:
            raise KeyboardInterrupt
        stop.requested = True
        if say is not None:
            who = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            _acknowledge(say, f"{who}: stopping: {stop.doing}. Ctrl-C again stops at once, "
                              "without a new checkpoint")  # fmt: skip

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _acknowledge(say: Callable[[str], None], message: str) -> None:
    """`say` it; where the signal came in the middle of a write to the same stream (Python
    refuses a reentrant write), straight to stderr."""
    try:
        say(message)
    except RuntimeError:
        os.write(2, (message + "\n").encode())
