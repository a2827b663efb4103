"""The piano task (RoboPianist): what a `robopianist:` id means, the songs, and how playing is
scored. The env itself is `envs.piano`.

An id names a song and, optionally, task flags: `robopianist:debug-TwinkleTwinkleRousseau`,
`robopianist:songs/tune.mid --control-timestep 0.05 --no-gravity-compensation`. The flags'
defaults are the published SAC run's task settings, so a bare song id is that task. One string
says everything needed to make the env again (run configs, datasets and rating runs store it).

Episode metrics (robopianist's definitions): per control step, the binary precision / recall /
F1 of the pressed keys against the song's keys at that step (nothing to press and nothing
pressed counts as 1); an episode's figure is their mean over its steps. They come in the last
step's `info["episode_metrics"]`.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prefrl.render.audio import PIANO_INSTALL as INSTALL
from prefrl.rundir.config import check_fields


def quiet_import():
    """Import robopianist without the warnings of its pydub dependency (no ffmpeg binary, the
    deprecated audioop; prefrl encodes audio with PyAV, never through pydub) and without the line
    pyfluidsynth prints to stdout when $CI is set, which would land in commands' output."""
    import contextlib
    import io
    import warnings

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.filterwarnings("ignore", module="pydub")
        warnings.filterwarnings("ignore", message=".*audioop.*")
        try:
            import robopianist.music
            import robopianist.suite  # noqa: F401
        except ImportError as e:
            raise ImportError(INSTALL) from e


@dataclass(frozen=True)
class PianoTask:
    """Task settings of `robopianist:` envs; defaults are the published SAC run's."""

    trim_silence: bool = True
    """Shift the song so that its first note starts at time 0."""
    gravity_compensation: bool = True
    reduced_action_space: bool = True
    """Fix the hand joints the published runs do not actuate."""
    control_timestep: float = 0.05
    physics_timestep: float = 0.005
    n_steps_lookahead: int = 10
    """Steps of upcoming keys in the goal observation."""
    n_seconds_lookahead: float | None = None
    """Overrides --n-steps-lookahead when set."""
    action_reward_observation: bool = True
    """Append the previous action and reward to the observation."""
    primitive_fingertip_collisions: bool = True
    disable_fingering_reward: bool = False
    disable_forearm_reward: bool = False
    disable_colorization: bool = False
    disable_hand_collisions: bool = False
    wrong_press_termination: bool = False
    """End the episode when a key that should not be pressed is."""
    initial_buffer_time: float = 0.0
    """Seconds of silence before the song, to reach the first notes."""
    energy_penalty_coef: float = 5e-3
    change_color_on_activation: bool = True
    """Colour pressed keys (what people see in clips)."""
    randomize_hand_positions: bool = False
    attachment_yaw: float = 0.0
    """Yaw of the hands' attachment, in degrees."""
    stretch: float = 1.0
    """Tempo factor of the song (2: half as fast)."""
    shift: int = 0
    """Transpose the song by this many semitones."""
    camera: str = "piano/back"
    """The camera clips and videos use."""

    def task_kwargs(self) -> dict:
        """The settings robopianist's task takes (the rest are prefrl's: observation, song,
        camera)."""
        ours = ("action_reward_observation", "stretch", "shift", "camera")
        return {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ours
        }

    def __post_init__(self) -> None:
        check_fields(self, {
            "control_timestep": (self.control_timestep > 0, "a positive number of seconds"),
            "physics_timestep": (0 < self.physics_timestep <= self.control_timestep,
                                 f"in (0, control-timestep={self.control_timestep}]"),
            "n_steps_lookahead": (self.n_steps_lookahead >= 0, ">= 0"),
            "initial_buffer_time": (self.initial_buffer_time >= 0, ">= 0"),
            "energy_penalty_coef": (self.energy_penalty_coef >= 0, ">= 0"),
            "stretch": (self.stretch > 0, "a positive number"),
        }, "piano task --")  # fmt: skip


