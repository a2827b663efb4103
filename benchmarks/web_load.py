"""The labelling web app under load: simulated annotators fetching pairs and posting labels.

    python benchmarks/web_load.py --annotators 20 --seconds 60

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
"""

from __future__ import annotations

import argparse
import asyncio
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

from prefrl.feedback.store import FeedbackStore
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
        return [store.add_annotator(f"load{i:02d}") for i in range(annotators)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(run_dir: Path, store_target: str, port: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "prefrl", "serve", str(run_dir), "--port", str(port),
           "--no-render", "--store", store_target]  # fmt: skip
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


async def annotator(base: str, token: str, seconds: float, seed: int, log: dict) -> None:
    rng = np.random.default_rng(seed)
    headers = {"X-Prefrl-Token": token}
    async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            r = await client.get("/api/next", params={"n": 2})
            log["latency"]["next"].append(time.perf_counter() - t0)
            log["done_at"].append(time.perf_counter())
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
                log["latency"]["label"].append(time.perf_counter() - t0)
                log["done_at"].append(time.perf_counter())
                if r.status_code == 200 and r.json().get("saved"):
                    log["acknowledged"].append((q["id"], label))
                else:
                    log["errors"].append(f"POST /api/label: {r.status_code} {r.text[:200]}")


async def load(base: str, tokens: list[str], seconds: float) -> list[dict]:
    logs = [
        {
            "latency": {"next": [], "label": []},
            "done_at": [],
            "acknowledged": [],
            "errors": [],
            "starved": 0,
        }
        for _ in tokens
    ]
    await asyncio.gather(
        *(annotator(base, t, seconds, i, log) for i, (t, log) in enumerate(zip(tokens, logs)))
    )
    return logs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--annotators", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--queries", type=int, default=30_000, help="open pairs at the start")
    parser.add_argument("--store", default=None, help="default: SQLite in the run directory")
    args = parser.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "web-load"
        store_target = args.store or str(run_dir)
        print(f"preparing {args.queries:,} open pairs with clips ...", flush=True)
        tokens = prepare_run(run_dir, store_target, args.queries, args.annotators)
        port = free_port()
        server = start_server(run_dir, store_target, port)
        try:
            print(f"{args.annotators} annotators for {args.seconds:.0f} s ...", flush=True)
            logs = asyncio.run(load(f"http://127.0.0.1:{port}", tokens, args.seconds))
        finally:
            server.terminate()
            server.wait(timeout=30)
        with FeedbackStore(store_target, create=False) as store:
            run_id = store.run_id(run_dir.name, create=False)
            stored = {x.query_id: x.label.name.lower() for x in store.labels(run_id)}

    acked = [a for log in logs for a in log["acknowledged"]]
    times = {k: np.array([t for log in logs for t in log["latency"][k]]) * 1000 for k in
             ("next", "label")}  # fmt: skip
    every = np.concatenate(list(times.values()))
    per_query = Counter(q for q, _ in acked)
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
        "acknowledged": len(acked),
        "stored": len(stored),
        "lost": sum(1 for q, label in acked if stored.get(q) != label),
        "duplicates": sum(n - 1 for n in per_query.values() if n > 1),
        "errors": sum(len(log["errors"]) for log in logs),
        "starved_fetches": sum(log["starved"] for log in logs),
    }
    errors = [e for log in logs for e in log["errors"]][:5]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{result['annotators']} annotators, {result['seconds']:.0f} s, {result['store']}: "
        f"{result['requests_per_s']:.0f} requests/s, latency p50 {result['p50_ms']:.1f} ms, p95 "
        f"{result['p95_ms']:.1f} ms (target < 100), p99 {result['p99_ms']:.1f} ms; labels "
        f"acknowledged {result['acknowledged']}, stored {result['stored']}, lost "
        f"{result['lost']}, duplicated {result['duplicates']}, errors {result['errors']}"
        + (f"; first errors: {errors}" if errors else "")
    )


if __name__ == "__main__":
    main()
