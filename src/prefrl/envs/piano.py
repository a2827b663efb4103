"""RoboPianist: two Shadow Hands playing a song on a piano, as the `robopianist:` family's env
(a Gymnasium env over robopianist's dm_env task, with exact state save/restore). What an id
means and how playing is scored: `envs.piano_task`."""

from __future__ import annotations

from typing import ClassVar

import gymnasium as gym
import numpy as np

from prefrl.envs.backends import (
    FAST_RENDER_OFF,
    NativeBackend,
    get_mujoco_state,
    prepare_offscreen,
    set_mujoco_state,
)
from prefrl.envs.piano_task import (
    INSTALL,  # noqa: F401 (read by the registry: what `prefrl envs` says to install)
    JUDGES,
    PianoTask,
    check_song_file,
    key_press_metrics,
    key_press_steps,
    load_midi,
    parse_piano_id,
    piano_installed,
    quiet_import,
    song_ids,
)


class PianoEnv(gym.Env):
    """A robopianist task behind the Gymnasium API (flat observations in the dm_env's key order,
    the task's own action bounds: `PrefrlEnv` rescales them to [-1, 1])."""

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"]}

    def __init__(self, song: str, task: PianoTask, width: int = 256, height: int = 256,
                 fast: bool = True):  # fmt: skip
        quiet_import()
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


def step_scores(env_id: str, states: np.ndarray, judge: str) -> np.ndarray:
    """Per-step scores of segments' stored states (N, H, state) for a piano judge:
    `piano-f1` the key-press F1 of each step, `piano-wrong-keys` minus the keys down that the
    song did not ask for."""
    if judge not in JUDGES:
        raise ValueError(f"piano judge {judge!r} is invalid: expected one of {JUDGES}")
    if not env_id.startswith("robopianist:"):
        raise ValueError(f"{judge!r} judges piano segments; these are of {env_id!r}")
    env = PianoEnv(*parse_piano_id(env_id.removeprefix("robopianist:")))
    try:
        out = np.empty(states.shape[:2])
        for i, segment in enumerate(states):
            pressed, target = env.keys_of_states(segment)
            if judge == "piano-f1":
                out[i] = key_press_steps(pressed, target)["f1"]
            else:
                out[i] = -(pressed & ~target).sum(1)
    finally:
        env.close()
    return out


def ids() -> list[str]:
    return song_ids()


def installed() -> bool:
    return piano_installed()


def check(name: str) -> None:
    """The flags always; the song too when the piano extra is installed. Without it an id is
    still accepted (configs and presets name piano tasks on machines without the extra), and
    making the env says how to install it."""
    song, task = parse_piano_id(name)
    if piano_installed():
        load_midi(song, task.stretch, task.shift)
    else:
        check_song_file(song)


def make(name: str, width: int, height: int, fast: bool, render: bool):
    song, task = parse_piano_id(name)
    env = PianoEnv(song, task, width, height, fast)
    if render:
        prepare_offscreen(env.physics.model.ptr, width, height, fast)
    return env, PianoBackend(env)
