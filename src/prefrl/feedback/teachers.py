"""Teachers answer queries. Scripted ones (B-Pref, Lee et al. 2021) answer from true rewards.

The interface is asynchronous on purpose: a loop `submit`s queries and later `poll`s for the
answers that have arrived, so a person in a browser (answers late, from another process, or never)
and a scripted teacher (answers at once) plug into the same loop.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol

import numpy as np

from prefrl.data.segments import Label, Segments
from prefrl.fielddocs import document_fields
from prefrl.rundir.config import check_fields, check_own_types


class Query(NamedTuple):
    """A batch of pairs to compare; `ids` are unique within a run."""

    ids: np.ndarray  # (n,) int64
    left: Segments
    right: Segments


class Answer(NamedTuple):
    """A teacher's answer to one pair: the pair's id in its `Query.ids`, and a `Label`."""

    query_id: int
    label: Label


class Teacher(Protocol):
    """What answers queries, scripted or a class of yours (its methods are all it needs).

    - `submit(query)` hands over a batch of pairs: a `Query` of ids and two `Segments` (each
      segment's observations, actions, true rewards and simulator states);
    - `poll()` is called by the loop at every feedback step and must not block: it returns the
      `Answer`s that arrived since the last call. An answer may come any number of polls late;
      an id answered twice, or never asked, is refused (`ValueError`); a query never answered
      is simply never trained on.
    - Labels: `Label.LEFT`, `Label.RIGHT`, `Label.EQUAL` (trained on as half a preference
      each way) and `Label.SKIP` ("can't tell": kept, never trained on).
    - `observe_episode(episode_return, length)`, optional: the loop reports every finished
      training episode (B-Pref's skip and equal thresholds use the recent returns).
    - `needs_true_reward`: True where the answers come from the segments' true rewards (the
      scripted teachers).
    """

    needs_true_reward: bool

    def submit(self, query: Query) -> None:
        """Hand queries over; answers come back through `poll`, possibly much later."""

    def poll(self) -> list[Answer]:
        """Answers that arrived since the last call (never blocks)."""

    def observe_episode(self, episode_return: float, length: int) -> None:
        """The loop reports each finished training episode (scripted thresholds use them)."""


def check_teacher(teacher: object) -> None:
    """Refuse an object that cannot be a teacher, naming the method it lacks."""
    for method in ("submit", "poll"):
        if not callable(getattr(teacher, method, None)):
            raise TypeError(
                f"teacher={teacher!r} has no {method}() method: give a preset name, a "
                "TeacherConfig, or an object with submit(Query) and poll() -> [Answer]"
            )


@document_fields
@dataclass(frozen=True)
class TeacherConfig:
    """A scripted teacher: a named B-Pref preset, with any parameter overridden."""

    preset: str = "oracle"
    """Scripted: oracle, stoc, mistake, skip, equal or myopic. A person: web or terminal."""
    beta: float | None = None
    """Rationality: P(σ₁ ≻ σ₀) = softmax(β · returns); inf answers the larger return always."""
    gamma: float | None = None
    """Myopia: step t of H weighted γ^(H-1-t)."""
    eps_mistake: float | None = None
    """Probability of flipping a decided answer."""
    eps_skip: float | None = None
    """Skip a pair when both returns are below ε · (recent mean episode return) · H / T_ep."""
    eps_equal: float | None = None
    """Answer equal when the returns differ by less than ε · |recent mean return| · H / T_ep."""
    judge: str = "return"
    """What a scripted teacher compares: the true return, or on the piano piano-f1 (key-press
    F1 per step) or piano-wrong-keys (fewer keys down the song did not ask for), replayed from
    the segments' stored states."""

    def __post_init__(self) -> None:
        check_own_types(self)
        check_fields(self, {"judge": (self.judge in JUDGES, f"one of {JUDGES}")}, "teacher ")
        if self.preset not in TEACHER_PRESETS and self.preset not in HUMAN_TEACHERS:
            raise ValueError(
                f"teacher {self.preset!r} does not exist; scripted: "
                f"{', '.join(TEACHER_PRESETS)}; a person: {', '.join(HUMAN_TEACHERS)}"
            )
        if self.is_human:
            return
        p = self.resolved()  # (the preset's values where a field is left at None)
        check_fields(p, {
            "beta": (p.beta > 0, "> 0 (inf: deterministic)"),
            "gamma": (0 < p.gamma <= 1, "a value in (0, 1]"),
            **{name: (0 <= getattr(p, name) <= 1, "a value in [0, 1]")
               for name in ("eps_mistake", "eps_skip", "eps_equal")},
        }, "teacher ")  # fmt: skip

    @property
    def is_human(self) -> bool:
        return self.preset in HUMAN_TEACHERS

    def resolved(self) -> TeacherParams:
        base = TEACHER_PRESETS[self.preset]
        overrides = {
            k: getattr(self, k)
            for k in ("beta", "gamma", "eps_mistake", "eps_skip", "eps_equal")
            if getattr(self, k) is not None
        }
        return replace(base, **overrides)


@dataclass(frozen=True)
class TeacherParams:
    beta: float = math.inf
    gamma: float = 1.0
    eps_mistake: float = 0.0
    eps_skip: float = 0.0
    eps_equal: float = 0.0


JUDGES = ("return", "piano-f1", "piano-wrong-keys")

# A person answers in the browser (`prefrl serve`) or the terminal (`prefrl label`).
HUMAN_TEACHERS = ("web", "terminal")

TEACHER_PRESETS: dict[str, TeacherParams] = {
    "oracle": TeacherParams(),
    "stoc": TeacherParams(beta=1.0),
    "mistake": TeacherParams(eps_mistake=0.1),
    "skip": TeacherParams(eps_skip=0.1),
    "equal": TeacherParams(eps_equal=0.1),
    "myopic": TeacherParams(gamma=0.9),
}


def scripted_labels(
    params: TeacherParams,
    left: Segments,
    right: Segments,
    rng: np.random.Generator,
    return_scale: float,
) -> np.ndarray:
    """B-Pref labels for pairs, vectorised. `return_scale` is R̄ · H / T_ep: the mean return of
    recent episodes scaled to a segment's length (the thresholds are ε times it).

    Order: skip, then equal, then the (myopic, possibly stochastic) choice, then one mistake flip.
    """
    r_left, r_right = left.true_returns(), right.true_returns()
    labels = np.empty(len(left), np.int8)
    q_left, q_right = left.true_returns(params.gamma), right.true_returns(params.gamma)
    diff = q_right - q_left
    if math.isinf(params.beta):
        right_better = diff > 0
        tie = diff == 0
    else:
        p_right = 1.0 / (1.0 + np.exp(-np.clip(params.beta * diff, -50, 50)))
        right_better = rng.random(len(left)) < p_right
        tie = np.zeros(len(left), bool)
    labels[:] = np.where(right_better, Label.RIGHT, Label.LEFT)
    # The flip is drawn once per pair (B-Pref's code applies it twice after its first session).
    flip = rng.random(len(left)) < params.eps_mistake
    labels[flip] = 1 - labels[flip]
    labels[tie] = Label.EQUAL
    if params.eps_equal > 0:
        labels[np.abs(r_left - r_right) < params.eps_equal * abs(return_scale)] = Label.EQUAL
    if params.eps_skip > 0:
        labels[np.maximum(r_left, r_right) < params.eps_skip * return_scale] = Label.SKIP
    return labels


class ScriptedTeacher:
    """Answers every query at once from the segments' true rewards (or, with a piano judge, from
    per-step scores of their replayed states; ε thresholds then use the pair's own mean)."""

    needs_true_reward = True

    def __init__(
        self, config: TeacherConfig, seed: int, episode_length: int | None, env_id: str = ""
    ):
        self.config, self.env_id = config, env_id
        self.params = config.resolved()
        self.rng = np.random.default_rng([seed, 7])
        self.episode_length = episode_length
        self.recent = deque(maxlen=10)  # (return, length) of the last 10 episodes
        self._answers: list[Answer] = []

    def observe_episode(self, episode_return: float, length: int) -> None:
        self.recent.append((float(episode_return), int(length)))

    def return_scale(self, segments: Segments) -> float:
        """R̄ · H / T_ep from recent episodes; before any episode, the pair's own mean return."""
        if not self.recent:
            return float(segments.true_returns().mean())
        mean_return = float(np.mean([r for r, _ in self.recent]))
        t_ep = self.episode_length or float(np.mean([n for _, n in self.recent]))
        return mean_return * segments.length / t_ep

    def submit(self, query: Query) -> None:
        left, right = query.left, query.right
        if self.config.judge != "return":
            from prefrl.envs.piano import step_scores

            # One replay of both sides: each call makes (and compiles) a piano env.
            scores = step_scores(
                self.env_id, np.concatenate([left.state, right.state]), self.config.judge
            )
            left = replace(left, reward=scores[: len(left)])
            right = replace(right, reward=scores[len(left) :])
        both = Segments.concatenate([left, right])
        scale = (
            self.return_scale(both)
            if self.config.judge == "return"
            else float(both.true_returns().mean())
        )
        labels = scripted_labels(self.params, left, right, self.rng, scale)
        self._answers += [
            Answer(int(i), Label(int(lab))) for i, lab in zip(query.ids, labels, strict=True)
        ]

    def poll(self) -> list[Answer]:
        answers, self._answers = self._answers, []
        return answers

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state, "recent": list(self.recent)}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.recent.clear()
        self.recent.extend(tuple(x) for x in state["recent"])
