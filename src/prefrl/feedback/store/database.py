"""The connection to one store: SQLite (a file in the run directory, WAL mode) or PostgreSQL,
opened, checked and migrated; one write transaction at a time per process."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from sqlalchemy import create_engine, event, insert, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from prefrl.feedback.store.location import redacted, store_url
from prefrl.feedback.store.schema import MIGRATIONS, SCHEMA_VERSION, Base, MetaRow, StoreError


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cur = dbapi_connection.cursor()
    # First: switching a new file to WAL waits for the other processes opening it at once, and
    # before this it would wait pysqlite's 5 s at most ("database is locked" on a loaded machine).
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
    cur.execute("PRAGMA synchronous=FULL")  # a committed label survives a power cut
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


CREATE_LOCK_KEY = 0x7072_6566  # ("pref"): PostgreSQL's advisory lock while a store is made


class StoreBase:
    """One database, opened (and created or upgraded); thread-safe (one session per call)."""

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
                f"no feedback store at {url.database}: runs that ask for labels or ratings "
                "keep them there (runs of prefrl rl have none). Put the file back (from a backup "
                "or a copy of the run), or name the run's store with --store"
            )
        kwargs = (
            {}
            if self.is_sqlite
            else {
                "pool_pre_ping": True,
                "pool_size": 8,
                "max_overflow": 8,
                "connect_args": {"connect_timeout": 10},
            }
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

    def _claim_writer(self, s: Session | Connection) -> None:
        """On SQLite, take the database's write lock at the start of a transaction that reads
        before it writes: a reader that turns writer later fails at once when another process
        wrote in between (SQLITE_BUSY_SNAPSHOT), however long the busy timeout."""
        if self.is_sqlite:
            s.execute(text("UPDATE prefrl_meta SET value = value WHERE key = 'schema_version'"))

    def _refresh_statistics(self, *tables: str) -> None:
        """ANALYZE on PostgreSQL (after a bulk insert); SQLite plans without statistics."""
        if self.is_sqlite:
            return
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            for table in tables:
                c.execute(text(f"ANALYZE {table}"))

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _prepare(self, create: bool) -> None:
        with self._session() as s:
            exists = self.engine.dialect.has_table(s.connection(), MetaRow.__tablename__)
        if not exists:
            if not create:
                raise StoreError(f"{redacted(self.url)} holds no prefrl feedback store")
            # One transaction: another process opening the store meanwhile sees no store, or
            # the whole one with its version; one that created it first is found inside it.
            with self._write_lock, self.engine.begin() as c:
                if self.is_sqlite:  # (pysqlite runs DDL outside any transaction unless told)
                    c.exec_driver_sql("BEGIN IMMEDIATE")
                else:  # (creators queue here; the first one's tables are then seen)
                    c.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": CREATE_LOCK_KEY})
                if not self.engine.dialect.has_table(c, MetaRow.__tablename__):
                    Base.metadata.create_all(c)
                    c.execute(insert(MetaRow).values(key="schema_version",
                                                     value=str(SCHEMA_VERSION)))  # fmt: skip
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
