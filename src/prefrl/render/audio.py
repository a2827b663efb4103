"""Piano audio: the keys a clip's hands pressed (or a MIDI file's notes) synthesised with
FluidSynth and robopianist's bundled General MIDI soundfont, so people rate what they hear.

Needs the piano extra (pyfluidsynth, robopianist) and Debian's libfluidsynth3.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

PIANO_INSTALL = (
    "the piano environments need the piano extra: pip install 'prefrl[piano]' (and the Debian "
    "packages portaudio19-dev and libfluidsynth3: apt-get install portaudio19-dev libfluidsynth3)"
)

SAMPLE_RATE = 44_100
KEY_TO_PITCH = 21
"""Piano key 0 (A0) is MIDI pitch 21."""
VELOCITY = 80
GAIN = 3.0
"""FluidSynth's master gain (its default 0.2 is very quiet with this soundfont); fixed, so that
every clip is as loud as the playing it records."""


def _synth(sample_rate: int):
    try:
        import fluidsynth
        from robopianist import SF2_PATH
    except ImportError as e:
        raise ImportError(PIANO_INSTALL) from e
    synth = fluidsynth.Synth(gain=GAIN, samplerate=float(sample_rate))
    font = synth.sfload(str(SF2_PATH))
    synth.program_select(0, font, 0, 0)  # channel 0, bank 0, program 0: acoustic grand piano
    return synth


def synthesize(
    notes: Iterable[tuple[int, float, float, int]],
    duration: float,
    sample_rate: int = SAMPLE_RATE,
    sustain: Iterable[tuple[float, float]] = (),
) -> np.ndarray:
    """Mono int16 samples of `duration` seconds playing `notes` (pitch, start, end, velocity)
    with the sustain pedal held over each (start, end) of `sustain`."""
    events = []  # (time, order, action, value): note-offs before note-ons at the same time
    for pitch, start, end, velocity in notes:
        events.append((start, 1, "on", (int(pitch), int(velocity))))
        events.append((end, 0, "off", int(pitch)))
    for start, end in sustain:
        events.append((start, 1, "pedal", 127))
        events.append((end, 0, "pedal", 0))
    events.sort(key=lambda e: (e[0], e[1]))
    total = max(round(duration * sample_rate), 1)
    synth = _synth(sample_rate)
    out, done = [], 0
    try:
        for time, _, action, value in events:
            at = min(round(time * sample_rate), total)
            if at > done:
                out.append(np.asarray(synth.get_samples(at - done))[::2])
                done = at
            if action == "on":
                synth.noteon(0, *value)
            elif action == "off":
                synth.noteoff(0, value)
            else:
                synth.cc(0, 64, value)
        if total > done:
            out.append(np.asarray(synth.get_samples(total - done))[::2])
    finally:
        synth.delete()
    return np.concatenate(out).astype(np.int16)


def key_notes(pressed: np.ndarray, fps: float) -> list[tuple[int, float, float, int]]:
    """Notes from per-step key presses (steps, 88): a key sounds from the step it goes down to
    the step it comes up (or the clip's end)."""
    pressed = np.asarray(pressed, bool)
    steps = len(pressed)
    padded = np.concatenate([np.zeros((1, pressed.shape[1]), bool), pressed,
                             np.zeros((1, pressed.shape[1]), bool)])  # fmt: skip
    change = np.diff(padded.astype(np.int8), axis=0)
    notes = []
    for key in range(pressed.shape[1]):
        downs = np.flatnonzero(change[:, key] == 1)
        ups = np.flatnonzero(change[:, key] == -1)
        for down, up in zip(downs, ups, strict=True):
            notes.append((KEY_TO_PITCH + key, down / fps, min(up, steps) / fps, VELOCITY))
    return notes


def pedal_spans(sustain: np.ndarray, fps: float) -> list[tuple[float, float]]:
    """(start, end) seconds of each run of steps with the sustain pedal down."""
    held = np.concatenate([[False], np.asarray(sustain, bool), [False]]).astype(np.int8)
    change = np.diff(held)
    starts, ends = np.flatnonzero(change == 1), np.flatnonzero(change == -1)
    return [(s / fps, e / fps) for s, e in zip(starts, ends, strict=True)]


def keys_audio(pressed: np.ndarray, fps: float, sustain: np.ndarray | None = None,
               sample_rate: int = SAMPLE_RATE) -> np.ndarray:  # fmt: skip
    """The sound of a clip: key presses (frames, 88), one row per video frame at `fps`,
    synthesised for the clip's length (frames / fps seconds)."""
    spans = pedal_spans(sustain, fps) if sustain is not None else []
    return synthesize(key_notes(pressed, fps), len(pressed) / fps, sample_rate, spans)
