"""The trainer's side of the store: its runs, segments (arrays in .npz files in the run
directory, rows with where to find them), the queries it asks and the labels it reads back."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import aliased

from prefrl.data.segments import Label, Segments, load_segments, save_segments
from prefrl.feedback.store.database import StoreBase
from prefrl.feedback.store.location import redacted
from prefrl.feedback.store.schema import (
    AnnotatorRow,
    ClipRow,
    LabelRow,
    NotFound,
    QueryRow,
    RunRow,
    SegmentRow,
    StoredLabel,
    StoredQuery,
)

SEGMENT_DIR = "segments"


BULK_ROWS = 1000
"""Inserting this many queries at once refreshes PostgreSQL's statistics of the tables: planned
blind, handing out pairs from a freshly filled table took seconds a request until autovacuum
came by (benchmarks/web_load.py, first minute)."""


class TrainerSide(StoreBase):
    """Runs, segments, queries and labels, as the trainer writes and reads them."""

    def run_id(self, name: str, env: str = "", create: bool = True, **info) -> int:
        """The row id of the run keyed `name` (a run directory's `run_uid`)."""
        with self._write() as s:
            row = s.scalar(select(RunRow).where(RunRow.name == name))
            if row is None:
                if not create:
                    known = ", ".join(repr(r) for r in self.runs()[-5:]) or "none"
                    raise NotFound(
                        f"the feedback store at {redacted(self.url)} holds no run {name!r} "
                        f"(its latest: {known}): this store is not the run's. Pass the run's "
                        "own with --store, or put back its feedback.db"
                    )
                row = RunRow(name=name, env=env, info=info)
                s.add(row)
                s.flush()
            return row.id

    def run_env(self, run_id: int) -> str:
        with self._session() as s:
            row = s.get(RunRow, run_id)
        if row is None:
            raise NotFound(f"run {run_id} does not exist")
        return row.env

    def runs(self) -> list[str]:
        with self._session() as s:
            return list(s.scalars(select(RunRow.name).order_by(RunRow.id)))

    def add_segments(self, run_id: int, run_dir: Path, segments: Segments, info=None) -> list[int]:
        """Store segments (arrays to a file first, then the rows); returns their row ids.
        Segments the run already stored (same id) are not stored twice."""
        with self._session() as s:
            known = dict(
                s.execute(
                    select(SegmentRow.key, SegmentRow.id).where(
                        SegmentRow.run_id == run_id,
                        SegmentRow.key.in_([int(k) for k in segments.id]),
                    )
                ).all()
            )
        first: dict[int, int] = {}  # key -> first index (a segment may be in several pairs)
        for i, k in enumerate(segments.id):
            first.setdefault(int(k), i)
        new = [i for k, i in first.items() if k not in known]
        if new:
            fresh = segments[np.asarray(new)]
            rel = f"{SEGMENT_DIR}/run{run_id}_seg{int(fresh.id[0]):09d}.npz"
            save_segments(Path(run_dir) / rel, fresh)
            with self._write() as s:
                for row, i in enumerate(new):
                    seg = SegmentRow(
                        run_id=run_id, key=int(segments.id[i]), file=rel, row=row,
                        step=int(segments.step[i]), episode=int(segments.episode[i]),
                        start=int(segments.start[i]), length=segments.length,
                        info=(info[i] if info is not None else {}),
                    )  # fmt: skip
                    s.add(seg)
                    s.flush()
                    known[int(segments.id[i])] = seg.id
        return [known[int(k)] for k in segments.id]

    def add_queries(
        self, run_id: int, run_dir: Path, keys: Sequence[int], left: Segments, right: Segments
    ) -> list[int]:
        """Store query pairs (segments first); returns the queries' row ids."""
        left_ids = self.add_segments(run_id, run_dir, left)
        right_ids = self.add_segments(run_id, run_dir, right)
        rows = [
            QueryRow(run_id=run_id, key=int(k), left_id=a, right_id=b)
            for k, a, b in zip(keys, left_ids, right_ids, strict=True)
        ]
        with self._write() as s:
            s.add_all(rows)
        if len(rows) >= BULK_ROWS:
            self._refresh_statistics("queries", "segments")
        return [r.id for r in rows]

    def query_count(
        self, run_id: int, status: str | None = None, below_key: int | None = None
    ) -> int:
        """The run's own queries with `status` (default: all but the dropped ones), among its
        first `below_key` asked where given; imported pairs (negative keys) were never asked
        by this run and are not counted."""
        cond = QueryRow.status == status if status else QueryRow.status != "dropped"
        first = [] if below_key is None else [QueryRow.key < below_key]
        with self._session() as s:
            return s.scalar(
                select(func.count())
                .select_from(QueryRow)
                .where(QueryRow.run_id == run_id, QueryRow.key >= 0, cond, *first)
            )

    def next_query_key(self, run_id: int) -> int:
        """A key above every query key the run has stored (imported pairs' are negative)."""
        with self._session() as s:
            top = s.scalar(select(func.max(QueryRow.key)).where(QueryRow.run_id == run_id))
        return 0 if top is None else max(top + 1, 0)

    def next_segment_key(self, run_id: int) -> int:
        """A key above every segment key the run has stored: segments cut after a resume must
        not take the keys of segments stored after its checkpoint, which are different ones."""
        with self._session() as s:
            top = s.scalar(select(func.max(SegmentRow.key)).where(SegmentRow.run_id == run_id))
        return 0 if top is None else max(top + 1, 0)

    def asked_pairs(self, run_id: int) -> set[tuple[int, int]]:
        """The segment keys of every pair the run holds, (smaller, larger): a pair asked
        once is not asked again, in either order."""
        left, right = aliased(SegmentRow), aliased(SegmentRow)
        with self._session() as s:
            rows = s.execute(
                select(left.key, right.key)
                .select_from(QueryRow)
                .join(left, QueryRow.left_id == left.id)
                .join(right, QueryRow.right_id == right.id)
                .where(QueryRow.run_id == run_id)
            ).all()
        return {(min(a, b), max(a, b)) for a, b in rows}

    def open_queries(self, run_id: int) -> list[StoredQuery]:
        with self._session() as s:
            rows = s.scalars(
                select(QueryRow)
                .where(QueryRow.run_id == run_id, QueryRow.status == "open")
                .order_by(QueryRow.id)
            )
            return [StoredQuery(r.id, r.key, r.left_id, r.right_id, r.status) for r in rows]

    def drop_queries(self, query_ids: Sequence[int]) -> int:
        """Mark open queries stale (never handed out again); returns how many were dropped."""
        with self._write() as s:
            res = s.execute(
                update(QueryRow)
                .where(QueryRow.id.in_(list(query_ids)), QueryRow.status == "open")
                .values(status="dropped")
            )
            return res.rowcount

    def drop_stale_queries(self, run_id: int, keep: int) -> int:
        """Drop the open queries without both clips that are older than the newest `keep` open
        ones: people label slower than the agent asks, and old candidates are the least useful.
        Queries someone already holds are kept."""
        clipped = select(ClipRow.segment_id)
        with self._session() as s:
            newest = list(s.scalars(
                select(QueryRow.id).where(QueryRow.run_id == run_id, QueryRow.status == "open")
                .order_by(QueryRow.id.desc()).limit(keep)
            ))  # fmt: skip
            if len(newest) < keep:
                return 0
            stale = list(s.scalars(
                select(QueryRow.id).where(
                    QueryRow.run_id == run_id, QueryRow.status == "open",
                    QueryRow.id < min(newest), QueryRow.assigned_to.is_(None),
                    or_(QueryRow.left_id.not_in(clipped), QueryRow.right_id.not_in(clipped)),
                )
            ))  # fmt: skip
        return self.drop_queries(stale) if stale else 0

    def query(self, query_id: int) -> StoredQuery:
        with self._session() as s:
            r = s.get(QueryRow, query_id)
        if r is None:
            raise NotFound(f"query {query_id} does not exist")
        return StoredQuery(r.id, r.key, r.left_id, r.right_id, r.status)

    def add_labels(self, query_ids: Sequence[int], labels: Sequence, source: str) -> None:
        """Many labels in one transaction (scripted teachers, imports)."""
        parsed = [Label.parse(x) for x in labels]
        with self._write() as s:
            for qid, label in zip(query_ids, parsed, strict=True):
                s.add(LabelRow(query_id=int(qid), value=label.name.lower(), source=source))
            s.execute(
                update(QueryRow)
                .where(QueryRow.id.in_([int(q) for q in query_ids]))
                .values(status="labelled")
            )

    def add_imported_pairs(
        self,
        run_id: int,
        run_dir: Path,
        left: Segments,
        right: Segments,
        labels: Sequence,
        sources: Sequence[str],
        response_ms: Sequence[int | None],
        origin: str,
    ) -> int:
        """Store labelled pairs that another run (`origin`) collected. They get negative segment
        and query keys, below any the run holds, so they never collide with the run's own
        (non-negative) keys and are not counted as asked. The labels and the note of `origin`
        in the run's info are committed together. Returns how many were stored."""
        parsed = [Label.parse(x) for x in labels]
        n = len(parsed)
        if not (len(left) == len(right) == n == len(sources) == len(response_ms)):
            raise ValueError("left, right, labels, sources and response_ms differ in length")
        with self._session() as s:
            lowest_seg = s.scalar(
                select(func.min(SegmentRow.key)).where(SegmentRow.run_id == run_id)
            )
            lowest_q = s.scalar(select(func.min(QueryRow.key)).where(QueryRow.run_id == run_id))
        seg0 = min(0, lowest_seg or 0) - 1
        q0 = min(0, lowest_q or 0) - 1
        both = Segments.concatenate([left, right])
        both.id = seg0 - np.arange(2 * n, dtype=np.int64)
        seg_ids = self.add_segments(run_id, run_dir, both)
        with self._write() as s:
            for i, (label, source, ms) in enumerate(zip(parsed, sources, response_ms)):
                q = QueryRow(run_id=run_id, key=q0 - i, left_id=seg_ids[i],
                             right_id=seg_ids[n + i], status="labelled")  # fmt: skip
                s.add(q)
                s.flush()
                s.add(LabelRow(query_id=q.id, value=label.name.lower(), source=source[:64],
                               response_ms=None if ms is None else int(ms)))  # fmt: skip
            run = s.get(RunRow, run_id)
            run.info = {**run.info, "imported": [*run.info.get("imported", []), origin]}
        return n

    def imported_from(self, run_id: int) -> list[str]:
        """Origins (a run's name) whose labels were imported into the run, in order."""
        with self._session() as s:
            return list(s.get(RunRow, run_id).info.get("imported", []))

    def labels(self, run_id: int, after_id: int = 0) -> list[StoredLabel]:
        """The run's labels with row id > `after_id`, oldest first."""
        with self._session() as s:
            rows = s.execute(
                select(LabelRow, QueryRow.key, AnnotatorRow.name)
                .join(QueryRow, LabelRow.query_id == QueryRow.id)
                .outerjoin(AnnotatorRow, LabelRow.annotator_id == AnnotatorRow.id)
                .where(QueryRow.run_id == run_id, LabelRow.id > after_id)
                .order_by(LabelRow.id)
            ).all()
        return [
            StoredLabel(r.id, r.query_id, key, Label.parse(r.value), r.source, name,
                        r.response_ms, r.created_at)
            for r, key, name in rows
        ]  # fmt: skip

    def label_counts(self, run_id: int) -> dict[str, int]:
        with self._session() as s:
            rows = s.execute(
                select(LabelRow.value, func.count())
                .join(QueryRow, LabelRow.query_id == QueryRow.id)
                .where(QueryRow.run_id == run_id)
                .group_by(LabelRow.value)
            ).all()
        counts = {m.name.lower(): 0 for m in Label}
        counts.update({v: n for v, n in rows})
        return counts

    def segment_ids(self, run_id: int, min_key: int | None = None) -> list[int]:
        """Row ids of every segment of the run (with a key from `min_key` on), oldest first."""
        cond = SegmentRow.run_id == run_id
        if min_key is not None:
            cond &= SegmentRow.key >= min_key
        with self._session() as s:
            return list(s.scalars(select(SegmentRow.id).where(cond).order_by(SegmentRow.id)))

    def segment_infos(self, segment_ids: Sequence[int]) -> dict[int, dict]:
        """Segment id -> the info stored with it (where it came from)."""
        with self._session() as s:
            return dict(
                s.execute(
                    select(SegmentRow.id, SegmentRow.info).where(
                        SegmentRow.id.in_([int(i) for i in segment_ids])
                    )
                ).all()
            )

    def segments(self, run_dir: Path, segment_ids: Sequence[int]) -> Segments:
        """The arrays of stored segments, in the order asked."""
        with self._session() as s:
            rows = {
                r.id: r
                for r in s.scalars(
                    select(SegmentRow).where(SegmentRow.id.in_([int(i) for i in segment_ids]))
                )
            }
        missing = [i for i in segment_ids if int(i) not in rows]
        if missing:
            raise NotFound(f"segments {missing} do not exist")
        parts = [
            _segment_file(str(Path(run_dir) / rows[int(i)].file))[rows[int(i)].row]
            for i in segment_ids
        ]
        return Segments.concatenate(parts)

    def query_pairs(self, run_dir: Path, query_ids: Sequence[int]) -> tuple[Segments, Segments]:
        """The (left, right) segments of queries, in the order asked."""
        ids = [int(q) for q in query_ids]
        with self._session() as s:
            pairs = {
                r.id: (r.left_id, r.right_id)
                for r in s.execute(
                    select(QueryRow.id, QueryRow.left_id, QueryRow.right_id).where(
                        QueryRow.id.in_(ids)
                    )
                )
            }
        missing = [q for q in ids if q not in pairs]
        if missing:
            raise NotFound(f"queries {missing} do not exist")
        return (
            self.segments(run_dir, [pairs[q][0] for q in ids]),
            self.segments(run_dir, [pairs[q][1] for q in ids]),
        )


@lru_cache(maxsize=64)
def _segment_file(path: str) -> Segments:
    return load_segments(path)
