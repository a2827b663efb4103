"""An Atari game from synthetic preferences against the same agent on the game's score, in one
grid (learning-from-human-preferences' headline: Pong, and Enduro):

- `prefs`: `prefrl frames --preset pong` (`--preset pong-ppo` with `--algo ppo`): the seed's
  reward CNN, 500 random-policy labels to pre-train it, labels from a scripted teacher comparing
  the clips' clipped scores while the agent trains on the learned reward, for `--steps` agent
  steps (4 frames each);
- `score`: `prefrl rl --env <game> --algo a2c` (or ppo) with the same agent settings and budget,
  on the game's own (clipped) score.

    python benchmarks/atari.py --env atari:Pong --seeds 0 1 2 --jobs 2
    python benchmarks/atari.py --env atari:Enduro --seeds 0 1 --jobs 2
    python benchmarks/atari.py --env atari:Pong --algo ppo --seeds 0 1 2 --jobs 2

`--algo a2c` (the seed's agent, the default) or `--algo ppo` (Baselines' Atari settings; fits
every 6 updates of 1024 agent steps, about A2C's 6,400 steps between fits). A2C trains 2.2x as
many agent steps a second on this CPU (1026 against 456, benchmarks/pixels_agent_speed.py), but
on Pong's score it reached -5.4 in the 5M agent steps (20M frames) the issue allows, where PPO
passed +15 by 1.5M: the 20M-frame rows are PPO's. Each agent has its own rows (`algo`) and run
folders.

The grid (2 methods x seeds) runs as a sweep on Ray: --jobs N trains N runs side by side, and
each run is a run directory under --runs (logs/atari-bench by default)/runs: stop the script and
start it again with the same arguments; finished runs are skipped, stopped ones resume from their
checkpoints; each run's metrics are kept in benchmarks/results/atari-runs (--keep) as it ends,
so a grid longer than one machine's life goes on, on the next, from the runs it finished
(`--methods score` first runs the shorter score runs alone). Writes the game's rows (of the
methods run; the others' rows stay) in benchmarks/results/atari.json: each method's return in its
last evaluation (10 episodes of the true game score, actions sampled) per seed, their mean, and
each run's training hours; `atari_<game>.png` beside it, the evaluation curves of every run of
the game kept from all its grids (both agents, both methods); and a video of each method's first
seed at its last checkpoint, `atari_<run>.mp4` (named in its row: the reproductions page shows it).
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np
from movingdot import training_seconds
from sweep_grid import add_grid_flags, run_grid

from prefrl.presets import FRAME_PRESETS
from prefrl.rl.config import RLConfig
from prefrl.rundir.metrics import read_metrics

RESULTS = Path(__file__).parent / "results" / "atari.json"
EVAL_EPISODES = 10
"""The target is judged on the last 10 evaluation episodes."""
METHODS = ("prefs", "score")
"""Run by default in this order; the labels of `configs`' grid end with them."""
CHECKPOINT_INTERVAL = 100_000
"""Agent steps between checkpoints: about 10 minutes of a run on 2 busy cores, what a stopped
run loses."""


def configs(env: str, steps: int, labels: int, initial_labels: int, pretrain_steps: int,
            eval_episodes: int = EVAL_EPISODES, algo: str = "a2c") -> dict:  # fmt: skip
    """The grid's two runs of a seed, by label: `<game>_prefs` and `<game>_score` for A2C,
    `<game>_ppo-prefs` and `<game>_ppo-score` for PPO."""
    game = env.split(":", 1)[1].lower()
    preset = FRAME_PRESETS["pong-ppo" if algo == "ppo" else "pong"].config
    prefs = dataclasses.replace(preset, env=env, steps=steps, labels=labels,
                                initial_labels=initial_labels,
                                pretrain_steps=pretrain_steps, eval_episodes=eval_episodes,
                                video=False, checkpoint_interval=CHECKPOINT_INTERVAL)  # fmt: skip
    score = RLConfig(env=env, algo=algo, steps=steps, a2c=prefs.a2c, ppo_frames=prefs.ppo_frames,
                     eval_interval=prefs.eval_interval, eval_episodes=eval_episodes,
                     checkpoint_interval=prefs.checkpoint_interval,
                     log_interval=prefs.log_interval, video=False)  # fmt: skip
    prefix = "" if algo == "a2c" else f"{algo}-"
    return {f"{game}_{prefix}prefs": prefs, f"{game}_{prefix}score": score}


