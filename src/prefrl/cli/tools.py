"""Tools around the tasks and runs: `midi` (songs for the piano), `envs` (the env ids) and `runs`
(where runs stand)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro


@dataclass(frozen=True)
class MidiInfoArgs:
    """A MIDI file's length and notes."""

    path: Annotated[Path, tyro.conf.Positional]
    notes: int = 20
    """How many of the first notes to list (0: none, -1: all)."""


@dataclass(frozen=True)
class MidiClipArgs:
    """Cut a MIDI file to a time window (notes crossing a bound are cut; the pedal state at the
    window's start is kept), shifted to start at 0."""

    path: Annotated[Path, tyro.conf.Positional]
    out: Path
    """The MIDI file to write."""
    start: float | None = None
    """Window start in seconds (default 0)."""
    end: float | None = None
    """Window end in seconds (default: the song's end)."""
    first: float | None = None
    """The first this many seconds."""
    middle: float | None = None
    """This many seconds around the song's middle."""
    last: float | None = None
    """The last this many seconds."""


@dataclass(frozen=True)
class MidiRenderArgs:
    """Play a MIDI file on the piano soundfont into an audio file (.wav or .m4a)."""

    path: Annotated[Path, tyro.conf.Positional]
    out: Path
    tail: float = 1.0
    """Seconds of silence after the last note, for it to ring out."""


def cmd_midi(args: list[str]) -> int:
    from prefrl.music import midi as m

    actions = {"info": MidiInfoArgs, "clip": MidiClipArgs, "render": MidiRenderArgs}
    if not args or args[0] in ("-h", "--help") or args[0] not in actions:
        if args and args[0] not in ("-h", "--help"):
            print(f"prefrl midi: unknown action {args[0]!r}", file=sys.stderr)
        print("usage: prefrl midi {" + ",".join(actions) + "} [--help] MIDI_FILE [flags]")
        return 0 if not args or args[0] in ("-h", "--help") else 2
    action, rest = args[0], args[1:]
    opts = tyro.cli(actions[action], args=rest, prog=f"prefrl midi {action}")
    song = m.load_midi_file(opts.path)
    if action == "info":
        notes = m.notes(song)
        pitches = [n.pitch for n in notes]
        print(
            f"{opts.path}: {m.duration(song):.2f} s, {len(notes)} notes, pitches "
            f"{min(pitches)}-{max(pitches)}, sustain pedal held {len(m.pedal_spans(song))} times"
        )
        shown = notes if opts.notes < 0 else notes[: opts.notes]
        for n in shown:
            print(f"  {n.start:8.3f} - {n.end:8.3f} s  {n.name:<4} (pitch {n.pitch}, velocity "
                  f"{n.velocity})")  # fmt: skip
        if len(shown) < len(notes):
            print(f"  ... {len(notes) - len(shown)} more (--notes -1 lists all)")
    elif action == "clip":
        start, end = m.resolve_window(
            m.duration(song), opts.start, opts.end, opts.first, opts.middle, opts.last
        )
        clipped = m.clip(song, start, end)
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        clipped.write(str(opts.out))
        print(
            f"{opts.out}: {start:.2f}-{end:.2f} s of {opts.path}, {len(m.notes(clipped))} notes "
            f"(train on it with --env 'robopianist:{opts.out}')"
        )
    else:
        samples, rate = m.render_audio(song, opts.tail)
        m.write_audio(opts.out, samples, rate)
        print(f"{opts.out}: {len(samples) / rate:.1f} s of audio")
    return 0


def cmd_envs(args: list[str]) -> int:
    from prefrl.envs import known_env_ids
    from prefrl.envs.registry import FAMILIES

    family = args[0] if args and not args[0].startswith("-") else None
    if "--help" in args or "-h" in args:
        if family == "robopianist":
            from prefrl.envs.piano_task import PianoTask

            print("robopianist:<song> [flags]: <song> is a bundled song (prefrl envs robopianist) "
                  "or a .mid/.midi path; the flags below (defaults: the published SAC run's task "
                  "settings) follow it inside the id.\n")  # fmt: skip
            tyro.cli(PianoTask, args=["--help"], prog="robopianist:<song>")
        print(
            f"usage: prefrl envs [{'|'.join(FAMILIES)}]\n\nList the environment ids "
            "make_env accepts (prefrl envs robopianist --help: the piano task flags)."
        )
        return 0
    for env_id in known_env_ids(family):
        print(env_id)
    for name in [family] if family else FAMILIES:  # (to stderr: stdout stays a list of ids)
        needs = FAMILIES[name].missing()
        if needs:
            print(f"{name}:* cannot be made here yet: {needs}", file=sys.stderr)
    return 0


def cmd_runs(args: list[str]) -> int:
    import argparse

    from prefrl.rundir.status import find_runs, run_status, status_table

    parser = argparse.ArgumentParser(
        prog="prefrl runs",
        description="Where each run stands: training now, finished or stopped (resumable), its "
        "steps, its last evaluation and, while it trains, its pace and the time it has left.",
    )
    parser.add_argument("folders", nargs="*", type=Path, default=[Path("runs")],
                        help="a run, a runs folder, a sweep or a folder of sweeps (default: runs)")  # fmt: skip
    for folder in parser.parse_args(args).folders:
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no such folder (a run, a runs folder or a sweep)")
        runs = find_runs(folder)
        if not runs:
            print(f"{folder}: no run directories (folders with a metrics.jsonl)")
            continue
        print("\n".join(status_table([run_status(r) for r in runs], folder)))
    return 0
