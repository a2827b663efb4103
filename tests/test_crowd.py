"""A team labelling at once: several server processes (`prefrl serve --workers 2`) on one real
PostgreSQL store, a share of pairs labelled twice to measure agreement, the run page that
updates itself while people label (in a real Chromium), clips served from memory, and the load
benchmark's own footing (benchmarks/web_load.py)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx2 as httpx
import pytest
from conftest import free_port, launch_chromium, served
from test_store import make_segments

from prefrl.feedback.store import FeedbackStore, run_info, wants_second_label
from prefrl.web.app import create_app

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import web_load  # (a benchmark script, found through the path above)

ENV = "toy:point-reach"


def make_run(run_dir: Path, store_target: str, n: int) -> list[int]:
    """A run directory whose store holds `n` open pairs with (stand-in) clips."""
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"env": ENV, "store": store_target,
                                                     "steps": 1000}))  # fmt: skip
    with FeedbackStore(store_target) as store:
        run_id = store.run_id(run_dir.name, env=ENV)
        left, right = make_segments(range(n)), make_segments(range(n, 2 * n), seed=1)
        rows = store.add_queries(run_id, run_dir, range(n), left, right)
        for seg in store.segment_ids(run_id):
            store.add_clip(seg, f"clips/seg{seg:09d}.mp4", 64, 64, 5, 30.0)
    return rows


def test_two_server_processes_on_postgresql_never_hand_out_a_pair_twice(tmp_path, postgres_server):
    url = postgres_server()
    rows = make_run(tmp_path / "team", url, n=120)
    with FeedbackStore(url) as store:
        tokens = {name: store.add_annotator(name) for name in [f"a{i}" for i in range(8)]}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    handed: dict[int, set[str]] = {}
    acknowledged: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()

    def annotator(name: str) -> None:
        # (a generous timeout: a loaded machine answers late)
        with httpx.Client(base_url=base, headers={"X-Prefrl-Token": tokens[name]},
                          timeout=300) as client:  # fmt: skip
            while True:
                got = client.get("/api/next?n=2").json()["queries"]
                if not got:
                    return
                with lock:
                    for q in got:
                        handed.setdefault(q["id"], set()).add(name)
                for q in got:
                    r = client.post("/api/label", json={"query_id": q["id"], "label": "left"})
                    if r.status_code != 200 or not r.json()["created"]:
                        errors.append(f"{name} {q['id']}: {r.status_code} {r.text}")
                    with lock:
                        acknowledged.append(q["id"])

    # (waited for as long as it starts, on a busy machine too; stopped whatever happens)
    with web_load.serving(tmp_path / "team", url, port, workers=2) as serve:
        workers = subprocess.run(["pgrep", "-f", "-P", str(serve.pid), "multiprocessing"],
                                 check=False, capture_output=True, text=True).stdout.split()  # fmt: skip
        assert len(workers) >= 2, f"expected 2 server processes, found {workers}"
        threads = [threading.Thread(target=annotator, args=(n,)) for n in tokens]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert serve.poll() is not None
    assert errors == []
    assert {q: names for q, names in handed.items() if len(names) > 1} == {}
    assert sorted(acknowledged) == sorted(rows)
    with FeedbackStore(url) as store:
        labels = store.labels(store.run_id("team"))
    assert sorted(x.query_id for x in labels) == sorted(rows)  # each stored exactly once
    assert len({x.annotator for x in labels}) > 1


def test_the_overlap_share_reaches_a_second_annotator_and_the_status_counts_agreement(tmp_path):
    from fastapi.testclient import TestClient

    rows = make_run(tmp_path / "two", str(tmp_path / "two"), n=8)
    run = run_info(tmp_path / "two")
    with FeedbackStore(run.store) as store:
        ana, ben = (store.add_annotator(n) for n in ("ana", "ben"))
    twice = {q for q in rows if wants_second_label(q, 0.5)}
    assert 0 < len(twice) < len(rows)
    with TestClient(create_app(run, require_token=True, overlap=0.5)) as client:
        for token, label in ((ana, "left"), (ben, "right")):
            while got := client.get(f"/api/next?n=3&token={token}").json()["queries"]:
                for q in got:
                    r = client.post(f"/api/label?token={token}",
                                    json={"query_id": q["id"], "label": label})  # fmt: skip
                    assert r.status_code == 200 and r.json()["created"]
                    assert r.json()["second"] == (token == ben)  # (ana answers first)
        status = client.get(f"/api/status?token={ana}").json()
    assert status["labels"] == len(rows)  # first labels: what the trainer learns from
    assert status["doubly_labelled"] == len(twice) and status["agreement"] == 0.0
    assert status["waiting_for_second"] == 0 and status["overlap"] == 0.5
    by_name = {a["name"]: a for a in status["annotators"]}
    assert by_name["ana"]["labels"] + by_name["ben"]["labels"] == len(rows) + len(twice)
    assert by_name["ben"]["doubly_labelled"] == len(twice) and by_name["ben"]["agreed"] == 0
    with pytest.raises(ValueError, match="overlap -0.1 is invalid"):
        create_app(run, overlap=-0.1)


def test_the_run_page_updates_itself_in_chromium(tmp_path):
    from playwright.sync_api import sync_playwright

    rows = make_run(tmp_path / "live", str(tmp_path / "live"), n=4)
    run = run_info(tmp_path / "live")
    metrics = [{"step": 1000, "eval/return_mean": -5.0, "eval/learned_return_mean": 0.1},
               {"step": 2000, "reward/val_accuracy": 0.75, "feedback/labels": 2.0}]  # fmt: skip
    (run.run_dir / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    with FeedbackStore(run.store) as store:
        store.add_label(rows[0], "left", "scripted:oracle")
    with served(create_app(run)) as port, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(f"http://127.0.0.1:{port}/run")
        page.wait_for_function("window.prefrlStatus !== undefined")
        assert page.text_content("#labels") == "1"
        assert page.locator("#curve polyline").count() == 2  # true and learned returns
        assert page.locator("#scatter text.empty").count() == 1  # no fit scatter yet
        # Labels, a fit and an evaluation arrive while the page is open: it shows them unasked.
        with FeedbackStore(run.store) as store:
            for q in rows[1:3]:
                store.add_label(q, "right", "scripted:oracle")
        with open(run.run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps({"step": 3000, "eval/return_mean": 4.0}) + "\n")
        (run.run_dir / "reward_fit.json").write_text(
            json.dumps({"step": 3000, "true": [1.0, 2.0, 3.0], "learned": [0.1, 0.3, 0.2]})
        )
        page.wait_for_function("document.getElementById('labels').textContent === '3'",
                               timeout=15000)  # fmt: skip
        page.wait_for_function("document.querySelectorAll('#scatter circle').length === 3")
        assert page.text_content("#counts") == "1 / 2 / 0 / 0"
        assert page.text_content("#step") == "3000 (the run has finished)"  # (of 1000 steps)
        assert page.locator("#accuracy-chart circle").count() == 1
        page.screenshot(path=str(tmp_path / "run.png"))
        browser.close()
    assert os.path.getsize(tmp_path / "run.png") > 0


def test_clips_are_served_whole_or_in_part_and_anew_once_replaced(tmp_path):
    """Clips come from memory once read (most of a clip request's CPU was the file's
    handling): whole, or the range a video element asks for; a clip rendered again is sent
    anew; nothing outside the run's clips folder is sent."""
    from fastapi.testclient import TestClient

    make_run(tmp_path / "c", str(tmp_path / "c"), n=1)
    clips = tmp_path / "c" / "clips"
    clips.mkdir()
    body = bytes(range(256)) * 40
    (clips / "a.mp4").write_bytes(body)
    (tmp_path / "secret.mp4").write_bytes(b"secret")
    (clips / "out.mp4").symlink_to(tmp_path / "secret.mp4")
    with TestClient(create_app(run_info(tmp_path / "c"))) as client:
        for _ in range(2):  # (read from the file, then from memory)
            whole = client.get("/clips/a.mp4")
            assert whole.status_code == 200 and whole.content == body
            assert whole.headers["content-type"] == "video/mp4"
            assert whole.headers["accept-ranges"] == "bytes"
            first = client.get("/clips/a.mp4", headers={"Range": "bytes=0-"})  # (a video's ask)
            assert first.status_code == 206 and first.content == body
            assert first.headers["content-range"] == f"bytes 0-{len(body) - 1}/{len(body)}"
            part = client.get("/clips/a.mp4", headers={"Range": "bytes=100-199"})
            assert part.status_code == 206 and part.content == body[100:200]
        several = client.get("/clips/a.mp4", headers={"Range": "bytes=0-9, 20-29"})
        assert several.status_code == 206  # (answered from the file, as before)
        assert several.headers["content-type"].startswith("multipart/byteranges")
        assert client.get("/clips/a.mp4", headers={"Range": "bytes=99999-"}).status_code == 416
        (clips / "a.mp4").write_bytes(b"rendered again")
        assert client.get("/clips/a.mp4").content == b"rendered again"
        for name in ("missing.mp4", "out.mp4"):
            assert client.get(f"/clips/{name}").status_code == 404, name


