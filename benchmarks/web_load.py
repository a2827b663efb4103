"""The labelling web app under load: simulated annotators fetching pairs and posting labels.

    python benchmarks/web_load.py --annotators 20 --seconds 60
    python benchmarks/web_load.py --annotators 1000 --seconds 300 --pace 2 5 --workers 2 \
        --overlap 0.1 --store postgresql://prefrl:prefrl@127.0.0.1/crowd --results web_crowd.json

A run directory with real Hopper-v5 segments and clips and `--queries` open pairs; the web app
runs as its own process (`prefrl serve --no-render`, as people use it) on 127.0.0.1. Each
annotator is an asyncio task with its own HTTP connection and token: it asks for the next pairs
(`GET /api/next?n=2`, as the compare page does to preload) and posts a label for each
(`POST /api/label`), with no pause between requests (worse than people). Afterwards the store is
read directly: every acknowledged label must be stored with its value (lost: those not), and no
pair may have been handed to two annotators (duplicates: pairs acknowledged twice). Latency is
per request, client side, over both endpoints. SQLite store by default; `--store postgresql://...`
for a server.

Target (issue 4): 20 annotators, 60 s, p95 < 100 ms, 0 lost, 0 duplicated.

With `--pace MIN MAX` each annotator labels as a person does on the compare page instead: it
keeps two pairs ahead (`GET /api/next?n=3` when fewer are left) and posts each label a random
MIN-MAX seconds after the last. `--workers N` serves with N processes; `--overlap` hands that
share of pairs to a second annotator. Then a pair handed to a second annotator while the first
still held it (before their label was acknowledged) counts as double-handed.

Target (issue 31): 1000 annotators at 2-5 s a label against `--workers 2` on PostgreSQL for
300 s: p95 < 100 ms, every acknowledged label stored exactly once, none double-handed.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx2
import numpy as np

from prefrl.feedback.store import LEASE_SECONDS, FeedbackStore
from prefrl.loops.collect import random_segments
from prefrl.render.clips import ClipRenderer

RESULTS = Path(__file__).parent / "results" / "web_load.json"
LABELS = ("left", "right", "equal", "skip")


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


def start_server(
    run_dir: Path, store_target: str, port: int, workers: int = 1, overlap: float = 0.0
) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "prefrl", "serve", str(run_dir), "--port", str(port),
           "--no-render", "--store", store_target, "--workers", str(workers),
           "--overlap", str(overlap)]  # fmt: skip
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            httpx2.get(f"http://127.0.0.1:{port}/api/status", timeout=1).raise_for_status()
            return server
        except httpx2.HTTPError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("the web app did not come up within 60 s")


def record(log: dict, kind: str, t0: float) -> None:
    now = time.perf_counter()
    log["latency"][kind].append(now - t0)
    log["done_at"].append(now)
    log["timed"].append((now, now - t0))


async def annotator(base: str, token: str, seconds: float, seed: int, log: dict) -> None:
    rng = np.random.default_rng(seed)
    headers = {"X-Prefrl-Token": token}
    async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            r = await client.get("/api/next", params={"n": 2})
            record(log, "next", t0)
            if r.status_code != 200:
                log["errors"].append(f"GET /api/next: {r.status_code} {r.text[:200]}")
                continue
            queries = r.json()["queries"]
            if not queries:
                log["starved"] += 1
                await asyncio.sleep(0.05)
                continue
            for q in queries:
                label = LABELS[rng.integers(4)]
                t0 = time.perf_counter()
                r = await client.post(
                    "/api/label",
                    json={"query_id": q["id"], "label": label, "response_ms": 900},
                )
                record(log, "label", t0)
                if r.status_code == 200 and r.json().get("saved"):
                    log["acknowledged"].append((q["id"], label))
                else:
                    log["errors"].append(f"POST /api/label: {r.status_code} {r.text[:200]}")


class Connection:
    """One annotator's keep-alive HTTP/1.1 connection, spoken by hand: a thousand of them in
    one process cost too much CPU through an HTTP library, and a busy client would count its
    own delays as the server's latency."""

    def __init__(self, host: str, port: int, token: str):
        self.host, self.port, self.token = host, port, token
        self.reader = self.writer = None

    async def request(self, method: str, path: str, body: dict | None = None):
        data = b"" if body is None else json.dumps(body).encode()
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nX-Prefrl-Token: "
                f"{self.token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n").encode()  # fmt: skip
        for attempt in range(2):  # (a connection the server closed is opened again, once)
            try:
                if self.writer is None:
                    self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
                self.writer.write(head + data)
                status = int((await self.reader.readuntil(b"\r\n")).split()[1])
                length = 0
                while (line := await self.reader.readuntil(b"\r\n")) != b"\r\n":
                    name, _, value = line.decode().partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                payload = json.loads(await self.reader.readexactly(length)) if length else None
                return status, payload
            except (OSError, asyncio.IncompleteReadError) as e:
                self.close()
                if attempt:
                    return 0, f"{type(e).__name__}: {e}"
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def paced_annotator(
    base: str, token: str, seconds: float, seed: int, log: dict, pace: tuple[float, float]
) -> None:
    """A person on the compare page: two pairs kept ahead, a label every `pace` seconds."""
    rng = np.random.default_rng(seed)
    host, port = base.removeprefix("http://").split(":")
    conn = Connection(host, int(port), token)
    await asyncio.sleep(rng.uniform(0, pace[1]))  # (people do not all start at once)
    deadline = time.perf_counter() + seconds
    upcoming: list[int] = []
    while time.perf_counter() < deadline:
        if len(upcoming) < 2:
            t0 = time.perf_counter()
            status, got = await conn.request("GET", "/api/next?n=3")
            record(log, "next", t0)
            if status != 200:
                log["errors"].append(f"GET /api/next: {status} {str(got)[:200]}")
            else:
                for q in got["queries"]:
                    if q["id"] not in upcoming:
                        upcoming.append(q["id"])
                        log["handed"].append((q["id"], time.perf_counter()))
        if not upcoming:
            log["starved"] += 1
            await asyncio.sleep(1.0)
            continue
        await asyncio.sleep(rng.uniform(*pace))
        query = upcoming.pop(0)
        label = LABELS[rng.integers(4)]
        t0 = time.perf_counter()
        log["sent_at"][query] = t0
        status, got = await conn.request(
            "POST", "/api/label", {"query_id": query, "label": label, "response_ms": 3000}
        )
        record(log, "label", t0)
        if status == 200 and got.get("saved"):
            log["acknowledged"].append((query, label))
        else:
            log["errors"].append(f"POST /api/label: {status} {str(got)[:200]}")
    conn.close()


