"""Training with a person as the teacher: the trainer waits only for the first labels, takes later
ones as they come, and loses none when the trainer and the web server are killed mid-labelling."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2
import numpy as np
import pytest
from conftest import PREFRL_WITH_CTRL_C, free_port
from test_online import _config

from prefrl.cli import main
from prefrl.feedback import ScheduleConfig, TeacherConfig
from prefrl.feedback.store import FeedbackStore, NotFound, run_uid
from prefrl.online.learner import train_online
from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.rundir.metrics import read_metrics
from prefrl.rundir.workers import trainer_running


def _answer_like_an_oracle(store: FeedbackStore, run_dir: Path, run_id: int, who: int) -> int:
    """Label every open query by true return, as a careful person would; returns how many."""
    queries = store.assign_queries(run_id, who, n=100)
    if not queries:
        return 0
    left, right = store.query_pairs(run_dir, [q.id for q in queries])
    for q, lr, rr in zip(queries, left.true_returns(), right.true_returns(), strict=True):
        store.add_label(q.id, "right" if rr > lr else "left", source="web", annotator_id=who)
    return len(queries)


def known_run(store: FeedbackStore, run_dir: Path) -> int | None:
    """The store's id of the run in `run_dir`, None until its trainer has registered it."""
    try:
        return store.run_id(run_uid(run_dir), create=False)
    except NotFound:
        return None


def a_person_labelling(run_dir: Path, done: threading.Event, answered: list, first=None):
    """A thread that labels the run's queries as they come, like an oracle, as "pat" (adding
    each batch's count to `answered`) until `done`; `first()` is called once the store exists."""

    def person():
        while not (run_dir / "feedback.db").exists() and not done.is_set():
            time.sleep(0.05)
        if first is not None:
            first()
        with FeedbackStore(run_dir) as store:
            while (run_id := known_run(store, run_dir)) is None and not done.is_set():
                time.sleep(0.05)  # (the trainer registers its run: a person never does)
            who = store.annotator(store.add_annotator("pat"))[0]
            while not done.is_set():
                answered.append(_answer_like_an_oracle(store, run_dir, run_id, who))
                time.sleep(0.05)

    thread = threading.Thread(target=person)
    thread.start()
    return thread


def test_trainer_waits_for_the_first_labels_then_takes_them_as_they_come(tmp_path):
    config = _config(
        tmp_path, teacher=TeacherConfig("terminal"), poll_seconds=0.05, refit_labels=5,
        schedule=ScheduleConfig(budget=40, session_size=20, interval=300),
    )  # fmt: skip
    run_dir = tmp_path / "run"
    answered, done, running = [], threading.Event(), []

    def first():
        time.sleep(1.0)  # the trainer must wait for us
        running.append(trainer_running(run_dir))

    t = a_person_labelling(run_dir, done, answered, first)
    try:
        result = train_online(config)
    finally:
        done.set()
        t.join()
    assert result.labels == 40 == sum(answered)
    # People labelling are told whether a trainer runs (and asks for more).
    assert running == [True] and trainer_running(run_dir) is False
    rows = read_metrics(run_dir)
    fits = [r for r in rows if "reward/val_accuracy" in r]
    # The first fit happened at the first query step: nothing trained on an unfitted reward.
    assert fits[0]["step"] == config.first_query_step
    assert fits[-1]["feedback/labels"] == 40


def _restarted_from_step_0(tmp_path, capsys, steps, timeout, budget, session, asked, answered):
    """A run a person teaches that nobody labels (it goes on after `timeout` s), `asked` pairs
    asked by its end and the first `answered` of them answered, then killed before its first
    checkpoint and started again: the second run's result and what it printed."""
    kw = {"teacher": TeacherConfig("terminal"), "poll_seconds": 0.05, "steps": steps,
          "first_labels_timeout": timeout,
          "schedule": ScheduleConfig(budget=budget, session_size=session, interval=300)}  # fmt: skip
    run_dir = train_online(_config(tmp_path, **kw)).run_dir
    with FeedbackStore(run_dir) as store:
        queries = store.open_queries(store.run_id(run_uid(run_dir)))
        assert len(queries) == asked
        store.add_labels([q.id for q in queries[:answered]], ["left"] * answered, "terminal")
    shutil.rmtree(run_dir / "checkpoints")  # as if killed before its first checkpoint
    capsys.readouterr()
    result = train_online(_config(tmp_path, resume=run_dir, **kw))
    return result, capsys.readouterr().out


