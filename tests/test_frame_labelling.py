"""A person labels frame clips (MovingDot) in Chromium and in the terminal: the clips are the
replayed colour frames, and the labels land in the run's store."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest
from conftest import launch_chromium, served

from prefrl.data.frame_clips import FrameClipRecorder
from prefrl.data.segments import Segments
from prefrl.envs import FrameVectorEnv, make_pixel_env
from prefrl.envs.pool import seeded
from prefrl.feedback.clips import make_clip_renderer, render_pending
from prefrl.feedback.store import FeedbackStore, run_info
from prefrl.feedback.terminal import label_in_terminal
from prefrl.web.app import create_app


@pytest.fixture
def run(tmp_path):
    """A run directory whose store holds 3 queries of MovingDot clips, rendered."""
    envs = FrameVectorEnv(seeded(make_pixel_env, "movingdot", 0), 3)
    recorder = FrameClipRecorder(3, 5)
    obs, clips, rng = envs.reset(), [], np.random.default_rng(0)
    for t in range(10):
        states = envs.get_states(np.flatnonzero(recorder.starting()))
        action = rng.integers(0, 5, 3)
        nxt, reward, term, trunc, _ = envs.step(action)
        clips += recorder.record(t * 3, obs, action, reward, term | trunc, states)
        obs = nxt
    run_dir = tmp_path / "frames-run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"env": "movingdot", "store": None}))
    with FeedbackStore(run_dir) as store:
        run_id = store.run_id(run_dir.name, env="movingdot")
        store.add_queries(run_id, run_dir, range(3), Segments.concatenate(clips[:3]),
                          Segments.concatenate(clips[3:6]))  # fmt: skip
        renderer = make_clip_renderer("movingdot")
        render_pending(store, run_id, run_dir, renderer, queue=5, pairs=True)
        renderer.close()
    return run_info(run_dir)


def test_clips_show_each_pixel_as_a_sharp_block(run):
    """Clips are enlarged by a whole factor (the 210x160 screen to 420x320 at the default size)
    with nearest neighbour: each screen pixel a uniform 2x2 block, the 4x4 dot 8x8, sharp."""
    import av

    paths = sorted((run.run_dir / "clips").glob("seg*.mp4"))
    assert len(paths) == 6
    for path in paths:
        with av.open(str(path)) as f:
            assert (f.streams.video[0].width, f.streams.video[0].height) == (320, 420)
            frames = [x.to_ndarray(format="rgb24").astype(int) for x in f.decode(video=0)]
        assert len(frames) == 20  # (5 steps x 4 emulator frames)
        for frame in frames:
            blocks = frame.reshape(210, 2, 160, 2, 3)
            assert (blocks.max((1, 3)) - blocks.min((1, 3))).max() <= 16  # (H.264's noise)
            rows, cols = np.nonzero(frame.min(-1) > 128)
            assert np.ptp(rows) + 1 == 8 and np.ptp(cols) + 1 == 8
            assert rows.min() % 2 == 0 and cols.min() % 2 == 0  # (on the blocks' grid)


def test_frame_clips_in_the_terminal(run):
    out = io.StringIO()
    with FeedbackStore(run.store) as store:
        n = label_in_terminal(store, run.uid, run.run_dir, inp=io.StringIO("l\nr\nq\n"), out=out,
                              open_clips=False)  # fmt: skip
        labels = store.labels(store.run_id(run.uid))
    assert n == 2 and [x.label.name for x in labels] == ["LEFT", "RIGHT"]
    assert ".mp4" in out.getvalue()


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian chromium not installed")
def test_frame_clips_in_chromium(run):
    from playwright.sync_api import sync_playwright

    with served(create_app(run)) as port, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(f"http://127.0.0.1:{port}/compare")
        page.wait_for_function("window.prefrlPair !== undefined && window.prefrlPair !== null")
        page.wait_for_function(
            "document.getElementById('left').readyState >= 2 && "
            "document.getElementById('right').readyState >= 2"
        )
        # The colour screen enlarged (210x160 2x), 20 frames (5 steps x 4) at 60/s.
        size = page.evaluate("[document.getElementById('left').videoWidth, "
                             "document.getElementById('left').videoHeight]")  # fmt: skip
        assert size == [320, 420]
        duration = page.evaluate("document.getElementById('left').duration")
        assert abs(duration - 20 / 60) < 0.05
        # Scaled further by the page (to 496 px high here), the blocks stay sharp: the dot's
        # edges are white against black, with no blurred greys between.
        rendering = page.evaluate("getComputedStyle(document.getElementById('left'))"
                                  ".imageRendering")  # fmt: skip
        assert rendering == "pixelated"
        page.evaluate("document.getElementById('left').pause()")
        box = page.locator("#left").bounding_box()
        assert box["height"] > 480
        shot = page.screenshot(clip={"x": box["x"] + 4, "y": box["y"] + 4,
                                     "width": box["width"] - 8, "height": box["height"] - 8})  # fmt: skip
        from PIL import Image

        grey = np.asarray(Image.open(io.BytesIO(shot)).convert("L")).astype(int)
        assert (grey > 200).sum() >= 64  # (the dot, 4x4 screen pixels, at least 8x8 here)
        assert ((grey > 50) & (grey < 200)).sum() <= 8
        first = page.evaluate("window.prefrlPair")
        page.keyboard.press("ArrowLeft")
        page.wait_for_function(f"window.prefrlPair !== {first}")
        browser.close()
    with FeedbackStore(run.store) as store:
        labels = store.labels(store.run_id(run.uid))
    assert [(x.query_id, x.label.name) for x in labels] == [(first, "LEFT")]
