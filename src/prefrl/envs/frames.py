"""Pixel environments as prefrl's frame agents see them: the Atari preprocessing of Mnih et al.
(2015) and Christiano et al. (2017) over a game that can save and restore its emulator state.

A `Game` is one frame at a time (an ALE ROM, or the built-in MovingDot); `PixelEnv` turns it into
agent steps: random no-op starts, each action repeated for 4 frames with the reward summed, the
max of the last two frames (Atari sprites flicker), grey 84x84, a stack of the 4 newest frames,
and optionally rows blanked (a score that would give the reward away). The resize is area
averaging, applied as two banded weighted sums, so no image library is needed.

`get_state()` is the game's emulator state plus the newest preprocessed frame; `set_state`
restores both, so stepping the same actions from a restored state gives the same rewards and
colour frames bit for bit, and the same observations once the stack has refilled (the 3 older
frames of the stack are not part of the state: they are refilled with the newest one, as after a
reset).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from prefrl.envs.pool import EnvPool

STACK, SIZE, FRAME_SKIP, NOOP_MAX = 4, 84, 4, 30
FRAME_SIZE = (SIZE, SIZE)
"""(height, width) of every pixel env's frames."""


class Game(Protocol):
    """One frame at a time."""

    action_meanings: list[str]
    fps: float  # frames per second of the game's own clock

    def reset(self, rng: np.random.Generator) -> None: ...
    def act(self, action: int) -> float: ...  # one frame; returns its reward
    def game_over(self) -> bool: ...
    def screen_grey(self) -> np.ndarray: ...  # (H, W) uint8
    def screen_rgb(self) -> np.ndarray: ...  # (H, W, 3) uint8
    def get_state(self) -> np.ndarray: ...  # uint8, fixed length per game
    def set_state(self, state: np.ndarray) -> None: ...


def area_matrix(src: int, dst: int) -> np.ndarray:
    """(dst, src) weights of area averaging: output pixel i is the mean of the source interval
    [i * src/dst, (i+1) * src/dst), partial source pixels weighted by their overlap."""
    edges = np.arange(dst + 1) * (src / dst)
    lo, hi = edges[:-1, None], edges[1:, None]
    pixel = np.arange(src)[None]
    overlap = np.clip(np.minimum(hi, pixel + 1) - np.maximum(lo, pixel), 0.0, None)
    return (overlap / overlap.sum(1, keepdims=True)).astype(np.float32)


