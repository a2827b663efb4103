"""Feedback channels: how the online loop's queries reach a teacher and labelled pairs return.

`StoreChannel` goes through the feedback store, the path of every CLI run: a scripted teacher
answers at submit time (its labels are written in the same breath), a teacher object of one's
own when it does (its answers are stored as they come), a person answers in the browser or the
terminal, later, from another process. The store is the record: a resumed run
takes every label in it that its checkpoint had not seen, including labels for queries asked
after that checkpoint, and never asks a question twice.

`InMemoryChannel` hands queries straight to a teacher object (scripted, or a user's own class
with `submit` and `poll`) and keeps nothing on disk: for Python users with no person in the loop.
Queries unanswered at a checkpoint are not asked again after a resume.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple, Protocol

from prefrl.data.segments import Label, PreferenceData, Segments
from prefrl.feedback.store import FeedbackStore
from prefrl.feedback.teachers import Query, ScriptedTeacher, Teacher, check_teacher


class LabelledPairs(NamedTuple):
    left: Segments
    right: Segments
    labels: list[Label]
    sources: list[str]


class FeedbackChannel(Protocol):
    is_human: bool
    """Answers come one by one, late: the loop refits every few and waits for the first."""

    def submit(self, query: Query) -> None: ...
    def poll(self) -> LabelledPairs | None: ...
    def has_loaded_labels(self) -> bool: ...
    def observe_episode(self, episode_return: float, length: int) -> None: ...
    def asked(self) -> int: ...
    def asked_pairs(self) -> set[tuple[int, int]]: ...
    def next_query_id(self) -> int: ...
    def next_segment_id(self) -> int: ...
    def unanswered(self, first: int | None = None) -> int: ...
    def state_dict(self) -> dict: ...
    def load_state_dict(self, state: dict) -> None: ...
    def close(self) -> None: ...


class StoreChannel:
    def __init__(
        self,
        store: FeedbackStore,
        run_uid: str,
        run_dir: Path,
        env: str,
        scripted: ScriptedTeacher | None,
        create: bool = True,
    ):
        """`create`: make the run's record in the store if it has none (a new run); a resumed
        one must find its own."""
        self.store, self.run_dir, self.scripted = store, Path(run_dir), scripted
        self.run_id = store.run_id(run_uid, env=env, create=create)
        preset = getattr(getattr(scripted, "config", None), "preset", type(scripted).__name__)
        self.source = f"scripted:{preset}" if scripted is not None else "human"
        self.cursor = 0  # id of the last label taken
        self.waiting: dict[int, int] = {}  # query key -> row: asked of the teacher, unanswered

    @property
    def is_human(self) -> bool:
        return self.scripted is None

    def submit(self, query: Query) -> None:
        rows = self.store.add_queries(self.run_id, self.run_dir, query.ids, query.left, query.right)
        if self.scripted is not None:
            self.waiting.update(zip(map(int, query.ids), rows, strict=True))
            self.scripted.submit(query)
            self._store_answers()

    def _store_answers(self) -> None:
        """Store the answers the teacher object gave since the last look (all of a scripted
        teacher's at once, a late one's as they come)."""
        if self.scripted is None or not self.waiting:
            return
        answers = self.scripted.poll()
        if answers:
            rows = [_waiting_for(self.waiting, a.query_id) for a in answers]
            self.store.add_labels(rows, [a.label for a in answers], self.source)

    def poll(self) -> LabelledPairs | None:
        """Labels that arrived since the last call, with their segments; None when none."""
        self._store_answers()
        new = self.store.labels(self.run_id, after_id=self.cursor)
        if not new:
            return None
        left, right = self.store.query_pairs(self.run_dir, [x.query_id for x in new])
        self.cursor = new[-1].id
        return LabelledPairs(left, right, [x.label for x in new], [x.source for x in new])

    def has_loaded_labels(self) -> bool:
        """Labels not taken yet of pairs another run asked (`--load-labels`, `prefrl labels
        import`): a reward model can be fitted on them without waiting for a person."""
        return any(x.query_key < 0 for x in self.store.labels(self.run_id, after_id=self.cursor))

    def observe_episode(self, episode_return: float, length: int) -> None:
        _observe(self.scripted, episode_return, length)

    def asked(self) -> int:
        """Queries asked so far (not counting those dropped as stale)."""
        return self.store.query_count(self.run_id)

    def asked_pairs(self) -> set[tuple[int, int]]:
        """Segment ids of the pairs asked so far (any asked after the last checkpoint too)."""
        return self.store.asked_pairs(self.run_id)

    def next_query_id(self) -> int:
        return self.store.next_query_key(self.run_id)

    def next_segment_id(self) -> int:
        return self.store.next_segment_key(self.run_id)

    def unanswered(self, first: int | None = None) -> int:
        """Pairs asked and not answered (of the run's `first` pairs asked, where given)."""
        self._store_answers()
        return self.store.query_count(self.run_id, status="open", below_key=first)

    def state_dict(self) -> dict:
        saved = getattr(self.scripted, "state_dict", None)
        return {"cursor": self.cursor, "scripted": saved() if saved else None,
                "waiting": [[k, row] for k, row in self.waiting.items()]}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        if "cursor" not in state:  # a checkpoint from before the store: the scripted state
            state = {"cursor": 0, "scripted": state}
        self.cursor = state["cursor"]
        self.waiting = {int(k): int(row) for k, row in state.get("waiting", [])}
        load = getattr(self.scripted, "load_state_dict", None)
        if load is not None and state.get("scripted"):
            load(state["scripted"])

    def close(self) -> None:
        self.store.close()


def unanswered_at_end(channel: FeedbackChannel) -> str | None:
    """What a run that reached its last step says of the pairs it asked and never got answered
    (never trained on); None when every one was answered."""
    if unanswered := channel.unanswered():
        return (f"{unanswered} of the {channel.asked()} pairs asked were unanswered at the run's "
                "last step: their labels were not trained on")  # fmt: skip
    return None


TIES_SHARE = 0.5
"""`mostly_ties`' threshold: the share of "equal" answers above which a run says so."""


def mostly_ties(labels: PreferenceData) -> str | None:
    """What a run says when most of its answers so far are "equal" (of 20 or more): a tie
    teaches the reward model only that two clips are alike, so such a run learns from a
    fraction of its labels (a backflip rule that answered 85% "equal" taught its agent to
    stand still). None otherwise."""
    total, equal = len(labels), labels.counts()["equal"]
    if total < 20 or equal <= TIES_SHARE * total:
        return None
    return (f"{equal:,} of the {total:,} answers were 'equal' ({100 * equal / total:.0f}%): a tie "
            "teaches the reward model only that two clips are alike. A teacher's rule that tells "
            "more clips apart (a smaller tie threshold, a score that grows with each step towards "
            "the goal) gives it more to learn from")  # fmt: skip


class InMemoryChannel:
    def __init__(self, teacher: Teacher):
        check_teacher(teacher)
        self.teacher = teacher
        self.is_human = False
        self.waiting: dict[int, tuple[Segments, Segments]] = {}  # query id -> (left, right)
        self.arrived: list[tuple[Label, Segments, Segments]] = []
        self.count = 0

    def submit(self, query: Query) -> None:
        for i, key in enumerate(query.ids):
            self.waiting[int(key)] = (query.left[i : i + 1], query.right[i : i + 1])
        self.count += len(query.ids)
        self.teacher.submit(query)

    def _receive(self) -> None:
        for answer in self.teacher.poll():
            pair = _waiting_for(self.waiting, answer.query_id)
            self.arrived.append((Label(answer.label), *pair))

    def poll(self) -> LabelledPairs | None:
        self._receive()
        if not self.arrived:
            return None
        arrived, self.arrived = self.arrived, []
        return LabelledPairs(
            Segments.concatenate([left for _, left, _ in arrived]),
            Segments.concatenate([right for _, _, right in arrived]),
            [label for label, _, _ in arrived],
            [type(self.teacher).__name__] * len(arrived),
        )

    def has_loaded_labels(self) -> bool:
        return False  # (only a store holds labels of other runs)

    def observe_episode(self, episode_return: float, length: int) -> None:
        _observe(self.teacher, episode_return, length)

    def asked(self) -> int:
        return self.count

    def asked_pairs(self) -> set[tuple[int, int]]:
        return set()  # (nothing outside the run's checkpoints remembers them)

    def next_query_id(self) -> int:
        return 0

    def next_segment_id(self) -> int:
        return 0

    def unanswered(self, first: int | None = None) -> int:
        self._receive()
        return sum(first is None or key < first for key in self.waiting)

    def state_dict(self) -> dict:
        saved = getattr(self.teacher, "state_dict", None)
        return {"teacher": saved() if saved is not None else None}

    def load_state_dict(self, state: dict) -> None:
        load = getattr(self.teacher, "load_state_dict", None)
        if load is not None and state.get("teacher") is not None:
            load(state["teacher"])

    def close(self) -> None:
        pass


def _waiting_for(waiting: dict, query_id):
    """What `waiting` holds for the query a teacher answered (taken out of it)."""
    found = waiting.pop(int(query_id), None)
    if found is None:
        raise ValueError(f"the teacher answered query {query_id}, which is not waiting for an "
                         "answer")  # fmt: skip
    return found


def _observe(teacher, episode_return: float, length: int) -> None:
    """Report a finished episode to a teacher that takes them (`observe_episode` is optional)."""
    observe = getattr(teacher, "observe_episode", None)
    if observe is not None:
        observe(episode_return, length)
