"""The training commands: `rl`, `train`, `offline`, `offline-cpl`, `finetune`, `frames`, `rfcl`."""

from __future__ import annotations

import dataclasses
import json
import math
import sys

from prefrl.cli.common import parse_config, pop_option, print_cpl_end

SHOWN = ("eval/success_at_end", "eval/score_mean", "eval/score_std")
"""Evaluation figures the result's summary line shows already."""


def cmd_rl(args: list[str]) -> int:
    from prefrl.presets import RL_PRESETS
    from prefrl.rl.config import RLConfig
    from prefrl.rl.learner import train_rl

    config = parse_config(
        RLConfig,
        RL_PRESETS,
        args,
        "prefrl rl",
        "Train SAC (or PPO: --algo ppo) on an environment's true reward.",
    )
    return _report(train_rl(config), "prefrl rl")


def _report(result, prog: str) -> int:
    """What a command adds to the line its run ended with (`TrainResult.summary`): how to go
    on, the env's own figures, the video; the exit code."""
    if result.interrupted:
        print(f"continue with: {prog} --resume {result.run_dir}")
        return 130
    if result.final_eval is None:
        return 0  # (a run at its last step: the set-up said so)
    for key, value in result.final_eval.extra.items():  # (the env's own: the piano's key F1)
        if key not in SHOWN:
            print(f"{key.removeprefix('eval/')}: {value:.3f}")
    if result.video is not None:
        print(f"video: {result.video}")
    return 0


def cmd_train(args: list[str]) -> int:
    from prefrl.online.learner import OnlineConfig, train_online
    from prefrl.presets import ONLINE_PRESETS

    # `--teacher web` is short for `--teacher.preset web`.
    args = ["--teacher.preset" if a == "--teacher" else a for a in args]
    args = [a.replace("--teacher=", "--teacher.preset=", 1) for a in args]

    config = parse_config(
        OnlineConfig,
        ONLINE_PRESETS,
        args,
        "prefrl train",
        "Learn a behaviour from preferences between pairs of clips (PEBBLE with SAC, or "
        "PrefPPO), labelled by a scripted teacher or by you (--teacher web or terminal).",
    )
    result = train_online(config)
    if result.final_eval is not None and not result.interrupted:
        m = {k.split("/")[-1]: v for k, v in result.details["reward_metrics"].items()}
        print(f"labels: {_label_origins(result, config)}; learned vs true "
              f"reward: validation accuracy {m.get('val_accuracy', float('nan')):.2f}, "
              f"correlation of segment returns "
              f"{m.get('segment_return_corr', float('nan')):.2f}")  # fmt: skip
        learned = result.final_eval.learned_returns
        if learned is not None:
            print(f"final return: true {result.final_eval.mean:.1f}, learned {learned.mean():.1f}")
    return _report(result, "prefrl train")


def _label_origins(result, config) -> str:
    """How many labels the run trained on, and who gave them: those loaded from other runs
    (`--load-labels`, `prefrl labels import`) are not its teacher's."""
    from prefrl.feedback.exchange import IMPORTED
    from prefrl.feedback.run_labels import label_sources

    sources = label_sources(result.run_dir, config.store)
    loaded = sum(n for source, n in sources.items() if source.startswith(IMPORTED))
    teacher = f"the {config.teacher.preset} teacher"
    if config.teacher.is_human:  # (in the browser, the terminal, or both)
        where = {"web": "in the browser", "terminal": "in the terminal"}
        given = [f"{n} {where.get(s, f'as {s}')}" for s, n in sorted(sources.items())
                 if not s.startswith(IMPORTED)]  # fmt: skip
        teacher = "you" + (f" ({', '.join(given)})" if given else "")
    if not loaded:
        return f"{result.labels} from {teacher}"
    stored = json.loads((result.run_dir / "config.json").read_text()).get("load_labels")
    where = f"from {stored} (--load-labels)" if stored else "from other runs (prefrl labels import)"
    return (f"{result.labels}, {loaded} of them loaded {where} and {result.labels - loaded} "
            f"from {teacher}")  # fmt: skip


def cmd_offline(args: list[str]) -> int:
    from prefrl.offline.learner import OfflineConfig, train_offline
    from prefrl.presets import OFFLINE_PRESETS

    given = [a.split("=")[0] for a in args]
    if "--iql.steps" in given:
        raise ValueError(
            "--iql.steps is not a setting of its own here: IQL takes --steps steps (which also "
            "set its actor's schedule); use --steps"
        )
    config = parse_config(
        OfflineConfig,
        OFFLINE_PRESETS,
        args,
        "prefrl offline",
        "Offline learning from preferences: fit a reward model (mr, nmr, pt) to a dataset's "
        "labelled queries, relabel the dataset, train IQL; reports the D4RL-normalised score.",
    )
    result = train_offline(config)
    m = {k.split("/")[-1]: v for k, v in result.details["reward_metrics"].items()}
    if config.reward != "true" and not result.interrupted:
        print(f"reward model ({config.reward}): validation accuracy "
              f"{m.get('val_accuracy', float('nan')):.2f}, correlation with the true episode "
              f"returns {m.get('episode_return_correlation', float('nan')):.2f}")  # fmt: skip
    score = result.details["score_mean"]
    if result.final_eval is None and not math.isnan(score):  # (a run resumed at its end)
        print(f"its last evaluation: normalised score {score:.1f} +- "
              f"{result.details['score_std']:.1f}")  # fmt: skip
    return _report(result, "prefrl offline")


