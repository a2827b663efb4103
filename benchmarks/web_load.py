"""The labelling web app under load: simulated annotators fetching pairs, their clips, and
posting labels; what each request costs the server, and how many people it serves.

    python benchmarks/web_load.py --annotators 20 --seconds 60
    python benchmarks/web_load.py --capacity $(seq 40 40 600) --stage-seconds 10 \
        --workers 2 --overlap 0.1 --queries 15000 --store postgresql://prefrl@127.0.0.1/crowd \
        [--beside-training]

A run directory with real Hopper-v5 segments and clips and `--queries` open pairs; the web app
runs as its own process (`prefrl serve --no-render`, as people use it) on 127.0.0.1. Each
annotator is an asyncio task with its own keep-alive connection and token. Afterwards the store
is read directly: every acknowledged label must be stored with its value (lost: those not), and
no pair may have been handed to two annotators (duplicates: pairs acknowledged twice). SQLite
store by default; `--store postgresql://...` for a server.

What each request costs (`cpu_ms_per_request`, measured first, one request at a time): the CPU
time of the server's processes per request of each kind (next: a page asking for pairs; label;
clip: one video file), of the store's calls alone (timed here, in this process, on the same
store) and, for a PostgreSQL server on this machine, of its backends. CPU time does not depend
on what else the machine runs; latency does.

Without `--pace` each annotator asks for the next pairs (`GET /api/next?n=2`) and posts a label
for each, with no pause (worse than people). With `--pace MIN MAX` each labels as a person does
on the compare page: it keeps two pairs ahead (`GET /api/next?n=3` when fewer are left), loads
each pair's two clips, and posts each label a random MIN-MAX seconds after the last.
`--capacity N1 N2 ...` brings paced people (2-5 s a label unless `--pace`) in stages, N1, then
N2, ... for `--stage-seconds` each, until a stage's p95 passes 100 ms (or someone gives up):
the capacity is the most people of a stage that held (a lower bound when every stage held).
People arriving load the server too: compare capacities measured with the same steps.
`--beside-training` runs a SAC training run (Hopper-v5) on the same machine meanwhile, as a
trainer does while people label its run. `--workers N` serves with N processes; `--overlap`
hands that share of pairs to a second annotator. A request unanswered after `--give-up`
seconds is abandoned, as a person reloading the page does, and counted (`gave_up`).

Target: p95 < 100 ms, every acknowledged label stored exactly once, none double-handed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx2
import numpy as np
import psutil

from prefrl.feedback.clips import ClipRenderer
from prefrl.feedback.store import LEASE_SECONDS, FeedbackStore
from prefrl.finetuning.rating_runs import random_segments

RESULTS = Path("runs") / "benchmarks" / "web_load.json"
"""Where results go unless --results says (the committed ones: benchmarks/results/)."""
LABELS = ("left", "right", "equal", "skip")
KINDS = ("status", "next", "label", "clip")
P95_TARGET_MS = 100.0
START_BOUND_S = 600.0
"""How long a server that is still starting is waited for (a busy machine starts it slowly)."""


def prepare_run(run_dir: Path, store_target: str, queries: int, annotators: int) -> list[str]:
    """Segments with clips, `queries` open pairs of them, and one token per annotator."""
    env = "Hopper-v5"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"env": env, "store": store_target}))
    segments = random_segments(env, 40, 50, seed=0)[:40]
    rng = np.random.default_rng(0)
    with FeedbackStore(store_target) as store:
        run_id = store.run_id(run_dir.name, env=env)
        seg_ids = store.add_segments(run_id, run_dir, segments)
        renderer = ClipRenderer(env, 128)
        for seg_id, states in zip(seg_ids, segments.state):
            rel = f"clips/seg{seg_id:09d}.mp4"
            frames = renderer.write(run_dir / rel, states)
            store.add_clip(seg_id, rel, 128, 128, frames, renderer.fps)
        renderer.close()
        pairs = np.stack([rng.choice(len(segments), 2, replace=False) for _ in range(queries)])
        for start in range(0, queries, 5000):
            part = pairs[start : start + 5000]
            keys = np.arange(start, start + len(part))
            store.add_queries(run_id, run_dir, keys, segments[part[:, 0]], segments[part[:, 1]])
        return [store.add_annotator(f"load{i:04d}") for i in range(annotators)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_serving(
    server: subprocess.Popen, port: int, bound_s: float = START_BOUND_S, log: Path | None = None
) -> None:
    """Until the server at `port` answers: as long as its process lives, up to `bound_s`
    (a busy machine starts it slowly). Failing, says why, with the end of its output `log`."""
    deadline = time.monotonic() + bound_s
    while server.poll() is None:
        try:
            httpx2.get(f"http://127.0.0.1:{port}/api/server", timeout=5).raise_for_status()
            return
        except httpx2.HTTPError:
            if time.monotonic() > deadline:
                raise SystemExit(f"the web app did not answer within {bound_s:.0f} s"
                                 + _tail(log)) from None  # fmt: skip
            time.sleep(0.2)
    raise SystemExit(f"the web app ended (exit code {server.returncode}) before it served"
                     + _tail(log))  # fmt: skip


def _tail(log: Path | None) -> str:
    with contextlib.suppress(OSError):
        return "" if log is None else ":\n" + "\n".join(log.read_text().splitlines()[-15:])
    return ""


def stop(process: subprocess.Popen, group: bool = False) -> None:
    """End `process` (and its process group, where it leads one): SIGTERM, then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig) if group else process.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)


