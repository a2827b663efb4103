"""A behaviour nobody wrote a reward for: the Hopper backflip, from a rule teacher's preferences,
beside SAC given the same rule as a hand-written reward, with the same seeds and budget.

    python benchmarks/backflip.py --seeds 0                 # every method, one after the other
    python benchmarks/backflip.py --seeds 0 --only pref     # one method (run two side by side)
    python benchmarks/backflip.py --seeds 0 --report-only   # rows and figure from finished runs

The rule, the teacher and the env are in examples/backflip.py: the teacher prefers the clip whose
leaps turn the torso further backwards with the whole body in the air (past a quarter turn, up to
one turn a leap), that lands more backflips on its feet (each worth a turn more) and spends a
little longer on them; the env is Hopper-v5 without early termination whose reward is the same
rule step by step (x100 for SAC, the scale its defaults are tuned for), and evaluations of both
methods report the rule's own score and the backflips landed. Runs go to
runs/bench-backflip-<rule>/<method>_s<seed> (`RULE` in examples/backflip.py names the rule;
earlier rules' runs keep their folders); started again, finished runs are reused and stopped ones
resume from their last checkpoint (a finished one, given more `--steps`, goes on from its last).
Rows are merged into benchmarks/results/backflip.json by rule, method and steps, the curves drawn
to benchmarks/results/backflip-<rule>.png (backflip-NAME.png for a runs folder
bench-backflip-NAME), and the first seed's policy of the preference method that lands the most
flips is filmed to docs/img/backflip.mp4: the first of reset seeds 0-9 in which it lands a
backflip (the row says which, and how many of the episodes tried landed one).
`pref-spread` is PEBBLE with its sessions of labels spread over the whole run; `pref-linear` the
same with a linear-output reward model; `pref-small` PEBBLE with a narrower reward model;
`rule-reward-alpha0.05` (and 0.02) and `pref-alpha0.02` SAC and that PEBBLE with SAC's
temperature held at the value named (`AGENTS`); `rule-reward-ppo` and `pref-ppo` the same with
PPO in place of SAC, `-ppo-norm` with PPO's observations normalised (`PPO_METHODS`), and
`pref-ppo-late` PrefPPO with the labels of `pref-ppo-norm` (`PREF_SETTINGS`); `-anneal` with
PPO's learning rate falling to 0 over the run (`ANNEALED`), `-floor` with the rule pricing time on
the floor (`FLOOR`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import backflip  # (examples/backflip.py: registers the env)

from prefrl import PPOConfig, RLLearner, SACConfig, ScheduleConfig
from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.rundir.metrics import read_metrics

RESULTS = ROOT / "benchmarks/results/backflip.json"
VIDEO = ROOT / "docs/img/backflip.mp4"
DONE = "finished.json"

# Every method: SAC's defaults, 1k random steps, an evaluation of 5 episodes every 10k steps. The
# preference side is examples/backflip.py's `teach`: pebble-walker-1000's schedule (sessions of
# 100 labels every 20k steps after 9k unsupervised steps; the 1000 labels spent by 190k), or
# with `spread` the same sessions every 45k steps, the last at 450k.
METHODS = {
    "pref": "PEBBLE on the rule's preferences",
    "pref-spread": "PEBBLE, its labels spread over the run",
    "pref-linear": "PEBBLE, labels spread, a linear-output reward (3 x 3x128)",
    "pref-small": "PEBBLE, a narrower reward (3 x 3x128, tanh)",
    "rule-reward": "SAC on the rule (x100) as reward",
    "rule-reward-alpha0.05": "SAC on the rule (x100), its temperature held at 0.05",
    "rule-reward-alpha0.02": "SAC on the rule (x100), its temperature held at 0.02",
    "pref-alpha0.02": "PEBBLE, a narrower reward, SAC's temperature held at 0.02",
    "rule-reward-ppo": "PPO on the rule (x1) as reward",
    "pref-ppo": "PrefPPO (PPO from the rule's preferences), a narrower reward, labels spread",
    "rule-reward-ppo-norm": "PPO on the rule (x1), observations normalised",
    "pref-ppo-norm": "PrefPPO, observations normalised, 200k unsupervised steps, then labels",
    "pref-ppo-late": "PrefPPO, 200k unsupervised steps, then labels (pref-ppo-norm's, plain PPO)",
    "rule-reward-ppo-anneal": "PPO on the rule (x1), its learning rate falling to 0 over the run",
    "pref-ppo-norm-anneal": "pref-ppo-norm, PPO's learning rate falling to 0 over the run",
    "rule-reward-ppo-floor": "PPO on the rule (x1), time on the floor priced",
    "pref-ppo-norm-floor": "pref-ppo-norm, the teacher pricing time on the floor",
}
COLORS = {"pref": "C0", "pref-spread": "C2", "pref-linear": "C3", "pref-small": "C4",
          "rule-reward": "C1", "rule-reward-alpha0.05": "C5", "rule-reward-alpha0.02": "C6",
          "pref-alpha0.02": "C7", "rule-reward-ppo": "C8", "pref-ppo": "C9",
          "rule-reward-ppo-norm": "k", "pref-ppo-norm": "C0", "pref-ppo-late": "C2",
          "rule-reward-ppo-anneal": "C1", "pref-ppo-norm-anneal": "C3",
          "rule-reward-ppo-floor": "C4", "pref-ppo-norm-floor": "C5"}  # fmt: skip
# pref-linear: a tanh output bounds each step's learned reward, and the eighth try's ensemble,
# taught on leaps of 0.3-0.4 of a turn, rated bigger leaps below them (docs/notes/
# 2026-11-29-backflip.md); a linear output can keep growing with the turns, as Christiano et
# al.'s did. Half the width makes its fits of 190-step clips about 3x cheaper, so a run ends
# within a working session.
LINEAR_REWARD = dataclasses.replace(backflip.PEBBLE_REWARD, output="linear", hidden_dims=(128,) * 3)
# pref-small: PEBBLE's tanh output at that width, its labels by 190k as `pref`'s: 1000 labels of
# 190-step clips cost the 3x256 ensemble up to 13 minutes a fit (about 2 hours of a 4.5-hour run).
SMALL_REWARD = dataclasses.replace(backflip.PEBBLE_REWARD, hidden_dims=(128,) * 3)
REWARDS = {"pref-linear": LINEAR_REWARD, "pref-small": SMALL_REWARD,
           "pref-alpha0.02": SMALL_REWARD, "pref-ppo": SMALL_REWARD,
           "pref-ppo-norm": SMALL_REWARD, "pref-ppo-late": SMALL_REWARD,
           "pref-ppo-norm-anneal": SMALL_REWARD, "pref-ppo-norm-floor": SMALL_REWARD}  # fmt: skip
# rule-reward-alpha*: SAC's temperature tuned itself down to 0.004-0.01 on the rule (x100), because
# the idle steps (lying, standing) met its entropy target on their own; in the air its actions
# then grew narrow and often saturated (a fifth of its pre-tanh means beyond 3), so one flight
# varied little from the next and the critic's gradient hardly reached the actor, while a search
# from the same leap states lands flips (tools/backflip_landable.py; backflip note, thirteenth
# try). Held at 0.05, saturating costs 0.3-0.9 of the ~3 a flight step earns,
# but its entropy stayed near the most tanh allows (1.6 nats) and it hardly leapt (rule score 0.2
# by 160k, where the tuned run made 0.8 by 30k); 0.02 is between that and the tuned 0.004-0.013.
HELD_005, HELD_002 = (SACConfig(learn_temperature=False, init_temperature=a) for a in (0.05, 0.02))
AGENTS = {"rule-reward-alpha0.05": HELD_005, "rule-reward-alpha0.02": HELD_002,
          "pref-alpha0.02": HELD_002}  # fmt: skip
# *-ppo: PPO (the PPO paper's MuJoCo settings) in place of SAC. rl-teacher's backflip was taught
# to an on-policy agent (TRPO) over millions of steps; its state-independent noise does not
# collapse as SAC's tuned temperature did, and a step costs a fraction of SAC's update, so runs
# go to millions of steps. On the rule at x1 (x100 would make the value loss, clipped with the
# policy's gradient to one norm, drown the policy's share); evaluations every 50k steps,
# checkpoints every 100k (a minute and a half of PPO here).
PPO_METHODS = {"rule-reward-ppo": PPOConfig(), "pref-ppo": PPOConfig(),
               "rule-reward-ppo-norm": PPOConfig(normalize_obs=True),
               "pref-ppo-norm": PPOConfig(normalize_obs=True), "pref-ppo-late": PPOConfig(),
               "rule-reward-ppo-anneal": PPOConfig(),
               "pref-ppo-norm-anneal": PPOConfig(normalize_obs=True),
               "rule-reward-ppo-floor": PPOConfig(),
               "pref-ppo-norm-floor": PPOConfig(normalize_obs=True)}  # fmt: skip
# *-anneal: PPO's learning rate falls linearly to 0 over the run's steps, as in Baselines' MuJoCo
# PPO. Row 1m landed flips at 0.95-1.05M, then lost them as its clip fraction rose to 0.45 on a
# constant rate; a falling rate keeps what the policy learned late in the run.
ANNEALED = ("rule-reward-ppo-anneal", "pref-ppo-norm-anneal")
# *-floor: the rule prices each step with the torso or thigh on the floor (`backflip.FLOOR_COST`),
# in the teacher's answers and in the rule's reward (evaluations report the rule without it).
# Row 1p's learned reward paid a flip onto its back three times a landed flip: lying after the
# flip sat in every clip that won (backflip note, session 74).
FLOOR = ("rule-reward-ppo-floor", "pref-ppo-norm-floor")
PPO_EVAL_INTERVAL = 50_000
# pref-ppo-norm: pref-ppo asked its first 100 labels at 10k steps, of a policy that had not yet
# leapt, and the rule found 97 of them ties; PPO on the rule leapt by 100k and landed flips at
# 0.95-1.05M. So 200k steps of PEBBLE's unsupervised exploration come first, then sessions of
# 100 labels every 130k steps (the last at 1.37M), while the policy learns to leap and land.
# pref-ppo-late: the same with row 1m's plain PPO (normalised, PPO on the rule stood still).
LATE_LABELS = {
    "unsupervised_steps": 200_000,
    "schedule": ScheduleConfig(budget=1000, session_size=100, interval=130_000),
}
PREF_SETTINGS = {"pref-ppo-norm": LATE_LABELS, "pref-ppo-late": LATE_LABELS,
                 "pref-ppo-norm-anneal": LATE_LABELS,
                 "pref-ppo-norm-floor": {**LATE_LABELS, "floor": True}}  # fmt: skip


def train(method: str, seed: int, runs: Path, steps: int) -> Path:
    """One run to its end: reused when finished, resumed when stopped or when it finished short
    of `steps` (a longer budget goes on from its last checkpoint)."""
    name = f"{method}_s{seed}"
    run_dir = runs / name
    if (run_dir / DONE).exists() and json.loads((run_dir / DONE).read_text())["steps"] >= steps:
        return run_dir
    settings = {"runs_dir": runs, "name": name, "checkpoint_interval": 10_000,
                "video_interval": 100_000}  # fmt: skip
    if run_dir.exists() and latest_checkpoint(run_dir) is not None:
        settings["resume"] = run_dir
    if method in AGENTS:
        settings["sac"] = AGENTS[method]
    env = backflip.SCALED_ENV_ID
    if method in PPO_METHODS:
        ppo = PPO_METHODS[method]
        if method in ANNEALED:
            ppo = dataclasses.replace(ppo, lr_anneal_steps=steps)
        settings.update(algo="ppo", ppo=ppo, eval_interval=PPO_EVAL_INTERVAL,
                        checkpoint_interval=100_000, video_interval=500_000)  # fmt: skip
        env = backflip.FLOOR_ENV_ID if method in FLOOR else backflip.ENV_ID
    if method.startswith("pref"):
        if method in REWARDS:
            settings["reward"] = REWARDS[method]
        settings.update(PREF_SETTINGS.get(method, {}))
        spread = method in ("pref-spread", "pref-linear", "pref-ppo")
        result = backflip.teach(steps, seed=seed, spread=spread, **settings)
    else:
        settings.setdefault("eval_interval", 10_000)
        result = RLLearner(env, steps=steps, seed=seed, warmstart_steps=1_000, eval_episodes=5,
                           **settings).train()  # fmt: skip
    if result.interrupted:
        raise SystemExit(f"{name} stopped; start the same command again to resume it")
    (run_dir / DONE).write_text(json.dumps({"steps": steps}) + "\n")
    return run_dir


def curve(run_dir: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, rule score, landed flips) of every evaluation, a resumed run's repeats dropped."""
    rows: dict[int, dict] = {}
    for row in read_metrics(run_dir):
        if "eval/return_mean" in row:
            rows[row["step"]] = row
    steps = np.array(sorted(rows))
    score = np.array(
        [rows[s].get("eval/rule_score_mean", rows[s]["eval/return_mean"]) for s in steps]
    )  # (the scaled env's return is 100x the rule's score)
    flips = np.array([rows[s].get("eval/landed_flips_mean", np.nan) for s in steps])
    return steps, score, flips


