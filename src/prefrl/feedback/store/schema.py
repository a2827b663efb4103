"""What the feedback store holds: its tables (SQLAlchemy 2), the records it returns, its
errors, and the migrations that bring an older store up to `SCHEMA_VERSION`."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import JSON, DateTime, ForeignKey, Index, Integer, String, UniqueConstraint, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from prefrl.data.segments import Label

SCHEMA_VERSION = 3


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
# that it costs the same with 30 open queries or 30,000 (schema version 2); likewise the pairs
# waiting for a second annotator (version 3).
_QUERY_INDEXES = (
    ("ix_queries_open", ("run_id", "status", "id")),
    ("ix_queries_assigned_to", ("assigned_to",)),
)
# Pairs nobody holds, in partial indexes: under a crowd, the newest open pairs are all on
# someone's screen, and walking past them on every hand-out costs more than the rest (v3).
_FREE_INDEXES = (
    ("ix_queries_free", "status = 'open' AND assigned_to IS NULL"),
    ("ix_queries_second_free", "second_wanted = 1 AND assigned_to IS NULL"),
)


class QueryRow(Base):
    __tablename__ = "queries"
    __table_args__ = (
        UniqueConstraint("run_id", "key"),
        *(Index(name, *cols) for name, cols in _QUERY_INDEXES),
        *(
            Index(name, "run_id", "id", postgresql_where=text(where), sqlite_where=text(where))
            for name, where in _FREE_INDEXES
        ),
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
    second_wanted: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """1 while a labelled query waits for a second annotator's label (`prefrl serve --overlap`)."""
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


class SecondLabelRow(Base):
    """A second annotator's label of a query (the share `--overlap` asks for): it measures how
    often annotators agree and is not trained on; the trainer reads the first label only."""

    __tablename__ = "second_labels"
    id: Mapped[int] = mapped_column(primary_key=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id"), unique=True)
    value: Mapped[str] = mapped_column(String(8))
    source: Mapped[str] = mapped_column(String(64))
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"))
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
    second: bool = False
    """A second annotator's label (`--overlap`; its id counts in another table than the first's)."""


@dataclass(frozen=True)
class AnnotatorTally:
    name: str
    labels: int
    """Labels given, first and second ones."""
    doubly_labelled: int
    """Queries this annotator labelled that another annotator labelled too."""
    agreed: int
    """Of those, how many both labelled alike."""


@dataclass(frozen=True)
class AnnotatorStats:
    annotators: list[AnnotatorTally]
    doubly_labelled: int
    agreed: int
    waiting_for_second: int

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.doubly_labelled if self.doubly_labelled else None


def _add_query_indexes(store) -> None:
    with store.engine.begin() as c:
        for name, cols in _QUERY_INDEXES:
            c.execute(text(f"CREATE INDEX IF NOT EXISTS {name} ON queries ({', '.join(cols)})"))


def _add_second_labels(store) -> None:
    with store.engine.begin() as c:
        c.execute(text("ALTER TABLE queries ADD COLUMN second_wanted INTEGER NOT NULL DEFAULT 0"))
        for name, where in _FREE_INDEXES:
            c.execute(text(f"CREATE INDEX IF NOT EXISTS {name} ON queries (run_id, id) "
                           f"WHERE {where}"))  # fmt: skip
    SecondLabelRow.__table__.create(store.engine, checkfirst=True)


# version -> function that upgrades a store from that version to the next.
MIGRATIONS = {1: _add_query_indexes, 2: _add_second_labels}