def cmd_offline_cpl(args: list[str]) -> int:
    import tyro

    from prefrl.offline.cpl import OfflineCPLConfig, train_offline_cpl

    config = tyro.cli(
        OfflineCPLConfig,
        args=args,
        prog="prefrl offline-cpl",
        description="Offline CPL: behaviour cloning on a dataset, then Contrastive Preference "
        "Learning on its labelled queries (no reward model, no critic); reports the "
        "D4RL-normalised score before and after CPL.",
    )
    result = train_offline_cpl(config)
    m = result.details["metrics"]
    print(f"behaviour cloning ({config.bc_steps:,} steps): normalised score "
          f"{m['eval/bc_score_mean']:.1f} +- {m['eval/bc_score_std']:.1f}; CPL on {m['pairs']} "
          f"pairs ({config.steps:,} steps): {m['eval/score_mean']:.1f} +- "
          f"{m['eval/score_std']:.1f}")  # fmt: skip
    print_cpl_end(m, "BC policy", result.run_dir)
    return 0


def cmd_finetune(args: list[str]) -> int:
    import tyro
    from rich.console import Console
    from rich.table import Table

    from prefrl.finetuning.learner import FinetuneConfig, finetune

    config = tyro.cli(
        FinetuneConfig,
        args=args,
        prog="prefrl finetune",
        description="Fine-tune a SAC policy with Contrastive Preference Learning from the "
        "ratings of its clips (every pair of differently rated clips is a preference).",
    )
    result = finetune(config)
    metrics = result.details["metrics"]
    table = Table(title=f"CPL on {result.details['pairs']} pairs from {config.ratings}")
    for col in ("policy", "return mean", "return std", "min", "max"):
        table.add_column(col, justify="right")
    start = result.details["start_eval"].returns
    for label, r in (("original", start), ("fine-tuned", result.final_eval.returns)):
        table.add_row(
            label, f"{r.mean():.1f}", f"{r.std():.1f}", f"{r.min():.1f}", f"{r.max():.1f}"
        )
    Console().print(table)
    for key, value in metrics.items():  # the env's own figures (the piano's F1)
        name = key.removeprefix("eval/")
        if key.startswith("eval/") and f"start/{name}" in metrics:
            print(f"{name}: original {metrics[f'start/{name}']:.3f}, fine-tuned {value:.3f}")
    print_cpl_end(metrics, "original policy", result.run_dir)
    return 0


def cmd_frames(args: list[str]) -> int:
    from prefrl.pixels.preferences import FramePreferenceConfig, train_frames_from_preferences
    from prefrl.presets import FRAME_PRESETS

    config = parse_config(
        FramePreferenceConfig, FRAME_PRESETS, args, "prefrl frames",
        "Learn from preferences on frames (Christiano et al. 2017, Atari): clips of a random "
        "policy labelled, a reward CNN pre-trained on them, then A2C (or PPO) on the learned "
        "reward while more clips are labelled (a scripted teacher on sign-clipped game rewards).",
    )  # fmt: skip
    preset = pop_option(args, "--preset")[0]
    if preset is not None and pop_option(args, "--fit-every")[0] is None:
        _say_fit_rate_of_another_agent(config, FRAME_PRESETS[preset].config, preset)
    result = train_frames_from_preferences(config)
    if result.details.get("stop_after"):  # (no agent yet)
        print(f"go on with: prefrl frames --resume {result.run_dir} --stop-after None")
        return 0
    return _report(result, "prefrl frames")


def _say_fit_rate_of_another_agent(config, preset_config, preset: str) -> None:
    """`--fit-every` counts the agent's updates, so a preset run with the other agent (PPO's
    update is 12.8 A2C's agent steps at the defaults) fits at another rate: said, with the
    `--fit-every` that keeps the preset's."""
    if config.algo == preset_config.algo:
        return

    def per_update(c) -> int:
        return c.agent.n_envs * c.agent.n_steps

    meant = preset_config.fit_every * per_update(preset_config)
    now = config.fit_every * per_update(config)
    same = max(1, round(meant / per_update(config)))
    print(f"note: --algo {config.algo} keeps the {preset} preset's --fit-every "
          f"{config.fit_every}, counted in {config.algo.upper()} updates: a reward fit every "
          f"{now:,} agent steps where the preset fits every {meant:,}; --fit-every {same} "
          "keeps its rate", file=sys.stderr, flush=True)  # fmt: skip


def cmd_rfcl(args: list[str]) -> int:
    from prefrl.demos.rfcl import RFCLConfig, train_rfcl
    from prefrl.presets import RFCL_PRESETS

    config = parse_config(
        RFCLConfig, RFCL_PRESETS, args, "prefrl rfcl",
        "Learn a sparse-reward task from a few demonstrations with simulator states: Reverse "
        "Forward Curriculum Learning (SAC; episodes start from demo states, then from the "
        "task's own).",
    )  # fmt: skip
    if pop_option(args, "--resume")[0] is None:
        config = dataclasses.replace(config, demos=config.demos.absolute())  # (resumable anywhere)
    result = train_rfcl(config)
    if result.interrupted or result.final_eval is None:
        return _report(result, "prefrl rfcl")
    d = result.details
    stage = (f"stage {d['stage']}, demos solved {d['demos_solved']}/{d['demos']}; "
             if config.reverse_curriculum else "")  # fmt: skip
    print(f"{stage}on the task's initial states: success at the end "
          f"{result.final_eval.success_rate:.2f}, at some step "
          f"{d['success_once']:.2f}")  # fmt: skip
    drawn = ("curriculum.png: each demo's starts over the run; "
             if config.reverse_curriculum else "")  # fmt: skip
    print(f"{drawn}learning_curve.png: the success rates")
    return _report(result, "prefrl rfcl")