def test_a_restart_from_step_0_waits_for_the_rest_of_the_first_session(tmp_path, capsys):
    """A run killed with 12 of its first 20 labels in, before its first checkpoint, starts again
    from step 0: it waits for the other 8 (the one wait is for the whole first session), not
    training on the 12 as if the wait were over."""
    _, out = _restarted_from_step_0(tmp_path, capsys, steps=400, timeout=1.0, budget=40,
                                    session=20, asked=20, answered=12)  # fmt: skip
    assert "no checkpoint yet" in out
    assert "Waiting for your first 20 labels (12 in)" in out and "waiting: 8 label(s) to go" in out
    assert "Only 12 of the first 20 labels after 1 s (first_labels_timeout)" in out


def test_a_restart_from_step_0_with_a_later_session_unanswered_trains_on_its_labels(
    tmp_path, capsys
):
    """Killed before its first checkpoint with its first session answered (4 labels) and a
    second asked but not: started again from step 0 it does not wait (the first session is in)
    and fits its reward model on the 4 at once, fewer than the refit's 10 and with pairs still
    open: without a model the agent has nothing to learn from."""
    result, out = _restarted_from_step_0(tmp_path, capsys, steps=700, timeout=0.5, budget=8,
                                         session=4, asked=8, answered=4)  # fmt: skip
    run_dir = result.run_dir
    assert "no checkpoint yet" in out and "labels in its store are kept" in out
    assert "Waiting for" not in out and "never fitted" not in out
    fits = [r for r in read_metrics(run_dir) if "reward/segment_return_corr" in r]
    assert fits and fits[0]["feedback/labels"] == 4 and result.labels == 4