def banded(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A (dst, src) averaging matrix as (indices, weights) of its few non-zero source pixels per
    row, (dst, k) each (rows with fewer are padded with weight 0): applying it is then a gather
    and a short sum, 5-10x faster than the dense product on small frames."""
    k = int((weights > 0).sum(1).max())
    idx = np.zeros((weights.shape[0], k), np.int64)
    w = np.zeros((weights.shape[0], k), np.float32)
    for i, row in enumerate(weights):
        nz = np.flatnonzero(row)
        idx[i, : len(nz)], w[i, : len(nz)] = nz, row[nz]
    return idx, w


class PixelEnv:
    """A `Game` as agent steps of stacked 84x84 grey frames (uint8, shape (84, 84, 4)), with
    discrete actions. `blank_rows` (in 84-row units) are set to 0 in every frame."""

    def __init__(
        self,
        game: Game,
        env_id: str,
        seed: int | None = None,
        *,
        frame_skip: int = FRAME_SKIP,
        noop_max: int = NOOP_MAX,
        max_episode_steps: int | None = None,
        blank_rows: tuple[slice, ...] = (),
    ):
        self.game, self.env_id = game, env_id
        self.frame_skip, self.noop_max = frame_skip, noop_max
        self.max_episode_steps = max_episode_steps
        self.blank_rows = blank_rows
        self.rng = np.random.default_rng(seed)
        height, width = game.screen_grey().shape
        self._rows, self._cols = banded(area_matrix(height, SIZE)), banded(area_matrix(width, SIZE))
        self._stack = np.zeros((SIZE, SIZE, STACK), np.uint8)
        self._steps = 0

    @property
    def n_actions(self) -> int:
        return len(self.game.action_meanings)

    @property
    def obs_shape(self) -> tuple[int, int, int]:
        return (SIZE, SIZE, STACK)

    @property
    def fps(self) -> float:
        """Agent steps per second of game time (clips show every frame, at `game.fps`)."""
        return self.game.fps / self.frame_skip

    def _frame(self, screen: np.ndarray) -> np.ndarray:
        (rows, row_w), (cols, col_w) = self._rows, self._cols
        frame = np.einsum("rk,rkw->rw", row_w, screen[rows].astype(np.float32))
        frame = np.einsum("ck,rck->rc", col_w, frame[:, cols])
        frame = np.clip(np.rint(frame), 0, 255).astype(np.uint8)
        for rows in self.blank_rows:
            frame[rows] = 0
        return frame

    def _push(self, frame: np.ndarray) -> np.ndarray:
        """The stack without its oldest frame, `frame` the newest: each pixel's 4 bytes read as
        one little-endian 32-bit word (oldest frame lowest) shifted by a byte, 10x faster than
        moving the interleaved uint8 planes."""
        words = self._stack.view("<u4")[..., 0]
        self._stack = ((words >> 8) | (frame.astype("<u4") << 24))[..., None].view(np.uint8)
        return self._stack.copy()

    def reset(self) -> np.ndarray:
        self.game.reset(self.rng)
        for _ in range(int(self.rng.integers(1, self.noop_max + 1)) if self.noop_max else 0):
            self.game.act(0)
            if self.game.game_over():
                self.game.reset(self.rng)
        self._steps = 0
        self._stack[:] = self._frame(self.game.screen_grey())[..., None]
        return self._stack.copy()

    def step(self, action: int, colour: list | None = None) -> tuple[np.ndarray, float, bool, bool]:
        """(observation, reward summed over the skipped frames, terminated, truncated). With
        `colour`, every emulator frame's full-colour screen is appended to it."""
        reward, last = 0.0, []
        for i in range(self.frame_skip):
            reward += self.game.act(int(action))
            if colour is not None:
                colour.append(self.game.screen_rgb())
            if i >= self.frame_skip - 2:
                last.append(self.game.screen_grey())
            if self.game.game_over():
                break
        screen = np.maximum(last[0], last[-1]) if last else self.game.screen_grey()
        self._steps += 1
        terminated = self.game.game_over()
        truncated = (
            not terminated
            and self.max_episode_steps is not None
            and self._steps >= self.max_episode_steps
        )
        return self._push(self._frame(screen)), reward, terminated, truncated

    def render(self) -> np.ndarray:
        """The game's current full-colour frame."""
        return self.game.screen_rgb()

    def get_state(self) -> np.ndarray:
        """uint8: the newest preprocessed frame, the episode's step count, the emulator state."""
        steps = np.frombuffer(np.int64(self._steps).tobytes(), np.uint8)
        return np.concatenate([self._stack[..., -1].reshape(-1), steps, self.game.get_state()])

    def set_state(self, state: np.ndarray) -> np.ndarray:
        """Restore a `get_state()`; returns the observation (the stack refilled with the newest
        frame)."""
        state = np.asarray(state, np.uint8).reshape(-1)
        n = SIZE * SIZE
        self._stack[:] = state[:n].reshape(SIZE, SIZE)[..., None]
        self._steps = int(np.frombuffer(state[n : n + 8].tobytes(), np.int64)[0])
        self.game.set_state(state[n + 8 :])
        return self._stack.copy()

    def close(self) -> None:
        close = getattr(self.game, "close", None)
        if close is not None:
            close()


def _reset(env: PixelEnv) -> np.ndarray:
    return env.reset()


def _step_or_reset(env: PixelEnv, action: int):
    """One step; a new episode at once when it ended (its last observation comes as well)."""
    obs, reward, terminated, truncated = env.step(action)
    final = None
    if terminated or truncated:
        final, obs = obs, env.reset()
    return obs, reward, terminated, truncated, final


def _get_state(env: PixelEnv) -> np.ndarray:
    return env.get_state()


def _n_actions(env: PixelEnv) -> int:
    return env.n_actions


class FrameVectorEnv:
    """`n` pixel envs (`make(i)` builds env i) stepped side by side, in this process or over
    `workers` processes (`prefrl.envs.pool`). Each is reset as soon as its episode ends (the
    observation returned is then the new episode's first; the last one of the old episode is in
    `final_obs`)."""

    def __init__(self, make: Callable[[int], PixelEnv], n: int, workers: int = 0):
        self.pool = EnvPool(make, n, workers)
        self.n_actions: int = self.pool.call(0, _n_actions)

    def __len__(self) -> int:
        return len(self.pool)

    def reset(self) -> np.ndarray:
        return np.stack(self.pool.map(_reset))

    def step(self, actions: np.ndarray):
        """(obs, reward, terminated, truncated, final_obs): arrays over the envs; `final_obs` is
        the ended episodes' last observation (zeros elsewhere)."""
        results = self.pool.map(_step_or_reset, [(int(a),) for a in actions])
        obs = np.stack([r[0] for r in results])
        final = np.zeros_like(obs)
        for i, r in enumerate(results):
            if r[4] is not None:
                final[i] = r[4]
        reward = np.array([r[1] for r in results], np.float32)
        terminated = np.array([r[2] for r in results], bool)
        truncated = np.array([r[3] for r in results], bool)
        return obs, reward, terminated, truncated, final

    def get_states(self, indices) -> dict[int, np.ndarray]:
        """{i: env i's `get_state()`} for the envs named."""
        indices = [int(i) for i in indices]
        return dict(zip(indices, self.pool.map(_get_state, indices=indices), strict=True))

    def close(self) -> None:
        self.pool.close()
