"""The feedback store: where the trainer and the people labelling meet (SQLAlchemy 2).

The trainer writes segments and queries; the web app and the terminal labeller hand queries out
and write labels and ratings; the trainer polls for labels it has not seen. A label is committed
before anyone is told it was saved, and writing the same label twice stores it once.

SQLite (a file in the run directory, WAL mode) by default; any PostgreSQL server by URL. Segment
arrays live in .npz files in the run directory (the rows hold their metadata and where to find
them), so whoever renders or fits from the store needs the run directory too.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import secrets
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Self

import numpy as np
from sqlalchemy import (
    JSON,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
    create_engine,
    event,
    func,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, IntegrityError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from prefrl.data.segments import Label, Segments, load_segments, save_segments
from prefrl.feedback.ratings import parse_rating
from prefrl.rundir.atomic import atomic_write

SCHEMA_VERSION = 2
LEASE_SECONDS = 300.0
"""How long a query handed to an annotator stays theirs unless they answer or give it back."""
STORE_FILE = "feedback.db"
SEGMENT_DIR = "segments"
RUN_FILE = "run.json"


class StoreError(RuntimeError):
    """The store cannot be opened or used (unreachable, wrong schema version, ...)."""


class NotFound(LookupError):
    """An id (query, segment, token) that the store does not hold."""


class LabelConflict(ValueError):
    """A query that already holds a different label."""


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Base(DeclarativeBase):
    pass


class MetaRow(Base):
    __tablename__ = "prefrl_meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))


class RunRow(Base):
    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(256), unique=True)
    env: Mapped[str] = mapped_column(String(256), default="")
    info: Mapped[dict] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AnnotatorRow(Base):
    __tablename__ = "annotators"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    token: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SegmentRow(Base):
    __tablename__ = "segments"
    __table_args__ = (UniqueConstraint("run_id", "key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    key: Mapped[int] = mapped_column(Integer)
    """The segment's id within its run (Segments.id)."""
    file: Mapped[str] = mapped_column(String(512))
    """.npz file, relative to the run directory, holding the arrays."""
    row: Mapped[int] = mapped_column(Integer)
    step: Mapped[int] = mapped_column(Integer)
    episode: Mapped[int] = mapped_column(Integer)
    start: Mapped[int] = mapped_column(Integer)
    length: Mapped[int] = mapped_column(Integer)
    info: Mapped[dict] = mapped_column(JSON, default=dict)
    """Provenance (e.g. checkpoint and action noise of the fine-tuning workflow)."""
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ClipRow(Base):
    __tablename__ = "clips"
    id: Mapped[int] = mapped_column(primary_key=True)
    segment_id: Mapped[int] = mapped_column(ForeignKey("segments.id"), unique=True)
    path: Mapped[str] = mapped_column(String(512))
    """mp4 file, relative to the run directory."""
    width: Mapped[int] = mapped_column(Integer)
    height: Mapped[int] = mapped_column(Integer)
    frames: Mapped[int] = mapped_column(Integer)
    fps: Mapped[float] = mapped_column()
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


# Handing out pairs reads the newest open queries of a run, and an annotator's own: indexed so
# that it costs the same with 30 open queries or 30,000 (schema version 2).
_QUERY_INDEXES = (
    ("ix_queries_open", ("run_id", "status", "id")),
    ("ix_queries_assigned_to", ("assigned_to",)),
)


