"""Make the README's screenshot of the compare page: real Hopper-v5 clips (random actions) in a
real run directory, served by the web app, photographed by headless Chromium.

    python docs/screenshots.py            # writes docs/img/compare.png
"""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import uvicorn
from playwright.sync_api import sync_playwright

from prefrl.feedback.clips import ClipRenderer, render_pending
from prefrl.feedback.store import FeedbackStore, run_info
from prefrl.finetuning.rating_runs import random_segments
from prefrl.web.app import create_app

ENV = "Hopper-v5"
OUT = Path(__file__).parent / "img" / "compare.png"


def main() -> None:
    run_dir = Path(tempfile.mkdtemp()) / "hopper-demo"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"env": ENV}))
    segs = random_segments(ENV, count=4, length=50, action_scale=0.5)
    with FeedbackStore(run_dir) as store:
        run_id = store.run_id(run_dir.name, env=ENV)
        store.add_queries(run_id, run_dir, [0, 1], segs[[0, 2]], segs[[1, 3]])
        render_pending(store, run_id, run_dir, ClipRenderer(ENV, 256), queue=2)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(run_info(run_dir)), port=port))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=shutil.which("chromium"),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page(viewport={"width": 1100, "height": 760})
        page.goto(f"http://127.0.0.1:{port}/compare")
        page.wait_for_function("document.getElementById('left').readyState >= 2")
        page.wait_for_timeout(800)  # let the clips play a little
        OUT.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(OUT))
        browser.close()
    server.should_exit = True
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
