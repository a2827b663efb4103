"""RFCL's two curricula (Tao et al. 2024), the rules alone: which state an episode starts from,
how long it may run, and how each outcome moves the curriculum. No env, no agent: the RFCL loop
asks `next_start()`, runs the episode, and reports `record(...)`.

Reverse (stage 1), per demonstration i of T_i states: its frontier t_i starts at T_i - 1 (the
demo's last state, where the task is solved). An episode picks demo i with weight t_i / T_i
(1e-6 once t_i = 0) and starts at t_i + k, k = 0..4 with probabilities 1/2, 1/4, 1/8, 1/16, 1/16
(clipped to T_i - 1), with a time limit of 16 + (T_i - start) // r steps. Only episodes started
exactly at t_i count: after m of them succeed in a row, t_i <- max(t_i - delta, 0), and once t_i
is 0, m successes in a row from the demo's first state solve it (the reference implementation's
rule). Stage 1 ends once more than 90% of the demos are solved.

Forward (stage 2): the task's own initial states, as reset seeds 0..N-1. Each seed is scored by
a window of its last 5 episodes in which episodes not yet played count as failures (as in the
reference implementation): 3 if it succeeded in some but under 75% of the window, 2 if in none
(or never played), 1 if in 75% or more. So one success puts a seed first, and it takes 4 of 5
before it drops back. An episode counts as a success here if it succeeded at any step
(the reference implementation scores a seed by its returns, > 0 for any success), while the
reverse curriculum counts the success at the last step. Seeds are drawn with
0.9 * rank(score)^(-1/0.1) + 0.1 * rank(staleness)^(-1/0.1), each part normalised (prioritised
level replay; equal values share a rank): unsolved-but-learnable seeds first, and none
forgotten for long.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

START_OFFSETS = np.array([0.5, 0.25, 0.125, 0.0625, 0.0625])
"""P(start = frontier + k), k = 0..4."""


def time_limit(steps_left: int, time_divisor: int = 1) -> int:
    """The dynamic time limit of an episode that starts `steps_left` states before a demo's
    end: 16 steps plus the demo's own steps left, divided by r (`time_divisor`)."""
    return 16 + steps_left // time_divisor


@dataclass(frozen=True)
class Start:
    demo: int
    step: int
    time_limit: int
    at_frontier: bool


class ReverseCurriculum:
    def __init__(self, demo_lengths: list[int], delta: int = 4, streak: int = 2,
                 time_divisor: int = 1, solved_share: float = 0.9):  # fmt: skip
        """`demo_lengths`: each demo's number of states T_i; `delta`: how far a frontier moves
        back; `streak`: successes in a row from the frontier to move it (m); `time_divisor`: r
        of the dynamic time limit."""
        if not demo_lengths or min(demo_lengths) < 1:
            raise ValueError(f"demo lengths {demo_lengths}: expected one or more, each >= 1")
        self.lengths = np.asarray(demo_lengths, np.int64)
        self.frontier = self.lengths - 1
        self.successes = np.zeros(len(self.lengths), np.int64)  # in a row, from the frontier
        self.solved = np.zeros(len(self.lengths), bool)
        """A streak from the demo's first state (frontier 0) solved it."""
        self.delta, self.streak, self.time_divisor = delta, streak, time_divisor
        self.solved_share = solved_share

    @property
    def done(self) -> bool:
        """Stage 1 is over: more than `solved_share` of the demos are solved."""
        return bool(self.solved.mean() > self.solved_share)

    def weights(self) -> np.ndarray:
        w = np.where(self.frontier > 0, self.frontier / self.lengths, 1e-6)
        return w / w.sum()

    def next_start(self, rng: np.random.Generator) -> Start:
        demo = int(rng.choice(len(self.lengths), p=self.weights()))
        k = int(rng.choice(len(START_OFFSETS), p=START_OFFSETS))
        step = int(min(self.frontier[demo] + k, self.lengths[demo] - 1))
        limit = time_limit(int(self.lengths[demo] - step), self.time_divisor)
        return Start(demo, step, limit, step == self.frontier[demo])

    def record(self, start: Start, success: bool) -> None:
        """An episode's outcome (success at its last step). Only episodes from the frontier as
        it still is count; m successes in a row move it `delta` back."""
        i = start.demo
        if not start.at_frontier or start.step != self.frontier[i] or self.solved[i]:
            return
        if not success:
            self.successes[i] = 0
            return
        self.successes[i] += 1
        if self.successes[i] >= self.streak:
            self.successes[i] = 0
            if self.frontier[i] == 0:
                self.solved[i] = True
            else:
                self.frontier[i] = max(self.frontier[i] - self.delta, 0)

    def state_dict(self) -> dict:
        return {"frontier": self.frontier.tolist(), "successes": self.successes.tolist(),
                "solved": self.solved.tolist()}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.frontier = np.asarray(state["frontier"], np.int64)
        self.successes = np.asarray(state["successes"], np.int64)
        # (checkpoints from before the streak at state 0: a demo was solved on reaching it)
        self.solved = np.asarray(state.get("solved", self.frontier == 0), bool)


class ForwardCurriculum:
    def __init__(self, seeds: int = 1000, history: int = 5, temperature: float = 0.1,
                 staleness_share: float = 0.1):  # fmt: skip
        self.seeds, self.temperature, self.staleness_share = seeds, temperature, staleness_share
        self.history = [deque(maxlen=history) for _ in range(seeds)]
        self.last_played = np.zeros(seeds, np.int64)
        self.episodes = 0

    def scores(self) -> np.ndarray:
        out = np.full(self.seeds, 2.0)  # never succeeded (or never played)
        for i, h in enumerate(self.history):
            if any(h):  # (the share of the whole window: unplayed slots are failures)
                out[i] = 1.0 if sum(h) / h.maxlen >= 0.75 else 3.0
        return out

    def _rank_weights(self, values: np.ndarray) -> np.ndarray:
        """rank(value)^(-1/T), normalised; rank 1 for the largest, and equal values share a
        rank (1 + how many are larger), so equally scored seeds are drawn equally."""
        ranks = 1.0 + (values[None, :] > values[:, None]).sum(1)
        w = ranks ** (-1.0 / self.temperature)
        return w / w.sum()

    def weights(self) -> np.ndarray:
        staleness = (self.episodes - self.last_played).astype(np.float64)
        return (1 - self.staleness_share) * self._rank_weights(self.scores()) + (
            self.staleness_share * self._rank_weights(staleness)
        )

    def next_seed(self, rng: np.random.Generator) -> int:
        return int(rng.choice(self.seeds, p=self.weights()))

    def record(self, seed: int, success: bool) -> None:
        """An episode from `seed` ended; `success`: it succeeded at some step."""
        self.episodes += 1
        self.history[seed].append(bool(success))
        self.last_played[seed] = self.episodes

    def state_dict(self) -> dict:
        return {"history": [list(h) for h in self.history],
                "last_played": self.last_played.tolist(), "episodes": self.episodes}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        for h, saved in zip(self.history, state["history"], strict=True):
            h.clear()
            h.extend(saved)
        self.last_played = np.asarray(state["last_played"], np.int64)
        self.episodes = int(state["episodes"])
