"""Write docs/benchmarks.md from benchmarks/results/*.json: the README's headline table, then one
section per benchmark with what it measures, its baseline, the commands that produced its
figures, the figures themselves and its plots.

    python docs/gen_benchmarks.py          # (`make docs` runs it before building the site)

Figures superseded by a later run are in git history, not on the page; how they moved, and the
experiments behind the design, are in the dated notes (docs/notes/) each section links to.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
MAX_COLUMNS = 10


@dataclass(frozen=True)
class Benchmark:
    title: str
    files: tuple[str, ...]
    """Result files (names without .json), the benchmark's main file first."""
    what: str
    baseline: str
    columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per table (a list of rows in a file): the columns shown; the file has them all."""
    plots: tuple[str, ...] = ()
    """Globs of PNGs in benchmarks/results/."""
    notes: tuple[tuple[str, str], ...] = ()
    """(title, page under docs/) of the notes that tell how the figures came about."""


# fmt: off
BENCHMARKS = [
    Benchmark(
        "SAC loop throughput",
        ("sac_throughput", "sac_throughput_repeat", "sac_throughput_halfcheetah_sb3_9rounds",
         "sac_throughput_nvidia-h100-80gb-hbm3"),
        "Env steps per second of SAC's whole training loop (one gradient step per env step, "
        "batch 256, 2x256 networks), the median of rounds in which the contestants take turns; "
        "`paired_ratios` is the median of the rounds' own ratios.",
        "Stable-Baselines3's SAC (`sb3`) and SBX's (`sbx`) on the same envs in the same run; "
        "`ceiling` is prefrl's jitted update alone on batches already in memory (in its own "
        "process, and again in the loop's: `ceiling_same_process`).",
        {"results": ("env", "prefrl", "sb3", "sbx", "ceiling", "ceiling_same_process",
                     "paired_ratios")},
        notes=(("SAC's loop on the CPU", "notes/2026-11-28-sac-loop.md"),),
    ),
    Benchmark(
        "SAC learning",
        ("sac_learning",),
        "Final return of SAC (preset `sac-mujoco`) on HalfCheetah-v5 after 300k steps: the mean "
        "of 10 deterministic evaluation episodes, per seed.",
        "The SAC paper's HalfCheetah at the same budget: 5000+ (published, not run here).",
    ),
    Benchmark(
        "Learning from preferences (PEBBLE, label efficiency)",
        ("label_efficiency",),
        "Final true return of a preference run (PEBBLE: SAC and a reward model learned from a "
        "scripted teacher's labels; `method` qpa: QPA's policy-aligned queries, hybrid replay "
        "and crops, run in the same grid) and the loop's cost: the share of its wall time spent "
        "selecting queries, labelling, fitting the reward model and relabelling, and those "
        "seconds per label.",
        "SAC on the true reward with the same agent, steps and seeds, in the same invocation "
        "(`ratio`: preferences / true reward; with negative returns, below 1 is better).",
        {"results": ("env", "method", "variant", "teacher", "labels", "steps", "seeds",
                     "pref_return_mean", "pref_return_std", "true_reward_return_mean", "ratio",
                     "loop_overhead", "loop_seconds_per_label")},
        notes=(("PEBBLE on HalfCheetah, Hopper and the walker", "notes/2026-11-28-pebble.md"),),
    ),
    Benchmark(
        "Offline preferences (Preference Transformer, MR, NMR, then IQL)",
        ("offline", "offline_throughput", "offline_throughput_nvidia-h100-80gb-hbm3"),
        "D4RL-normalised score of IQL on a medium-replay dataset (made from a prefrl SAC run) "
        "relabelled by a reward model fitted to 500 labelled queries of 100 steps; and the "
        "reward models' and IQL's training speed (`--throughput`).",
        "IQL on the dataset's true reward, same settings and seeds, in the same invocation "
        "(`ratio_to_true`); the `true-like-learned` control gives the true reward a learned "
        "reward's centring and +0.5.",
        {"results": ("dataset", "teacher", "reward", "seeds", "iql_steps", "score_mean",
                     "score_std", "true_score_mean", "ratio_to_true", "device")},
        plots=("offline_*.png",),
        notes=(("Offline preferences on Hopper and Walker2d", "notes/2026-11-28-offline.md"),),
    ),
    Benchmark(
        "Labelling under faults",
        ("label_faults",),
        "Labels acknowledged by the labelling app against those stored and trained on, while "
        "the trainer, the web server and the clip renderer are killed with SIGKILL at random.",
        "None needed: every acknowledged label must be stored once, on its own pair, and "
        "trained on.",
    ),
    Benchmark(
        "Sweeps on Ray",
        ("sweep",),
        "Wall time of 8 short runs as a sweep on Ray, two at a time; and a killed Ray node's "
        "run resumed on another.",
        "The same runs one after another by hand (`by_hand_seconds`; `overhead` = sweep / by "
        "hand).",
    ),
    Benchmark(
        "Labelling under load",
        ("web_crowd", "web_crowd_alone", "web_load"),
        "How many people `prefrl serve` serves, and what each request costs it: simulated "
        "people (a label each 2-5 s, with the compare page's requests) arriving 40 at a time "
        "until p95 passes 100 ms (`capacity_people`), on PostgreSQL with two server processes, "
        "beside a SAC run training on the same cores (`web_crowd`) and without it "
        "(`web_crowd_alone`), with the CPU time per request of the server and of PostgreSQL "
        "(`cpu_ms_per_request`); and 20 clients with no pause on SQLite (`web_load`); then the "
        "store is read directly for lost, duplicated and doubly handed-out labels.",
        "The target: p95 under 100 ms, none lost or duplicated.",
        notes=(("The labelling app under load", "notes/2026-11-28-labelling-load.md"),),
    ),
    Benchmark(
        "The piano (RoboPianist)",
        ("piano",),
        "Env steps per second through prefrl's wrapping, a 10 s clip with sound, and the "
        "`robopianist-debug` preset's key-press F1 over 60k steps.",
        "Raw robopianist on the same song, task settings and actions (interleaved rounds); "
        "a random policy's F1.",
    ),
    Benchmark(
        "Demonstrations (RFCL)",
        ("rfcl", "rfcl_nvidia-h100-80gb-hbm3", "metaworld_check"),
        "Success at the end of evaluation episodes from the task's own initial states "
        "(deterministic actions) after RFCL's reverse then forward curriculum from a few demos, "
        "on the maze and Adroit's door, pen and relocate; RFCL's env steps per second; and "
        "whether MetaWorld's tasks behave on prefrl's MuJoCo 3.17 as on the 3.3.0 MetaWorld "
        "pins (`metaworld_check`, from `tools/metaworld_check.py`: the largest differences of a "
        "reset and of a step taken from the same state, in m, and the scripted policy's success "
        "rates on 3.3.0 and 3.17).",
        "SAC with the demos in half of each batch (`sac+demos`, RLPD-style) and SAC alone "
        "(`sac`), run through RFCL's loop with its curricula off, same settings and seeds; on "
        "the GPU, the paper's 3-task Adroit mean (`published_bar`).",
        {"results": ("env", "method", "demo_source", "demo_action_scale", "env_steps", "seeds",
                     "success_mean", "per_seed", "success_once_mean", "steps_per_s"),
         "throughput": ("config", "env", "steps_per_s", "no_curriculum_steps_per_s"),
         "preset_throughput": ("config", "env", "steps_per_s", "hours_per_1M_steps"),
         "side_by_side": ("env", "env_steps", "success_at_end", "success_once",
                          "demos_solved_at_stop", "start_fraction_mean_at_stop", "steps_per_s"),
         "tasks": ("task", "agrees", "reset_obs_difference", "step_max_obs_difference",
                   "step_success_differs", "scripted_success_rate", "differs")},
        plots=("rfcl_*.png",),
        notes=(("RFCL on Adroit's door, pen and relocate", "notes/2026-11-28-rfcl-adroit.md"),
               ("RFCL on the pen, rule by rule", "notes/2026-11-28-rfcl-pen.md")),
    ),
    Benchmark(
        "From pixels (MovingDot, Pong, Enduro)",
        ("pixels", "pixels_nvidia-h100-80gb-hbm3", "atari"),
        "MovingDot's return after 150k agent steps from synthetic preferences; Atari games "
        "(`atari`: the return over the last 10 evaluation episodes after 5M agent steps, 20M "
        "frames, from synthetic preferences, `prefs`, or on the game's score, `score`); the reward "
        "CNN's held-out accuracy on Pong; the speed of the CNN steps, of the agents' training and "
        "of stepping Pong.",
        "A2C on MovingDot's true reward, same seeds; the same agent (`algo`) on an Atari game's "
        "score in the same grid; PyTorch 2.13 on the same CNN steps and Stable-Baselines3 on the "
        "same envs and batches (`peer`), rounds alternating.",
        {"results": ("env", "method", "algo", "agent_steps", "frames", "seeds", "return_mean",
                     "per_seed", "labels", "hours_per_seed"),
         "speed": ("what", "algo", "env_workers", "prefrl", "peer", "peer_value", "ratio",
                   "unit"),
         "env_speed": ("what", "way", "steps_per_s", "cores"),
         "reward_accuracy": ("env", "labels", "held_out_pairs", "held_out_accuracy",
                             "clip_return_corr", "gradient_steps"),
         "movingdot": ("env", "method", "agent_steps", "return_mean", "return_std", "per_seed"),
         "learning": ("env", "labels", "agent_steps", "seeds", "pref_return_mean",
                      "true_reward_return_mean"),
         "preference_loop": ("what", "prefrl", "pretrain_seconds", "hours_per_10M_steps"),
         "reward_fit": ("what", "before", "after", "ratio", "measured")},
        notes=(("Pixels on the CPU and on an H100", "notes/2026-11-28-pixels.md"),),
    ),
    Benchmark(
        "Fine-tuning from ratings (CPL)",
        ("cpl",),
        "Return of a SAC policy (a checkpoint about half-way through its run) after 2000 CPL "
        "steps on 500 pairs of its rated clips, per rater and set-up.",
        "The start policy on the same evaluation seeds (`ratio` = fine-tuned / start); the "
        "control clones the rated segments with no preference loss (`regulariser` bc, "
        "`preference_weight` 0).",
        {"results": ("env", "rater", "sources", "siblings", "bias", "mean_only", "regulariser",
                     "start_return", "finetuned_return_mean", "ratio")},
        notes=(("CPL on Hopper and HalfCheetah", "notes/2026-11-28-cpl.md"),),
    ),
    Benchmark(
        "Clip rendering",
        ("clip_render",),
        "Frames per second of a 50-frame 256x256 Hopper clip re-created from stored states, "
        "rendered offscreen (EGL on the CPU) and encoded as H.264, end to end.",
        "MuJoCo's default rendering quality, same clips (`speedup`).",
    ),
    Benchmark(
        "k-NN state-entropy reward",
        ("knn_entropy",),
        "Milliseconds for PEBBLE's unsupervised reward of one SAC batch: 256 observations "
        "against 8192 stored ones, 24 dimensions.",
        "The obvious formulation (the full difference tensor, `lax.top_k`), same run.",
    ),
    Benchmark(
        "Two runs at once on two cores",
        ("side_by_side",),
        "Env steps per second in all of RFCL's pen loop (rfcl-adroit-cpu, updates after a warm "
        "start): two runs at once, with XLA's own thread pool or one thread each.",
        "One run alone on the same machine, rounds alternating (`vs_two_default`: against two "
        "with XLA's pool).",
        {"results": ("setting", "runs_at_once", "machine_steps_per_s", "vs_two_default")},
    ),
    Benchmark(
        "Reward-model fit cost",
        ("reward_fit_cost",),
        "Milliseconds per comparison-epoch fitting a reward model to 1000 labelled pairs of "
        "50-step HalfCheetah segments, one thread.",
        "imitation 1.0.1's preference comparisons with the same network (BasicRewardNet "
        "32-32), in the same run.",
    ),
    Benchmark(
        "Hopper backflip from a rule teacher",
        ("backflip", "backflip-bench-backflip-one-turn"),
        "PEBBLE on at most 1000 answers of a rule teacher (`examples/backflip.py`, the rule named "
        "in `rule`), 500k steps: the rule's own score of the last evaluation (5 episodes) and "
        "the backflips landed an episode. `backflip-bench-backflip-one-turn` holds the fifth "
        "rule's further seeds, run with that rule's code (`code`: its commit; queue row 1g).",
        "SAC given the same rule (x100) as its reward, same seed and budget (`rule-reward`).",
        plots=("backflip-*.png",),
        notes=(("The Hopper backflip from a rule teacher", "notes/2026-11-29-backflip.md"),),
    ),
]
# fmt: on


def cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return ", ".join(cell(v) for v in value[:6]) + (" ..." if len(value) > 6 else "")
    if isinstance(value, dict):
        return ", ".join(f"{k} {cell(v)}" for k, v in value.items() if not isinstance(v, list))
    return str(value).replace("|", "\\|").replace("\n", " ")


def scalar(value) -> bool:
    return (
        value is None
        or isinstance(value, str | int | float | bool)
        or (isinstance(value, list) and all(isinstance(v, int | float | str) for v in value))
    )


def rows_table(rows: list[dict], columns: tuple[str, ...] | None) -> list[str]:
    if columns is None:
        columns = ()
        for row in rows:
            columns += tuple(k for k, v in row.items() if k not in columns and scalar(v))
        columns = tuple(c for c in columns if c != "command")[:MAX_COLUMNS]
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return out


def is_command(key: str) -> bool:
    return key == "command" or key.endswith("_command")


def commands_block(commands: list[str]) -> list[str]:
    unique = list(dict.fromkeys(commands))
    return ["```bash", *unique, "```", ""] if unique else []


def file_section(name: str, data: dict, columns: dict[str, tuple[str, ...]]) -> list[str]:
    lines = [f"### `{name}.json`", ""]
    lines += commands_block([v if isinstance(v, str) else " ".join(v)
                             for k, v in data.items() if is_command(k)])  # fmt: skip
    figures = {k: v for k, v in data.items() if not is_command(k) and scalar(v)}
    if figures:
        lines += ["| figure | value |", "|---|---|"]
        lines += [f"| {k} | {cell(v)} |" for k, v in figures.items()]
        lines.append("")
    for key, value in data.items():
        if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
            lines += [f"**{key}** ({len(value)} rows)", "", *rows_table(value, columns.get(key))]
            lines += ["", *commands_block([r["command"] for r in value if "command" in r])]
        elif isinstance(value, dict) and value and all(isinstance(r, dict) for r in value.values()):
            rows = [{"": name, **row} for name, row in value.items()]
            lines += [f"**{key}**", "", *rows_table(rows, None), ""]
        elif isinstance(value, dict) and value and all(scalar(v) for v in value.values()):
            lines += [f"**{key}**", "", "| | value |", "|---|---|"]
            lines += [f"| {k} | {cell(v)} |" for k, v in value.items()] + [""]
    return lines


def anchor(title: str) -> str:
    """The heading's id as the site makes it (MkDocs' toc: lower case, words joined by -)."""
    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", title).strip().lower())


def section(bench: Benchmark) -> list[str]:
    lines = [f"## {bench.title}", "", bench.what, "", f"**Baseline:** {bench.baseline}", ""]
    scripts = sorted({m for name in bench.files if (RESULTS / f"{name}.json").exists()
                      for m in re.findall(r"benchmarks/\w+\.py",
                                          (RESULTS / f"{name}.json").read_text())})  # fmt: skip
    if scripts:
        lines += ["Scripts: " + ", ".join(f"`{s}`" for s in scripts) + ".", ""]
    if bench.notes:
        links = [f"[{title}]({page})" for title, page in bench.notes]
        lines += ["How these figures came about: " + "; ".join(links) + ".", ""]
    for pattern in bench.plots:
        for image in sorted(RESULTS.glob(pattern)):
            lines += [f"![{image.stem}](results/{image.name})", ""]
    for name in bench.files:
        path = RESULTS / f"{name}.json"
        if path.exists():
            lines += file_section(name, json.loads(path.read_text()), bench.columns)
    return lines


def headline() -> list[str]:
    """The README's table of headline results, as it stands."""
    readme = (ROOT / "README.md").read_text()
    part = readme.split("## Headline results", 1)[1].split("\n## ", 1)[0]
    return [line for line in part.splitlines() if line.startswith("|")]


