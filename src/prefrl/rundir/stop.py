"""Ctrl-C and `kill` stop a run at the next step boundary, so the checkpoint written on the way
out is always consistent. Each signal is acknowledged at once, saying what the stop will do
(also while the main thread is busy in compiled code: a watcher thread hears it); a second one
stops at once, without a new checkpoint, unless the checkpoint is being written already."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator


class StopRequest:
    def __init__(self, say: Callable[[str], None] | None = None) -> None:
        self.requested = False
        self.doing: str | Callable[[], str] = "a checkpoint at the next step, then the end"
        """What a stop does now (or a function that says it), said when one is asked for: a
        loop busy with something long (a reward fit) says how that ends."""
        self.say = say
        """Prints the acknowledgements (none without it)."""
        self.saving = False
        """The checkpoint to stop with is being written: no signal cuts it short."""

    @contextlib.contextmanager
    def meanwhile(self, doing: str) -> Iterator[None]:
        """What a stop does while the block runs (something long that cannot stop midway)."""
        before, self.doing = self.doing, doing
        try:
            yield
        finally:
            self.doing = before

    def acknowledgement(self, signum: int, again: bool) -> str:
        who = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if self.saving:
            return f"{who}: writing the checkpoint to resume from; the run ends when it is written"
        if again:
            return f"{who} again: stopping at once, without a new checkpoint"
        doing = self.doing() if callable(self.doing) else self.doing
        return f"{who}: stopping: {doing}. Ctrl-C again stops at once, without a new checkpoint"


_active: StopRequest | None = None  # (the stop request of the outermost graceful_stop)


@contextlib.contextmanager
def graceful_stop(say: Callable[[str], None] | None = None) -> Iterator[StopRequest]:
    """`say`: prints the acknowledgements. Within another `graceful_stop` (a learner's, around
    its set-up too) it is that one's request, acknowledged with this `say` meanwhile: a stop asked
    for during the set-up stops the loop too."""
    global _active
    if _active is not None:
        outer, before = _active, _active.say
        outer.say = say or before
        try:
            yield outer
        finally:
            outer.say = before
        return
    stop = StopRequest(say)
    if threading.current_thread() is not threading.main_thread():
        yield stop  # signal handlers can only be installed from the main thread
        return
    watcher = _Watcher(stop)

    def handler(signum, frame):
        again = stop.requested
        stop.requested = True
        if not watcher.running:  # (it has said so already, the moment the signal came)
            _acknowledge(stop, stop.acknowledgement(signum, again))
        if again and not stop.saving:
            raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    watcher.start()
    _active = stop
    try:
        yield stop
    finally:
        _active = None
        watcher.stop()
        for sig, old in previous.items():
            signal.signal(sig, old)


class _Watcher:
    """Says each signal the moment it comes: Python runs a signal's handler in the main thread
    only once that thread is back in Python, which a compilation or a long array operation
    delays by up to a minute. The signal's number is written to a pipe as it comes (Python's
    wakeup fd), which this thread reads."""

    def __init__(self, stop: StopRequest):
        self.stop_request, self.running = stop, False
        self._pipe = self._previous = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        read, write = os.pipe()
        os.set_blocking(write, False)
        try:
            self._previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except ValueError:  # (not the main thread, or the fd is refused: the handler says it)
            os.close(read)
            os.close(write)
            return
        self._pipe = (read, write)
        self._thread = threading.Thread(target=self._run, name="prefrl-stop", daemon=True)
        self.running = True
        self._thread.start()

    def _run(self) -> None:
        read, _ = self._pipe
        heard = 0
        while (byte := os.read(read, 1)) and byte != b"\0":
            if byte[0] in (signal.SIGINT, signal.SIGTERM):
                request = self.stop_request
                _acknowledge(request, request.acknowledgement(byte[0], again=heard > 0))
                heard += 1

    def stop(self) -> None:
        if not self.running:
            return
        signal.set_wakeup_fd(self._previous)
        read, write = self._pipe
        os.set_blocking(write, True)
        os.write(write, b"\0")
        self._thread.join(timeout=5)
        self.running = False
        os.close(write)
        os.close(read)


def _acknowledge(stop: StopRequest, message: str) -> None:
    """`say` it; where the signal came in the middle of a write to the same stream (Python
    refuses a reentrant write), straight to stderr."""
    if stop.say is None:
        return
    try:
        stop.say(message)
    except RuntimeError:
        os.write(2, (message + "\n").encode())