class QueryRow(Base):
    __tablename__ = "queries"
    __table_args__ = (
        UniqueConstraint("run_id", "key"),
        *(Index(name, *cols) for name, cols in _QUERY_INDEXES),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    key: Mapped[int] = mapped_column(Integer)
    """The query's id within its run (Query.ids)."""
    left_id: Mapped[int] = mapped_column(ForeignKey("segments.id"))
    right_id: Mapped[int] = mapped_column(ForeignKey("segments.id"))
    status: Mapped[str] = mapped_column(String(16), default="open", index=True)
    """open (waiting for a label), labelled, or dropped (stale: never shown again)."""
    assigned_to: Mapped[int | None] = mapped_column(ForeignKey("annotators.id"), nullable=True)
    assigned_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LabelRow(Base):
    __tablename__ = "labels"
    id: Mapped[int] = mapped_column(primary_key=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id"), unique=True)
    value: Mapped[str] = mapped_column(String(8))
    source: Mapped[str] = mapped_column(String(64))
    """Who answered: web, terminal, import, or scripted:<preset>."""
    annotator_id: Mapped[int | None] = mapped_column(ForeignKey("annotators.id"), nullable=True)
    response_ms: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RatingRow(Base):
    __tablename__ = "ratings"
    __table_args__ = (UniqueConstraint("segment_id", "annotator_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    segment_id: Mapped[int] = mapped_column(ForeignKey("segments.id"), index=True)
    annotator_id: Mapped[int | None] = mapped_column(ForeignKey("annotators.id"), nullable=True)
    value: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


@dataclass(frozen=True)
class StoredQuery:
    id: int
    key: int
    left_segment: int
    right_segment: int
    status: str


@dataclass(frozen=True)
class OpenQueries:
    total: int
    held_by_others: int
    holders: list[str]
    free_in_seconds: float | None
    """When the first of the others' leases runs out (None: nobody else holds one)."""
    without_clips: int


@dataclass(frozen=True)
class StoredLabel:
    id: int
    query_id: int
    query_key: int
    label: Label
    source: str
    annotator: str | None
    response_ms: int | None
    created_at: dt.datetime


@dataclass(frozen=True)
class RunInfo:
    run_dir: Path
    name: str
    store: str
    env: str
    uid: str
    """The run's key in its feedback store (`run_uid`)."""


def run_uid(run_dir: str | Path) -> str:
    """The run's key in its feedback store, kept in the run directory's run.json, so that a
    renamed or copied run directory still finds its own record. A run directory from before
    run.json (or one made by hand) is keyed by its name."""
    path = Path(run_dir) / RUN_FILE
    try:
        return str(json.loads(path.read_text())["uid"])
    except FileNotFoundError:
        return Path(run_dir).name
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise StoreError(
            f"{path} is damaged ({type(e).__name__}: {e}); it names the run's record in the "
            'feedback store: restore it from a copy of the run, or write {"uid": "<name>"} '
            "with the name of the run's row in the store's runs table"
        ) from None


def claim_run_uid(run_dir: str | Path, new: bool) -> str:
    """`run_uid`, written to run.json the first time: a fresh random id for a new run, the
    directory's name for one made before run.json existed (its record is under that name)."""
    path = Path(run_dir) / RUN_FILE
    if path.exists():
        return run_uid(run_dir)
    uid = uuid.uuid4().hex if new else Path(run_dir).name
    with atomic_write(path, "w") as f:
        json.dump({"uid": uid, "name": Path(run_dir).name}, f)
    return uid


def run_info(run_dir: str | Path, store: str | None = None) -> RunInfo:
    """Where a run keeps its feedback: from its config.json (or the defaults)."""
    run_dir = Path(run_dir)
    config_path = run_dir / "config.json"
    if not config_path.exists():
        raise FileNotFoundError(f"{run_dir} is not a prefrl run directory (no config.json)")
    try:
        config = json.loads(config_path.read_text())
    except json.JSONDecodeError as e:
        raise StoreError(f"{config_path} is damaged ({e})") from None
    return RunInfo(run_dir, run_dir.name, store or config.get("store") or str(run_dir),
                   config.get("env", ""), run_uid(run_dir))  # fmt: skip


def store_url(target: str | Path) -> str:
    """A SQLAlchemy URL for a run directory, a file path or a database URL (postgresql:// is
    taken through psycopg 3)."""
    target = str(target)
    if "://" not in target:
        path = Path(target)
        if path.is_dir():
            path = path / STORE_FILE
        return f"sqlite:///{path.resolve()}"
    if target.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + target.split("://", 1)[1]
    return target


def redacted(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
    cur.execute("PRAGMA synchronous=FULL")  # a committed label survives a power cut
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


class FeedbackStore:
    """Repository functions over one database. Thread-safe (one session per call)."""

    def __init__(self, target: str | Path, create: bool = True):
        self.url = store_url(target)
        try:
            url = make_url(self.url)
        except ArgumentError as e:
            raise StoreError(
                f"feedback store {target!r} is not a database URL or a path: expected a run "
                "directory, a .db file or postgresql://user:password@host/dbname"
            ) from e
        if url.get_backend_name() not in ("sqlite", "postgresql"):
            raise StoreError(
                f"feedback store {redacted(self.url)}: backend {url.get_backend_name()!r} is not "
                "supported; use a SQLite file or postgresql://..."
            )
        self.is_sqlite = url.get_backend_name() == "sqlite"
        if self.is_sqlite and not create and not Path(url.database or "").exists():
            raise StoreError(
                f"no feedback store at {url.database}: the run's queries and labels are kept "
                "there. Put the file back (from a backup or a copy of the run), or name the "
                "run's store with --store"
            )
        kwargs = (
            {}
            if self.is_sqlite
            else {"pool_pre_ping": True, "connect_args": {"connect_timeout": 10}}
        )
        self.engine: Engine = create_engine(self.url, **kwargs)
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        self._write_lock = threading.Lock() if self.is_sqlite else contextlib.nullcontext()
        try:
            self._prepare(create)
        except DatabaseError as e:
            self.engine.dispose()
            reason = str(e.orig).strip().splitlines()[0] if e.orig else str(e)
            if self.is_sqlite and not isinstance(e, OperationalError) or "malformed" in reason:
                raise StoreError(
                    f"the feedback store {url.database} is damaged ({reason}). Its rows may be "
                    f"rescued with `sqlite3 {url.database} .recover | sqlite3 recovered.db`; the "
                    "labels are also in the run's latest checkpoint (labels.npz)"
                ) from e
            raise StoreError(
                f"cannot reach the feedback store at {redacted(self.url)}: {reason}"
            ) from e

    @contextlib.contextmanager
    def _write(self) -> Iterator[Session]:
        """A write transaction. SQLite takes one writer at a time: this process's threads queue
        for it here, in order, rather than in SQLite's busy handler, which sleeps in growing
        steps (a long latency tail with many annotators at once)."""
        with self._write_lock, self._session.begin() as s:
            yield s

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ schema
    def _prepare(self, create: bool) -> None:
        with self._session() as s:
            exists = self.engine.dialect.has_table(s.connection(), MetaRow.__tablename__)
        if not exists:
            if not create:
                raise StoreError(f"{redacted(self.url)} holds no prefrl feedback store")
            Base.metadata.create_all(self.engine)
            with self._write() as s:
                s.merge(MetaRow(key="schema_version", value=str(SCHEMA_VERSION)))
            return
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the feedback store at {redacted(self.url)} has schema version {version}, made by "
                f"a newer prefrl; this one reads versions up to {SCHEMA_VERSION}: upgrade prefrl"
            )
        while version < SCHEMA_VERSION:
            MIGRATIONS[version](self)
            version += 1
            with self._write() as s:
                s.merge(MetaRow(key="schema_version", value=str(version)))

    def schema_version(self) -> int:
        with self._session() as s:
            row = s.get(MetaRow, "schema_version")
        if row is None or not row.value.isdigit():
            raise StoreError(f"{redacted(self.url)}: the schema version is missing or unreadable")
        return int(row.value)

    # ------------------------------------------------------------------ runs, annotators
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

    # ------------------------------------------------------------------ segments, queries
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
        return [r.id for r in rows]

    def query_count(self, run_id: int, status: str | None = None) -> int:
        """The run's own queries with `status` (default: all but the dropped ones); imported
        pairs (negative keys) were never asked by this run and are not counted."""
        cond = QueryRow.status == status if status else QueryRow.status != "dropped"
        with self._session() as s:
            return s.scalar(
                select(func.count())
                .select_from(QueryRow)
                .where(QueryRow.run_id == run_id, QueryRow.key >= 0, cond)
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

    def assign_queries(
        self,
        run_id: int,
        annotator_id: int,
        n: int = 1,
        lease_s: float = LEASE_SECONDS,
        need_clips: bool = False,
    ) -> list[StoredQuery]:
        """Hand up to `n` open queries to one annotator: the ones it already holds first, then
        the newest that nobody holds (or whose holder's lease ran out). Several annotators at
        once get different queries."""
        now = utcnow()
        expired = now - dt.timedelta(seconds=lease_s)
        cond = [QueryRow.run_id == run_id, QueryRow.status == "open"]
        if need_clips:
            clipped = select(ClipRow.segment_id)
            cond += [QueryRow.left_id.in_(clipped), QueryRow.right_id.in_(clipped)]
        free = or_(QueryRow.assigned_to.is_(None), QueryRow.assigned_at < expired)
        # Two indexed reads (the annotator's own, then the newest free ones) rather than one
        # sorted by ownership, which would sort every open query of the run.
        picks = [QueryRow.assigned_to == annotator_id, free]
        with self._write() as s:
            if self.is_sqlite:  # take the write lock first: SQLite serialises writers
                s.execute(text("UPDATE prefrl_meta SET value = value WHERE key = 'schema_version'"))
            rows: list[QueryRow] = []
            for pick in picks:
                if len(rows) == n:
                    break
                stmt = select(QueryRow).where(*cond, pick).order_by(QueryRow.id.desc())
                stmt = stmt.limit(n - len(rows))
                if not self.is_sqlite:
                    stmt = stmt.with_for_update(skip_locked=True)
                rows += [r for r in s.scalars(stmt) if r not in rows]
            for r in rows:
                r.assigned_to, r.assigned_at = annotator_id, now
            return [StoredQuery(r.id, r.key, r.left_id, r.right_id, r.status) for r in rows]

    def release_queries(self, run_id: int, annotator_id: int, query_ids=None) -> int:
        """Give back the open queries an annotator holds (all, or those of `query_ids`), so that
        others get them at once rather than when the lease runs out; returns how many."""
        cond = [QueryRow.run_id == run_id, QueryRow.status == "open",
                QueryRow.assigned_to == annotator_id]  # fmt: skip
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

    # ------------------------------------------------------------------ labels
    def add_label(
        self,
        query_id: int,
        value,
        source: str,
        annotator_id: int | None = None,
        response_ms: int | None = None,
    ) -> tuple[StoredLabel, bool]:
        """Commit a label; returns (label, created). The same label again returns the stored one
        (created False); a different label for an answered query raises LabelConflict."""
        label = Label.parse(value)
        if response_ms is not None and not (0 <= int(response_ms) < 2**31):
            raise ValueError(f"response time {response_ms} ms is invalid: expected >= 0")
        try:
            with self._write() as s:
                q = s.get(QueryRow, query_id)
                if q is None:
                    raise NotFound(f"query {query_id} does not exist")
                if q.status == "dropped":
                    q.status = "open"  # a person answered a stale pair: the answer still counts
                row = LabelRow(
                    query_id=query_id, value=label.name.lower(), source=source,
                    annotator_id=annotator_id, response_ms=response_ms,
                )  # fmt: skip
                s.add(row)
                s.flush()
                q.status = "labelled"
                stored = self._label(s, row)
            return stored, True  # (the block commits before the caller hears of it)
        except IntegrityError:
            pass
        with self._session() as s:
            row = s.scalar(select(LabelRow).where(LabelRow.query_id == query_id))
            stored = self._label(s, row)
        if stored.label != label:
            raise LabelConflict(
                f"query {query_id} is already labelled {stored.label.name.lower()}; "
                f"not replaced by {label.name.lower()}"
            )
        return stored, False

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

    def _label(self, s: Session, row: LabelRow) -> StoredLabel:
        q = s.get(QueryRow, row.query_id)
        who = s.get(AnnotatorRow, row.annotator_id) if row.annotator_id else None
        return StoredLabel(
            row.id, row.query_id, q.key, Label.parse(row.value), row.source,
            who.name if who else None, row.response_ms, row.created_at,
        )  # fmt: skip

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

    # ------------------------------------------------------------------ arrays
    def segment_ids(self, run_id: int) -> list[int]:
        """Row ids of every segment of the run, oldest first."""
        with self._session() as s:
            return list(
                s.scalars(
                    select(SegmentRow.id).where(SegmentRow.run_id == run_id).order_by(SegmentRow.id)
                )
            )

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

    # ------------------------------------------------------------------ clips
    def add_clip(
        self, segment_id: int, path: str, width: int, height: int, frames: int, fps: float
    ) -> None:
        try:
            with self._write() as s:
                s.add(
                    ClipRow(
                        segment_id=segment_id,
                        path=path,
                        width=width,
                        height=height,
                        frames=frames,
                        fps=fps,
                    )
                )
        except IntegrityError:
            pass  # rendered twice (two renderers): the first one stays

    def clip(self, segment_id: int) -> str | None:
        return self.clips([segment_id]).get(segment_id)

    def clips(self, segment_ids: Sequence[int]) -> dict[int, str]:
        """segment id -> clip path (relative to the run directory), for those that have one."""
        with self._session() as s:
            rows = s.execute(
                select(ClipRow.segment_id, ClipRow.path).where(
                    ClipRow.segment_id.in_([int(i) for i in segment_ids])
                )
            )
            return dict(rows.all())

    def clip_seconds(self, segment_ids: Sequence[int]) -> dict[int, float]:
        """segment id -> how long its clip plays at its own frame rate."""
        with self._session() as s:
            rows = s.execute(
                select(ClipRow.segment_id, ClipRow.frames, ClipRow.fps).where(
                    ClipRow.segment_id.in_([int(i) for i in segment_ids])
                )
            )
            return {i: frames / fps for i, frames, fps in rows.all() if fps > 0}

    def segments_to_render(self, run_id: int, limit: int) -> list[int]:
        """Segments of the newest open queries that have no clip yet (newest first)."""
        clipped = select(ClipRow.segment_id)
        with self._session() as s:
            rows = s.execute(
                select(QueryRow.left_id, QueryRow.right_id)
                .where(QueryRow.run_id == run_id, QueryRow.status == "open")
                .where(or_(QueryRow.left_id.not_in(clipped), QueryRow.right_id.not_in(clipped)))
                .order_by(QueryRow.id.desc())
                .limit(limit)
            ).all()
            done = set(
                s.scalars(clipped.where(ClipRow.segment_id.in_([i for r in rows for i in r])))
            )
        out: list[int] = []
        for pair in rows:
            out += [i for i in pair if i not in done and i not in out]
        return out

    # ------------------------------------------------------------------ ratings
    def add_rating(
        self, segment_id: int, value, source: str, annotator_id: int | None = None
    ) -> bool:
        """Store (or change) one annotator's 1-100 rating of a segment; True when stored new."""
        rating = parse_rating(value)
        with self._write() as s:
            if s.get(SegmentRow, segment_id) is None:
                raise NotFound(f"segment {segment_id} does not exist")
            row = s.scalar(
                select(RatingRow).where(
                    RatingRow.segment_id == segment_id, RatingRow.annotator_id == annotator_id
                )
            )
            if row is not None:  # (a second scripted rater replaces the first: its name too)
                row.value, row.source = rating, source
                return False
            s.add(
                RatingRow(
                    segment_id=segment_id, annotator_id=annotator_id, value=rating, source=source
                )
            )
            return True

    def segments_to_rate(self, run_id: int, annotator_id: int, n: int) -> list[int]:
        """Segments with a clip that this annotator has not rated, oldest first."""
        rated = select(RatingRow.segment_id).where(RatingRow.annotator_id == annotator_id)
        with self._session() as s:
            return list(s.scalars(
                select(SegmentRow.id).join(ClipRow, ClipRow.segment_id == SegmentRow.id)
                .where(SegmentRow.run_id == run_id, SegmentRow.id.not_in(rated))
                .order_by(SegmentRow.id).limit(n)
            ))  # fmt: skip

    def ratings(self, run_id: int) -> list[tuple[int, int, str | None]]:
        """(segment id, rating, who: the annotator's name, or the rating's source where no
        annotator gave it, e.g. scripted:return) of every rating in the run."""
        with self._session() as s:
            return [
                tuple(r)
                for r in s.execute(
                    select(
                        RatingRow.segment_id,
                        RatingRow.value,
                        func.coalesce(AnnotatorRow.name, RatingRow.source),
                    )
                    .join(SegmentRow, RatingRow.segment_id == SegmentRow.id)
                    .outerjoin(AnnotatorRow, RatingRow.annotator_id == AnnotatorRow.id)
                    .where(SegmentRow.run_id == run_id)
                    .order_by(RatingRow.id)
                ).all()
            ]


@lru_cache(maxsize=64)
def _segment_file(path: str) -> Segments:
    return load_segments(path)


def _add_query_indexes(store: FeedbackStore) -> None:
    with store.engine.begin() as c:
        for name, cols in _QUERY_INDEXES:
            c.execute(text(f"CREATE INDEX IF NOT EXISTS {name} ON queries ({', '.join(cols)})"))


# version -> function that upgrades a store from that version to the next.
MIGRATIONS = {1: _add_query_indexes}