def test_a_stop_at_the_last_step_finishes_and_a_resume_with_nothing_to_train_serves_nothing(
    tmp_path, capsys
):
    """Ctrl-C (here a callback's stop) at the last step: the run has finished, and says how to
    train it further, not to resume it; resuming it without a larger --steps starts no
    labelling server for labels it would never train on. The last step's checkpoint is written
    once."""
    saved = []

    def stop_at_the_end(event):
        if event.kind == "checkpoint":
            saved.append(event.step)
        return not (event.kind == "eval" and event.step == 600)

    result = train_online(_config(tmp_path, steps=600, eval_interval=300), stop_at_the_end)
    out = " ".join(capsys.readouterr().out.split())  # (said above the bar: wrapped)
    assert not result.interrupted and result.steps == 600 and result.final_eval is not None
    assert saved.count(600) == 1
    assert ("stopped at step 600, the run's last: it has finished. To train it further, "
            "resume it with a larger --steps (the total to reach)") in out  # fmt: skip
    code = main(["train", "--resume", str(result.run_dir), "--teacher", "web", "--web-port",
                 str(free_port()), "--no-progress"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "--steps 600 leaves nothing to train" in out
    assert "label at" not in out and "nothing left to train" in out


def _children(pid: int) -> list[int]:
    tasks = Path(f"/proc/{pid}/task")
    return [int(c) for t in tasks.iterdir() for c in (t / "children").read_text().split()]


def _alive(pid: int) -> bool:
    try:  # a zombie (exited, not yet reaped by whoever adopted it) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_kill_9_trainer_and_server_loses_no_acknowledged_label(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    common = [
        "--env", "toy:point-reach", "--teacher", "terminal", "--warmstart-steps", "300",
        "--segment-length", "10", "--schedule.budget", "400", "--schedule.session-size", "40",
        "--schedule.interval", "200", "--reward.hidden-dims", "32", "32",
        "--reward.max-epochs", "3", "--sac.hidden-dims", "32", "32", "--eval-interval",
        "2000", "--eval-episodes", "2", "--no-video", "--checkpoint-interval", "400",
        "--buffer-size", "5000", "--runs-dir", str(tmp_path), "--name", "run", "--no-progress",
        "--poll-seconds", "0.1",
    ]  # fmt: skip
    trainer = subprocess.Popen([sys.executable, "-m", "prefrl", "train", "--steps", "100000",
                                *common], env=env)  # fmt: skip
    run_dir = tmp_path / "run"
    port = free_port()
    deadline = time.time() + 300  # generous: a loaded machine starts three Python processes here
    while not (run_dir / "feedback.db").exists():
        assert time.time() < deadline and trainer.poll() is None, "the trainer did not start"
        time.sleep(0.2)
    server = subprocess.Popen([sys.executable, "-m", "prefrl", "serve", str(run_dir), "--port",
                               str(port), "--clip-size", "32"], env=env)  # fmt: skip
    acknowledged: set[int] = set()
    rng = np.random.default_rng(0)
    try:
        with httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            while len(acknowledged) < 60:
                assert time.time() < deadline, f"only {len(acknowledged)} labels in 300 s"
                try:
                    queries = client.get("/api/next?n=3").json()["queries"]
                except httpx2.TransportError:
                    time.sleep(0.2)  # the server is still starting
                    continue
                for q in queries:
                    label = ["left", "right", "equal", "skip"][rng.integers(4)]
                    r = client.post("/api/label", json={"query_id": q["id"], "label": label})
                    if r.status_code == 200:
                        acknowledged.add(q["id"])
                if not queries:
                    time.sleep(0.1)
            renderers = _children(server.pid)
            assert renderers, "prefrl serve started no clip renderer"
            # Mid-labelling, both die without a chance to clean up.
            for proc in (trainer, server):
                proc.send_signal(signal.SIGKILL)
            for proc in (trainer, server):
                proc.wait(timeout=30)
    finally:
        for proc in (trainer, server):
            if proc.poll() is None:
                proc.kill()
    with FeedbackStore(run_dir) as store:
        stored = {x.query_id for x in store.labels(store.run_id(run_uid(run_dir)))}
    assert acknowledged <= stored
    # The server's renderer does not outlive it.
    deadline = time.time() + 120  # (the renderer may still be importing when its server dies)
    while any(_alive(pid) for pid in renderers):
        assert time.time() < deadline, f"renderer {renderers} still running after its server died"
        time.sleep(0.2)
    # The resumed run takes every stored label, including those given after its checkpoint
    # (resumed with the scripted teacher so that it does not wait for a person again).
    ckpt_step = json.loads((latest_checkpoint(run_dir) / "loop.json").read_text())["step"]
    steps = ckpt_step + 200
    out = subprocess.run(
        [sys.executable, "-m", "prefrl", "train", "--resume", str(run_dir), "--steps", str(steps),
         "--teacher", "oracle"],
        check=False, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    labels_line = next(line for line in out.stdout.splitlines() if line.startswith("labels:"))
    assert int(labels_line.split()[1]) >= len(stored)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["steps"] == steps


def _descendants(pid: int) -> list[int]:
    found = []
    for child in _children(pid):
        found += [child, *_descendants(child)]
    return found


def _until_served(trainer: subprocess.Popen) -> str:
    """What a trainer prints up to its labelling link ("label at ...", its last line); the
    test fails with what it printed if it ends first."""
    lines = [trainer.stdout.readline()]
    while lines[-1] and not lines[-1].startswith("label at "):
        lines.append(trainer.stdout.readline())
    if not lines[-1]:
        trainer.kill()
        pytest.fail("".join(lines))
    return "".join(lines)


def _served_link(trainer: subprocess.Popen) -> str:
    return _until_served(trainer).splitlines()[-1].split()[2]


def test_a_killed_trainer_takes_its_labelling_server_with_it(tmp_path):
    """`kill -9` of a trainer labelled in the browser leaves no server holding its port; a
    trainer whose port is taken says by what and serves on the next free one."""
    from conftest import served

    from prefrl.feedback.store import run_info
    from prefrl.web.app import create_app

    other = tmp_path / "other"  # another run's labelling server holds the port asked for
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"env": "toy:point-reach", "steps": 10}))
    with FeedbackStore(other) as store:
        store.run_id(other.name, env="toy:point-reach")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    with served(create_app(run_info(other))) as taken:
        trainer = subprocess.Popen(
            [sys.executable, "-m", "prefrl", "train", "--env", "toy:point-reach", "--teacher",
             "web", "--web-port", str(taken), "--steps", "100000", "--warmstart-steps", "300",
             "--segment-length", "10", "--schedule.budget", "40", "--schedule.session-size",
             "20", "--reward.hidden-dims", "32", "32", "--sac.hidden-dims", "32", "32",
             "--no-video", "--runs-dir", str(tmp_path), "--name", "run", "--no-progress"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        out = _until_served(trainer)
    assert (f"port {taken} on 127.0.0.1 is taken by the labelling server of another run, "
            f"'other' (pid {os.getpid()}): serving on port") in out, out  # fmt: skip
    port = int(out.splitlines()[-1].split("http://127.0.0.1:")[1].split("/")[0])
    assert port != taken
    try:
        deadline = time.time() + 300  # (a loaded machine starts the server slowly)
        while True:
            try:
                info = httpx2.get(f"http://127.0.0.1:{port}/api/server", timeout=10).json()
                break
            except httpx2.TransportError:
                assert time.time() < deadline and trainer.poll() is None, "no server came up"
                time.sleep(0.5)
        helpers = _descendants(trainer.pid)
        assert info["pid"] in helpers and info["run"] == "run"
    finally:
        trainer.kill()  # SIGKILL: the trainer has no chance to stop its server
        trainer.wait(timeout=60)
    deadline = time.time() + 120  # (the renderer may still be importing)
    while alive := [p for p in helpers if _alive(p)]:
        assert time.time() < deadline, f"{alive} still running after their trainer was killed"
        time.sleep(0.2)
    import socket

    with socket.socket() as s:  # the port is free again: a resumed trainer can serve on it
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))


