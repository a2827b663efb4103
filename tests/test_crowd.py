"""A team labelling at once: several server processes (`prefrl serve --workers 2`) on one real
PostgreSQL store, a share of pairs labelled twice to measure agreement, and the run page that
updates itself while people label (in a real Chromium)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2 as httpx
import pytest
from conftest import free_port, launch_chromium, served
from test_store import make_segments

from prefrl.feedback.store import FeedbackStore, run_info, wants_second_label
from prefrl.web.app import create_app

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
    serve = subprocess.Popen(
        [sys.executable, "-m", "prefrl", "serve", str(tmp_path / "team"), "--store", url,
         "--no-render", "--workers", "2", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    handed: dict[int, set[str]] = {}
    acknowledged: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()

    def annotator(name: str) -> None:
        with httpx.Client(base_url=base, headers={"X-Prefrl-Token": tokens[name]},
                          timeout=30) as client:  # fmt: skip
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

    try:
        deadline = time.monotonic() + 60
        while True:  # until both processes serve
            try:
                httpx.get(f"{base}/api/status", timeout=1)
                break
            except httpx.TransportError:
                assert serve.poll() is None, serve.stdout.read()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        workers = subprocess.run(["pgrep", "-f", "-P", str(serve.pid), "multiprocessing"],
                                 check=False, capture_output=True, text=True).stdout.split()  # fmt: skip
        assert len(workers) >= 2, f"expected 2 server processes, found {workers}"
        threads = [threading.Thread(target=annotator, args=(n,)) for n in tokens]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        serve.terminate()
        serve.wait(timeout=30)
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
