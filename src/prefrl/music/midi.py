"""MIDI files for the piano tasks: list a song's notes, cut it to a time window, render it to
audio. Songs become tasks with `robopianist:<path>`; a short window trains in minutes.

Needs the piano extra (pretty_midi; FluidSynth for rendering).
"""

from __future__ import annotations

import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

NOTE_NAMES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
SUSTAIN_CC = 64


@dataclass(frozen=True)
class NoteInfo:
    pitch: int
    start: float
    end: float
    velocity: int

    @property
    def name(self) -> str:
        return f"{NOTE_NAMES[self.pitch % 12]}{self.pitch // 12 - 1}"


def load_midi_file(path: str | Path):
    """A pretty_midi.PrettyMIDI of a file that exists, parses as MIDI and has notes."""
    try:
        import pretty_midi
    except ImportError as e:
        from prefrl.render.audio import PIANO_INSTALL as INSTALL

        raise ImportError(INSTALL) from e
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"MIDI file {path} does not exist")
    try:
        midi = pretty_midi.PrettyMIDI(str(path))
    except Exception as e:
        raise ValueError(f"{path} is not a readable MIDI file ({type(e).__name__}: {e})") from e
    if not any(inst.notes for inst in midi.instruments):
        raise ValueError(f"{path} has no notes: a piano task needs at least one")
    return midi


def notes(midi) -> list[NoteInfo]:
    """Every note of every non-drum instrument, by start time then pitch."""
    out = [
        NoteInfo(n.pitch, float(n.start), float(n.end), int(n.velocity))
        for inst in midi.instruments
        if not inst.is_drum
        for n in inst.notes
    ]
    return sorted(out, key=lambda n: (n.start, n.pitch))


def duration(midi) -> float:
    """Seconds from 0 to the end of the last note."""
    return max(n.end for n in notes(midi))


def resolve_window(
    total: float,
    start: float | None = None,
    end: float | None = None,
    first: float | None = None,
    middle: float | None = None,
    last: float | None = None,
) -> tuple[float, float]:
    """(start, end) seconds from one way of naming a window: --start/--end, --first S,
    --middle S or --last S, checked against the song's `total` length."""
    given = [x is not None for x in (first, middle, last)]
    if sum(given) > 1 or (any(given) and (start is not None or end is not None)):
        raise ValueError("name the window one way: --start/--end, --first, --middle or --last")
    if first is not None:
        start, end = 0.0, first
    elif middle is not None:
        start = (total - middle) / 2
        end = start + middle
    elif last is not None:
        start, end = total - last, total
    start = 0.0 if start is None else float(start)
    end = total if end is None else float(end)
    if not (0 <= start < end <= total + 1e-9):
        raise ValueError(
            f"window [{start:.2f} s, {end:.2f} s] is outside the song (0 to {total:.2f} s) or "
            "empty: expected 0 <= start < end <= the song's length"
        )
    return start, end


def clip(midi, start: float, end: float):
    """A new PrettyMIDI with the notes and pedal of [start, end), shifted to start at 0; notes
    that cross a bound are cut at it."""
    import pretty_midi

    out = pretty_midi.PrettyMIDI(initial_tempo=120.0)
    for inst in midi.instruments:
        new = pretty_midi.Instrument(inst.program, inst.is_drum, inst.name)
        for n in inst.notes:
            if n.end > start and n.start < end:
                new.notes.append(pretty_midi.Note(
                    n.velocity, n.pitch, max(n.start, start) - start, min(n.end, end) - start
                ))  # fmt: skip
        pedal_down = False
        for cc in inst.control_changes:
            if cc.number != SUSTAIN_CC:
                continue
            if cc.time < start:
                pedal_down = cc.value >= 64
            elif cc.time < end:
                new.control_changes.append(
                    pretty_midi.ControlChange(cc.number, cc.value, cc.time - start)
                )
        if pedal_down:  # the pedal was held when the window began
            new.control_changes.insert(0, pretty_midi.ControlChange(SUSTAIN_CC, 127, 0.0))
        if new.notes:
            out.instruments.append(new)
    if not out.instruments:
        raise ValueError(f"the window [{start:.2f} s, {end:.2f} s] holds no notes")
    return out


def pedal_spans(midi) -> list[tuple[float, float]]:
    """(start, end) seconds of the sustain pedal held, from control change 64."""
    spans, down_at = [], None
    changes = sorted(
        (cc.time, cc.value)
        for inst in midi.instruments
        for cc in inst.control_changes
        if cc.number == SUSTAIN_CC
    )
    for time, value in changes:
        if value >= 64 and down_at is None:
            down_at = time
        elif value < 64 and down_at is not None:
            spans.append((down_at, time))
            down_at = None
    if down_at is not None:
        spans.append((down_at, duration(midi)))
    return spans


def render_audio(midi, tail: float = 1.0) -> tuple[np.ndarray, int]:
    """(mono int16 samples, sample rate) of the song played on the piano soundfont, with
    `tail` seconds after the last note for it to ring out."""
    from prefrl.render.audio import SAMPLE_RATE, synthesize

    played = [(n.pitch, n.start, n.end, n.velocity) for n in notes(midi)]
    samples = synthesize(played, duration(midi) + tail, SAMPLE_RATE, pedal_spans(midi))
    return samples, SAMPLE_RATE


def write_audio(path: str | Path, samples: np.ndarray, rate: int) -> Path:
    """A .wav (PCM) or .m4a (AAC) file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".wav":
        with wave.open(str(path), "wb") as f:
            f.setnchannels(1)
            f.setsampwidth(2)
            f.setframerate(rate)
            f.writeframes(np.asarray(samples, np.int16).tobytes())
        return path
    if path.suffix.lower() == ".m4a":
        import av

        from prefrl.render.video import write_audio_stream

        with av.open(str(path), mode="w", format="mp4") as out:
            stream = out.add_stream("aac", rate=rate, layout="mono")
            write_audio_stream(out, stream, samples, rate)
        return path
    raise ValueError(f"audio file {path}: expected a .wav or .m4a name")
