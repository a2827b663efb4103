"""The GPU rows, on a machine with a GPU and about 16 cores, without thought:

    python benchmarks/gpu_rows.py                    # every job, chunk after chunk, to the end
    python benchmarks/gpu_rows.py --chunks 1         # one chunk of at most 9 minutes, then stop

The jobs, in order: RFCL in the paper's wall-time config (`--preset rfcl-adroit`, 1M steps, 3
seeds) on adroit:door from people's demos (hand_dapg's door pickle; from planned demos where it
is not there), then on pen and relocate from planned demos; then Pong from synthetic preferences
at the paper's budget (`--preset pong`, 10M agent steps, 3 seeds) beside A2C on the score; then
QPA on dmc:walker-walk from 100 labels with QPA's own agent (B-Pref's 2x1024 SAC, batches of
1024: `--methods qpa-preset`, 3 seeds, beside SAC on the true reward), which the CPU cannot run
in a session. Each job is one resumable benchmark command (`benchmarks/rfcl.py`,
`benchmarks/atari.py`, `benchmarks/label_efficiency.py`) writing its rows, when its grid is
done, into the GPU's own results files (`rfcl_<gpu>.json`, `atari_<gpu>.json`,
`label_efficiency_<gpu>.json`; the CPU's are never touched).

A chunk runs the first unfinished job for at most `--chunk-minutes` (9 by default: the device
tool's commands end at 10), then stops it as Ctrl-C does (its runs checkpoint) and, with chunks
left, starts it again: it resumes from its run directories under `--state` (logs/gpu-rows). A job
is done when its command ends by itself; `--state`/progress.json keeps which are. Start the
script again, on the same machine, to go on where it stopped. Run directories hold replay
buffers and clips (100 MB and more a run), so they stay on the machine that made them.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DAPG_DOOR = ROOT / "logs/human/door-v0_demos.pickle"
"""hand_dapg's door demos (the demonstrations guide says how to fetch them)."""


def jobs(state: Path, device: str) -> dict[str, list[str]]:
    """Each job's command (run from the repository's root)."""
    slug = device.lower().replace(" ", "-")
    state = shlex.quote(str(state))
    rfcl = ("benchmarks/rfcl.py --demos 5 --preset rfcl-adroit --seeds 0 1 2 --jobs 3 "
            "--gpus-per-run 0.3 --env-workers 4")  # fmt: skip
    door = "--reverse-time-divisor 1"  # (planned demos: the whole of what is left)
    if DAPG_DOOR.exists():
        door = f"--dapg {shlex.quote(str(DAPG_DOOR))} --reverse-time-divisor 3 --demo-action-scale 1.25"
    out = shlex.quote(str(ROOT / f"benchmarks/results/atari_{slug}.json"))
    labels_out = shlex.quote(str(ROOT / f"benchmarks/results/label_efficiency_{slug}.json"))
    commands = {
        "rfcl-door": f"{rfcl} --env adroit:door {door} --runs {state}/rfcl-door",
        "rfcl-pen": f"{rfcl} --env adroit:pen --reverse-time-divisor 1 --runs {state}/rfcl-pen",
        "rfcl-relocate": f"{rfcl} --env adroit:relocate --reverse-time-divisor 1 --settle 17 "
                         f"--runs {state}/rfcl-relocate",
        "pong": "benchmarks/atari.py --env atari:Pong --steps 10000000 --seeds 0 1 2 --jobs 3 "
                f"--gpus-per-run 0.3 --runs {state}/atari --out {out}",
        "walker-qpa": "benchmarks/label_efficiency.py --envs dmc:walker-walk --labels 100 "
                      "--methods qpa-preset --seeds 0 1 2 --jobs 3 --gpus-per-run 0.3 "
                      f"--runs-dir {state}/labels --out {labels_out}",
    }  # fmt: skip
    return {name: [sys.executable, *shlex.split(c)] for name, c in commands.items()}


def run_chunk(command: list[str], seconds: float, log: Path, grace: float = 120.0) -> int | None:
    """Run `command` for at most `seconds`, then stop it as Ctrl-C does (SIGINT to its process
    group, then, after `grace` seconds to checkpoint, SIGKILL). Its exit status when it ended
    by itself; None when it was stopped."""
    with log.open("a") as out:
        out.write(f"\n== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n")
        out.flush()
        proc = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        try:
            return proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return None


def main(argv: list[str] | None = None, job_commands: dict[str, list[str]] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", type=Path, default=ROOT / "logs/gpu-rows")
    parser.add_argument("--chunk-minutes", type=float, default=9.0)
    parser.add_argument("--chunks", type=int, default=None, help="stop after this many chunks")
    parser.add_argument("--grace-seconds", type=float, default=120.0,
                        help="time a stopped job has to checkpoint")  # fmt: skip
    parser.add_argument("--only", nargs="+", help="these jobs (default: all, in order)")
    args = parser.parse_args(argv)
    if args.chunk_minutes <= 0 or (args.chunks is not None and args.chunks < 1):
        parser.error("--chunk-minutes must be > 0 and --chunks at least 1")
    args.state.mkdir(parents=True, exist_ok=True)
    if job_commands is None:
        import jax

        device = jax.devices()[0].device_kind
        if device == "cpu":
            parser.error("no GPU: these rows need one (jax sees only the CPU)")
        job_commands = jobs(args.state, device)
    unknown = set(args.only or ()) - set(job_commands)
    if unknown:
        parser.error(f"--only {sorted(unknown)}: the jobs are {', '.join(job_commands)}")
    progress_file = args.state / "progress.json"
    done = set(json.loads(progress_file.read_text())["done"]) if progress_file.exists() else set()
    chunks = 0
    for name, command in job_commands.items():
        if name in done or (args.only and name not in args.only):
            continue
        while args.chunks is None or chunks < args.chunks:
            chunks += 1
            print(f"chunk {chunks}: {name} for at most {args.chunk_minutes:g} minutes", flush=True)
            log = args.state / f"{name}.log"
            status = run_chunk(command, 60 * args.chunk_minutes, log, args.grace_seconds)
            if status not in (None, 0):
                sys.exit(f"{name} failed (exit status {status}): see the end of {log}")
            if status == 0:
                done.add(name)
                progress_file.write_text(json.dumps({"done": sorted(done)}) + "\n")
                print(f"{name}: done, its rows written", flush=True)
                break
        else:
            break
    left = [n for n in job_commands if n not in done and (not args.only or n in args.only)]
    print("all jobs done" if not left else f"left: {', '.join(left)} (run this again to go on; "
          f"logs in {args.state})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