def p95_windows(logs: list[dict], start: float, seconds: float) -> list[float]:
    """The latency's 95th percentile in each 30 s of the run: a tail from the start (a thousand
    people arriving at once) tells apart from one that grows as the store does."""
    timed = np.array([t for log in logs for t in log["timed"]])
    edges = np.arange(0, seconds + 30, 30)
    out = []
    for lo, hi in itertools.pairwise(edges):
        inside = timed[(timed[:, 0] - start >= lo) & (timed[:, 0] - start < hi), 1]
        out.append(round(float(np.percentile(inside, 95)) * 1000, 1) if len(inside) else None)
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


async def load(
    base: str, tokens: list[str], seconds: float, pace: tuple[float, float] | None = None
) -> list[dict]:
    logs = [
        {
            "latency": {"next": [], "label": []},
            "done_at": [],
            "acknowledged": [],
            "errors": [],
            "starved": 0,
            "handed": [],
            "sent_at": {},
            "timed": [],
        }
        for _ in tokens
    ]
    if pace is None:
        runs = (annotator(base, t, seconds, i, log) for i, (t, log) in enumerate(zip(tokens, logs)))
    else:
        runs = (
            paced_annotator(base, t, seconds, i, log, pace)
            for i, (t, log) in enumerate(zip(tokens, logs))
        )
    await asyncio.gather(*runs)
    return logs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--annotators", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--queries", type=int, default=30_000, help="open pairs at the start")
    parser.add_argument("--store", default=None, help="default: SQLite in the run directory")
    parser.add_argument(
        "--pace",
        type=float,
        nargs=2,
        default=None,
        metavar=("MIN", "MAX"),
        help="seconds between a person's labels (default: no pause)",
    )
    parser.add_argument("--workers", type=int, default=1, help="server processes")
    parser.add_argument("--overlap", type=float, default=0.0, help="share labelled twice")
    parser.add_argument("--results", default="web_load.json", help="file in benchmarks/results")
    args = parser.parse_args()
    results = RESULTS.parent / args.results
    os.environ.setdefault("MUJOCO_GL", "egl")

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "web-load"
        store_target = args.store or str(run_dir)
        print(f"preparing {args.queries:,} open pairs with clips ...", flush=True)
        tokens = prepare_run(run_dir, store_target, args.queries, args.annotators)
        port = free_port()
        server = start_server(run_dir, store_target, port, args.workers, args.overlap)
        try:
            print(f"{args.annotators} annotators for {args.seconds:.0f} s ...", flush=True)
            pace = tuple(args.pace) if args.pace else None
            logs = asyncio.run(load(f"http://127.0.0.1:{port}", tokens, args.seconds, pace))
        finally:
            server.terminate()
            server.wait(timeout=30)
        with FeedbackStore(store_target, create=False) as store:
            run_id = store.run_id(run_dir.name, create=False)
            stored = Counter(
                (x.query_id, x.annotator, x.label.name.lower())
                for x in store.labels(run_id) + store.second_labels(run_id)
            )

    acked = [(q, f"load{i:04d}", label) for i, log in enumerate(logs)
             for q, label in log["acknowledged"]]  # fmt: skip
    times = {k: np.array([t for log in logs for t in log["latency"][k]]) * 1000 for k in
             ("next", "label")}  # fmt: skip
    every = np.concatenate(list(times.values()))
    per_query = Counter(q for q, _, _ in acked)
    done = np.sort([t for log in logs for t in log["done_at"]])
    windows = np.histogram(done - done[0], bins=np.arange(0, args.seconds + 10, 10))[0]
    result = {
        "command": "python benchmarks/web_load.py " + " ".join(sys.argv[1:]),
        "store": "postgresql" if args.store else "sqlite",
        "annotators": args.annotators,
        "seconds": args.seconds,
        "p95_ms": float(np.percentile(every, 95)),
        "p50_ms": float(np.percentile(every, 50)),
        "p99_ms": float(np.percentile(every, 99)),
        "p95_next_ms": float(np.percentile(times["next"], 95)),
        "p95_label_ms": float(np.percentile(times["label"], 95)),
        "requests_per_s": len(every) / args.seconds,
        "requests_per_10s_window": windows.tolist(),
        "p95_ms_per_30s_window": p95_windows(logs, done[0], args.seconds),
        "workers": args.workers,
        "overlap": args.overlap,
        "pace_seconds": args.pace,
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
    errors = [e for log in logs for e in log["errors"]][:5]
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{result['annotators']} annotators, {result['seconds']:.0f} s, {result['store']}: "
        f"{result['requests_per_s']:.0f} requests/s, latency p50 {result['p50_ms']:.1f} ms, p95 "
        f"{result['p95_ms']:.1f} ms (target < 100), p99 {result['p99_ms']:.1f} ms; labels "
        f"acknowledged {result['acknowledged']}, stored {result['stored']}, lost "
        f"{result['lost']}, duplicated {result['duplicates']}, double-handed "
        f"{result['double_handed']}, errors {result['errors']}"
        + (f"; first errors: {errors}" if errors else "")
    )


if __name__ == "__main__":
    main()