def labels_used(run_dir: Path) -> int:
    rows = [r for r in read_metrics(run_dir) if "feedback/labels" in r]
    return int(rows[-1]["feedback/labels"]) if rows else 0


def figure_path(runs: Path) -> Path:
    """benchmarks/results/backflip-NAME.png, NAME the runs folder's after `bench-backflip-` (by
    default the rule's: bench-backflip-ppo's curves go to backflip-ppo.png, beside the rule's)."""
    name = (
        runs.name.removeprefix("bench-backflip-")
        if runs.name.startswith("bench-backflip-")
        else backflip.RULE
    )
    return ROOT / f"benchmarks/results/backflip-{name}.png"


def report(runs: Path, seeds: list[int], command: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_score, ax_flips) = plt.subplots(1, 2, figsize=(11, 4))
    rows = {}
    for method, title in METHODS.items():
        dirs = [runs / f"{method}_s{s}" for s in seeds if (runs / f"{method}_s{s}" / DONE).exists()]
        if not dirs:
            continue
        curves = [curve(d) for d in dirs]
        for i, (steps, score, flips) in enumerate(curves):
            kw = {"label": title if i == 0 else None, "color": COLORS[method]}
            ax_score.plot(steps, score, **kw)
            ax_flips.plot(steps, flips, **kw)
        rows[method] = {
            "rule": backflip.RULE, "method": method, "description": title,
            "env": backflip.FLOOR_ENV_ID if method in FLOOR else backflip.ENV_ID,
            "steps": int(curves[0][0][-1]), "seeds": [int(d.name.rsplit("_s", 1)[1]) for d in dirs],
            "rule_score_final": [float(c[1][-1]) for c in curves],
            "landed_flips_final": [float(c[2][-1]) for c in curves],
            **({"labels": [labels_used(d) for d in dirs]} if method.startswith("pref") else {}),
            "command": command,
        }  # fmt: skip
        for key in ("rule_score", "landed_flips"):
            rows[method][f"{key}_mean"] = float(np.mean(rows[method][f"{key}_final"]))
        print(f"{title}: rule score {rows[method]['rule_score_mean']:.2f}, landed backflips "
              f"{rows[method]['landed_flips_mean']:.1f} per episode ({len(dirs)} seeds)")  # fmt: skip
    if not rows:
        raise SystemExit(f"no finished runs in {runs} for seeds {seeds}")
    ax_score.set(xlabel="env steps", ylabel="rule score per episode (turns + time on feet)")
    ax_flips.set(xlabel="env steps", ylabel="backflips landed per episode")
    ax_score.legend()
    fig.suptitle(
        f"Hopper backflip, rule '{backflip.RULE}': evaluation episodes (5 each, "
        "deterministic actions)"
    )
    fig.tight_layout()
    figure = figure_path(runs)
    fig.savefig(figure, dpi=110)
    prefs = [m for m in rows if m.startswith("pref")]
    if prefs:  # (the preference method that lands the most flips at the end; ties: the first)
        best = max(prefs, key=lambda m: rows[m]["landed_flips_mean"])
        rows[best]["video"] = _film(
            runs / f"{best}_s{rows[best]['seeds'][0]}", rows[best]["description"]
        )
    existing = json.loads(RESULTS.read_text())["results"] if RESULTS.exists() else []
    if prefs:  # (the video file was replaced: an older row no longer describes it)
        existing = [{k: v for k, v in r.items() if k != "video"} for r in existing]
    key = lambda r: (r.get("rule"), r["method"], r["steps"])  # (a longer run: a row of its own)
    merged = {key(r): r for r in existing} | {key(r): r for r in rows.values()}
    RESULTS.write_text(json.dumps({"results": list(merged.values())}, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)} and {figure.relative_to(ROOT)}")


