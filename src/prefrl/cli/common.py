"""What the commands share: config parsing with presets and --resume, and printed tables."""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from pathlib import Path

import numpy as np
import tyro


def pop_option(args: list[str], flag: str) -> tuple[str | None, list[str]]:
    """Remove `flag VALUE` / `flag=VALUE` from args; return (value, remaining)."""
    rest, value, i = [], None, 0
    while i < len(args):
        a = args[i]
        if a == flag:
            if i + 1 >= len(args):
                raise SystemExit(f"prefrl: {flag} needs a value")
            value, i = args[i + 1], i + 2
            continue
        if a.startswith(flag + "="):
            value = a.split("=", 1)[1]
        else:
            rest.append(a)
        i += 1
    return value, rest


def parse_config(cls, presets, args: list[str], prog: str, summary: str):
    """tyro over `cls`, starting from --preset NAME or, with --resume RUN, the run's own stored
    config (flags given on the command line override either)."""
    from prefrl.rundir.config import IDENTITY, check_same_identity, config_from_dict

    args = _renamed_flags(cls, args, prog)
    preset, args = pop_option(args, "--preset")
    resume = pop_option(args, "--resume")[0]  # stays in args: tyro parses it too
    if resume is not None:
        stored = Path(resume) / "config.json"
        if not stored.exists():
            from prefrl.sweep.runner import MANIFEST_FILE

            if (Path(resume) / MANIFEST_FILE).exists():
                raise FileNotFoundError(
                    f"--resume {resume}: that is a sweep's directory (prefrl sweep): the same "
                    f"prefrl sweep command again goes on with it; each of its runs, "
                    f"{resume}/runs/NAME, resumes with its own command"
                )
            raise FileNotFoundError(
                f"--resume {resume}: no config.json there (not a run directory)"
            )
        data = json.loads(stored.read_text())
        _check_resumable_here(cls, data, resume, prog)
        given = {field: pop_option(args, f"--{field}")[0] for field in IDENTITY}
        check_same_identity(resume, data, given)  # (before the stored config meets the flags)
        base = config_from_dict(cls, data)
    elif preset is not None:
        if preset not in presets:
            raise LookupError(f"unknown --preset {preset!r}; known: {', '.join(presets)}")
        base = presets[preset].config
    else:
        base = cls()
    listing = "\n".join(f"  {name}: {p.description}" for name, p in presets.items())
    description = summary
    if presets:
        description += (
            "\n\n--preset NAME starts from a named published setting (other flags, wherever "
            f"they stand, override it):\n{listing}"
        )
    return tyro.cli(cls, default=base, args=args, prog=prog, description=description)


def _check_resumable_here(cls, data: dict, resume: str, prog: str) -> None:
    """A run another command made (its config has fields `cls` lacks) is refused naming that
    command and what to do with the run, not the fields."""
    made = f"--resume {resume}: that is"
    if data.get("kind") == "ratings":  # (`make_rating_run`)
        raise ValueError(f"{made} a rating run made by prefrl collect, not a training run: rate "
                         f"its clips with prefrl rate {resume} (or prefrl serve {resume}), then "
                         f"fine-tune on them with prefrl finetune --ratings {resume}")  # fmt: skip
    if "queries" in data and set(data) <= {"env", "dataset", "queries", "next"}:  # (send_to_store)
        then = f", then {data['next']}" if data.get("next") else ""
        raise ValueError(f"{made} a labelling run made by prefrl dataset queries, not a training "
                         f"run: label its pairs with prefrl serve {resume} (or prefrl label "
                         f"{resume}){then}")  # fmt: skip
    if set(data) <= _field_names(cls):
        return
    from prefrl.sweep.spec import TRAINERS, resumable

    makers = {f"prefrl {command}": getattr(importlib.import_module(module), name)
              for command, (module, name, _, _) in TRAINERS.items()}  # fmt: skip
    fits = [c for c in makers if set(data) <= _field_names(makers[c])]
    if not fits:
        unknown = ", ".join(sorted(set(data) - _field_names(cls)))
        raise ValueError(f"--resume {resume}: not a run of {prog} (its config.json has {unknown}, "
                         f"which {prog} does not take)")  # fmt: skip
    command = min(fits, key=lambda c: len(_field_names(makers[c]) - set(data)))  # the closest
    if resumable(makers[command]):
        raise ValueError(f"--resume {resume}: that run was made by {command}, not {prog}; "
                         f"resume it with {command} --resume {resume}")  # fmt: skip
    raise ValueError(f"--resume {resume}: that run was made by {command}, which does not resume "
                     f"runs (they are minutes long: run it again); evaluate its policy with "
                     f"prefrl eval {resume}")  # fmt: skip


