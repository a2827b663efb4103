"""What a sweep on Ray costs, and whether it survives losing a node.

    python benchmarks/sweep.py --steps 4000

1. Overhead: 8 short SAC runs (toy:point-reach, 2 configs x 4 seeds) through `prefrl sweep`
   (a Ray started for it, one CPU a run, so two at a time on this 2-core machine), and the same
   8 runs started by hand as `prefrl rl` processes, two at a time, in this same invocation.
   Target (issue 31): the sweep takes <= 10% longer in total.
2. A node killed mid-sweep: a two-node Ray cluster on this machine (`ray start --head`, then a
   worker node with `ray start --address`), one CPU each; a sweep of 2 longer runs on it; once
   both have a checkpoint, the worker node is killed (its raylet and its processes, SIGKILL).
   Recovered when the sweep still finishes every run, the killed one resumed from its
   checkpoint (two sessions in its run directory) on the node that was left.

Writes benchmarks/results/sweep.json.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "sweep.json"
BATCHES = ("128", "256")
SEEDS = ("0", "1", "2", "3")


def run_flags(steps: int) -> list[str]:
    every = str(max(steps // 4, 100))
    return ["--env", "toy:point-reach", "--steps", str(steps), "--warmstart-steps", "500",
            "--eval-interval", every, "--eval-episodes", "2", "--checkpoint-interval", every,
            "--keep-checkpoints", "1", "--no-video", "--no-progress"]  # fmt: skip


# Ray (2.59 and later) protects a cluster it starts with a token: every node and the driver
# of the sweep say so, and read the token from ~/.ray/auth_token.
CLUSTER_ENV = {**os.environ, "RAY_AUTH_MODE": "token"}


def sh(cmd: list[str], env=None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=False, capture_output=True, text=True, env=env)


def prefrl(*args: str) -> list[str]:
    return [sys.executable, "-m", "prefrl", *args]


def by_hand(root: Path, steps: int) -> float:
    """The 8 runs as `prefrl rl` processes, two at a time."""
    commands = [
        prefrl("rl", *run_flags(steps), "--sac.batch-size", b, "--seed", s, "--runs-dir",
               str(root), "--name", f"b{b}_s{s}")
        for b in BATCHES for s in SEEDS
    ]  # fmt: skip
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for done in pool.map(lambda c: sh(c), commands):
            if done.returncode:
                raise SystemExit(
                    f"a run by hand failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
                )
    return time.perf_counter() - t0


def through_sweep(root: Path, steps: int) -> float:
    cmd = prefrl("sweep", "rl", "--grid", f"sac.batch_size={','.join(BATCHES)}", "--seeds",
                 *SEEDS, "--dir", str(root), "--num-cpus", "2", "--", *run_flags(steps))  # fmt: skip
    t0 = time.perf_counter()
    done = sh(cmd)
    seconds = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"the sweep failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return seconds


def ray_cli(*args: str) -> str:
    out = sh([str(Path(sys.executable).parent / "ray"), *args], env=CLUSTER_ENV)
    if out.returncode:
        raise SystemExit(f"ray {' '.join(args)} failed:\n{out.stdout}{out.stderr}")
    return out.stdout


def node_kill(root: Path, steps: int, port: int = 6389, worker_port: int = 41234) -> dict:
    """A sweep on a two-node cluster whose worker node dies mid-run."""
    ray_cli("stop", "--force")
    ray_cli("get-auth-token", "--generate")
    ray_cli("start", "--head", "--port", str(port), "--num-cpus", "1", "--include-dashboard",
            "false", "--disable-usage-stats")  # fmt: skip
    ray_cli("start", "--address", f"127.0.0.1:{port}", "--num-cpus", "1", "--node-manager-port",
            str(worker_port), "--disable-usage-stats")  # fmt: skip
    cmd = prefrl("sweep", "rl", "--seeds", "0", "1", "--dir", str(root), "--address",
                 f"127.0.0.1:{port}", "--", *run_flags(steps))  # fmt: skip
    sweep = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=CLUSTER_ENV)  # fmt: skip
    runs = [root / "runs" / f"rl_s{s}" for s in (0, 1)]
    try:
        while not all(list(r.glob("checkpoints/step_*")) for r in runs):
            if sweep.poll() is not None:
                raise SystemExit(f"the sweep ended before the kill:\n{sweep.stdout.read()}")
            time.sleep(1)
        raylet = sh(["pgrep", "-f", f"raylet.*node_manager_port={worker_port}"]).stdout.split()
        if len(raylet) != 1:
            raise SystemExit(f"expected the worker node's raylet, found {raylet}")
        children = sh(["pgrep", "-P", raylet[0]]).stdout.split()
        victims = [int(p) for p in (raylet[0], *children)]
        killed_at = time.time()
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        out = sweep.communicate(timeout=1800)[0]
    finally:
        if sweep.poll() is None:
            sweep.kill()
        ray_cli("stop", "--force")
    sessions = [len((r / "sessions.jsonl").read_text().splitlines()) for r in runs]
    finished = [(r / "sweep_done.json").exists() for r in runs]
    return {
        "returncode": sweep.returncode,
        "finished": finished,
        "sessions": sessions,
        "seconds_after_kill": round(time.time() - killed_at, 1),
        "recovered": sweep.returncode == 0 and all(finished) and max(sessions) == 2,
        "output_tail": out[-1500:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=4000, help="SAC steps of each run")
    parser.add_argument("--kill-steps", type=int, default=6000, help="steps of the node-kill runs")
    parser.add_argument("--skip-kill", action="store_true")

    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="prefrl-sweep-bench-"))
    try:
        print("8 runs by hand, two at a time ...", flush=True)
        hand = by_hand(root / "hand", args.steps)
        print(f"  {hand:.0f} s; the same 8 through prefrl sweep ...", flush=True)
        swept = through_sweep(root / "sweep", args.steps)
        print(f"  {swept:.0f} s (overhead {swept / hand:.3f})", flush=True)
        kill = None
        if not args.skip_kill:
            print("a two-node cluster, its worker node killed mid-sweep ...", flush=True)
            kill = node_kill(root / "kill", args.kill_steps)
            print(f"  recovered: {kill['recovered']} (sessions {kill['sessions']})", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {
        "command": "python benchmarks/sweep.py " + " ".join(sys.argv[1:]),
        "runs": 8,
        "sweep_seconds": round(swept, 1),
        "by_hand_seconds": round(hand, 1),
        "overhead": round(swept / hand, 4),
        "node_kill_recovered": None if kill is None else kill["recovered"],
        "node_kill": None
        if kill is None
        else {k: v for k, v in kill.items() if k != "output_tail"},
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
