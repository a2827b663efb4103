"""A sparse point maze (`toy:maze`, `toy:maze-open`, `toy:maze-medium`): the built-in task for
learning from a few demonstrations.

A point mass (a double integrator: the action is a bounded acceleration) starts in the maze's
start cell and must reach the goal cell. The reward is 1 on a step that ends at the goal and 0
otherwise; touching a wall stops the point and forfeits success for the rest of the episode, so
only clean paths succeed. Episodes never end early (the time limit truncates them). Pure numpy:
thousands of steps per second, with an exact `get_state`/`set_state`.

`shortest_path` and `scripted_action` drive the point along the shortest path of cells with a
PD controller and hold it at the goal: scripted demonstrations for tests and benchmarks.
"""

from __future__ import annotations

from collections import deque
from typing import ClassVar

import gymnasium as gym
import numpy as np

# '#' wall, 'S' start cell, 'G' goal cell, '.' free. Row 0 is the top of the picture.
LAYOUTS = {
    "u": ["#####",
          "#S..#",
          "###.#",
          "#G..#",
          "#####"],
    "open": ["######",
             "#S...#",
             "#....#",
             "#...G#",
             "######"],
    "medium": ["########",
               "#S.#...#",
               "#..#.#.#",
               "#....#.#",
               "##.###.#",
               "#...#..#",
               "#.#...G#",
               "########"],
}  # fmt: skip
TIME_LIMITS = {"u": 150, "open": 100, "medium": 300}
GOAL_RADIUS = 0.3
"""Success: the point within this distance of the goal cell's centre (cells are 1 wide)."""


class PointMaze(gym.Env):
    """Observation: position (2), velocity (2), goal (2), wall touched (1). Action: acceleration
    in [-1, 1]^2. Reward: `info["success"]` as 0/1 (at the goal, no wall touched)."""

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"], "render_fps": 20}
    dt = 0.1
    accel = 5.0
    max_speed = 2.0

    def __init__(self, layout: str = "u", render_mode: str | None = None, width: int = 128,
                 height: int = 128):  # fmt: skip
        if layout not in LAYOUTS:
            raise ValueError(f"maze layout {layout!r} is unknown; known: {', '.join(LAYOUTS)}")
        self.layout = layout
        self.grid = np.array([[c == "#" for c in row] for row in LAYOUTS[layout]])
        self.start_cell = _find(LAYOUTS[layout], "S")
        self.goal_cell = _find(LAYOUTS[layout], "G")
        self.max_steps = TIME_LIMITS[layout]
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (7,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.render_mode, self.width, self.height = render_mode, width, height
        self._state = np.zeros(7, np.float64)  # pos, vel, goal, wall touched

    # ---------------------------------------------------------------- geometry
    def centre(self, cell: tuple[int, int]) -> np.ndarray:
        """(x, y) of a cell's centre; x grows to the right, y upwards."""
        row, col = cell
        return np.array([col + 0.5, len(self.grid) - row - 0.5])

    def is_wall(self, pos: np.ndarray) -> bool:
        col, row = int(np.floor(pos[0])), len(self.grid) - 1 - int(np.floor(pos[1]))
        inside = 0 <= row < self.grid.shape[0] and 0 <= col < self.grid.shape[1]
        return not inside or bool(self.grid[row, col])

    # ---------------------------------------------------------------- the env
    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        pos = self.centre(self.start_cell) + self.np_random.uniform(-0.3, 0.3, 2)
        self._state = np.concatenate([pos, np.zeros(2), self.centre(self.goal_cell), [0.0]])
        return self.observe(), {"success": False}

    def step(self, action):
        a = np.clip(np.asarray(action, np.float64), -1.0, 1.0)
        s = self._state
        vel = s[2:4] + self.dt * self.accel * a
        speed = float(np.linalg.norm(vel))
        if speed > self.max_speed:
            vel *= self.max_speed / speed
        pos = s[0:2] + self.dt * vel
        if self.is_wall(pos):  # stopped at the wall; success is forfeited
            vel, pos, s[6] = np.zeros(2), s[0:2], 1.0
        s[0:2], s[2:4] = pos, vel
        success = self.success()
        return self.observe(), float(success), False, False, {"success": success}

    def success(self) -> bool:
        s = self._state
        return bool(s[6] == 0 and np.linalg.norm(s[0:2] - s[4:6]) <= GOAL_RADIUS)

    def observe(self) -> np.ndarray:
        return self._state.astype(np.float32)

    def get_state(self) -> np.ndarray:
        return self._state.copy()

    def set_state(self, state: np.ndarray) -> None:
        state = np.asarray(state, np.float64).reshape(-1)
        if state.shape != (7,):
            raise ValueError(f"state has {state.shape[0]} values; PointMaze's state has 7")
        self._state = state.copy()

    def render(self) -> np.ndarray:
        rows, cols = self.grid.shape
        h, w = self.height, self.width
        img = np.full((h, w, 3), 235, np.uint8)
        yy, xx = np.mgrid[0:h, 0:w]
        cell_r, cell_c = (yy * rows // h), (xx * cols // w)
        img[self.grid[cell_r, cell_c]] = (70, 70, 80)

        def disc(xy, radius, color):
            cx, cy = xy[0] / cols * w, (rows - xy[1]) / rows * h
            img[(xx - cx) ** 2 + (yy - cy) ** 2 <= radius**2] = color

        s = self._state
        disc(s[4:6], GOAL_RADIUS / cols * w, (40, 170, 60))
        disc(s[0:2], max(2.0, w / cols / 6), (200, 140, 40) if s[6] else (200, 50, 50))
        return img


def _find(layout: list[str], mark: str) -> tuple[int, int]:
    for r, row in enumerate(layout):
        if mark in row:
            return r, row.index(mark)
    raise ValueError(f"the layout has no {mark!r} cell")


def shortest_path(maze: PointMaze) -> list[tuple[int, int]]:
    """The cells from the start cell to the goal cell, by breadth-first search."""
    rows, cols = maze.grid.shape
    came: dict[tuple[int, int], tuple[int, int] | None] = {maze.start_cell: None}
    queue = deque([maze.start_cell])
    while queue:
        cell = queue.popleft()
        if cell == maze.goal_cell:
            break
        r, c = cell
        for nxt in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= nxt[0] < rows and 0 <= nxt[1] < cols and not maze.grid[nxt] and nxt not in came:
                came[nxt] = cell
                queue.append(nxt)
    path, cell = [], maze.goal_cell
    while cell is not None:
        path.append(cell)
        cell = came[cell]
    return path[::-1]


def scripted_action(
    maze: PointMaze, waypoints: list[np.ndarray], index: int
) -> tuple[np.ndarray, int]:
    """A PD controller towards waypoint `index` (the next once within 0.15 of it); returns the
    action and the waypoint index to use next."""
    s = maze.get_state()
    pos, vel = s[0:2], s[2:4]
    if index < len(waypoints) - 1 and np.linalg.norm(waypoints[index] - pos) < 0.15:
        index += 1
    a = 2.0 * (waypoints[index] - pos) - 1.2 * vel
    return np.clip(a, -1.0, 1.0).astype(np.float32), index
