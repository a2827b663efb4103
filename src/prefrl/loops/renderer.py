"""The renderer worker: a process of its own beside the trainer and the web server, sharing only
the feedback store and the run directory with them. It ends with the process that started it,
however that one ended (a `kill -9` included): it never outlives its server."""

from __future__ import annotations

import os
import time
from pathlib import Path

from prefrl.feedback.store import FeedbackStore
from prefrl.render.clips import ClipRenderer, render_pending


def run_renderer(
    store_target: str,
    run_dir: str,
    run_name: str,
    size: int = 256,
    queue: int = 20,
    poll_seconds: float = 1.0,
    once: bool = False,
    pairs: bool = False,
) -> None:
    """Render until killed or orphaned (or one pass with `once`)."""
    parent = os.getppid()
    store = FeedbackStore(store_target, create=False)
    try:
        run_id = store.run_id(run_name, create=False)
        renderer = ClipRenderer(store.run_env(run_id), size)
        try:
            while True:
                counts = render_pending(store, run_id, Path(run_dir), renderer, queue, pairs)
                if once:
                    return
                if os.getppid() != parent:  # the server is gone (its children are re-parented)
                    return
                if not counts["rendered"] and not counts["pairs"]:
                    time.sleep(poll_seconds)
        finally:
            renderer.close()
    finally:
        store.close()
