"""The annotators' side of the store: who labels (tokens), the leases on the queries handed to
them, their labels (committed before anyone is told they were saved; the same label twice is
stored once) and how often two annotators agree. Clips and ratings: `store.clips`."""

from __future__ import annotations

import datetime as dt
import secrets

from sqlalchemy import and_, bindparam, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased

from prefrl.data.segments import Label
from prefrl.feedback.store.database import StoreBase
from prefrl.feedback.store.schema import (
    AnnotatorRow,
    AnnotatorStats,
    AnnotatorTally,
    ClipRow,
    LabelConflict,
    LabelRow,
    NotFound,
    OpenQueries,
    QueryRow,
    SecondLabelRow,
    StoredLabel,
    StoredQuery,
    utcnow,
)

LEASE_SECONDS = 300.0
"""How long a query handed to an annotator stays theirs unless they answer or give it back."""


def wants_second_label(query_id: int, overlap: float) -> bool:
    """Whether query `query_id` is in the `overlap` share labelled twice: a fixed hash of its
    id, so that every server process decides alike without asking the others."""
    return overlap > 0 and (query_id * 2654435761) % 2**32 < overlap * 2**32


class AnnotatorSide(StoreBase):
    """Annotators, leases, labels, clips and ratings, as the web app and the terminal write and read them."""

    def add_annotator(self, name: str) -> str:
        """Registers `name` (or finds it) and returns its token."""
        name = name.strip()
        if not name or len(name) > 128:
            raise ValueError(f"annotator name {name!r} is invalid: expected 1-128 characters")
        with self._write() as s:
            row = s.scalar(select(AnnotatorRow).where(AnnotatorRow.name == name))
            if row is None:
                row = AnnotatorRow(name=name, token=secrets.token_urlsafe(24))
                s.add(row)
            return row.token

    def annotator(self, token: str) -> tuple[int, str]:
        """(id, name) of the annotator holding `token`."""
        with self._session() as s:
            row = s.scalar(select(AnnotatorRow).where(AnnotatorRow.token == token))
        if row is None:
            raise NotFound("unknown annotator token")
        return row.id, row.name

    def annotators(self) -> list[tuple[str, str]]:
        with self._session() as s:
            return [
                (r.name, r.token) for r in s.scalars(select(AnnotatorRow).order_by(AnnotatorRow.id))
            ]

    def assign_queries(
        self,
        run_id: int,
        annotator_id: int,
        n: int = 1,
        lease_s: float = LEASE_SECONDS,
        need_clips: bool = False,
    ) -> list[StoredQuery]:
        """Hand up to `n` queries to one annotator: the ones it already holds first, then those
        waiting for a second annotator's label (`--overlap`; never to the one who gave the
        first), then the newest open ones that nobody holds (or whose holder's lease ran out).
        Several annotators at once, in one process or many, get different queries."""
        now = utcnow()
        params = {"run": run_id, "who": annotator_id, "now": now,
                  "expired": now - dt.timedelta(seconds=lease_s)}  # fmt: skip
        picks, assign = self._assign_statements(need_clips)
        with self._write_lock, self.engine.begin() as c:  # (Core, not the ORM: the hot path)
            self._claim_writer(c)
            ids: list[int] = []
            for pick in picks:
                if len(ids) == n:
                    break
                ids += c.scalars(pick, {**params, "taken": ids, "n": n - len(ids)}).all()
            if not ids:
                return []
            rows = c.execute(assign, {**params, "ids": ids}).all()
        order = {q: i for i, q in enumerate(ids)}
        return [StoredQuery(*r) for r in sorted(rows, key=lambda r: order[r[0]])]

    def _assign_statements(self, need_clips: bool):
        """The reads that pick queries for an annotator (indexed, one per kind, rather than one
        sorted by ownership, which would sort every open query of the run), and the update that
        hands them over; built once, with parameters."""
        cache = self.__dict__.setdefault("_statements", {})
        if need_clips in cache:
            return cache[need_clips]
        run = [QueryRow.run_id == bindparam("run")]
        if need_clips:
            clipped = select(ClipRow.segment_id)
            run += [QueryRow.left_id.in_(clipped), QueryRow.right_id.in_(clipped)]
        unheld = QueryRow.assigned_to.is_(None)  # (as the partial indexes say it)
        expired = and_(
            QueryRow.assigned_to.is_not(None), QueryRow.assigned_at < bindparam("expired")
        )
        labelled_by_me = (
            select(LabelRow.id)
            .where(LabelRow.query_id == QueryRow.id, LabelRow.annotator_id == bindparam("who"))
            .exists()
        )
        second = [QueryRow.second_wanted == 1, ~labelled_by_me]
        kinds = [  # in this order, until `n` are found: the last two rarely run
            [QueryRow.assigned_to == bindparam("who"),
             or_(QueryRow.status == "open", QueryRow.second_wanted == 1)],
            [*second, unheld],
            [QueryRow.status == "open", unheld],
            [*second, expired],
            [QueryRow.status == "open", expired],
        ]  # fmt: skip
        picks = []
        for kind in kinds:
            # (`taken`: one's own whose lease ran out match the free kinds too)
            taken = QueryRow.id.not_in(bindparam("taken", expanding=True))
            pick = select(QueryRow.id).where(*run, *kind, taken)
            pick = pick.order_by(QueryRow.id.desc()).limit(bindparam("n"))
            picks.append(pick if self.is_sqlite else pick.with_for_update(skip_locked=True))
        assign = (
            update(QueryRow)
            .where(QueryRow.id.in_(bindparam("ids", expanding=True)))
            .values(assigned_to=bindparam("who"), assigned_at=bindparam("now"))
            .returning(
                QueryRow.id, QueryRow.key, QueryRow.left_id, QueryRow.right_id, QueryRow.status
            )
        )
        cache[need_clips] = picks, assign
        return picks, assign

    def release_queries(self, run_id: int, annotator_id: int, query_ids=None) -> int:
        """Give back the queries an annotator holds and has not answered (all, or those of
        `query_ids`), so that others get them at once rather than when the lease runs out;
        returns how many."""
        cond = [QueryRow.run_id == run_id, QueryRow.assigned_to == annotator_id,
                or_(QueryRow.status == "open", QueryRow.second_wanted == 1)]  # fmt: skip
        if query_ids is not None:
            cond.append(QueryRow.id.in_([int(q) for q in query_ids]))
        with self._write() as s:
            res = s.execute(
                update(QueryRow).where(*cond).values(assigned_to=None, assigned_at=None)
            )
            return res.rowcount

    def open_query_summary(
        self, run_id: int, annotator_id: int | None = None, lease_s: float = LEASE_SECONDS
    ) -> OpenQueries:
        """How the run's open queries stand, from one annotator's side: how many there are,
        how many others hold (and when the first lease ends), how many still lack clips."""
        now = utcnow()
        expired = now - dt.timedelta(seconds=lease_s)
        clipped = select(ClipRow.segment_id)
        base = [QueryRow.run_id == run_id, QueryRow.status == "open", QueryRow.key >= 0]
        held = [QueryRow.assigned_to.is_not(None), QueryRow.assigned_at >= expired]
        if annotator_id is not None:
            held.append(QueryRow.assigned_to != annotator_id)
        with self._session() as s:
            total = s.scalar(select(func.count()).select_from(QueryRow).where(*base))
            others = s.execute(
                select(func.count(), func.min(QueryRow.assigned_at)).where(*base, *held)
            ).one()
            unclipped = s.scalar(
                select(func.count())
                .select_from(QueryRow)
                .where(
                    *base,
                    or_(QueryRow.left_id.not_in(clipped), QueryRow.right_id.not_in(clipped)),
                )
            )
            holders = list(s.scalars(
                select(AnnotatorRow.name).join(QueryRow, QueryRow.assigned_to == AnnotatorRow.id)
                .where(*base, *held).distinct()
            ))  # fmt: skip
        first = others[1]
        if first is not None and first.tzinfo is None:  # (SQLite keeps no time zone)
            first = first.replace(tzinfo=dt.UTC)
        free_in = None if first is None else max(0.0, (first - expired).total_seconds())
        return OpenQueries(total, others[0], holders, free_in, unclipped)

    def add_label(
        self,
        query_id: int,
        value,
        source: str,
        annotator_id: int | None = None,
        response_ms: int | None = None,
        overlap: float = 0.0,
    ) -> tuple[StoredLabel, bool]:
        """Commit a label; returns (label, created). The same label again returns the stored one
        (created False); a different label for an answered query raises LabelConflict.

        With `overlap` > 0, that share of the queries (chosen by id, so every server process
        agrees) wants a second annotator's label once the first is in: it goes to the next
        other annotator who asks, and is stored beside the first to measure agreement."""
        label = Label.parse(value)
        if response_ms is not None and not (0 <= int(response_ms) < 2**31):
            raise ValueError(f"response time {response_ms} ms is invalid: expected >= 0")
        if not 0.0 <= overlap <= 1.0:
            raise ValueError(f"overlap {overlap} is invalid: expected a share in [0, 1]")
        for attempt in range(2):  # a second pass when another writer won a race for the row
            try:
                # (Core, not the ORM: the hot path; commits before the caller hears of it)
                with self._write_lock, self.engine.begin() as c:
                    self._claim_writer(c)
                    return self._add_label(
                        c, query_id, label, source, annotator_id, response_ms, overlap
                    )
            except IntegrityError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _add_label(self, c, query_id, label, source, annotator_id, response_ms, overlap):
        st = self._label_statements()
        q = c.execute(st["query"], {"q": query_id}).one_or_none()
        if q is None:
            raise NotFound(f"query {query_id} does not exist")
        value = label.name.lower()
        new = {"query_id": query_id, "value": value, "source": source,
               "annotator_id": annotator_id, "response_ms": response_ms, "created_at": utcnow()}  # fmt: skip
        first = c.execute(st["first"], {"q": query_id}).one_or_none()
        if first is None:  # (a stale, dropped pair answered: the answer still counts)
            second = annotator_id is not None and wants_second_label(query_id, overlap)
            row_id = c.execute(st["add_first"], new).scalar_one()
            c.execute(st["second_wanted"] if second else st["labelled"], {"q": query_id})
            return self._stored(c, row_id, q.key, new), True
        stored = first
        if annotator_id is not None and first.annotator_id != annotator_id:
            second = c.execute(st["second"], {"q": query_id}).one_or_none()
            if second is None and q.second_wanted:
                row_id = c.execute(st["add_second"], new).scalar_one()
                c.execute(st["second_given"], {"q": query_id})
                return self._stored(c, row_id, q.key, new, second=True), True
            if second is not None and second.annotator_id == annotator_id:
                stored = second
        out = self._stored(c, stored.id, q.key, stored._asdict() | {"query_id": query_id},
                           second=stored is not first)  # fmt: skip
        if out.label != label:
            raise LabelConflict(
                f"query {query_id} is already labelled {out.label.name.lower()}; "
                f"not replaced by {value}"
            )
        return out, False

    def _label_statements(self) -> dict:
        """What labelling a query reads and writes, built once, with parameters."""
        cache = self.__dict__.setdefault("_statements", {})
        if "label" in cache:
            return cache["label"]
        q = bindparam("q")

        def fields(table):
            return (table.id, table.value, table.source, table.annotator_id, table.response_ms,
                    table.created_at)  # fmt: skip

        def set_query(**values):
            return update(QueryRow).where(QueryRow.id == q).values(**values)

        cache["label"] = {
            # (a row lock on PostgreSQL: one labeller of a query at a time)
            "query": select(QueryRow.key, QueryRow.second_wanted)
            .where(QueryRow.id == q)
            .with_for_update(),
            "first": select(*fields(LabelRow)).where(LabelRow.query_id == q),
            "second": select(*fields(SecondLabelRow)).where(SecondLabelRow.query_id == q),
            "add_first": insert(LabelRow).returning(LabelRow.id),
            "add_second": insert(SecondLabelRow).returning(SecondLabelRow.id),
            "labelled": set_query(status="labelled"),
            "second_wanted": set_query(
                status="labelled", second_wanted=1, assigned_to=None, assigned_at=None
            ),
            "second_given": set_query(second_wanted=0),
        }
        return cache["label"]

    def _stored(self, s, row_id: int, key: int, row: dict, second: bool = False) -> StoredLabel:
        who = row["annotator_id"]
        return StoredLabel(
            row_id, row["query_id"], key, Label.parse(row["value"]), row["source"],
            self._annotator_name(s, who) if who is not None else None, row["response_ms"],
            row["created_at"], second,
        )  # fmt: skip

    def _annotator_name(self, s: Session, annotator_id: int) -> str:
        """(Names never change: each is looked up once per store object.)"""
        names = self.__dict__.setdefault("_annotator_names", {})
        if annotator_id not in names:
            names[annotator_id] = s.scalar(
                select(AnnotatorRow.name).where(AnnotatorRow.id == annotator_id)
            )
        return names[annotator_id]

    def _label(self, s: Session, row: LabelRow | SecondLabelRow) -> StoredLabel:
        q = s.get(QueryRow, row.query_id)
        who = s.get(AnnotatorRow, row.annotator_id) if row.annotator_id else None
        return StoredLabel(
            row.id, row.query_id, q.key, Label.parse(row.value), row.source,
            who.name if who else None, row.response_ms, row.created_at,
            isinstance(row, SecondLabelRow),
        )  # fmt: skip

    def second_labels(self, run_id: int) -> list[StoredLabel]:
        """The run's second labels (the `--overlap` share), oldest first."""
        with self._session() as s:
            rows = s.scalars(
                select(SecondLabelRow)
                .join(QueryRow, SecondLabelRow.query_id == QueryRow.id)
                .where(QueryRow.run_id == run_id)
                .order_by(SecondLabelRow.id)
            ).all()
            return [self._label(s, r) for r in rows]

    def annotator_stats(self, run_id: int) -> AnnotatorStats:
        """Labels per annotator and how often two annotators agree on the queries both labelled
        (the `--overlap` share): overall and for each annotator against the others."""
        with self._session() as s:
            firsts = s.execute(
                select(AnnotatorRow.name, func.count())
                .join(LabelRow, LabelRow.annotator_id == AnnotatorRow.id)
                .join(QueryRow, LabelRow.query_id == QueryRow.id)
                .where(QueryRow.run_id == run_id)
                .group_by(AnnotatorRow.name)
            ).all()
            a, b = aliased(AnnotatorRow), aliased(AnnotatorRow)
            pairs = s.execute(
                select(a.name, b.name, LabelRow.value == SecondLabelRow.value)
                .select_from(SecondLabelRow)
                .join(LabelRow, LabelRow.query_id == SecondLabelRow.query_id)
                .join(QueryRow, SecondLabelRow.query_id == QueryRow.id)
                .join(a, LabelRow.annotator_id == a.id)
                .join(b, SecondLabelRow.annotator_id == b.id)
                .where(QueryRow.run_id == run_id)
            ).all()
            waiting = s.scalar(
                select(func.count())
                .select_from(QueryRow)
                .where(QueryRow.run_id == run_id, QueryRow.second_wanted == 1)
            )
        labels = dict(firsts)
        both: dict[str, list[int]] = {}
        for first, second, agreed in pairs:
            labels[second] = labels.get(second, 0) + 1
            for name in (first, second):
                both.setdefault(name, [0, 0])
                both[name][0] += 1
                both[name][1] += int(bool(agreed))
        per = [
            AnnotatorTally(name, n, *both.get(name, (0, 0)))
            for name, n in sorted(labels.items(), key=lambda kv: (-kv[1], kv[0]))
        ]
        agreed = sum(int(bool(x)) for *_, x in pairs)
        return AnnotatorStats(per, len(pairs), agreed, waiting)