def _field_names(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)} | set(getattr(cls, "RENAMED", {}))


def _renamed_flags(cls, args: list[str], prog: str) -> list[str]:
    """Flags of fields renamed since (`cls.RENAMED`, e.g. --agent.tau is now --sac.tau) still
    work, with a note saying the new name."""
    out = list(args)
    for old, new in getattr(cls, "RENAMED", {}).items():
        given = [a for a in out if a.startswith(f"--{old}.")]
        if given:
            print(f"{prog}: --{old}.* flags are now --{new}.* (read {given[0]} as "
                  f"--{new}.{given[0].split('.', 1)[1]})", file=sys.stderr)  # fmt: skip
            out = [f"--{new}." + a.split(".", 1)[1] if a in given else a for a in out]
    return out


def print_eval(results, names: list[str], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("policy", overflow="fold")  # (a run's path is wrapped, not cut short)
    own = list(results[0].extra)  # the env's own figures (success, the piano's F1): one env
    for col in ("episodes", "return mean", "std", "min", "max", "length"):
        table.add_column(col, justify="right")
    for key in own:
        table.add_column(key.removeprefix("eval/").replace("_", " "), justify="right")
    for name, result in zip(names, results, strict=True):
        r = result.returns
        table.add_row(
            name, str(len(r)), f"{r.mean():.1f}", f"{r.std():.1f}", f"{r.min():.1f}",
            f"{r.max():.1f}", f"{result.lengths.mean():.0f}",
            *(f"{result.extra[key]:.3f}" for key in own),
        )  # fmt: skip
    Console().print(table)
    for name, result in zip(names, results, strict=True):
        r = result.returns
        prefix = f"{name}: " if len(results) > 1 else ""
        print(f"{prefix}evaluation return: {r.mean():.1f} +- {r.std():.1f} over {len(r)} episodes")
        for key, value in result.extra.items():  # the env's own figures (the piano's key-press F1)
            print(f"{prefix}{key.removeprefix('eval/')}: {value:.3f}")


def print_dataset(data) -> None:
    starts, ends = data.episode_bounds()
    returns = data.episode_returns()
    print(
        f"{data.name}: {data.env_id}, {len(data):,} transitions in {len(starts):,} episodes "
        f"(length {np.mean(ends - starts):.0f} mean), episode return {returns.mean():.1f} "
        f"mean, {returns.min():.1f} to {returns.max():.1f}"
    )
    if data.ref_min_score is not None and data.ref_max_score is not None:
        score = data.normalized_score(returns)
        print(
            f"reference returns: random {data.ref_min_score:.1f}, expert {data.ref_max_score:.1f}"
            f"; normalised episode score {score.mean():.1f} mean"
        )


def print_cpl_end(metrics: dict, start: str, run_dir: Path) -> None:
    """The held-out accuracy of a CPL run (and of its start) and where the run is."""
    if "cpl/val_accuracy" in metrics:
        print(
            f"held-out pairs: implied preference accuracy {metrics['cpl/val_accuracy']:.2f} "
            f"({start} {metrics['cpl/val_accuracy_start']:.2f})"
        )
    print(f"run directory: {run_dir} (prefrl eval {run_dir} --video out.mp4)")
