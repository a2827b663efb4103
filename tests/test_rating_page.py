"""The rating page in a real Chromium: clips slowed to a speed a person can follow, and a Listen
button only under clips with sound."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import launch_chromium, served

from prefrl.feedback.store import FeedbackStore, run_info
from prefrl.finetuning.rating_runs import make_rating_run, random_segments
from prefrl.render.video import has_audio, read_video, write_video
from prefrl.web.app import create_app

ENV = "toy:point-reach"  # 10 frames per second: a 10-step clip lasts 1 s


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian chromium not installed")
def test_rating_clips_play_slowed_down_and_only_clips_with_sound_can_be_listened_to(tmp_path):
    from fastapi.testclient import TestClient
    from playwright.sync_api import sync_playwright

    segs = random_segments(ENV, count=3, length=10)[:3]
    run = run_info(make_rating_run(tmp_path / "rate", ENV, segs, [{}] * 3, 64))
    with FeedbackStore(run.store) as store:
        ids = store.segment_ids(store.run_id(run.uid))
        clip = run.run_dir / store.clips([ids[1]])[ids[1]]
    # The second clip gets a sound track, as a piano clip has.
    tone = (3000 * np.sin(np.arange(22050) * 2 * np.pi * 440 / 22050)).astype(np.int16)
    write_video(clip, read_video(clip), fps=10, audio=(tone, 22050))
    assert has_audio(clip) and not has_audio(tmp_path / "nothing.mp4")
    with TestClient(create_app(run)) as client:
        got = client.get("/api/rate/next?n=6").json()["segments"]
    assert [s["sound"] for s in got] == [False, True, False]
    assert all(s["seconds"] == pytest.approx(1.0) for s in got)
    rates = "[...document.querySelectorAll('#clips video')].map(v => v.playbackRate)"
    with served(create_app(run)) as port, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(f"http://127.0.0.1:{port}/rate")
        page.wait_for_function("document.querySelectorAll('#clips video').length == 3")
        # auto: a 1 s clip plays over 3 s, as the compare page plays it
        page.wait_for_function("[...document.querySelectorAll('#clips video')]"
                               ".every(v => v.readyState >= 2 && !v.paused)")  # fmt: skip
        assert page.evaluate(rates) == pytest.approx([1 / 3] * 3, abs=1e-6)
        assert page.inner_text("#speed-now").strip() == "(0.33×)"
        # A clip too short for 3 s even so plays at the slowest speed a browser takes (1/16).
        slowest = page.evaluate(
            "(() => { const v = document.querySelector('#clips video'); "
            "v.playbackRate = speedOf(0.12); return v.playbackRate; })()"
        )
        assert slowest == 0.0625
        listen = page.locator("#clips figure .listen")
        assert listen.count() == 1
        assert listen.first.evaluate("b => Number(b.closest('figure').dataset.segment)") == ids[1]
        listen.first.click()
        muted = "[...document.querySelectorAll('#clips video')].map(v => v.muted)"
        assert page.evaluate(muted) == [True, False, True]
        # A speed chosen holds for the next clips and the next visit (the compare page's too).
        page.select_option("#speed", "0.5")
        assert page.evaluate(rates) == [0.5] * 3
        page.reload()
        page.wait_for_function("document.querySelectorAll('#clips video').length == 3")
        assert page.evaluate(rates) == [0.5] * 3
        assert page.evaluate("localStorage.getItem('prefrl-speed')") == "0.5"
        browser.close()


def test_serving_a_rating_run_gives_the_rating_page_first(tmp_path):
    """A rating run has clips to rate, no pairs: `prefrl serve` leads with its /rate link."""
    import os
    import subprocess
    import sys

    from conftest import free_port

    run_dir = make_rating_run(tmp_path / "rate", ENV, random_segments(ENV, count=2, length=10)[:2],
                              [{}] * 2, 64)  # fmt: skip
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "prefrl", "serve", str(run_dir), "--port", str(port),
         "--no-render"], env={**os.environ, "JAX_PLATFORMS": "cpu"}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        first = server.stdout.readline()
    finally:
        server.terminate()  # (as it starts serving: it ends, saying so, all the same)
        rest, _ = server.communicate(timeout=60)
    assert first.startswith(f"rate at http://127.0.0.1:{port}/rate"), first
    assert server.returncode == 0 and rest.strip().endswith("stopped serving"), rest