def unclaimed() -> list[str]:
    """Result files no benchmark above shows (each gets a plain section at the end)."""
    claimed = {name for bench in BENCHMARKS for name in bench.files}
    return sorted(p.stem for p in RESULTS.glob("*.json") if p.stem not in claimed)


def render() -> str:
    lines = [
        "# Benchmarks",
        "",
        (
            "Generated by `docs/gen_benchmarks.py` from `benchmarks/results/*.json`: the latest "
            "run of each benchmark. Each section says what it measures and against what, then "
            "gives every result file's commands and figures (the files hold more fields than "
            "the tables show). Ratios against peers (SB3, SBX, imitation, PyTorch, published "
            "figures) are measured in the same run. Measured on this project's 2-core CPU "
            "machine unless a file names another device. What the figures mean for the design "
            "is in [Performance notes](performance.md)."
        ),
        "",
        "## Headline results",
        "",
        "The README's table; each row's benchmark is a section below.",
        "",
        *headline(),
        "",
        "Sections: " + ", ".join(f"[{b.title}](#{anchor(b.title)})" for b in BENCHMARKS) + ".",
        "",
    ]
    for bench in BENCHMARKS:
        lines += section(bench)
    for name in unclaimed():
        lines += [f"## {name}", ""]
        lines += file_section(name, json.loads((RESULTS / f"{name}.json").read_text()), {})
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    PAGE.write_text(render())
    images = PAGE.parent / "results"
    images.mkdir(exist_ok=True)
    for image in [*RESULTS.glob("*.png"), *RESULTS.glob("*.mp4")]:  # (videos: the reproductions)
        (images / image.name).write_bytes(image.read_bytes())
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
