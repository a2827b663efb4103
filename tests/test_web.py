"""Clip rendering, the web app (HTTP API and a real Chromium) and the terminal labeller, on a real
run directory of the toy env with a real SQLite store."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import av
import numpy as np
import pytest
from conftest import PREFRL_WITH_CTRL_C, free_port, launch_chromium, served

from prefrl.data import Segments
from prefrl.envs import make_env
from prefrl.feedback.clips import ClipRenderer, pair_clip, render_pending, side_by_side
from prefrl.feedback.store import FeedbackStore, run_info
from prefrl.feedback.terminal import label_in_terminal
from prefrl.finetuning.rating_runs import random_segments
from prefrl.rundir.workers import hold_trainer, read_status
from prefrl.web.app import create_app
from prefrl.web.serve import take_port

ENV = "toy:point-reach"


def rollout_segments() -> Segments:
    return random_segments(ENV, count=12, length=10)


@pytest.fixture
def run(tmp_path):
    """A run directory whose store holds 6 queries of real toy-env segments."""
    run_dir = tmp_path / "run-web"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"env": ENV, "store": None, "steps": 1000}))
    segs = rollout_segments()
    with FeedbackStore(run_dir) as store:
        run_id = store.run_id(run_dir.name, env=ENV)
        store.add_queries(run_id, run_dir, range(6), segs[:6], segs[6:12])
    return run_info(run_dir)


def test_clips_are_rendered_from_states_newest_first_and_stale_queries_dropped(run):
    renderer = ClipRenderer(ENV, size=64)
    trainer = hold_trainer(run.run_dir)  # (stale while a trainer asks for more)
    with FeedbackStore(run.store) as store:
        run_id = store.run_id(run.uid)
        counts = render_pending(store, run_id, run.run_dir, renderer, queue=2)
        assert counts == {"rendered": 4, "dropped": 4, "pairs": 0}
        open_ids = [q.id for q in store.open_queries(run_id)]
        assert len(open_ids) == 2 and open_ids == sorted(open_ids)[-2:]  # the newest kept
        q = store.query(open_ids[0])
        clip = run.run_dir / store.clip(q.left_segment)
        seg = store.segments(run.run_dir, [q.left_segment])
    with av.open(str(clip)) as f:
        frames = [fr.to_ndarray(format="rgb24") for fr in f.decode(video=0)]
        assert f.streams.video[0].codec_context.name == "h264"
    assert len(frames) == seg.length and frames[0].shape == (64, 64, 3)
    # The clip shows the segment: its first frame is the render of the first stored state.
    env = make_env(ENV, render=renderer.settings)
    env.set_state(seg.state[0, 0])
    assert np.abs(frames[0].astype(int) - env.render().astype(int)).mean() < 8  # (H.264 loss)
    both = side_by_side(frames[:3], frames[:2])
    assert len(both) == 3 and both[0].shape == (64, 64 * 2 + 8, 3)
    renderer.close()
    trainer.close()


def test_a_run_no_trainer_runs_on_keeps_every_pair_to_answer(run):
    """A finished or stopped run asks for nothing new: none of its pairs goes stale, each is
    rendered in its turn and can be answered (the terminal's "pairs left" only counts down),
    each shown as one side-by-side video, also before the renderer has written it."""
    renderer = ClipRenderer(ENV, size=64)
    with FeedbackStore(run.store) as store:
        run_id = store.run_id(run.uid)
        passes = [render_pending(store, run_id, run.run_dir, renderer, queue=2, pairs=first)
                  for first in (True, False, False)]  # fmt: skip
        assert [(c["rendered"], c["dropped"]) for c in passes] == [(4, 0)] * 3
        assert passes[0]["pairs"] == 2 and store.query_count(run_id, status="open") == 6
        out = io.StringIO()
        assert label_in_terminal(store, run.uid, run.run_dir, inp=io.StringIO("l\n" * 6),
                                 out=out, open_clips=False, side_by_side=True,
                                 max_labels=6) == 6  # fmt: skip
        assert store.query_count(run_id, status="labelled") == 6
    renderer.close()
    left = [int(x) for x in re.findall(r"pairs left: (\d+)", out.getvalue())]
    assert left == [6, 5, 4, 3, 2, 1]
    assert out.getvalue().count("L | R: ") == 6 and "\n  L: " not in out.getvalue()
    assert all((run.run_dir / pair_clip(q)).is_file() for q in range(1, 7))


def _rendered(run, queue=10):
    renderer = ClipRenderer(ENV, size=64)
    with FeedbackStore(run.store) as store:
        render_pending(store, store.run_id(run.uid), run.run_dir, renderer, queue=queue)
    renderer.close()


def test_api_labels_are_committed_once_and_bad_input_is_refused(run):
    from fastapi.testclient import TestClient

    _rendered(run)
    with TestClient(create_app(run)) as client:
        pairs = client.get("/api/next?n=2").json()
        assert len(pairs["queries"]) == 2
        q = pairs["queries"][0]
        clip = client.get(q["left"])
        assert clip.status_code == 200 and clip.content[4:8] == b"ftyp"
        ok = client.post("/api/label", json={"query_id": q["id"], "label": "left",
                                             "response_ms": 900})  # fmt: skip
        assert ok.status_code == 200 and ok.json()["created"]
        again = client.post("/api/label", json={"query_id": q["id"], "label": "left"})
        assert again.status_code == 200 and not again.json()["created"]
        conflict = client.post("/api/label", json={"query_id": q["id"], "label": "right"})
        assert conflict.status_code == 409 and "already labelled left" in conflict.json()["detail"]
        bad = client.post("/api/label", json={"query_id": pairs["queries"][1]["id"],
                                              "label": "up"})  # fmt: skip
        assert bad.status_code == 400 and "expected one of left, right" in bad.json()["detail"]
        assert client.post("/api/label", json={"query_id": 999, "label": "left"}).status_code == 404
        assert client.post("/api/label", json={"label": "left"}).status_code == 422
        # An id past the store's 64-bit integers is refused like any bad id, not a server error.
        huge = 99999999999999999999999
        for path, body in [("/api/label", {"query_id": huge, "label": "left"}),
                           ("/api/label", {"query_id": q["id"], "label": "left",
                                           "response_ms": huge}),
                           ("/api/release", {"query_ids": [huge]}),
                           ("/api/rating", {"segment_id": huge, "rating": 50})]:  # fmt: skip
            r = client.post(path, json=body)
            assert r.status_code == 422 and "less than or equal to" in r.text, (path, r.text)
        assert client.get("/clips/..%2Fconfig.json").status_code == 404
        status = client.get("/api/status").json()
        assert status["labels"] == 1 and status["counts"]["left"] == 1
        assert status["waiting_for_first_labels"]  # open queries, no reward fit yet
        # Two fits, the first without held-out labels (so no accuracy): both counted.
        (run.run_dir / "metrics.jsonl").write_text(
            json.dumps({"step": 300, "reward/segment_return_corr": 0.4}) + "\n"
            + json.dumps({"step": 600, "reward/segment_return_corr": 0.6,
                          "reward/val_accuracy": 0.75}) + "\n"
        )  # fmt: skip
        status = client.get("/api/status").json()
        assert status["reward_fits"] == 2 and status["reward_val_accuracy"] == 0.75
        assert [f["val_accuracy"] for f in status["fits"]] == [None, 0.75]
        (run.run_dir / "metrics.jsonl").unlink()
        page = client.get("/run")
        assert page.status_code == 200 and "waiting for the first labels" in page.text
        for path in ("/compare", "/rate"):
            assert client.get(path).status_code == 200
        # Ratings: 1-100 whole numbers only.
        seg = client.get("/api/rate/next?n=1").json()["segments"][0]["id"]
        for bad_rating in (0, 101, "x", 5.5):
            r = client.post("/api/rating", json={"segment_id": seg, "rating": bad_rating})
            assert r.status_code == 400 and "1 to 100" in r.json()["detail"]
        assert client.post("/api/rating", json={"segment_id": seg, "rating": 64}).json()["saved"]
    with FeedbackStore(run.store) as store:
        run_id = store.run_id(run.uid)
        assert [x.label.name for x in store.labels(run_id)] == ["LEFT"]
        assert store.labels(run_id)[0].annotator == "local"
        assert store.ratings(run_id) == [(seg, 64, "local")]


def test_exposed_server_needs_a_token_and_annotators_get_different_pairs(run):
    from fastapi.testclient import TestClient

    _rendered(run)
    with FeedbackStore(run.store) as store:
        tokens = [store.add_annotator(name) for name in ("ana", "ben")]
    with TestClient(create_app(run, require_token=True)) as client:
        r = client.get("/api/next")
        assert r.status_code == 401 and "token" in r.json()["detail"]
        assert client.get("/api/next?token=wrong").status_code == 403
        got = [
            {q["id"] for q in client.get(f"/api/next?n=3&token={t}").json()["queries"]}
            for t in tokens
        ]
        assert len(got[0]) == len(got[1]) == 3 and got[0].isdisjoint(got[1])
        header = client.get("/api/next?n=3", headers={"X-Prefrl-Token": tokens[0]}).json()
        assert {q["id"] for q in header["queries"]} == got[0]  # the same annotator keeps its own


def test_a_closed_page_gives_its_pairs_back_and_an_empty_queue_says_why(run):
    from fastapi.testclient import TestClient

    _rendered(run)
    with FeedbackStore(run.store) as store:
        tokens = [store.add_annotator(name) for name in ("ana", "ben")]
    with TestClient(create_app(run, require_token=True)) as client:
        held = client.get(f"/api/next?n=6&token={tokens[0]}").json()
        assert len(held["queries"]) == 6 and held["open"] == 6 and held["waiting"] is None
        empty = client.get(f"/api/next?n=3&token={tokens[1]}").json()
        assert empty["queries"] == [] and "being labelled by ana" in empty["waiting"]
        # What the page sends as it closes (a beacon: the token in the address).
        ids = [q["id"] for q in held["queries"]][:4]
        gone = client.post(f"/api/release?token={tokens[0]}", json={"query_ids": ids})
        assert gone.json() == {"released": 4}
        assert len(client.get(f"/api/next?n=6&token={tokens[1]}").json()["queries"]) == 4
        assert client.get("/favicon.ico").status_code == 200


def test_rating_page_says_when_segments_have_no_clip(tmp_path):
    from fastapi.testclient import TestClient

    from prefrl.finetuning.rating_runs import make_rating_run

    segs = random_segments(ENV, count=3, length=10)[:3]
    run = run_info(make_rating_run(tmp_path / "bare", ENV, segs, [{}] * 3, None))  # no clips
    with TestClient(create_app(run)) as client:
        got = client.get("/api/rate/next").json()
    assert got["segments"] == [] and got["without_clips"] == 3


def test_terminal_labeller(run):
    _rendered(run)
    answers = io.StringIO("x\nl\n\ne\nq\n")
    out = io.StringIO()
    with FeedbackStore(run.store) as store:
        n = label_in_terminal(store, run.uid, run.run_dir, inp=answers, out=out,
                              open_clips=False)  # fmt: skip
        labels = store.labels(store.run_id(run.uid))
    assert n == 3
    assert [x.label.name for x in labels] == ["LEFT", "SKIP", "EQUAL"]
    assert {x.source for x in labels} == {"terminal"}
    text = out.getvalue()
    assert "'x' is not an answer" in text and ".mp4" in text


def _answer_all(run) -> None:
    with FeedbackStore(run.store) as store:
        run_id = store.run_id(run.uid)
        for q in store.open_queries(run_id):
            store.add_label(q.id, "left", source="test")


def _started(args: list[str], log: Path, ready, what: str) -> subprocess.Popen:
    """`prefrl ARGS` in a session of its own (as a terminal's foreground job: Ctrl-C reaches its
    children too), its output in `log`, once `ready(output)` holds."""
    proc = subprocess.Popen([*PREFRL_WITH_CTRL_C, *args], stdin=subprocess.PIPE,
                            stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})  # fmt: skip
    deadline = time.time() + 300  # (generous: three Python processes start on a loaded machine)
    while not ready(log.read_text()):
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail(f"{what} did not start: {log.read_text()}")
        time.sleep(0.2)
    return proc


def _renderer_running(run) -> bool:
    status = read_status(run.run_dir, "renderer")
    return status is not None and status.state == "running"


def test_ctrl_c_and_q_stop_the_terminal_labeller_and_server_without_a_traceback(run, tmp_path):
    """Ctrl-C (the whole process group, as a terminal sends it) stops `prefrl label` and `prefrl
    serve` and their clip renderers without a traceback; Q stops a labeller waiting for pairs."""
    _answer_all(run)  # nothing to label: the labeller waits
    log = tmp_path / "label.log"
    waiting = _started(["label", str(run.run_dir), "--no-open-clips"], log,
                       lambda out: "Waiting (" in out and _renderer_running(run), "prefrl label")  # fmt: skip
    os.killpg(waiting.pid, signal.SIGINT)
    assert waiting.wait(timeout=120) == 0, log.read_text()
    out = log.read_text()
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert out.rstrip().endswith("0 labels stored"), out

    quits = _started(["label", str(run.run_dir), "--no-render", "--no-open-clips"], log,
                     lambda out: "Waiting (" in out, "prefrl label")  # fmt: skip
    quits.stdin.write(b"x\nq\n")
    quits.stdin.flush()
    assert quits.wait(timeout=120) == 0, log.read_text()
    out = log.read_text()
    assert "'x': there is no pair to answer yet; Q and Enter to quit" in out, out
    assert out.rstrip().endswith("0 labels stored"), out

    (run.run_dir / "workers" / "renderer.json").unlink()
    port = free_port()
    server = _started(["serve", str(run.run_dir), "--port", str(port)], tmp_path / "serve.log",
                      lambda out: "label at" in out and _renderer_running(run), "prefrl serve")  # fmt: skip
    os.killpg(server.pid, signal.SIGINT)
    assert server.wait(timeout=120) == 0
    out = (tmp_path / "serve.log").read_text()
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert out.rstrip().endswith("stopped serving"), out


def test_terminal_rater(tmp_path):
    from prefrl.feedback.terminal import rate_in_terminal
    from prefrl.finetuning.rating_runs import make_rating_run

    segs = random_segments(ENV, count=4, length=10)[:4]
    infos = [{"family": 0}] * 2 + [{}] * 2
    run = run_info(make_rating_run(tmp_path / "rate", ENV, segs, infos, 64))
    out = io.StringIO()
    with FeedbackStore(run.store) as store:
        ids = store.segment_ids(store.run_id(run.uid))
        # Bad ratings are refused and asked again; Enter passes the first clip over.
        answers = io.StringIO("x\n150\n\n70\n40\nq\n")
        assert rate_in_terminal(store, run.uid, run.run_dir, inp=answers, out=out,
                                open_clips=False) == 2  # fmt: skip
        # The next session starts with the clip passed over, then the one left.
        assert rate_in_terminal(store, run.uid, run.run_dir, inp=io.StringIO("55\n"), out=out,
                                open_clips=False) == 1  # fmt: skip
        rated = {seg: (value, who) for seg, value, who in store.ratings(store.run_id(run.uid))}
    assert rated == {ids[1]: (70, "terminal"), ids[2]: (40, "terminal"), ids[0]: (55, "terminal")}
    text = out.getvalue()
    assert "rating 'x' is invalid" in text and "rating '150' is invalid" in text
    assert "family 0: rate it against its siblings" in text and ".mp4" in text
    # A rating run without clips has nothing to show.
    bare = run_info(make_rating_run(tmp_path / "bare", ENV, segs, infos, None))
    out = io.StringIO()
    with FeedbackStore(bare.store) as store:
        assert rate_in_terminal(store, bare.uid, bare.run_dir, inp=io.StringIO(""), out=out,
                                open_clips=False) == 0  # fmt: skip
    assert "4 segment(s) have no clip to show" in out.getvalue()


def test_side_by_side_pair_videos_for_the_terminal(run):
    renderer = ClipRenderer(ENV, size=64)
    with FeedbackStore(run.store) as store:
        run_id = store.run_id(run.uid)
        counts = render_pending(store, run_id, run.run_dir, renderer, queue=3, pairs=True)
        assert counts["pairs"] == 3
        again = render_pending(store, run_id, run.run_dir, renderer, queue=3, pairs=True)
        assert again["pairs"] == 0  # written once
        newest = store.open_queries(run_id)[-1]
        out = io.StringIO()
        label_in_terminal(store, run.uid, run.run_dir, inp=io.StringIO("r\n"), out=out,
                          open_clips=False, side_by_side=True, max_labels=1)  # fmt: skip
    renderer.close()
    assert f"pairs left: 6\n  L | R: {run.run_dir / pair_clip(newest.id)}" in out.getvalue()
    with av.open(str(run.run_dir / pair_clip(newest.id))) as f:
        frames = [fr.to_ndarray(format="rgb24") for fr in f.decode(video=0)]
    assert len(frames) == 10 and frames[0].shape == (64, 64 * 2 + 8, 3)
    assert (frames[0][:, 64:72] > 240).all()  # the white bar between the two clips


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian chromium not installed")
def test_rating_page_shows_siblings_as_a_family_in_chromium(tmp_path):
    """Clips that start from one moment are rated together: the page shows a family whole, says
    so, and moves to the next family once every clip of this one is rated."""
    from fastapi.testclient import TestClient
    from playwright.sync_api import sync_playwright

    from prefrl.finetuning.rating_runs import make_rating_run

    segs = random_segments(ENV, count=5, length=10)[:5]
    infos = [{"family": 0}] * 3 + [{"family": 1}] * 2
    run = run_info(make_rating_run(tmp_path / "rate", ENV, segs, infos, 64))
    with TestClient(create_app(run)) as client:
        got = client.get("/api/rate/next?n=2").json()  # the family, not n, decides
        assert got["family"] == 0 and len(got["segments"]) == 3
    count = "document.querySelectorAll('#clips figure').length"
    with served(create_app(run)) as port, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(f"http://127.0.0.1:{port}/rate")
        page.wait_for_function(f"{count} == 3")
        assert "These 3 clips start from the same moment" in page.inner_text("#family")
        first = page.locator("#clips figure").first
        first.locator("input[type=number]").fill("90")
        assert first.locator("input[type=range]").input_value() == "90"  # one rating, two views
        first.locator(".save").click()
        page.wait_for_function(f"{count} == 2")
        page.wait_for_timeout(300)  # the reload after a save brings no clip of another family
        assert page.evaluate(count) == 2
        page.locator("#clips figure").first.locator(".save").click()
        page.wait_for_function(f"{count} == 1")  # saved: the clip leaves before the next click
        page.locator("#clips figure").first.locator(".save").click()
        page.wait_for_function(f"{count} == 2 && !document.getElementById('family').hidden")
        ids = page.evaluate("[...document.querySelectorAll('#clips figure')]"
                            ".map(f => Number(f.dataset.segment))")  # fmt: skip
        browser.close()
    with FeedbackStore(run.store) as store:
        rows = store.ratings(store.run_id(run.uid))
        infos_now = store.segment_infos(ids)
    assert sorted(v for _, v, _ in rows) == [50, 50, 90]
    assert {info["family"] for info in infos_now.values()} == {1}


def test_compare_page_in_chromium(run, tmp_path):
    from playwright.sync_api import sync_playwright

    _rendered(run)
    with served(create_app(run)) as port, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(f"http://127.0.0.1:{port}/compare")
        page.wait_for_function("window.prefrlPair !== undefined && window.prefrlPair !== null")
        first = page.evaluate("window.prefrlPair")
        # Both clips load and play.
        page.wait_for_function(
            "document.getElementById('left').readyState >= 2 && "
            "document.getElementById('right').readyState >= 2"
        )
        page.screenshot(path=str(tmp_path / "compare.png"))
        # Sound (the piano's clips have it): one clip at a time, s cycles off/left/right.
        muted = "[document.getElementById('left').muted, document.getElementById('right').muted]"
        assert page.evaluate(muted) == [True, True]
        page.keyboard.press("s")
        assert page.evaluate(muted) == [False, True]
        page.keyboard.press("s")
        assert page.evaluate(muted) == [True, False]
        page.keyboard.press("ArrowLeft")
        page.wait_for_function(f"window.prefrlPair !== {first}")
        second = page.evaluate("window.prefrlPair")
        assert page.evaluate(muted) == [True, False]  # the choice holds for the next pair
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"window.prefrlPair !== {second}")
        page.click("text=Equally good")
        page.wait_for_function("document.getElementById('status').textContent"
                               ".includes('Labels given: 3')")  # fmt: skip
        browser.close()
    with FeedbackStore(run.store) as store:
        labels = store.labels(store.run_id(run.uid))
    assert [(x.query_id, x.label.name) for x in labels][:2] == [(first, "LEFT"), (second, "RIGHT")]
    assert [x.label.name for x in labels] == ["LEFT", "RIGHT", "EQUAL"]
    assert all(x.response_ms is not None and x.response_ms >= 0 for x in labels)
    assert Path(tmp_path / "compare.png").stat().st_size > 0


def test_a_taken_port_is_said_to_be_held_by_what(run):
    """A trainer finding its port taken serves on the next free one and says by what it was
    taken; `prefrl serve` refuses before it prints a link."""
    with served(create_app(run)) as port:  # this run's server, left over from before
        free, why = take_port(port, run.uid)
        assert free != port and why == (
            f"port {port} on 127.0.0.1 is taken by this run's labelling server from before "
            f"(pid {os.getpid()}): serving on port {free} instead; stop the old one with: "
            f"kill {os.getpid()}"
        )
        out = subprocess.run([sys.executable, "-m", "prefrl", "serve", str(run.run_dir), "--port",
                              str(port), "--no-render"], check=False, capture_output=True,
                             text=True, timeout=300)  # fmt: skip
        assert out.returncode == 2 and "label at" not in out.stdout, out
        assert (f"port {port} on 127.0.0.1 is taken by this run's labelling server from before "
                f"(pid {os.getpid()}): stop it (kill {os.getpid()}), or serve on another port: "
                f"--port {port + 1}") in out.stderr, out.stderr  # fmt: skip
    with socket.socket() as other:  # a program that is no prefrl server
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        free, why = take_port(port, run.uid)
        assert free != port and "taken by another program, not a prefrl labelling server" in why


def test_compare_page_counts_live_clears_an_answered_pair_and_says_the_run_finished(run):
    """Two annotators at once: each answer shows the run's counts as they are after it; with
    no pair left the answered pair goes, the keys store nothing, and the page says that the
    run has finished, with its labels and what to run next."""
    from playwright.sync_api import sync_playwright

    _rendered(run)
    (run.run_dir / "metrics.jsonl").write_text(json.dumps({"step": 1000}) + "\n")  # finished
    with FeedbackStore(run.store) as store:
        bob = {"X-Prefrl-Token": store.add_annotator("bob")}
    status = "document.getElementById('status').textContent"
    with served(create_app(run)) as port, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{port}/compare")
        page.wait_for_function(f"{status}.includes('Pairs left to label: 6.')")  # (3 held)
        # Pairs are left: offered, under a notice that the run has finished.
        assert page.inner_text("#notice").startswith("The run has finished (1,000 steps): "
                                                     "labels given now are trained on")  # fmt: skip
        # Bob labels two pairs beside this page.
        held = page.request.get(f"http://127.0.0.1:{port}/api/next?n=2", headers=bob).json()
        for q in held["queries"]:
            r = page.request.post(f"http://127.0.0.1:{port}/api/label", headers=bob,
                                  data={"query_id": q["id"], "label": "right"})  # fmt: skip
            assert r.ok
        for given in (3, 4, 5, 6):  # this page's answers, counted with bob's, at once
            shown = page.evaluate("window.prefrlPair")
            page.keyboard.press("ArrowLeft")
            page.wait_for_function(f"window.prefrlPair !== {shown}")
            then = f"Pairs left to label: {6 - given}." if given < 6 else "The run has finished"
            page.wait_for_function(
                f"{status}.startsWith('Labels given: {given}. ') && {status}.includes('{then}')"
            )
        # No pair left: the last one is gone from the screen, and the run has finished.
        text = page.evaluate(status)
        assert text.startswith("Labels given: 6. The run has finished (1,000 steps) with 6 "
                               f"label(s). Next: see what it learned with `prefrl eval "
                               f"{run.run_dir}`"), text  # fmt: skip
        assert page.evaluate("window.prefrlPair") is None
        assert not page.is_visible("#notice")  # (the status says it now)
        assert page.evaluate("[...document.querySelectorAll('video')].every(v => !v.src)")
        assert page.evaluate("[...document.querySelectorAll('button[data-label]')]"
                             ".every(b => b.disabled)")  # fmt: skip
        page.keyboard.press("ArrowRight")
        page.wait_for_timeout(500)
        browser.close()
    with FeedbackStore(run.store) as store:
        labels = store.labels(store.run_id(run.uid))
    assert sorted(x.label.name for x in labels) == ["LEFT"] * 4 + ["RIGHT"] * 2


def test_run_page_legend_labels_have_their_lines_colours(run):
    """The learning curve's legend names each line in that line's colour."""
    from playwright.sync_api import sync_playwright

    rows = [{"step": s, "eval/return_mean": s / 100, "eval/learned_return_mean": s / 200}
            for s in (100, 200, 300)]  # fmt: skip
    (run.run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with served(create_app(run)) as port, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{port}/run")
        page.wait_for_function("document.querySelectorAll('#curve polyline').length == 2")
        lines = page.evaluate("[...document.querySelectorAll('#curve polyline')]"
                              ".map(l => getComputedStyle(l).stroke)")  # fmt: skip
        legend = page.evaluate("Object.fromEntries([...document.querySelectorAll('#curve text')]"
                               ".map(t => [t.textContent, getComputedStyle(t).fill]))")  # fmt: skip
        browser.close()
    assert lines == ["rgb(102, 204, 255)", "rgb(255, 204, 102)"]
    assert legend["true return"] == lines[0] and legend["learned return"] == lines[1]


def _no_nan(constant: str):
    raise ValueError(f"{constant} is not JSON")


def test_non_finite_numbers_are_refused_with_a_json_answer(run):
    """NaN, Infinity and 1e400 (read as infinity) are refused (422) like any bad number, in an
    answer that is itself JSON (echoed as they came, they made it a 500)."""
    from fastapi.testclient import TestClient

    nan, inf = float("nan"), float("inf")
    with TestClient(create_app(run)) as client:
        for path, body in [
            ("/api/label", json.dumps({"query_id": nan, "label": "left"})),
            ("/api/label", json.dumps({"query_id": inf, "label": "left"})),
            ("/api/label", '{"query_id": 15, "label": "left", "response_ms": 1e400}'),
            ("/api/release", json.dumps({"query_ids": [-inf]})),
            ("/api/rating", json.dumps({"segment_id": nan, "rating": 50})),
        ]:  # fmt: skip
            r = client.post(path, content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 422, (body, r.text)
            detail = json.loads(r.text, parse_constant=_no_nan)["detail"]
            assert "finite number" in detail[0]["msg"], r.text
            assert detail[0]["input"] in ("nan", "inf", "-inf"), r.text


def test_a_finished_or_stopped_run_with_open_pairs_says_so_above_them(run):
    """Pairs left when the trainer ended are still offered, under a notice that the run has
    finished (or stopped) and that their labels are trained on once it is resumed; while a
    trainer runs, no notice."""
    from fastapi.testclient import TestClient

    from prefrl.rundir.workers import hold_trainer

    _rendered(run)
    (run.run_dir / "metrics.jsonl").write_text(json.dumps({"step": 1000}) + "\n")  # finished
    finished = (
        f"The run has finished (1,000 steps): labels given now are trained on when it is "
        f"trained further: `prefrl train --resume {run.run_dir} --steps 2000`."
    )
    with TestClient(create_app(run)) as client:
        got = client.get("/api/next?n=1").json()
        assert len(got["queries"]) == 1 and got["notice"] == finished
    out = io.StringIO()
    with FeedbackStore(run.store) as store:
        assert label_in_terminal(store, run.uid, run.run_dir, inp=io.StringIO("l\nq\n"), out=out,
                                 open_clips=False) == 1  # fmt: skip
    assert out.getvalue().startswith(f"\n{finished}\n\npairs left: 6\n"), out.getvalue()
    (run.run_dir / "metrics.jsonl").write_text(json.dumps({"step": 500}) + "\n")  # stopped
    with TestClient(create_app(run)) as client:
        assert client.get("/api/next?n=1").json()["notice"] == (
            "The trainer is not running (it stopped at step 500 of 1,000): labels given now are "
            f"trained on when it is resumed: `prefrl train --resume {run.run_dir}`."
        )
    held = hold_trainer(run.run_dir)  # a trainer runs: nothing to say
    try:
        with TestClient(create_app(run)) as client:
            assert client.get("/api/next?n=1").json()["notice"] is None
        out = io.StringIO()
        with FeedbackStore(run.store) as store:
            label_in_terminal(store, run.uid, run.run_dir, inp=io.StringIO("q\n"), out=out,
                              open_clips=False)  # fmt: skip
        assert out.getvalue().startswith("\npairs left: 5\n"), out.getvalue()
    finally:
        held.close()