@contextlib.contextmanager
def serving(
    run_dir: Path, store_target: str, port: int, workers: int = 1, overlap: float = 0.0,
    bound_s: float = START_BOUND_S,
) -> Iterator[subprocess.Popen]:  # fmt: skip
    """`prefrl serve --no-render` of `run_dir` on `port`, once it answers; always stopped. Its
    output goes to serve.log beside `run_dir`."""
    cmd = [sys.executable, "-m", "prefrl", "serve", str(run_dir), "--port", str(port),
           "--no-render", "--store", store_target, "--workers", str(workers),
           "--overlap", str(overlap)]  # fmt: skip
    log = run_dir.parent / "serve.log"
    with open(log, "w") as out:
        server = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until_serving(server, port, bound_s, log)
        yield server
    finally:
        stop(server)


def tree_cpu(pids: list[int]) -> float:
    """CPU seconds of these processes and their children, every thread, to the nanosecond
    (the scheduler's count: /proc's user and system times tick in hundredths)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            for p in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
                for stat in Path(f"/proc/{p.pid}/task").glob("*/schedstat"):
                    with contextlib.suppress(OSError, ValueError):
                        total += int(stat.read_text().split()[0])
    return total / 1e9


class Database:
    """The CPU time of a PostgreSQL server's backends on this machine (None elsewhere)."""

    def __init__(self, store_target: str):
        self.store = None
        if store_target.startswith("postgresql") and any(
            h in store_target for h in ("@127.0.0.1", "@localhost", "@/")
        ):
            self.store = FeedbackStore(store_target, create=False)

    def cpu(self) -> float | None:
        if self.store is None:
            return None
        from sqlalchemy import text

        with self.store.engine.connect() as c:
            pids = c.scalars(text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            )).all()  # fmt: skip
        return tree_cpu(list(pids))


