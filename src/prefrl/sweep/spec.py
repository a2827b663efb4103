"""What a sweep runs: named configs (a grid over config fields, or a list) x seeds, each one a
normal run directory under the sweep's. Everything is built and checked here, before any run
starts: an unknown field or a bad value fails the sweep naming it."""

from __future__ import annotations

import dataclasses
import importlib
import re
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

# command -> (module, config class, training function, presets in prefrl.presets or None)
TRAINERS = {
    "train": ("prefrl.online.learner", "OnlineConfig", "train_online", "ONLINE_PRESETS"),
    "rl": ("prefrl.rl.learner", "RLConfig", "train_rl", "RL_PRESETS"),
    "offline": ("prefrl.offline.learner", "OfflineConfig", "train_offline", "OFFLINE_PRESETS"),
    "offline-cpl": ("prefrl.offline.cpl", "OfflineCPLConfig", "train_offline_cpl", None),
    "finetune": ("prefrl.finetuning.learner", "FinetuneConfig", "finetune", None),
    "frames": ("prefrl.pixels.preferences", "FramePreferenceConfig",
               "train_frames_from_preferences", "FRAME_PRESETS"),
    "rfcl": ("prefrl.demos.rfcl", "RFCLConfig", "train_rfcl", "RFCL_PRESETS"),
}  # fmt: skip
"""The training commands a sweep can run. Those with a `resume` field resume from their run
directory; the CPL ones (minutes long, no checkpoint until their end) start again when stopped."""


def resumable(config) -> bool:
    """Whether runs of this config resume from their checkpoints (else a stopped one restarts)."""
    return any(f.name == "resume" for f in dataclasses.fields(config))


def trainer_of(config) -> tuple[str, Any]:
    """(command, training function) for a config object."""
    for command, (module, cls, fn, _) in TRAINERS.items():
        mod = importlib.import_module(module)
        if type(config) is getattr(mod, cls):
            return command, getattr(mod, fn)
    known = ", ".join(f"{cls} ({cmd})" for cmd, (_, cls, _, _) in TRAINERS.items())
    raise TypeError(f"a sweep cannot run a {type(config).__name__}; it runs {known}")


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep: its config (label) and seed; `name` is its run directory's."""

    label: str
    seed: int
    config: Any

    @property
    def name(self) -> str:
        return f"{self.label}_s{self.seed}"


def safe_label(text: str) -> str:
    """A config's label as a directory name: `teacher.preset=noisy` -> `teacher.preset-noisy`."""
    out = re.sub(r"[^A-Za-z0-9._,-]+", "-", text.replace("=", "-")).strip("-")
    if not out:
        raise ValueError(f"config label {text!r} is empty once made a directory name")
    return out


def expand_runs(configs: dict[str, Any], seeds, runs_dir: Path) -> list[SweepRun]:
    """Every (config, seed) as a run: its seed, name, run directory and quiet progress set."""
    seeds = [int(s) for s in seeds]
    if not configs:
        raise ValueError("a sweep needs at least one config")
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds {seeds} are invalid: expected distinct integers, at least one")
    runs = []
    labels = {}
    for label, config in configs.items():
        safe = safe_label(label)
        if safe in labels:
            raise ValueError(f"configs {labels[safe]!r} and {label!r} would share run directories")
        labels[safe] = label
        trainer_of(config)  # (refuses what a sweep cannot run, before anything starts)
        for seed in seeds:
            run = SweepRun(safe, seed, None)
            quiet = {"progress": False} if hasattr(config, "progress") else {}
            if resumable(config):
                quiet["resume"] = None
            cfg = dataclasses.replace(config, seed=seed, name=run.name, runs_dir=Path(runs_dir),
                                      **quiet)  # fmt: skip
            runs.append(SweepRun(safe, seed, cfg))
    return runs


def grid(base, axes: dict[str, list]) -> dict[str, Any]:
    """Configs for every combination of `axes` (dotted field -> values) over `base`, labelled
    `field=value,field=value`. A field the config lacks, or a value its checks refuse, fails
    here, naming it."""
    for field in axes:
        _check_field(base, field)
    if not axes:
        return {"base": base}
    out = {}
    for values in product(*axes.values()):
        label = ",".join(f"{f}={v}" for f, v in zip(axes, values))
        config = base
        for field, value in zip(axes, values):
            try:
                config = replace_field(config, field, value)
            except (TypeError, ValueError) as e:
                raise ValueError(f"sweep grid: {field}={value!r} is invalid: {e}") from e
        out[label] = config
    return out


def _check_field(config, field: str) -> None:
    obj = config
    for part in field.split("."):
        names = [f.name for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj) else []
        if part not in names:
            raise ValueError(
                f"sweep grid: {type(config).__name__} has no field {field!r}"
                + (f" ({part!r} is not one of {', '.join(names)})" if names else "")
            )
        obj = getattr(obj, part)


def replace_field(config, field: str, value):
    """`config` with the dotted `field` set to `value` (nested dataclasses replaced too)."""
    head, _, rest = field.partition(".")
    if rest:
        return dataclasses.replace(
            config, **{head: replace_field(getattr(config, head), rest, value)}
        )
    return dataclasses.replace(config, **{head: value})
