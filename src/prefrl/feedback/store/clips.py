"""The store's clips (the videos annotators watch, one per segment) and the 1-100 ratings
given to them."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, or_, select
from sqlalchemy.exc import IntegrityError

from prefrl.feedback.ratings import parse_rating
from prefrl.feedback.store.database import StoreBase
from prefrl.feedback.store.schema import (
    AnnotatorRow,
    ClipRow,
    NotFound,
    QueryRow,
    RatingRow,
    SegmentRow,
)


class ClipsAndRatings(StoreBase):
    """Clips rendered for segments, and annotators' ratings of them."""

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

    def clip_infos(self, segment_ids: Sequence[int]) -> dict[int, tuple[str, float | None]]:
        """segment id -> (clip path, how long it plays at its own frame rate), for those
        that have one."""
        with self._session() as s:
            rows = s.execute(
                select(ClipRow.segment_id, ClipRow.path, ClipRow.frames, ClipRow.fps).where(
                    ClipRow.segment_id.in_([int(i) for i in segment_ids])
                )
            )
            return {i: (path, frames / fps if fps > 0 else None) for i, path, frames, fps in rows}

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
