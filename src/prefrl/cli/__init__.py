"""The `prefrl` command: one module per command family, each command parses its flags (tyro,
from the same frozen dataclasses that configure the code), calls one library function and prints
what it did. A command's module is imported only when it runs, so `prefrl --help` and the store
commands start without JAX."""

from __future__ import annotations

import importlib
import sys

COMMANDS = {  # name -> ("module:function" in prefrl.cli, one-line description)
    "train": ("train:cmd_train", "learn from preferences (PEBBLE / PrefPPO), labelled by a script or by you"),
    "rl": ("train:cmd_rl", "train SAC or PPO on an environment's true reward"),
    "eval": ("evaluate:cmd_eval", "evaluate a run or checkpoint: returns table and a video"),
    "serve": ("feedback:cmd_serve", "label a run's pairs and rate clips in the browser"),
    "label": ("feedback:cmd_label", "label a run's pairs in the terminal"),
    "labels": ("feedback:cmd_labels", "export a run's labels as JSON, or import them into a run"),
    "annotators": ("feedback:cmd_annotators", "add annotators (prints their links) or list them"),
    "dataset": ("dataset:cmd_dataset", "make, import and inspect offline datasets; sample and label queries"),
    "frames": ("train:cmd_frames", "learn from preferences on frames (movingdot, atari:*): A2C or PPO + a reward CNN"),
    "rfcl": ("train:cmd_rfcl", "learn a sparse-reward task from a few demonstrations (RFCL)"),
    "demos": ("demos:cmd_demos", "make, check and render demonstrations (with simulator states)"),
    "sweep": ("sweep:cmd_sweep", "run a training command over a grid of flags x seeds on Ray (resumable)"),
    "offline": ("train:cmd_offline", "offline preferences: reward model (mr/nmr/pt) + IQL on a dataset"),
    "offline-cpl": ("train:cmd_offline_cpl", "offline preferences: CPL on a dataset's labelled queries"),
    "collect": ("ratings:cmd_collect", "roll out checkpoints x action noise into clips to rate"),
    "rate": ("ratings:cmd_rate", "rate a rating run's clips with a scripted rater"),
    "finetune": ("train:cmd_finetune", "fine-tune a SAC policy with CPL from ratings of its clips"),
    "midi": ("tools:cmd_midi", "MIDI files for piano tasks: list notes, cut a window, render audio"),
    "envs": ("tools:cmd_envs", "list environment ids"),
    "runs": ("tools:cmd_runs", "where runs stand: training, finished or stopped; steps, last evaluation, time left"),
}  # fmt: skip

ERRORS = (  # what a command reports as `prefrl NAME: error: ...` (the message says what to do)
    ValueError,
    LookupError,
    FileNotFoundError,
    FileExistsError,
    FloatingPointError,
    RuntimeError,
    TypeError,
    ImportError,  # an optional extra that is not installed
    ConnectionError,  # an unreachable Ray cluster
)


def handler(name: str):
    """The function that runs the command `name`."""
    module, function = COMMANDS[name][0].split(":")
    return getattr(importlib.import_module(f"prefrl.cli.{module}"), function)


def _usage() -> str:
    lines = ["usage: prefrl COMMAND [--help] [flags]", "", "commands:"]
    lines += [f"  {name:<11} {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    command, args = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"prefrl: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    from prefrl.rundir.config import from_config

    try:
        with from_config():  # (errors name settings as the flags they were given as)
            return handler(command)(args)
    except ERRORS as e:
        print(f"prefrl {command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # (Ctrl-C before the command takes it itself: while it starts)
        print(f"prefrl {command}: stopped", file=sys.stderr)
        return 130