class Connection:
    """One annotator's keep-alive HTTP/1.1 connection, spoken by hand: a thousand of them in
    one process cost too much CPU through an HTTP library, and a busy client would count its
    own delays as the server's latency."""

    def __init__(self, host: str, port: int, token: str):
        self.host, self.port, self.token = host, port, token
        self.reader = self.writer = None

    async def request(self, method: str, path: str, body: dict | None = None):
        """(status, the JSON answer, or the bytes of a file); status 0: no answer. A clip is
        asked for as a browser's video asks: `Range: bytes=0-`."""
        data = b"" if body is None else json.dumps(body).encode()
        extra = "Range: bytes=0-\r\n" if path.startswith("/clips/") else ""
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nX-Prefrl-Token: "
                f"{self.token}\r\n{extra}Content-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n").encode()  # fmt: skip
        for attempt in range(2):  # (a connection the server closed is opened again, once)
            try:
                if self.writer is None:
                    self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
                self.writer.write(head + data)
                status = int((await self.reader.readuntil(b"\r\n")).split()[1])
                length, kind = 0, ""
                while (line := await self.reader.readuntil(b"\r\n")) != b"\r\n":
                    name, _, value = line.decode().partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                    elif name.lower() == "content-type":
                        kind = value.strip()
                payload = await self.reader.readexactly(length) if length else b""
                return status, json.loads(payload) if kind == "application/json" else payload
            except (OSError, asyncio.IncompleteReadError) as e:
                self.close()
                if attempt:
                    return 0, f"{type(e).__name__}: {e}"
        raise AssertionError("unreachable")

    async def timed(self, log: dict, kind: str, give_up: float, method: str, path: str,
                    body: dict | None = None):  # fmt: skip
        """`request`, its latency logged under `kind`; None when it took longer than a person
        waits (`give_up` seconds): abandoned and counted, the connection closed, as a page
        reloaded does."""
        t0 = time.perf_counter()
        try:
            status, got = await asyncio.wait_for(self.request(method, path, body), give_up)
        except TimeoutError:
            self.close()
            log["gave_up"].append((kind, time.perf_counter()))
            return None
        now = time.perf_counter()
        log["timed"].append((kind, now, now - t0))
        if status not in (200, 206):
            log["errors"].append(f"{method} {path.split('?')[0]}: {status} {str(got)[:200]}")
            return None
        return got

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def new_log() -> dict:
    return {"timed": [], "gave_up": [], "acknowledged": [], "errors": [], "starved": 0,
            "handed": [], "sent_at": {}}  # fmt: skip


async def annotator(conn: Connection, seed: int, log: dict, until: dict, give_up: float):
    """No pause: next pairs, a label for each, again (until `until["end"]`)."""
    rng = np.random.default_rng(seed)
    while time.perf_counter() < until["end"]:
        got = await conn.timed(log, "next", give_up, "GET", "/api/next?n=2")
        if got is None:
            continue
        if not got["queries"]:
            log["starved"] += 1
            await asyncio.sleep(0.05)
        for q in got["queries"]:
            await label(conn, log, q["id"], LABELS[rng.integers(4)], give_up)


async def label(conn: Connection, log: dict, query: int, value: str, give_up: float) -> None:
    log["sent_at"][query] = time.perf_counter()
    got = await conn.timed(log, "label", give_up, "POST", "/api/label",
                           {"query_id": query, "label": value, "response_ms": 3000})  # fmt: skip
    if got is not None and got.get("saved"):
        log["acknowledged"].append((query, value))


async def person(
    conn: Connection, seed: int, log: dict, until: dict, give_up: float,
    pace: tuple[float, float],
) -> None:  # fmt: skip
    """A person on the compare page (static/compare.js): pairs asked for as the page opens and
    after each label (it keeps two ahead), each pair's two clips loaded as it arrives, a label
    `pace` seconds after the last."""
    rng = np.random.default_rng(seed)
    await asyncio.sleep(rng.uniform(0, pace[1]))  # (people do not all start at once)
    upcoming: list[int] = []
    while time.perf_counter() < until["end"]:
        got = await conn.timed(log, "next", give_up, "GET", "/api/next?n=3")
        if got is None:  # (gave up: the page, reloaded, starts again)
            upcoming = []
            continue
        for q in got["queries"]:
            if q["id"] not in upcoming:
                upcoming.append(q["id"])
                log["handed"].append((q["id"], time.perf_counter()))
                for side in ("left", "right"):
                    await conn.timed(log, "clip", give_up, "GET", q[side])
        if not upcoming:
            log["starved"] += 1
            await asyncio.sleep(2.0)  # (the page checks every 2 s)
            continue
        await asyncio.sleep(rng.uniform(*pace))
        await label(conn, log, upcoming.pop(0), LABELS[rng.integers(4)], give_up)
    conn.close()


COST_BLOCKS = 5
"""Requests of each kind are timed in blocks; a figure is its blocks' median (on a busy machine
a block now and then runs slower: CPU time, too, grows when others crowd the caches)."""