def row_key(row: dict) -> tuple[str, str, str]:
    """What a row is the result of: game, method and agent (rows before `algo` were A2C's)."""
    return row["env"], row["method"], row.get("algo", "a2c")


def method_of(label: str) -> str:
    """`prefs` or `score`, of a grid label (`pong_ppo-prefs`: prefs)."""
    return label.rsplit("_", 1)[1].rsplit("-", 1)[-1]


def describe(label: str) -> str:
    """A grid label in words: `pong_ppo-prefs` is "PPO from preferences"."""
    agent = "PPO" if "_ppo-" in label else "A2C"
    return f"{agent} {'from preferences' if method_of(label) == 'prefs' else 'on the score'}"


TARGETS = {"atari:Pong": 15.0}
"""The issue's target return, drawn on the game's plot."""
VIDEO_STEPS = 1000
"""Agent steps in the video of each method's first seed: about a minute of play."""


def film(label: str, run: Path, seed: int, out: Path, made: dict | None,
         steps: int = VIDEO_STEPS) -> dict | None:  # fmt: skip
    """The row's `video` entry: one episode's first `steps` agent steps of the run's last
    checkpoint at the game's own size, in `atari_<label>.mp4` beside `out` (with the learned
    reward under the frames, from preferences); made once, while the run's checkpoints are on
    this machine (`made`: the entry of the video already there; delete the file to make it
    again)."""
    from prefrl.rundir.checkpoints import latest_checkpoint

    video = out.resolve().with_name(f"atari_{label}.mp4")
    root = Path(__file__).resolve().parent.parent
    path = str(video.relative_to(root) if video.is_relative_to(root) else video)
    if video.exists():
        return made if made and made.get("path") == path else None
    ckpt = latest_checkpoint(run)
    if ckpt is None:  # (a run restored from its kept metrics)
        return None
    from prefrl.pixels.viewer import view_frames_checkpoint

    seen = view_frames_checkpoint(ckpt, video, seed=0, size=210, max_steps=steps)
    at = int(ckpt.name.removeprefix("step_"))
    caption = (f"{describe(label)}, seed {seed} at {at:,} agent steps: the first "
               f"{seen.steps:,} agent steps of an episode, actions sampled as in training "
               f"(score {seen.true_return:+.0f} by then)")  # fmt: skip
    if seen.learned_return is not None:
        caption += "; the learned reward of each step under the frames"
    print(f"wrote {video}: {caption}", flush=True)
    return {"path": path, "caption": caption}


