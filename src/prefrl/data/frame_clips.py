"""Clips of pixel envs as `Segments`, each frame stored once: `obs` holds the H + 3 grey frames
a clip's H stacks of 4 are cut from (`prefrl.reward.frames.frame_stacks`), not H stacks (4x
the memory); `state` holds the env state before the clip's first step only (the emulator
replays the clip from it, by its actions); `reward` the true reward of each step (NaN where
none).
"""

from __future__ import annotations

import numpy as np

from prefrl.data.segments import Segments


class FrameClipRecorder:
    """Cuts the steps of envs stepped side by side into clips of `length` steps within an
    episode (an episode's last partial clip is dropped)."""

    def __init__(self, n_envs: int, length: int, next_id: int = 0):
        if length < 1:
            raise ValueError(f"clip length {length} is invalid: expected >= 1")
        self.length, self.next_id = length, next_id
        self._frames: list[list[np.ndarray]] = [[] for _ in range(n_envs)]
        self._actions: list[list[int]] = [[] for _ in range(n_envs)]
        self._rewards: list[list[float]] = [[] for _ in range(n_envs)]
        self._start: list[tuple[np.ndarray, int, int]] = [None] * n_envs  # (state, step, t)
        self._episode_step = np.zeros(n_envs, np.int64)
        self.episodes = np.arange(n_envs, dtype=np.int64)  # (a fresh id per ended episode)
        self._next_episode = n_envs

    def starting(self) -> np.ndarray:
        """Envs whose next step starts a clip: the loop passes their states to `record`."""
        return np.array([not f for f in self._frames])

    def record(self, step: int, obs: np.ndarray, action, reward, ended, states: dict) -> list:
        """One step of every env: the stacks it acted on (N, 84, 84, 4), its actions and true
        rewards, which episodes ended with it, and `states[i]` for the envs `starting()`.
        Returns the clips completed by this step."""
        clips = []
        for i in range(len(self._frames)):
            if not self._frames[i]:
                self._frames[i] = [obs[i][..., k] for k in range(obs.shape[-1] - 1)]
                self._start[i] = (states[i], step, int(self._episode_step[i]))
            self._frames[i].append(obs[i][..., -1])
            self._actions[i].append(int(action[i]))
            self._rewards[i].append(float(reward[i]))
            self._episode_step[i] += 1
            if len(self._actions[i]) == self.length:
                clips.append(self._clip(i))
            if ended[i]:
                self._frames[i], self._actions[i], self._rewards[i] = [], [], []
                self._episode_step[i] = 0
                self.episodes[i], self._next_episode = self._next_episode, self._next_episode + 1
        return clips

    def _clip(self, i: int) -> Segments:
        state, step, start = self._start[i]
        clip = Segments(
            obs=np.stack(self._frames[i])[None],
            action=np.asarray(self._actions[i], np.float32)[None, :, None],
            reward=np.asarray(self._rewards[i], np.float32)[None],
            state=np.asarray(state)[None, None],
            id=np.array([self.next_id]), step=np.array([step]),
            episode=np.array([self.episodes[i]]), start=np.array([start]),
        )  # fmt: skip
        self.next_id += 1
        self._frames[i], self._actions[i], self._rewards[i] = [], [], []
        return clip