def _film(run_dir: Path, description: str, tries: int = 10) -> dict:
    """One episode of the policy to docs/img/backflip.mp4: the first of reset seeds 0, 1, ...
    (up to `tries`) in which it lands a backflip, else seed 0's. Returns which, and how many of
    the episodes tried landed one, for the row."""
    from prefrl.rl.compare import compare_policies

    landed = []
    for seed in range(tries):
        result = compare_policies([run_dir], 1, seed).results[0]
        landed.append(result.extra.get("eval/landed_flips_mean", 0.0))
        if landed[-1] >= 1:
            break
    seed = len(landed) - 1 if landed[-1] >= 1 else 0
    VIDEO.parent.mkdir(parents=True, exist_ok=True)
    compare_policies([run_dir], 1, seed, VIDEO, 256)
    print(f"video: {VIDEO} (reset seed {seed}: {landed[seed]:.0f} landed flips; "
          f"{sum(x >= 1 for x in landed)} of the {len(landed)} episodes tried landed one)")  # fmt: skip
    caption = (f"{description} (rule '{backflip.RULE}', {run_dir.name}), reset seed {seed}: "
               f"{landed[seed]:.0f} landed flips")  # fmt: skip
    return {"path": str(VIDEO.relative_to(ROOT)), "reset_seed": seed, "caption": caption,
            "landed_flips": landed[seed], "episodes_tried": len(landed)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--only", choices=list(METHODS), help="train one method only")
    parser.add_argument("--steps", type=int, default=500_000)
    parser.add_argument(
        "--runs-dir", type=Path, default=ROOT / f"runs/bench-backflip-{backflip.RULE}"
    )
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    command = "python benchmarks/backflip.py " + " ".join(sys.argv[1:])
    if not args.report_only:
        for method in [args.only] if args.only else list(METHODS):
            for seed in args.seeds:
                train(method, seed, args.runs_dir, args.steps)
    if not args.only:
        report(args.runs_dir, args.seeds, command)


if __name__ == "__main__":
    main()