def plot_game(env: str, keep: Path, path: Path) -> list[str]:
    """Evaluation returns over frames of every run of `env` kept under `keep` (all its grids: each
    agent on the score and from preferences), each agent and method's mean over its seeds with
    every seed faint behind it. Returns the curves' legend (empty: no run to plot)."""
    game = env.split(":", 1)[1].lower()
    curves: dict[str, list] = {}
    for metrics in sorted(keep.glob(f"*/{game}_*_s*/metrics.jsonl.gz")):
        label = metrics.parent.name.rsplit("_s", 1)[0]
        with gzip.open(metrics, "rt") as f:
            rows = [r for r in map(json.loads, f) if "eval/return_mean" in r]
        curves.setdefault(label, []).append(
            (np.array([4 * r["step"] / 1e6 for r in rows]), [r["eval/return_mean"] for r in rows])
        )
    if not curves:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    legend = []
    for colour, (label, runs) in zip(
        ("C0", "C1", "C2", "C3"), sorted(curves.items()), strict=False
    ):
        for frames, returns in runs:
            ax.plot(frames, returns, color=colour, alpha=0.25, lw=1)
        n = min(len(r[1]) for r in runs)
        legend.append(f"{describe(label)} ({len(runs)} seed{'s' * (len(runs) > 1)})")
        ax.plot(runs[0][0][:n], np.mean([r[1][:n] for r in runs], axis=0), color=colour, lw=2,
                label=legend[-1])  # fmt: skip
    if env in TARGETS:
        ax.axhline(TARGETS[env], color="grey", ls="--", lw=1, label="target")
    ax.set(xlabel="frames (millions)", ylabel=f"evaluation return ({EVAL_EPISODES} episodes)",
           title=env)  # fmt: skip
    # (below the axes: curves that learn climb through any corner of them)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize="small",
              frameon=False)  # fmt: skip
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return legend


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="atari:Pong", help="atari:Pong, atari:Enduro, ...")
    parser.add_argument("--steps", type=int, default=5_000_000,
                        help="agent steps a run (4 frames each; 5M = 20M frames)")  # fmt: skip
    parser.add_argument("--labels", type=int, default=FRAME_PRESETS["pong"].config.labels)
    parser.add_argument("--initial-labels", type=int,
                        default=FRAME_PRESETS["pong"].config.initial_labels,
                        help="of --labels, those asked of random-policy clips before the agent")  # fmt: skip
    parser.add_argument("--pretrain-steps", type=int,
                        default=FRAME_PRESETS["pong"].config.pretrain_steps,
                        help="the reward CNN's steps on the first labels, before the agent")  # fmt: skip
    parser.add_argument("--eval-episodes", type=int, default=EVAL_EPISODES)
    parser.add_argument("--algo", default="a2c", choices=["a2c", "ppo"],
                        help="the agent of both methods (its own rows and run folders)")  # fmt: skip
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS),
                        help="prefs: from preferences; score: on the game's score. A grid of "
                        "some methods leaves the others' rows")  # fmt: skip
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--video-steps", type=int, default=VIDEO_STEPS,
                        help="agent steps in the video each method's first seed leaves beside "
                        "--out (atari_<run>.mp4, in its row; 0: none)")  # fmt: skip
    parser.add_argument("--runs", type=Path, default=Path("logs/atari-bench"))
    add_grid_flags(parser)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--keep", type=Path,
                        help="where each run's metrics are kept as it ends, by --runs name "
                        "(default: atari-runs beside --out; commit them): a new machine's grid "
                        "restores them and runs the others")  # fmt: skip
    args = parser.parse_args()
    if not args.env.startswith("atari:"):
        parser.error(f"--env {args.env!r}: an Atari game, atari:<Game> (e.g. atari:Pong)")
    if args.video_steps < 0:
        parser.error(f"--video-steps {args.video_steps}: 0 (no video) or a positive number")

    grid = configs(args.env, args.steps, args.labels, args.initial_labels, args.pretrain_steps,
                   args.eval_episodes, args.algo)  # fmt: skip
    grid = {label: c for label, c in grid.items() if method_of(label) in args.methods}
    sweep = run_grid(grid, args.seeds, args.runs, args,
                     keep=args.keep or args.out.with_name("atari-runs"))  # fmt: skip
    old = json.loads(args.out.read_text()) if args.out.exists() else {"results": []}
    rows = []
    for label in grid:
        runs = [sweep.run_dir(label, seed) for seed in args.seeds]
        finals = [[r for r in read_metrics(run) if "eval/return_mean" in r][-1] for run in runs]
        returns = [f["eval/return_mean"] for f in finals]
        rows.append({
            "env": args.env, "method": method_of(label), "algo": args.algo,
            "agent_steps": args.steps,
            "frames": 4 * args.steps, "seeds": args.seeds,
            "return_mean": float(np.mean(returns)),
            "return_std": float(np.std(returns, ddof=1)) if len(returns) > 1 else None,
            "per_seed": returns, "eval_step": [f["step"] for f in finals],
            "eval_episodes": args.eval_episodes,
            "hours_per_seed": [training_seconds(run) / 3600 for run in runs],
            **({"labels": args.labels} if label.endswith("prefs") else {}),
            "device": "cpu", "command": "python benchmarks/atari.py " + " ".join(sys.argv[1:]),
        })  # fmt: skip
        before = next((r for r in old["results"] if row_key(r) == row_key(rows[-1])), {})
        video = args.video_steps and film(label, runs[0], args.seeds[0], args.out,
                                          before.get("video"), args.video_steps)  # fmt: skip
        if video:
            rows[-1]["video"] = video
        print(json.dumps(rows[-1]), flush=True)
    written = {row_key(r) for r in rows}
    old["results"] = [r for r in old["results"] if row_key(r) not in written] + rows
    old["machine"] = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    args.out.write_text(json.dumps(old, indent=1) + "\n")
    print(f"wrote {args.out}; the sweep's table: {args.runs / 'results.md'}")
    plot = args.out.with_name(f"atari_{args.env.split(':', 1)[1].lower()}.png")
    if plot_game(args.env, args.keep or args.out.with_name("atari-runs"), plot):
        print(f"wrote {plot}: every kept run of {args.env}, from all its grids")
    return 0


if __name__ == "__main__":
    sys.exit(main())
