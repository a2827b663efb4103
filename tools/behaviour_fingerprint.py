"""Fingerprint what each workflow produces for a fixed seed, to show a refactor changed nothing.

Runs short seeded runs of every workflow through the CLI (rl, train with a scripted teacher
under SAC and PPO, dataset + offline, collect + rate + finetune, the piano debug task, RFCL on
the maze, A2C and frame preferences on MovingDot) and
records a SHA-256 of every checkpoint file and of the metrics with wall-clock entries removed.
Two fingerprints taken on one machine compare equal when behaviour is unchanged:

    python tools/behaviour_fingerprint.py --out logs/before.json      # on the old commit
    python tools/behaviour_fingerprint.py --out logs/after.json --compare logs/before.json

(Across machines floats may differ in the last bits: compare on one machine.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

from prefrl.cli import main as prefrl

TIMING = ("seconds", "per_s", "_time", "wall", "fit_started")


def workflows(root: Path) -> dict[str, list[list[str]]]:
    """Each workflow's commands, in order; the run fingerprinted is named by its --name."""
    r = str(root)
    quiet = f"--no-progress --runs-dir {r}"
    short_rl = ("--steps 600 --warmstart-steps 200 --eval-interval 300 --checkpoint-interval 300 "
                "--eval-episodes 2 --no-video --buffer-size 5000 --log-interval 100 "
                f"--sac.batch-size 64 --sac.hidden-dims 32 32 {quiet}")  # fmt: skip
    pref = ("--env toy:point-reach --steps 1200 --warmstart-steps 200 --eval-interval 600 "
            "--checkpoint-interval 600 --eval-episodes 2 --no-video --log-interval 100 "
            "--segment-length 10 --schedule.budget 40 --schedule.session-size 20 "
            "--schedule.interval 400 --reward.max-epochs 5 --reward.hidden-dims 32 32 "
            f"{quiet}")  # fmt: skip
    commands = {
        "rl": [f"rl --env toy:point-reach --keep-checkpoints 0 --name rl {short_rl}"],
        "train-sac": [(f"train {pref} --name pebble --sac.batch-size 64 "
                       "--sac.hidden-dims 32 32")],
        "train-ppo": [f"train {pref} --algo ppo --name prefppo --ppo.rollout-steps 256"],
        "offline": [
            f"dataset collect {r}/rl --kind medium-replay --medium-step 300 --out {r}/ds",
            f"dataset queries {r}/ds --num 40 --length 10 --out {r}/q.json",
            (f"offline --dataset {r}/ds --labels {r}/q.json --reward mr --steps 600 "
             "--steps-per-call 100 --eval-interval 300 --checkpoint-interval 300 "
             f"--eval-episodes 2 --no-video --iql.hidden-dims 32 32 --name offline {quiet}"),
        ],
        "finetune": [
            (f"collect --checkpoints {r}/rl --noise 0 0.3 --segments 12 --length 10 "
             f"--clip-size 0 --out {r}/ratings"),
            f"rate {r}/ratings --rater return --no-open-clips",
            (f"finetune --policy {r}/rl --ratings {r}/ratings --steps 30 --eval-episodes 2 "
             f"--log-interval 10 --cpl.batch-size 8 --name finetune --runs-dir {r}"),
        ],
        "rfcl": [
            f"demos script --env toy:maze --episodes 2 --out {r}/maze-demos",
            (f"rfcl --demos {r}/maze-demos --steps 600 --warmstart-steps 200 --eval-interval 300 "
             f"--eval-episodes 2 --sac.hidden-dims 16 16 --name rfcl {quiet}"),
        ],
        "rl-frames": [("rl --env movingdot --algo a2c --steps 1280 --eval-interval 640 "
                       f"--checkpoint-interval 640 --eval-episodes 2 --no-video --name a2c {quiet}")],
        "frames": [("frames --preset movingdot --segment-length 5 --initial-labels 4 --labels 8 "
                    "--pool-size 8 --steps 1280 --no-video "
                    f"--name dot {quiet}")],
        "piano": [("rl --preset robopianist-debug --steps 60 --warmstart-steps 30 "
                   "--eval-interval 30 --checkpoint-interval 30 --eval-episodes 1 --no-video "
                   f"--sac.batch-size 16 --name piano {quiet}")],
    }  # fmt: skip
    return {name: [c.split() for c in cmds] for name, cmds in commands.items()}


RUN_NAMES = {"rl": "rl", "train-sac": "pebble", "train-ppo": "prefppo", "offline": "offline",
             "finetune": "finetune", "piano": "piano", "rfcl": "rfcl",
             "rl-frames": "a2c", "frames": "dot"}  # fmt: skip


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def untimed(value):
    """`value` without the entries that measure wall-clock time (they differ run to run)."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items()
                if k != "time" and not any(t in k for t in TIMING)}  # fmt: skip
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def file_digest(path: Path, root: Path) -> str:
    """JSON without timings, and with the (temporary) root of the runs written as <root>."""
    if path.suffix in (".json", ".jsonl"):
        text = path.read_text().replace(str(root), "<root>")
    if path.suffix == ".json":
        return digest(json.dumps(untimed(json.loads(text)), sort_keys=True).encode())
    if path.suffix == ".jsonl":
        rows = [untimed(json.loads(line)) for line in text.splitlines()]
        return digest(json.dumps(rows, sort_keys=True).encode())
    return digest(path.read_bytes())


def fingerprint(run_dir: Path, root: Path) -> dict[str, str]:
    """Checkpoint files (the manifest and config excepted: they name paths and sizes of files
    already hashed) and the metrics, without timings."""
    out = {}
    for f in sorted(run_dir.glob("checkpoints/step_*/**/*")):
        if f.is_file() and f.name not in ("manifest.json", "config.json"):
            out[str(f.relative_to(run_dir))] = file_digest(f, root)
    if (run_dir / "metrics.jsonl").exists():
        out["metrics.jsonl"] = file_digest(run_dir / "metrics.jsonl", root)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", type=Path, help="an earlier fingerprint to compare with")
    parser.add_argument("--only", nargs="*", help="workflows to run (default: all)")
    parser.add_argument("--keep", type=Path, help="run in this directory and keep the runs")
    args = parser.parse_args()
    result: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        for name, commands in workflows(root).items():
            if args.only and name not in args.only and name != "rl":  # (the others use rl's run)
                continue
            for command in commands:
                print("prefrl", " ".join(command), flush=True)
                if prefrl(command) != 0:
                    raise SystemExit(f"{name}: prefrl {' '.join(command)} failed")
            result[name] = fingerprint(root / RUN_NAMES[name], root)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    if args.compare is None:
        return 0
    before = json.loads(args.compare.read_text())
    differ = 0
    for name in sorted(set(before) | set(result)):
        a, b = before.get(name, {}), result.get(name, {})
        changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        print(
            f"{name}: {'same' if not changed else 'DIFFERS: ' + ', '.join(changed)}"
            f" ({len(b)} files)"
        )
        differ += bool(changed)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
