"""RoboPianist: two Shadow Hands playing a song on a piano, as the `robopianist:` family.

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
from typing import ClassVar

import gymnasium as gym
import numpy as np

from prefrl.envs.backends import (
    FAST_RENDER_OFF,
    NativeBackend,
    get_mujoco_state,
    set_mujoco_state,
)

INSTALL = (
    "the piano environments need the piano extra: pip install 'prefrl[piano]' (and the Debian "
    "packages portaudio19-dev and libfluidsynth3: apt-get install portaudio19-dev libfluidsynth3)"
)


def _quiet_import():
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
        checks = {
            "control_timestep": self.control_timestep > 0,
            "physics_timestep": 0 < self.physics_timestep <= self.control_timestep,
            "n_steps_lookahead": self.n_steps_lookahead >= 0,
            "initial_buffer_time": self.initial_buffer_time >= 0,
            "energy_penalty_coef": self.energy_penalty_coef >= 0,
            "stretch": self.stretch > 0,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(
                    f"piano task --{name.replace('_', '-')}={getattr(self, name)!r} is invalid"
                )


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
        _quiet_import()
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
    _quiet_import()
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


def step_scores(env_id: str, states: np.ndarray, judge: str) -> np.ndarray:
    """Per-step scores of segments' stored states (N, H, state) for a piano judge:
    `piano-f1` the key-press F1 of each step, `piano-wrong-keys` minus the keys down that the
    song did not ask for."""
    if judge not in JUDGES:
        raise ValueError(f"piano judge {judge!r} is invalid: expected one of {JUDGES}")
    if not env_id.startswith("robopianist:"):
        raise ValueError(f"{judge!r} judges piano segments; these are of {env_id!r}")
    from prefrl.envs import make_env

    env = make_env(env_id, seed=0)
    try:
        out = np.empty(states.shape[:2])
        for i, segment in enumerate(states):
            pressed, target = env.unwrapped.keys_of_states(segment)
            if judge == "piano-f1":
                out[i] = key_press_steps(pressed, target)["f1"]
            else:
                out[i] = -(pressed & ~target).sum(1)
    finally:
        env.close()
    return out


JUDGES = ("piano-f1", "piano-wrong-keys")


class PianoEnv(gym.Env):
    """A robopianist task behind the Gymnasium API (flat observations in the dm_env's key order,
    the task's own action bounds: `PrefrlEnv` rescales them to [-1, 1])."""

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"]}

    def __init__(self, song: str, task: PianoTask, width: int = 256, height: int = 256,
                 fast: bool = True):  # fmt: skip
        _quiet_import()
        from mujoco_utils import composer_utils
        from robopianist.suite.tasks import piano_with_shadow_hands

        self.song, self.task_settings = song, task
        midi = load_midi(song, task.stretch, task.shift)
        self._task = piano_with_shadow_hands.PianoWithShadowHands(midi=midi, **task.task_kwargs())
        self._env = composer_utils.Environment(
            task=self._task, random_state=0, strip_singleton_obs_buffer_dim=True,
            recompile_physics=False, legacy_step=True,
        )  # fmt: skip
        self.size = (height, width)
        self.render_flags = {flag: False for flag in FAST_RENDER_OFF} if fast else None
        spec = self._env.action_spec()
        self.action_space = gym.spaces.Box(
            spec.minimum.astype(np.float32), spec.maximum.astype(np.float32), dtype=np.float32
        )
        obs_size = sum(int(np.prod(s.shape)) for s in self._env.observation_spec().values())
        if task.action_reward_observation:
            obs_size += spec.shape[0] + 1
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_size,), np.float32)
        self._last_action = np.zeros(spec.shape, np.float32)
        self._last_reward = 0.0
        self._pressed: list[np.ndarray] = []
        self._sustained: list[bool] = []
        self._renderer = None
        self._camera = -1

    # ------------------------------------------------------------------ the Gymnasium API
    @property
    def physics(self):
        return self._env.physics

    def _flat(self, observation) -> np.ndarray:
        parts = [np.asarray(v, np.float32).reshape(-1) for v in observation.values()]
        if self.task_settings.action_reward_observation:
            parts += [self._last_action, np.array([self._last_reward], np.float32)]
        return np.concatenate(parts)

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self._env._random_state = np.random.RandomState(seed)
        timestep = self._env.reset()
        self._last_action[:] = 0.0
        self._last_reward = 0.0
        self._pressed, self._sustained = [], []
        return self._flat(timestep.observation), {}

    def step(self, action):
        action = np.asarray(action, np.float64)
        timestep = self._env.step(action)
        reward = float(timestep.reward or 0.0)
        piano = self._task.piano
        self._pressed.append(piano.activation.copy())
        self._sustained.append(bool(piano.sustain_activation[0]))
        self._last_action = action.astype(np.float32)
        self._last_reward = reward
        info = {}
        terminated = truncated = False
        if timestep.last():
            terminated = timestep.discount == 0.0
            truncated = not terminated
            info["episode_metrics"] = self.episode_metrics()
        return self._flat(timestep.observation), reward, terminated, truncated, info

    def target_keys(self) -> np.ndarray:
        """(steps, 88) bool: the keys the song presses at each control step."""
        notes = self._task._notes
        target = np.zeros((len(notes), self._task.piano.n_keys), bool)
        for t, step_notes in enumerate(notes):
            target[t, [n.key for n in step_notes]] = True
        return target

    def pressed_keys(self) -> np.ndarray:
        """(steps so far, 88) bool: the keys pressed after each step of this episode."""
        if not self._pressed:
            return np.zeros((0, self._task.piano.n_keys), bool)
        return np.stack(self._pressed)

    def sustain(self) -> np.ndarray:
        return np.asarray(self._sustained, bool)

    def episode_audio(self, frames: int) -> tuple[np.ndarray, int]:
        """The sound of this episode's first `frames` video frames (the reset frame, then one
        per step), as (mono int16 samples, sample rate)."""
        from prefrl.render.audio import SAMPLE_RATE, keys_audio

        n_keys = self._task.piano.n_keys
        pressed = np.concatenate([np.zeros((1, n_keys), bool), self.pressed_keys()])[:frames]
        sustain = np.concatenate([[False], self.sustain()])[:frames]
        return keys_audio(pressed, self.fps, sustain), SAMPLE_RATE

    def clip_audio(self, states: np.ndarray) -> tuple[np.ndarray, int]:
        """The sound of a clip re-created from stored states (one frame each): the keys and
        pedal down in each state."""
        from prefrl.render.audio import SAMPLE_RATE, keys_audio

        pressed, sustain = [], []
        for state in states:
            self.set_state(state)
            pressed.append(self.key_activation())
            sustain.append(self.sustain_activation())
        return keys_audio(np.stack(pressed), self.fps, np.asarray(sustain)), SAMPLE_RATE

    def episode_metrics(self) -> dict[str, float]:
        pressed = self.pressed_keys()
        return key_press_metrics(pressed, self.target_keys()[: len(pressed)])

    # ------------------------------------------------------------ state, observation, render
    def get_state(self) -> np.ndarray:
        """The MuJoCo state, then the song position and the sustain pedal's state."""
        physics = self.physics
        sim = get_mujoco_state(physics.model.ptr, physics.data.ptr)
        piano = self._task.piano
        extra = [float(self._task._t_idx), float(piano._sustain_state[0])]
        return np.concatenate([sim, extra, self._last_action, [self._last_reward]])

    def set_state(self, state: np.ndarray) -> None:
        state = np.asarray(state, np.float64).reshape(-1)
        n_act = self._last_action.shape[0]
        physics = self.physics
        sim, extra = state[: -(n_act + 3)], state[-(n_act + 3) :]
        set_mujoco_state(physics.model.ptr, physics.data.ptr, sim)
        t_idx = int(extra[0])
        self._task._t_idx = t_idx
        self._env._reset_next_step = False
        # The key-press history of this episode up to the state (padded with nothing pressed
        # when the state came from another episode), so episode metrics stay aligned.
        n_keys = self._task.piano.n_keys
        self._pressed = self._pressed[:t_idx] + [np.zeros(n_keys, bool)] * (
            t_idx - len(self._pressed)
        )
        self._sustained = self._sustained[:t_idx] + [False] * (t_idx - len(self._sustained))
        piano = self._task.piano
        piano._sustain_state[0] = extra[1]
        piano._update_key_state(physics)
        piano._update_key_color(physics)
        self._last_action = extra[2 : 2 + n_act].astype(np.float32)
        self._last_reward = float(extra[-1])

    def observe(self) -> np.ndarray:
        updater = self._env._observation_updater
        updater.reset(self.physics, self._env.random_state)
        return self._flat(updater.get_observation())

    def keys_of_states(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(pressed, target), each (len(states), 88) bool: the keys down in each stored state
        and the keys the song asked for at the step that led to it (none before the first)."""
        target_all = self.target_keys()
        pressed, target = [], []
        for state in states:
            self.set_state(state)
            pressed.append(self.key_activation())
            t = self._task._t_idx - 1
            target.append(target_all[t] if 0 <= t < len(target_all) else np.zeros(88, bool))
        return np.stack(pressed), np.stack(target)

    def key_activation(self) -> np.ndarray:
        """(88,) bool: the keys pressed in the current (possibly restored) state."""
        return self._task.piano.activation.copy()

    def sustain_activation(self) -> bool:
        return bool(self._task.piano.sustain_activation[0])

    def render(self) -> np.ndarray:
        # mujoco.Renderer directly: 1.6x faster per frame than dm_control's physics.render on
        # this CPU (57 vs 91 ms at 256x256), the same pixels.
        import mujoco

        if self._renderer is None:
            model = self.physics.model.ptr
            camera = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, self.task_settings.camera)
            if camera < 0:
                names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, i)
                         for i in range(model.ncam)]  # fmt: skip
                raise ValueError(
                    f"piano task --camera={self.task_settings.camera!r} does not exist; the "
                    f"scene's cameras: {', '.join(names)}"
                )
            h, w = self.size
            self._renderer = mujoco.Renderer(model, height=h, width=w)
            self._camera = camera
            if self.render_flags is not None:
                for flag in self.render_flags:
                    self._renderer.scene.flags[flag] = 0
        self._renderer.update_scene(self.physics.data.ptr, camera=self._camera)
        return self._renderer.render()

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    @property
    def fps(self) -> float:
        return 1.0 / self.task_settings.control_timestep

    @property
    def max_episode_steps(self) -> int:
        return len(self._task._notes)


class PianoBackend(NativeBackend):
    """A NativeBackend that also reports the song's frame rate and length and closes the
    renderer."""

    def close(self) -> None:
        self.base.close()

    def fps(self) -> float:
        return self.base.fps

    def max_episode_steps(self) -> int:
        return self.base.max_episode_steps
