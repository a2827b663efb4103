"""Teachers answer queries. Scripted ones (B-Pref, Lee et al. 2021) answer from true rewards.

The interface is asynchronous on purpose: a loop `submit`s queries and later `poll`s for the
answers that have arrived, so a person in a browser (answers late, from another process, or never)
and a scripted teacher (answers at once) plug into the same loop.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

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


class Teacher:
    """Answers queries. Subclass it with a rule of your own, or give the learner any object with
    `submit` and `poll`; a scripted preset (`"oracle"`, ...) or a person needs neither.

    The short way: define `answer(left, right)`, which gets the `Segments` of a batch of pairs
    (pair i is `left[i]` against `right[i]`) and returns one `Label` per pair; each batch is
    answered when the run next polls:

        class Upright(Teacher):
            def answer(self, left, right):  # Pendulum's observation: cos θ, sin θ, θ'
                height = lambda s: s.obs[..., 0].mean(-1)
                return np.where(height(right) > height(left), Label.RIGHT, Label.LEFT)

    The contract, for a teacher that overrides `submit` and `poll` (one that answers in its
    own time: a person elsewhere, a service):

    - `submit(query)`: the run hands over a batch of pairs whenever its schedule asks for
      labels: a `Query` of `ids` (int64, unique within the run) and two `Segments` of N
      segments of H steps, `left` and `right`: `obs` (N, H, obs_dim), `action` (N, H,
      action_dim), `reward` (N, H: the env's own reward), `state` (N, H, state_dim: the
      simulator state before each step, enough to replay or render it), and `id`, `step`,
      `episode` and `start` (where it was cut from).
    - `poll()`: called at least every 100 env steps once queries begin, whenever the run counts
      what is unanswered, and every `poll_seconds` while it waits; it must return at once
      (never block), with the `Answer(query_id, label)`s ready since the last call (or []).
    - Late answers are fine: an answer may come any number of polls later and is trained on
      from the next fit. Before its first fit the run waits for the first answers
      (`first_labels_timeout`: seconds until it goes on without them); pairs still unanswered
      at the last step are never trained on, and the result says so (`unanswered`, `notes`).
    - An answer to an id never asked, or already answered, is refused: a `ValueError` that
      stops the run, naming the id.
    - Labels: `Label.LEFT` or `Label.RIGHT`; `Label.EQUAL` (both as good) is trained on as half
      a preference each way; `Label.SKIP` ("can't tell": incomparable, or no answer to give)
      is kept and counted but never trained on.
    - `needs_true_reward` (default False): True when the answers read the segments' `reward`
      (the scripted teachers): the run then refuses an env without a true reward (such as
      `toy:point-free`, whose reward is always 0) instead of having them judge zeros.
    - `check_env(env)` (optional): called with the run's env (a `PrefrlEnv`: `env_id`,
      `obs_dim`, `unwrapped`) when the learner is made, before anything is written; raise a
      `ValueError` saying what the teacher needs to refuse an env it cannot judge.
    - `observe_episode(episode_return, length)`: the run reports every finished training
      episode (its true return and length); it does nothing unless overridden. The scripted
      teachers scale their skip and equal thresholds by the recent returns.
    - Optional `state_dict()` and `load_state_dict(state)`: a JSON-able state saved with each
      checkpoint and handed back when the run resumes (the scripted teachers' random numbers).

    With `in_memory=False` the queries and answers also go into the run's feedback store, each
    answer as it comes. (The frames workflow takes a scripted preset or a person only.)
    """

    needs_true_reward: bool = False
    """True when the answers read the segments' true `reward`: an env without one is refused."""

    def answer(self, left: Segments, right: Segments) -> Sequence[Label] | np.ndarray:
        """One label per pair of a batch (pair i: `left[i]` against `right[i]`); `Label`s, or
        their numbers or names. Define it, or override `submit` and `poll` instead."""
        raise NotImplementedError(
            f"{type(self).__name__} defines neither answer(left, right) nor poll()"
        )

    def submit(self, query: Query) -> None:
        """Hand queries over; answers come back through `poll`, possibly much later. (Here:
        kept for `poll` to answer with `answer`.)"""
        self.__dict__.setdefault("_asked", []).append(query)

    def poll(self) -> list[Answer]:
        """Answers that arrived since the last call (never blocks). (Here: `answer` gives the
        labels of every batch submitted since the last call.)"""
        asked, self._asked = self.__dict__.get("_asked", []), []
        answers = []
        for query in asked:
            labels = self.answer(query.left, query.right)
            labels = [labels] if np.ndim(labels) == 0 else list(labels)
            if len(labels) != len(query.ids):
                raise ValueError(f"{type(self).__name__}.answer gave {len(labels)} labels for "
                                 f"{len(query.ids)} pairs: give one per pair")  # fmt: skip
            for query_id, label in zip(query.ids, labels, strict=True):
                try:
                    answers.append(Answer(int(query_id), Label.parse(label)))
                except ValueError as e:
                    raise ValueError(f"{type(self).__name__}.answer: {e}") from None
        return answers

    def observe_episode(self, episode_return: float, length: int) -> None:
        """The run reports each finished training episode; nothing happens unless overridden."""


def check_teacher(teacher: object) -> None:
    """Refuse an object that cannot be a teacher, naming the method it lacks."""
    for method in ("submit", "poll"):
        if not callable(getattr(teacher, method, None)):
            raise TypeError(
                f"teacher={teacher!r} has no {method}() method: give a preset name, a "
                "TeacherConfig, or an object with submit(Query) and poll() -> [Answer]"
            )
    kind = type(teacher)
    if isinstance(teacher, Teacher) and kind.answer is Teacher.answer and kind.poll is Teacher.poll:
        raise TypeError(f"teacher={teacher!r}: {kind.__name__} defines neither "
                        "answer(left, right) -> labels nor submit(query) and poll()")  # fmt: skip


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


class ScriptedTeacher(Teacher):
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