async def request_costs(
    base: str, tokens: list[str], server: subprocess.Popen, database: Database
) -> dict:
    """CPU ms of the server (and the database) per request of each kind, one at a time: each
    token asks for two new pairs, labels them, loads their clips and the run's status (which
    the run page asks for every few seconds)."""
    host, port = base.removeprefix("http://").split(":")
    conns, log = [Connection(host, int(port), t) for t in tokens], new_log()
    for conn in conns:  # (each process looks a token up once: not what is timed)
        await conn.timed(log, "page", 60.0, "GET", "/compare")
    blocks: dict[str, dict[str, list[float]]] = {k: {"server": [], "database": []} for k in KINDS}

    async def kind(name: str, requests: list) -> list:
        cpu, db = tree_cpu([server.pid]), database.cpu()
        answers = [await conn.timed(log, name, 60.0, method, path, body)
                   for conn, method, path, body in requests]  # fmt: skip
        blocks[name]["server"].append((tree_cpu([server.pid]) - cpu) / len(requests) * 1000)
        if db is not None:
            blocks[name]["database"].append((database.cpu() - db) / len(requests) * 1000)
        return answers

    size = len(conns) // COST_BLOCKS
    for b in range(COST_BLOCKS):
        group = conns[b * size : (b + 1) * size]
        got = await kind("next", [(c, "GET", "/api/next?n=2", None) for c in group])
        handed = [(c, q) for c, g in zip(group, got) if g is not None for q in g["queries"]]
        await kind("label", [(c, "POST", "/api/label", {"query_id": q["id"], "label": "left"})
                             for c, q in handed])  # fmt: skip
        await kind("clip", [(c, "GET", q[side], None) for c, q in handed
                            for side in ("left", "right")])  # fmt: skip
        await kind("status", [(c, "GET", "/api/status", None) for c in group])
    for conn in conns:
        conn.close()
    if log["errors"]:
        raise SystemExit(f"timing the requests failed: {log['errors'][:3]}")
    return {k: {n: float(np.median(v)) for n, v in by.items() if v} for k, by in blocks.items()}


def store_costs(store_target: str, run_name: str, rounds: int) -> dict:
    """CPU ms of the store's calls behind `next` and `label` alone (in this process: SQLAlchemy,
    and for SQLite the database itself; a PostgreSQL server's share is `database`)."""
    blocks: dict[str, list[float]] = {"next": [], "label": []}
    with FeedbackStore(store_target, create=False) as store:
        run_id = store.run_id(run_name, create=False)
        who = [store.annotator(store.add_annotator(f"store-cost{i:04d}"))[0]
               for i in range(rounds + 1)]  # fmt: skip
        store.assign_queries(run_id, who.pop(), n=2, need_clips=True)  # (statements built once)
        size = rounds // COST_BLOCKS
        for b in range(COST_BLOCKS):
            t0, handed = time.process_time(), []
            for w in who[b * size : (b + 1) * size]:
                handed += [(w, q) for q in store.assign_queries(run_id, w, n=2, need_clips=True)]
            blocks["next"].append((time.process_time() - t0) / size * 1000)
            t0 = time.process_time()
            for w, q in handed:
                store.add_label(q.id, "left", source="web", annotator_id=w)
            blocks["label"].append((time.process_time() - t0) / max(len(handed), 1) * 1000)
    return {k: float(np.median(v)) for k, v in blocks.items()}


@contextlib.contextmanager
def training_beside(tmp: Path) -> Iterator[subprocess.Popen]:
    """A SAC run (Hopper-v5) training on this machine, as a trainer does while people label
    its run; yields once it is past start-up and updating."""
    cmd = [sys.executable, "-m", "prefrl", "rl", "--env", "Hopper-v5", "--steps", "100000000",
           "--warmstart-steps", "1000", "--log-interval", "500", "--eval-interval", "100000000",
           "--checkpoint-interval", "100000000", "--no-video", "--no-progress", "--runs-dir",
           str(tmp), "--name", "busy"]  # fmt: skip
    trainer = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                               start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + START_BOUND_S
        metrics = tmp / "busy" / "metrics.jsonl"
        while not (metrics.exists() and "train/steps_per_s" in metrics.read_text()):  # updating
            if trainer.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the training run beside did not start ({' '.join(cmd)})")
            time.sleep(1.0)
        yield trainer
    finally:
        stop(trainer, group=True)


