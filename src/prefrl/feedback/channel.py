"""The trainer's side of the feedback store: queries go in, labelled pairs come out.

Every online run keeps its queries and labels in the store, whoever answers: a scripted teacher
answers at submit time (its labels are written in the same breath), a person answers in the
browser or the terminal, later, from another process. The store is the record: a resumed run
takes every label in it that its checkpoint had not seen, including labels for queries asked
after that checkpoint, and never asks a question twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from prefrl.data.segments import Label, Segments
from prefrl.feedback.store import FeedbackStore
from prefrl.feedback.teachers import Query, ScriptedTeacher


class LabelledPairs(NamedTuple):
    left: Segments
    right: Segments
    labels: list[Label]
    sources: list[str]


class FeedbackChannel:
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
        self.source = f"scripted:{scripted.config.preset}" if scripted else "human"
        self.cursor = 0  # id of the last label taken

    @property
    def is_human(self) -> bool:
        return self.scripted is None

    def submit(self, query: Query) -> None:
        rows = self.store.add_queries(self.run_id, self.run_dir, query.ids, query.left, query.right)
        if self.scripted is not None:
            self.scripted.submit(query)
            by_key = {a.query_id: a.label for a in self.scripted.poll()}
            self.store.add_labels(rows, [by_key[int(k)] for k in query.ids], self.source)

    def poll(self) -> LabelledPairs | None:
        """Labels that arrived since the last call, with their segments; None when none."""
        new = self.store.labels(self.run_id, after_id=self.cursor)
        if not new:
            return None
        left, right = self.store.query_pairs(self.run_dir, [x.query_id for x in new])
        self.cursor = new[-1].id
        return LabelledPairs(left, right, [x.label for x in new], [x.source for x in new])

    def has_unseen_labels(self) -> bool:
        return bool(self.store.labels(self.run_id, after_id=self.cursor))

    def observe_episode(self, episode_return: float, length: int) -> None:
        if self.scripted is not None:
            self.scripted.observe_episode(episode_return, length)

    def asked(self) -> int:
        """Queries asked so far (not counting those dropped as stale)."""
        return self.store.query_count(self.run_id)

    def next_query_id(self) -> int:
        return self.store.next_query_key(self.run_id)

    def next_segment_id(self) -> int:
        return self.store.next_segment_key(self.run_id)

    def unanswered(self) -> int:
        return self.store.query_count(self.run_id, status="open")

    def state_dict(self) -> dict:
        scripted = self.scripted.state_dict() if self.scripted else None
        return {"cursor": self.cursor, "scripted": scripted}

    def load_state_dict(self, state: dict) -> None:
        if "cursor" not in state:  # a checkpoint from before the store: the scripted state
            state = {"cursor": 0, "scripted": state}
        self.cursor = state["cursor"]
        if self.scripted is not None and state.get("scripted"):
            self.scripted.load_state_dict(state["scripted"])
