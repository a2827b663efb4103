"""MovingDot (the test task of learning-from-human-preferences): a 4x4 white dot on a black
210x160 screen, 5 actions (no-op, down, right, up, left; 1 pixel per frame), reward +1 / 0 / -1
per frame as the dot's distance to the centre (x 80, y 105) shrinks / stays / grows, a random
start. The game never ends by itself: episodes are cut after 1000 frames (250 agent steps with a
frame skip of 4), a time limit, not an end of the task."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

HEIGHT, WIDTH, DOT = 210, 160, 4
CENTRE = np.array([80, 105])  # (x, y)
EPISODE_FRAMES = 1000
MOVES = np.array([[0, 0], [0, 1], [1, 0], [0, -1], [-1, 0]])  # (dx, dy); y grows downwards


class MovingDotGame:
    action_meanings: ClassVar[list[str]] = ["NOOP", "DOWN", "RIGHT", "UP", "LEFT"]
    fps = 60.0

    def __init__(self) -> None:
        self.pos = CENTRE.copy()

    def reset(self, rng: np.random.Generator) -> None:
        self.pos = np.array([rng.integers(0, WIDTH - DOT + 1), rng.integers(0, HEIGHT - DOT + 1)])

    def act(self, action: int) -> float:
        if not 0 <= action < len(MOVES):
            raise ValueError(f"MovingDot action {action} is invalid: expected 0-4")
        before = np.linalg.norm(self.pos - CENTRE)
        self.pos = np.clip(self.pos + MOVES[action], 0, [WIDTH - DOT, HEIGHT - DOT])
        after = np.linalg.norm(self.pos - CENTRE)
        return float(np.sign(before - after))

    def game_over(self) -> bool:
        return False

    def screen_grey(self) -> np.ndarray:
        screen = np.zeros((HEIGHT, WIDTH), np.uint8)
        x, y = self.pos
        screen[y : y + DOT, x : x + DOT] = 255
        return screen

    def screen_rgb(self) -> np.ndarray:
        return np.repeat(self.screen_grey()[..., None], 3, -1)  # (white on black)

    def get_state(self) -> np.ndarray:
        return np.frombuffer(np.asarray(self.pos, np.int64).tobytes(), np.uint8)

    def set_state(self, state: np.ndarray) -> None:
        self.pos = np.frombuffer(np.asarray(state, np.uint8).tobytes(), np.int64).copy()