async def load(base: str, tokens: list[str], stages: list[tuple[int, float]], give_up: float,
               pace: tuple[float, float] | None, watch=None) -> list[dict]:  # fmt: skip
    """People in stages ((how many in all, seconds)): each stage brings the new ones; all go on
    to the end. `watch(stage, started)`, after each stage, may end the run (False)."""
    host, port = base.removeprefix("http://").split(":")
    logs = [new_log() for _ in tokens]
    until = {"end": time.perf_counter() + sum(s for _, s in stages)}
    tasks, started = [], 0
    for stage, (people, seconds) in enumerate(stages):
        stage_start = time.perf_counter()
        for i in range(started, people):
            conn = Connection(host, int(port), tokens[i])
            run = (annotator(conn, i, logs[i], until, give_up) if pace is None
                   else person(conn, i, logs[i], until, give_up, pace))  # fmt: skip
            tasks.append(asyncio.create_task(run))
        started = people
        await asyncio.sleep(max(0.0, stage_start + seconds - time.perf_counter()))
        if watch is not None and not watch(stage, logs):
            until["end"] = time.perf_counter()  # (each ends after its request under way)
            break
    await asyncio.gather(*tasks)
    return logs


def latency_ms(logs: list[dict], kinds=KINDS, since=0.0, until=np.inf):
    return np.array([lat for log in logs for kind, at, lat in log["timed"]
                     if kind in kinds and since <= at < until]) * 1000  # fmt: skip


