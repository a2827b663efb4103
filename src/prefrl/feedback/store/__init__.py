"""The feedback store: where the trainer and the people labelling meet (SQLAlchemy 2).

The trainer writes segments and queries; the web app and the terminal labeller hand queries out
and write labels and ratings; the trainer polls for labels it has not seen. A label is committed
before anyone is told it was saved, and writing the same label twice stores it once.

SQLite (a file in the run directory, WAL mode) by default; any PostgreSQL server by URL. Segment
arrays live in .npz files in the run directory (the rows hold their metadata and where to find
them), so whoever renders or fits from the store needs the run directory too.
"""

from __future__ import annotations

from prefrl.feedback.ratings import parse_rating
from prefrl.feedback.store.annotators import LEASE_SECONDS, AnnotatorSide, wants_second_label
from prefrl.feedback.store.clips import ClipsAndRatings
from prefrl.feedback.store.location import (
    STORE_FILE,
    RunInfo,
    redacted,
    run_info,
    run_uid,
    store_url,
)
from prefrl.feedback.store.schema import (
    SCHEMA_VERSION,
    AnnotatorStats,
    AnnotatorTally,
    LabelConflict,
    NotFound,
    OpenQueries,
    StoredLabel,
    StoredQuery,
    StoreError,
)
from prefrl.feedback.store.trainer import SEGMENT_DIR, TrainerSide


class FeedbackStore(TrainerSide, AnnotatorSide, ClipsAndRatings):
    """The store: `TrainerSide` (runs, segments, queries, labels read back), `AnnotatorSide`
    (annotators, leases, labels given, agreement) and `ClipsAndRatings` over one database
    (`StoreBase`)."""


from prefrl.rundir.uid import RUN_FILE, claim_run_uid

__all__ = [
    "LEASE_SECONDS",
    "RUN_FILE",
    "SCHEMA_VERSION",
    "SEGMENT_DIR",
    "STORE_FILE",
    "AnnotatorStats",
    "AnnotatorTally",
    "FeedbackStore",
    "LabelConflict",
    "NotFound",
    "OpenQueries",
    "RunInfo",
    "StoreError",
    "StoredLabel",
    "StoredQuery",
    "claim_run_uid",
    "parse_rating",
    "redacted",
    "run_info",
    "run_uid",
    "store_url",
    "wants_second_label",
]