def parse_piano_id(name: str) -> tuple[str, PianoTask]:
    """`<song> [flags]` -> (song, settings). Bad flags raise ValueError naming them."""
    import tyro

    parts = shlex.split(name)
    if not parts:
        raise ValueError("robopianist: ids need a song: a bundled song name or a MIDI file path")
    song, flags = parts[0], parts[1:]
    try:
        task = tyro.cli(PianoTask, args=flags, prog=f"robopianist:{song}")
    except SystemExit as e:
        raise ValueError(
            f"robopianist:{song}: bad task flags {flags} (see `prefrl envs robopianist --help`)"
        ) from e
    return song, task


def piano_installed() -> bool:
    try:
        quiet_import()
    except ImportError:
        return False
    return True


def check_song_file(song: str) -> None:
    """A song given as a MIDI path must exist (what can be checked without robopianist)."""
    path = Path(song)
    if path.suffix.lower() in (".mid", ".midi") and not path.exists():
        raise FileNotFoundError(f"robopianist:{song}: MIDI file {path} does not exist")


def song_ids() -> list[str]:
    """The bundled songs, as `robopianist:` ids (the etude and repertoire songs also need
    robopianist's separately downloaded MIDI data)."""
    if not piano_installed():
        return []
    from robopianist import suite

    return [f"robopianist:{_short(name)}" for name in suite.ALL]


def _short(full: str) -> str:
    return full.removeprefix("RoboPianist-").removesuffix("-v0")


def load_midi(song: str, stretch: float = 1.0, shift: int = 0):
    """A robopianist MidiFile from a bundled song name or a MIDI file path."""
    quiet_import()
    from robopianist import music, suite

    full = song if song.startswith("RoboPianist-") else f"RoboPianist-{song}-v0"
    if full in suite.ALL:
        source = suite._ALL_DICT[full]
    else:
        path = Path(song)
        if path.suffix.lower() not in (".mid", ".midi"):
            bundled = ", ".join(_short(s) for s in suite.DEBUG)
            raise ValueError(
                f"robopianist:{song}: not a bundled song nor a .mid/.midi file (bundled debug "
                f"songs: {bundled}; `prefrl envs robopianist` lists all)"
            )
        check_song_file(song)
        source = path
    try:
        midi = music.load(source, stretch=stretch, shift=shift)
    except FileNotFoundError as e:
        raise FileNotFoundError(
            f"robopianist:{song}: its MIDI data is not installed ({e}); the etude and "
            "repertoire songs need robopianist's separate MIDI download"
        ) from e
    except Exception as e:
        raise ValueError(f"robopianist:{song}: {source} could not be read as MIDI ({e})") from e
    if not midi.seq.notes:
        raise ValueError(f"robopianist:{song}: {source} has no notes")
    return midi


def key_press_steps(pressed: np.ndarray, target: np.ndarray) -> dict[str, np.ndarray]:
    """Per-step binary precision / recall / F1 of `pressed` keys (T, 88) against `target` keys
    (T, 88); a step with nothing predicted (or nothing to press) scores 1 on that side, and F1
    is 1 when both are empty (scikit-learn's zero_division=1, as robopianist computes them)."""
    pressed, target = np.asarray(pressed, bool), np.asarray(target, bool)
    tp = (pressed & target).sum(1)
    n_pred, n_true = pressed.sum(1), target.sum(1)
    return {
        "precision": np.where(n_pred > 0, tp / np.maximum(n_pred, 1), 1.0),
        "recall": np.where(n_true > 0, tp / np.maximum(n_true, 1), 1.0),
        # 2tp / (2tp + fp + fn)
        "f1": np.where(n_pred + n_true > 0, 2 * tp / np.maximum(n_pred + n_true, 1), 1.0),
    }


def key_press_metrics(pressed: np.ndarray, target: np.ndarray) -> dict[str, float]:
    """An episode's (or clip's) precision / recall / F1: the means of the per-step figures."""
    return {k: float(v.mean()) for k, v in key_press_steps(pressed, target).items()}


JUDGES = ("piano-f1", "piano-wrong-keys")