def test_the_load_benchmark_waits_for_a_slow_server_and_says_why_one_ended(tmp_path):
    """A busy machine starts the server slowly: the benchmark waits as long as it lives (not a
    fixed minute), says at once why one that ended did, with its output, and stops it."""
    port = free_port()
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "server").write_text("{}")  # (what it answers, once it does)
    slow = subprocess.Popen([sys.executable, "-c", (
        "import http.server, time; time.sleep(3); "
        f"http.server.HTTPServer(('127.0.0.1', {port}), http.server.SimpleHTTPRequestHandler)"
        ".serve_forever()")], cwd=tmp_path)  # fmt: skip
    try:
        web_load.wait_until_serving(slow, port)
    finally:
        web_load.stop(slow)
    assert slow.poll() is not None
    log = tmp_path / "serve.log"
    log.write_text("RuntimeError: port 1 taken\n")
    ended = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(SystemExit, match=r"ended \(exit code 3\) before it served:\n.*port 1"):
        web_load.wait_until_serving(ended, free_port(), log=log)
    never = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        with pytest.raises(SystemExit, match="did not answer within 1 s"):
            web_load.wait_until_serving(never, free_port(), bound_s=1)
    finally:
        web_load.stop(never)
    assert never.poll() is not None


def test_the_load_benchmark_gives_up_as_a_person_would_and_rates_by_the_time_taken():
    """A request unanswered for `--give-up` seconds is abandoned and counted; requests per
    second are of the time the requests took (they go on past the run's seconds); results go
    outside the committed ones unless asked."""
    with socket.socket() as mute:  # (takes connections, never answers)
        mute.bind(("127.0.0.1", 0))
        mute.listen()
        conn = web_load.Connection("127.0.0.1", mute.getsockname()[1], "token")
        log = web_load.new_log()
        got = asyncio.run(conn.timed(log, "next", 0.5, "GET", "/api/next?n=3"))
    assert got is None and [kind for kind, _ in log["gave_up"]] == ["next"]
    assert log["timed"] == [] and conn.writer is None  # (the page, reloaded, connects anew)
    log["timed"] = [("label", 100.0 + i, 0.02) for i in range(31)]  # (answered over 30 s)
    out = web_load.summarise([log], started=100.0, ended=130.0)
    assert out["requests_per_s"] == pytest.approx(31 / 30, abs=0.05) and out["gave_up"] == 1
    assert out["p95_ms"] == pytest.approx(20.0)
    committed = (Path(__file__).resolve().parent.parent / "benchmarks" / "results").resolve()
    assert not web_load.RESULTS.resolve().is_relative_to(committed)