def pct(values: np.ndarray, q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if len(values) else None


def summarise(logs: list[dict], started: float, ended: float) -> dict:
    """Latency percentiles per kind and overall, and requests per second of the time taken
    (from the first request sent to the last answered: requests go on past a deadline)."""
    every = latency_ms(logs)
    out = {
        "requests": len(every),
        "seconds": round(ended - started, 2),
        "requests_per_s": round(len(every) / (ended - started), 1),
        "p50_ms": pct(every, 50),
        "p95_ms": pct(every, 95),
        "p99_ms": pct(every, 99),
        "gave_up": sum(len(log["gave_up"]) for log in logs),
    }
    for kind in KINDS:
        if len(times := latency_ms(logs, (kind,))):
            out[f"p95_{kind}_ms"] = pct(times, 95)
    return out


def double_handed(logs: list[dict], lease_s: float) -> int:
    """Pairs handed to an annotator while another surely still held them: the second got the
    pair before the first even sent their label (or, unanswered, before their lease ran out).
    (Handing a pair on between the first label's commit and its answer reaching the client
    is correct: the pair was free.)"""
    events: dict[int, list[tuple[float, int]]] = {}
    for who, log in enumerate(logs):
        for query, at in log["handed"]:
            events.setdefault(query, []).append((at, who))
    count = 0
    for query, handed in events.items():
        handed.sort()
        for (at_a, a), (at_b, b) in itertools.pairwise(handed):
            held_until = logs[a]["sent_at"].get(query, at_a + lease_s)
            count += int(a != b and at_b < held_until)
    return count


class Stages:
    """Per stage of a capacity run: its people, latency, give-ups and CPU per request; ends
    the run at the first stage that does not hold (p95 over the target, or a give-up)."""

    def __init__(self, stages, pace, server, database):
        self.stages, self.pace, self.server, self.database = stages, pace, server, database
        self.rows: list[dict] = []
        self.mark = self._now()

    def _now(self) -> tuple:
        return (time.perf_counter(), time.process_time(), tree_cpu([self.server.pid]),
                self.database.cpu())  # fmt: skip

    def __call__(self, stage: int, logs: list[dict]) -> bool:
        before, now = self.mark, self._now()
        t0 = before[0]
        self.mark = now
        inside = latency_ms(logs, since=t0, until=now[0])
        requests = len(inside)
        gave_up = sum(1 for log in logs for _, at in log["gave_up"] if t0 <= at < now[0])
        row = {"people": self.stages[stage][0],
               "requests_per_s": round(requests / (now[0] - t0), 1), "p50_ms": pct(inside, 50),
               "p95_ms": pct(inside, 95), "gave_up": gave_up}  # fmt: skip
        for name, i in (("server", 2), ("client", 1), ("database", 3)):
            if now[i] is not None and requests:
                row[f"{name}_cpu_ms_per_request"] = round((now[i] - before[i]) / requests * 1e3, 3)
        row["held"] = bool(row["p95_ms"] is not None and row["p95_ms"] < P95_TARGET_MS
                           and gave_up == 0)  # fmt: skip
        self.rows.append(row)
        print(f"  {row['people']} people: {row['requests_per_s']} requests/s, p50 "
              f"{row['p50_ms']} ms, p95 {row['p95_ms']} ms, gave up {gave_up}"
              + ("" if row["held"] else "  (does not hold)"), flush=True)  # fmt: skip
        return row["held"]

    def capacity(self) -> int:
        held = [r["people"] for r in itertools.takewhile(lambda r: r["held"], self.rows)]
        return held[-1] if held else 0


def per_label(costs: dict) -> dict:
    """CPU ms of a person's label: the label, the pairs asked for after it, the new pair's
    two clips; the server's, and the database's where it was measured."""
    return {f"{part}_cpu_ms_per_label": round(costs["next"][part] + costs["label"][part]
                                              + 2 * costs["clip"].get(part, 0.0), 2)
            for part in ("server", "database") if part in costs["label"]}  # fmt: skip


def rounded(d: dict) -> dict:
    return {k: round(v, 3) for k, v in d.items()}


def machine() -> dict:
    """What the figures depend on: the cores, and what else ran (the load average before the
    benchmark began: other work on the machine)."""
    return {"cpus": os.cpu_count(), "processor": _cpu_model(),
            "load_average_before": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip


def _cpu_model() -> str | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return None


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--annotators", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--queries", type=int, default=30_000, help="open pairs at the start")
    parser.add_argument("--store", default=None, help="default: SQLite in the run directory")
    parser.add_argument("--pace", type=float, nargs=2, default=None, metavar=("MIN", "MAX"),
                        help="seconds between a person's labels (default: no pause; 2-5 s with "
                        "--capacity)")  # fmt: skip
    parser.add_argument("--capacity", type=int, nargs="+", default=None, metavar="PEOPLE",
                        help="paced people in stages, in all (e.g. 25 50 100 200)")  # fmt: skip
    parser.add_argument("--stage-seconds", type=float, default=20.0)
    parser.add_argument("--beside-training", action="store_true",
                        help="a SAC training run on this machine meanwhile")  # fmt: skip
    parser.add_argument("--workers", type=int, default=1, help="server processes")
    parser.add_argument("--overlap", type=float, default=0.0, help="share labelled twice")
    parser.add_argument("--give-up", type=float, default=30.0,
                        help="seconds a person waits for an answer before reloading")  # fmt: skip
    parser.add_argument("--cost-rounds", type=int, default=200,
                        help="requests of each kind timed one by one for their CPU")  # fmt: skip
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help=f"JSON file written (default: {RESULTS})")  # fmt: skip
    command = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(command)
    if args.capacity and sorted(set(args.capacity)) != args.capacity:
        parser.error(f"--capacity {args.capacity}: expected increasing numbers of people")
    pace = tuple(args.pace) if args.pace else ((2.0, 5.0) if args.capacity else None)
    stages = ([(n, args.stage_seconds) for n in args.capacity] if args.capacity
              else [(args.annotators, args.seconds)])  # fmt: skip
    people = stages[-1][0]
    os.environ.setdefault("MUJOCO_GL", "egl")
    before = machine()

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "web-load"
        store_target = args.store or str(run_dir)
        print(f"preparing {args.queries:,} open pairs with clips ...", flush=True)
        tokens = prepare_run(run_dir, store_target, args.queries, people)
        with FeedbackStore(store_target) as store:
            cost_tokens = [store.add_annotator(f"cost{i:04d}") for i in range(args.cost_rounds)]
        database = Database(store_target)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with contextlib.ExitStack() as running:
            server = running.enter_context(
                serving(run_dir, store_target, port, args.workers, args.overlap)
            )
            costs = asyncio.run(request_costs(base, cost_tokens, server, database))
            store = store_costs(store_target, run_dir.name, args.cost_rounds)
            for kind, ms in store.items():
                costs[kind]["store"] = ms
            print("CPU ms per request, server (store, database): " + ", ".join(
                f"{k} {v['server']:.2f} ({v.get('store', 0):.2f}, {v.get('database', 0):.2f})"
                for k, v in costs.items()), flush=True)  # fmt: skip
            if args.beside_training:
                print("starting a training run beside ...", flush=True)
                running.enter_context(training_beside(Path(tmp) / "busy"))
            watch = Stages(stages, pace, server, database) if args.capacity else None
            print(f"{people} annotators" + (f" in stages {args.capacity}" if args.capacity
                  else f" for {args.seconds:.0f} s") + " ...", flush=True)  # fmt: skip
            started = time.perf_counter()
            logs = asyncio.run(load(base, tokens[:people], stages, args.give_up, pace, watch))
            ended = max([started, *(at for log in logs for _, at, _ in log["timed"])])
        with FeedbackStore(store_target, create=False) as store:
            run_id = store.run_id(run_dir.name, create=False)
            stored = Counter(
                (x.query_id, x.annotator, x.label.name.lower())
                for x in store.labels(run_id) + store.second_labels(run_id)
                if x.annotator.startswith("load")
            )

    acked = [(q, f"load{i:04d}", label) for i, log in enumerate(logs)
             for q, label in log["acknowledged"]]  # fmt: skip
    per_query = Counter(q for q, _, _ in acked)
    result = {
        "command": "python benchmarks/web_load.py " + " ".join(command),
        "store": "postgresql" if store_target.startswith("postgresql") else "sqlite",
        "workers": args.workers,
        "overlap": args.overlap,
        "pace_seconds": pace,
        "beside_training": args.beside_training,
        **before,
        "cpu_ms_per_request": {k: rounded(v) for k, v in costs.items()},
        **per_label(costs),
        "annotators": watch.rows[-1]["people"] if watch is not None else people,
        **summarise(logs, started, ended),
        "acknowledged": len(acked),
        "stored": sum(stored.values()),
        "lost": sum(1 for key in acked if stored[key] == 0),
        "duplicates": sum(n - 1 for n in stored.values() if n > 1)
        + sum(n - 1 for n in per_query.values() if n > 1 + (args.overlap > 0)),
        "double_handed": double_handed(logs, LEASE_SECONDS),
        "doubly_labelled": sum(1 for n in per_query.values() if n == 2),
        "errors": sum(len(log["errors"]) for log in logs),
        "starved_fetches": sum(log["starved"] for log in logs),
    }
    if watch is not None:
        result["capacity_people"] = watch.capacity()
        # (every stage held: the capacity is higher than the last stage; give more people)
        result["capacity_at_least"] = all(r["held"] for r in watch.rows)
        result["stage_people"] = [r["people"] for r in watch.rows]
        result["stage_p95_ms"] = [r["p95_ms"] for r in watch.rows]
        result["stages"] = watch.rows
    errors = [e for log in logs for e in log["errors"]][:5]
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(result, indent=2) + "\n")
    if watch is not None:
        least = "at least " if result["capacity_at_least"] else ""
        print(f"capacity: {least}{result['capacity_people']} people with p95 < "
              f"{P95_TARGET_MS:.0f} ms")  # fmt: skip
    print(
        f"{result['annotators']} annotators, {result['seconds']:.0f} s, {result['store']}: "
        f"{result['requests_per_s']:.0f} requests/s, latency p50 {result['p50_ms']} ms, p95 "
        f"{result['p95_ms']} ms, gave up {result['gave_up']}; labels acknowledged "
        f"{result['acknowledged']}, stored {result['stored']}, lost {result['lost']}, "
        f"duplicated {result['duplicates']}, double-handed {result['double_handed']}, errors "
        f"{result['errors']}"
        + (f"; first errors: {errors}" if errors else "")
        + f" (written to {args.results})"
    )
    return result


if __name__ == "__main__":
    main()
