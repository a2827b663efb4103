"""Fault injection on the human labelling path: two annotators label through `prefrl serve`
while the trainer (every kill), the server and the clip renderer (every third kill, in turn)
are killed with SIGKILL at random moments and started again (`--resume` for the trainer); at the end every acknowledged label must be
stored once, on the pair whose clips were shown, and the trainer must have trained on exactly
the stored pairs.

    python benchmarks/label_faults.py --kills 20      # writes benchmarks/results/label_faults.json

`tests/test_faults.py` runs the same harness with a few kills.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from prefrl.data import PreferenceData
from prefrl.feedback.store import FeedbackStore, NotFound, run_uid
from prefrl.rundir.checkpoints import latest_checkpoint

TRAIN = [
    "--env", "toy:point-reach", "--teacher", "terminal", "--warmstart-steps", "300",
    "--segment-length", "10", "--schedule.budget", "100000", "--schedule.session-size", "20",
    "--schedule.interval", "200", "--reward.hidden-dims", "32", "32", "--reward.max-epochs",
    "3", "--sac.hidden-dims", "32", "32", "--eval-interval", "100000", "--eval-episodes",
    "2", "--no-video", "--checkpoint-interval", "200", "--buffer-size", "20000",
    "--no-progress", "--poll-seconds", "0.1", "--steps", "1000000",
]  # fmt: skip
CLIP = re.compile(r"/clips/seg(\d+)\.mp4")


def _prefrl(*args: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "prefrl", *args], env=env, stdout=out,
                                stderr=subprocess.STDOUT)  # fmt: skip


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Annotator(threading.Thread):
    """Labels whatever the server hands it, as fast as a hurried person; keeps what it was
    shown (the clips' segment ids) for every label the server acknowledged."""

    def __init__(self, port: int, token: str, seed: int):
        super().__init__(daemon=True)
        self.port, self.token, self.rng = port, token, np.random.default_rng(seed)
        self.acknowledged: dict[int, tuple[str, int, int]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        import httpx2

        headers = {"X-Prefrl-Token": self.token}
        with httpx2.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10) as client:
            while not self.stop.is_set():
                try:
                    queries = client.get("/api/next?n=1", headers=headers).json()["queries"]
                    for q in queries:
                        left, right = (int(CLIP.search(q[s]).group(1)) for s in ("left", "right"))
                        label = ("left", "right", "equal", "skip")[self.rng.integers(4)]
                        r = client.post("/api/label", headers=headers,
                                        json={"query_id": q["id"], "label": label})  # fmt: skip
                        if r.status_code == 200:
                            self.acknowledged[q["id"]] = (label, left, right)
                    time.sleep(0.05 if queries else 0.3)
                except (httpx2.TransportError, ValueError, KeyError):
                    time.sleep(0.3)  # the server is down or starting


def _children(pid: int) -> list[int]:
    try:
        tasks = Path(f"/proc/{pid}/task")
        return [int(c) for t in tasks.iterdir() for c in (t / "children").read_text().split()]
    except FileNotFoundError:
        return []


def stored_run(store: FeedbackStore, run_dir: Path) -> int | None:
    """The run's id in its store, or None while the trainer has yet to add it (its store's file
    exists a moment before the run's row: a busy machine widens that moment)."""
    try:
        return store.run_id(run_uid(run_dir), create=False)
    except NotFound:
        return None


def run_faults(workdir: Path, kills: int, seed: int = 0, log=print) -> dict:
    rng = np.random.default_rng(seed)
    run_dir, logs = workdir / "run", workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    trainer = _prefrl("train", *TRAIN, "--runs-dir", str(workdir), "--name", "run",
                      log=logs / "trainer.log")  # fmt: skip
    deadline = time.time() + 300
    try:  # (the trainer is not left running when it cannot be reached)
        while not (run_dir / "feedback.db").exists():
            assert time.time() < deadline and trainer.poll() is None, "the trainer did not start"
            time.sleep(0.2)
        with FeedbackStore(run_dir) as store:
            tokens = [store.add_annotator(name) for name in ("ana", "ben")]
    except BaseException:
        trainer.kill()
        trainer.wait()
        raise
    port = _free_port()

    def serve():
        return _prefrl("serve", str(run_dir), "--port", str(port), "--clip-size", "32",
                       log=logs / "server.log")  # fmt: skip

    server = serve()
    annotators = [Annotator(port, t, seed + i) for i, t in enumerate(tokens)]
    for a in annotators:
        a.start()
    killed = {"trainer": 0, "server": 0, "renderer": 0}

    def asked() -> int:
        with FeedbackStore(run_dir, create=False) as store:
            run = stored_run(store, run_dir)
            return 0 if run is None else store.query_count(run)

    try:
        for k in range(kills):
            # Each kill comes at a random moment after the trainer has asked new questions
            # since it (re)started, so that every kill falls while people label.
            before, waited = asked(), time.time()
            while asked() == before and time.time() - waited < 120:
                time.sleep(0.2)
            time.sleep(float(rng.uniform(0.0, 4.0)))
            # Every kill takes the trainer; every third also the server or its renderer.
            victims = ["trainer"] + ([("server", "renderer")[(k // 3) % 2]] if k % 3 == 2 else [])
            for victim in victims:
                if victim == "trainer":
                    trainer.send_signal(signal.SIGKILL)
                    trainer.wait()
                    trainer = _prefrl("train", "--resume", str(run_dir), "--no-progress",
                                      log=logs / "trainer.log")  # fmt: skip
                elif victim == "server":
                    server.send_signal(signal.SIGKILL)
                    server.wait()
                    server = serve()
                else:
                    for pid in _children(server.pid):
                        os.kill(pid, signal.SIGKILL)
                killed[victim] += 1
            log(f"kill {k + 1}/{kills}: {' and '.join(victims)}; acknowledged so far "
                f"{sum(len(a.acknowledged) for a in annotators)}")  # fmt: skip
        time.sleep(5.0)
    finally:
        for a in annotators:
            a.stop.set()
        for a in annotators:
            a.join(timeout=30)
        for proc in (trainer, server):
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
    shown = {q: v for a in annotators for q, v in a.acknowledged.items()}
    # The trainer takes every stored label on a last resume (a scripted teacher from here on,
    # so that it does not wait for a person).
    step = json.loads((latest_checkpoint(run_dir) / "loop.json").read_text())["step"]
    final = subprocess.run(
        [sys.executable, "-m", "prefrl", "train", "--resume", str(run_dir), "--steps",
         str(step + 200), "--teacher", "oracle", "--no-progress"],
        env={**os.environ, "JAX_PLATFORMS": "cpu"}, capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip
    assert final.returncode == 0, final.stdout + final.stderr
    return {**killed, **check(run_dir, shown)}


def check(run_dir: Path, shown: dict[int, tuple[str, int, int]]) -> dict:
    """Every acknowledged label stored once, on the pair shown; the trainer's labels equal the
    store's, pair for pair, array for array."""
    with FeedbackStore(run_dir, create=False) as store:
        run_id = store.run_id(run_uid(run_dir), create=False)
        stored = store.labels(run_id)
        by_query = {}
        for x in stored:
            by_query.setdefault(x.query_id, []).append(x)
        lost = [q for q in shown if q not in by_query]
        twice = [q for q, xs in by_query.items() if len(xs) > 1]
        wrong = [
            q for q, (label, left, right) in shown.items()
            if q in by_query and (
                by_query[q][0].label.name.lower() != label
                or (store.query(q).left_segment, store.query(q).right_segment) != (left, right)
            )
        ]  # fmt: skip
        left, right = store.query_pairs(run_dir, [x.query_id for x in stored])
    trained = PreferenceData.load(latest_checkpoint(run_dir) / "labels.npz").arrays()
    same = (
        len(trained["label"]) == len(stored)
        and np.array_equal(trained["obs_left"], left.obs)
        and np.array_equal(trained["obs_right"], right.obs)
    )
    return {"acknowledged": len(shown), "stored": len(stored), "lost": len(lost),
            "stored_twice": len(twice), "on_wrong_pair": len(wrong),
            "trained_on_the_stored_pairs": bool(same)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/label_faults.json"))
    args = parser.parse_args()
    if args.kills < 1:
        parser.error(f"--kills={args.kills} is invalid: expected at least 1")
    with tempfile.TemporaryDirectory(prefix="prefrl-faults-") as tmp:
        t0 = time.time()
        result = run_faults(Path(tmp), args.kills, args.seed)
        result["seconds"] = round(time.time() - t0, 1)
    result["command"] = f"python benchmarks/label_faults.py --kills {args.kills} --seed {args.seed}"
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