def test_a_person_in_chromium_labels_on_through_a_kill_9_of_their_trainer(tmp_path):
    """A person answers in Chromium; the trainer is killed with SIGKILL (its server with it); an
    answer given meanwhile is said to be not saved yet; the trainer started again serves on the
    same port, and that answer is stored, once, without the person doing anything."""
    from conftest import launch_chromium
    from playwright.sync_api import sync_playwright

    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    port = free_port()
    command = [sys.executable, "-m", "prefrl", "train", "--env", "toy:point-reach", "--teacher",
               "web", "--web-port", str(port), "--steps", "100000", "--warmstart-steps", "300",
               "--segment-length", "10", "--schedule.budget", "40", "--schedule.session-size",
               "20", "--reward.hidden-dims", "32", "32", "--sac.hidden-dims", "32", "32",
               "--no-video", "--runs-dir", str(tmp_path), "--name", "run", "--no-progress"]  # fmt: skip
    resume = [*command[:4], "--resume", str(tmp_path / "run"), "--no-progress"]
    status = "document.getElementById('status').textContent"

    def stored() -> int:
        with FeedbackStore(tmp_path / "run", create=False) as store:
            return sum(
                store.label_counts(store.run_id(run_uid(tmp_path / "run"), create=False)).values()
            )

    trainer = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        link = _served_link(trainer)
        assert link.startswith(f"http://127.0.0.1:{port}/")
        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page()
            page.goto(link)
            page.wait_for_function("window.prefrlPair !== null && window.prefrlPair !== undefined",
                                   timeout=300_000)  # fmt: skip
            first = page.evaluate("window.prefrlPair")
            page.keyboard.press("ArrowLeft")
            page.wait_for_function(f"window.prefrlPair !== {first}", timeout=60_000)
            assert stored() == 1
            helpers = _descendants(trainer.pid)
            trainer.kill()
            trainer.wait(timeout=60)
            deadline = time.time() + 120
            while [h for h in helpers if _alive(h)]:
                assert time.time() < deadline, "the server outlived its trainer"
                time.sleep(0.2)
            page.keyboard.press("ArrowRight")  # (the page holds the next pair: answered now)
            page.wait_for_function(f"{status}.startsWith('Not saved yet (server unreachable)')")
            assert stored() == 1
            trainer = subprocess.Popen(resume, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)  # fmt: skip
            assert _served_link(trainer) == link  # the same port, the same link
            page.wait_for_function(f"{status}.startsWith('Labels given: 2.')", timeout=300_000)
            browser.close()
        with FeedbackStore(tmp_path / "run", create=False) as store:
            labels = store.labels(store.run_id(run_uid(tmp_path / "run"), create=False))
        assert sorted(x.label.name for x in labels) == ["LEFT", "RIGHT"]
    finally:
        trainer.kill()
        trainer.wait(timeout=60)


def test_ctrl_c_in_the_terminal_stops_a_trainer_waiting_for_labels_without_a_server_failure(
    tmp_path,
):
    """A terminal's Ctrl-C goes to its whole foreground group: the labelling server is not in
    it (the trainer stops it), so its death is not reported as a failure and restarted while
    the trainer stops."""
    port = free_port()
    trainer = subprocess.Popen(
        [*PREFRL_WITH_CTRL_C, "train", "--env", "toy:point-reach", "--teacher", "web",
         "--web-port", str(port), "--steps", "100000", "--warmstart-steps", "300",
         "--segment-length", "10", "--reward.hidden-dims", "32", "32", "--sac.hidden-dims",
         "32", "32", "--no-video", "--runs-dir", str(tmp_path), "--name", "run", "--no-progress"],
        env={**os.environ, "JAX_PLATFORMS": "cpu"}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        lines = [trainer.stdout.readline()]
        while lines[-1] and "Waiting for your first" not in lines[-1]:
            lines.append(trainer.stdout.readline())
        assert lines[-1], "".join(lines)
        server = httpx2.get(f"http://127.0.0.1:{port}/api/server", timeout=60).json()["pid"]
        assert os.getpgid(server) != os.getpgid(trainer.pid)
        os.killpg(trainer.pid, signal.SIGINT)  # (as a terminal sends Ctrl-C)
        trainer.wait(timeout=300)  # (what it prints after the signal fits in the pipe)
        out = "".join(lines) + trainer.stdout.read()
    finally:
        trainer.kill()
    assert "stopped" in out and "labelling server stopped" not in out, out
    assert "Traceback" not in out, out
    # (the page to label on is the trainer's own server's, not a second one to start)
    assert f"Label in the browser at http://127.0.0.1:{port}/compare or" in " ".join(out.split())
