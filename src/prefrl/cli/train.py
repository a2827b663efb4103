"""The training commands: `rl`, `train`, `offline`, `offline-cpl`, `finetune`, `frames`, `rfcl`."""

from __future__ import annotations

import dataclasses

from prefrl.cli.common import (
    parse_config,
    pop_option,
    print_cpl_end,
    print_eval,
    print_run_end,
)


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
    result = train_rl(config)
    return _report_rl(result, config.steps, "prefrl rl", f"{config.algo.upper()} on {config.env}")


def _report_rl(result, steps: int, prog: str, title: str) -> int:
    """The end of an RL run (`RLResult`): the final evaluation, where the run and its video are;
    the exit code."""
    if print_run_end(result, steps, prog):
        return 130 if result.interrupted else 0
    print_eval([result.final_eval], ["final"], f"{title} after {result.step:,} steps")
    print(f"run directory: {result.run_dir}")
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
    if print_run_end(result, config.steps, "prefrl train"):
        return 130 if result.interrupted else 0
    algo = "PEBBLE" if config.algo == "sac" else "PrefPPO"
    print_eval(
        [result.final_eval], ["final"], f"{algo} on {config.env} after {result.step:,} steps"
    )
    m = result.reward_metrics
    print(
        f"labels: {result.labels} from the {config.teacher.preset} teacher; learned vs true "
        f"reward: validation accuracy {m.get('reward/val_accuracy', float('nan')):.2f}, "
        f"correlation of segment returns {m.get('reward/segment_return_corr', float('nan')):.2f}"
    )
    learned = result.final_eval.learned_returns
    if learned is not None:
        print(
            f"final return: true {result.final_eval.returns.mean():.1f}, learned {learned.mean():.1f}"
        )
    print(f"run directory: {result.run_dir}")
    if result.video is not None:
        print(f"video: {result.video}")
    return 0


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
    if result.stopped:
        print(
            f"stopped at step {result.steps:,}; continue with: prefrl offline --resume "
            f"{result.run_dir}"
        )
        return 130
    m = result.reward_metrics
    if config.reward != "true":
        print(
            f"reward model ({config.reward}): validation accuracy "
            f"{m.get('reward/val_accuracy', float('nan')):.2f}, correlation with the true "
            f"episode returns {m.get('reward/episode_return_correlation', float('nan')):.2f}"
        )
    print(
        f"IQL on the {config.reward} reward after {result.steps:,} steps: normalised score "
        f"{result.score_mean:.1f} +- {result.score_std:.1f} (return {result.return_mean:.1f})"
    )
    print(f"run directory: {result.run_dir}")
    return 0


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
    m = result.metrics
    print(
        f"behaviour cloning ({config.bc_steps:,} steps): normalised score "
        f"{m['eval/bc_score_mean']:.1f} +- {m['eval/bc_score_std']:.1f}"
    )
    print(
        f"CPL on {m['pairs']} pairs ({config.steps:,} steps): normalised score "
        f"{m['eval/score_mean']:.1f} +- {m['eval/score_std']:.1f} (return "
        f"{m['eval/return_mean']:.1f})"
    )
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
    table = Table(title=f"CPL on {result.pairs} pairs from {config.ratings}")
    for col in ("policy", "return mean", "return std", "min", "max"):
        table.add_column(col, justify="right")
    for label, r in (("original", result.start_returns), ("fine-tuned", result.finetuned_returns)):
        table.add_row(
            label, f"{r.mean():.1f}", f"{r.std():.1f}", f"{r.min():.1f}", f"{r.max():.1f}"
        )
    Console().print(table)
    for key, value in result.metrics.items():  # the env's own figures (the piano's F1)
        name = key.removeprefix("eval/")
        if key.startswith("eval/") and f"start/{name}" in result.metrics:
            print(f"{name}: original {result.metrics[f'start/{name}']:.3f}, fine-tuned {value:.3f}")
    print_cpl_end(result.metrics, "original policy", result.run_dir)
    return 0


def cmd_frames(args: list[str]) -> int:
    from prefrl.pixels.preferences import FramePreferenceConfig, train_frames_from_preferences
    from prefrl.presets import FRAME_PRESETS

    config = parse_config(
        FramePreferenceConfig, FRAME_PRESETS, args, "prefrl frames",
        "Learn from preferences on frames (Christiano et al. 2017, Atari): clips of a random "
        "policy labelled, a reward CNN pre-trained on them, then A2C on the learned reward while "
        "more clips are labelled (a scripted teacher on sign-clipped game rewards).",
    )  # fmt: skip
    result = train_frames_from_preferences(config)
    if result.final_eval is None and not result.interrupted:  # (--stop-after: no agent yet)
        print(f"stopped after --stop-after {config.stop_after}; go on with: prefrl frames "
              f"--resume {result.run_dir} --stop-after None")  # fmt: skip
        return 0
    return _report_rl(
        result,
        config.steps,
        "prefrl frames",
        f"{config.algo.upper()} from preferences on {config.env}",
    )


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
    if result.interrupted:
        print(f"stopped at step {result.step:,}; continue with: prefrl rfcl --resume "
              f"{result.run_dir}")  # fmt: skip
        return 130
    if result.success_at_end != result.success_at_end:  # (nan: a resume with nothing to train,
        return 0  # which the loop said)
    stage = (f"stage {result.stage}, demos solved {result.demos_solved}; "
             if config.reverse_curriculum else "")  # fmt: skip
    print(f"{result.method} on {config.env} after {result.step:,} steps: {stage}on the task's "
          f"initial states: success at the end {result.success_at_end:.2f}, at some step "
          f"{result.success_once:.2f}")  # fmt: skip
    drawn = ("curriculum.png: each demo's starts over the run; "
             if config.reverse_curriculum else "")  # fmt: skip
    print(f"run directory: {result.run_dir} ({drawn}learning_curve.png: the success rates)")
    return 0
