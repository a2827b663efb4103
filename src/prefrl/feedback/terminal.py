"""The terminal labeller (`prefrl label RUN_DIR`): one pair at a time, answered with a key.

Shows the two clips' paths (and opens them with the system viewer where there is one), then takes
L (left), R (right), E (equal), Enter (can't tell: skip) or Q (quit), as the original
learning-from-human-preferences interface did. Labels go to the same store as the web app's.

The terminal rater (`prefrl rate RUN_DIR --rater terminal`) does the same for a rating run's
clips: one clip at a time, answered with a rating from 1 to 100.
"""

from __future__ import annotations

import codecs
import io
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from prefrl.feedback.clips import pair_clip, write_pair_clip
from prefrl.feedback.ratings import parse_rating
from prefrl.feedback.store import FeedbackStore, LabelConflict
from prefrl.feedback.waiting import no_pair_message, resume_notice

KEYS = {"l": "left", "r": "right", "e": "equal", "": "skip"}


def open_with_viewer(paths: list[Path]) -> bool:
    """Open files with the desktop's viewer; False where there is none (no display, no opener)."""
    opener = shutil.which("xdg-open") or shutil.which("open")
    if opener is None or not (os.environ.get("DISPLAY") or sys.platform == "darwin"):
        return False
    for p in paths:
        subprocess.Popen([opener, str(p)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return True


def label_in_terminal(
    store: FeedbackStore,
    run_uid: str,
    run_dir: Path,
    annotator: str = "terminal",
    inp: TextIO = sys.stdin,
    out: TextIO = sys.stdout,
    open_clips: bool = True,
    wait_seconds: float = 2.0,
    max_labels: int | None = None,
    side_by_side: bool = False,
) -> int:
    """Label until Q, Ctrl-C, end of input or `max_labels`; returns the number of labels
    stored. With `side_by_side`, a pair's side-by-side video is shown instead of its two clips
    once the renderer has written it (`prefrl label --side-by-side` asks it to)."""
    run_id = store.run_id(run_uid, create=False)
    who, _ = store.annotator(store.add_annotator(annotator))
    try:
        return _label_pairs(store, run_id, run_dir, who, _Lines(inp), out, open_clips,
                            wait_seconds, max_labels, side_by_side)  # fmt: skip
    finally:  # Q, end of input, Ctrl-C: the pair on screen goes back to the others at once
        store.release_queries(run_id, who)


class _Lines:
    """Lines typed, read as they come: with a timeout (while waiting for pairs) where the input
    is a terminal, pipe or file, else (a `StringIO`) only when a pair asks for one. Read from
    the file descriptor itself, so that lines typed together are all seen."""

    def __init__(self, inp: TextIO):
        self.inp, self.pending, self.ended = inp, "", False
        try:
            self.fd = inp.fileno()
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            self.fd = None
        self.decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode

    def next(self, timeout: float | None = None) -> str | None:
        """The next line ("" at the end of input), or None when `timeout` passed first."""
        if self.fd is None:
            if timeout is not None:
                time.sleep(timeout)
                return None
            return self.inp.readline()
        deadline = None if timeout is None else time.monotonic() + timeout
        while "\n" not in self.pending and not self.ended:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 4096)
            self.ended = not chunk
            self.pending += self.decode(chunk, final=self.ended)
        line, newline, self.pending = self.pending.partition("\n")
        return line + newline


def _quit_while_waiting(lines: _Lines, out: TextIO, seconds: float) -> bool:
    """Wait `seconds` for a key: True on Q (or the end of input)."""
    line = lines.next(timeout=seconds)
    if line is None:
        return False
    if not line or line.strip().lower() == "q":
        return True
    print(f"{line.strip()!r}: there is no pair to answer yet; Q and Enter to quit", file=out)
    return False


def _label_pairs(store, run_id, run_dir, who, lines, out, open_clips, wait_seconds, max_labels,
                 side_by_side) -> int:  # fmt: skip
    stored = 0
    said = told = None
    try:
        while max_labels is None or stored < max_labels:
            queries = store.assign_queries(run_id, who, n=1, need_clips=True)
            if not queries:
                message = no_pair_message(store, run_id, run_dir, who)
                if message != said:  # (said again only when it changes)
                    print(f"{message} Waiting (Ctrl-C, or Q and Enter, to stop)...", file=out)
                    said = message
                out.flush()
                if _quit_while_waiting(lines, out, wait_seconds):
                    return stored
                continue
            said = None
            notice = resume_notice(run_dir)
            if notice and notice != told:
                print(f"\n{notice}", file=out)
            told = notice
            q = queries[0]
            answer = _answer(store, run_id, run_dir, q, lines, out, open_clips, side_by_side)
            if answer is None:  # Q or the end of input
                return stored
            key, seconds = answer
            try:
                _, created = store.add_label(q.id, KEYS[key], source="terminal", annotator_id=who,
                                             response_ms=int(1000 * seconds))  # fmt: skip
            except LabelConflict as e:
                print(f"not stored: {e}", file=out)
                continue
            stored += created
            print(f"saved: {KEYS[key]} ({stored} this session)", file=out)
    except KeyboardInterrupt:  # (Ctrl-C, as its message says, stops it as Q does)
        print(file=out)
    return stored


def _answer(store, run_id, run_dir, q, lines, out, open_clips, side_by_side):
    """Show pair `q` and read its answer: (key, seconds taken), or None for Q or the end of
    input."""
    left = store.query_count(run_id, status="open")
    paths = store.clips([q.left_segment, q.right_segment])
    clips = [run_dir / paths[q.left_segment], run_dir / paths[q.right_segment]]
    if side_by_side:  # (made here when the renderer has not written it yet)
        pair = run_dir / pair_clip(q.id)
        clips = [pair if pair.exists() else write_pair_clip(store, run_dir, q)]
        print(f"\npairs left: {left}\n  L | R: {pair}", file=out)
    else:
        print(f"\npairs left: {left}\n  L: {clips[0]}\n  R: {clips[1]}", file=out)
    if open_clips:
        open_with_viewer(clips)
    shown = time.monotonic()
    while True:
        print("better? [L]eft, [R]ight, [E]qual, Enter: can't tell, [Q]uit > ", end="",
              file=out, flush=True)  # fmt: skip
        line = lines.next()
        if not line:  # end of input
            return None
        key = line.strip().lower()
        if key == "q":
            return None
        if key in KEYS:
            return key, time.monotonic() - shown
        print(f"{line.strip()!r} is not an answer: type L, R, E, Q or just Enter", file=out)


def rate_in_terminal(
    store: FeedbackStore,
    run_uid: str,
    run_dir: Path,
    annotator: str = "terminal",
    inp: TextIO = sys.stdin,
    out: TextIO = sys.stdout,
    open_clips: bool = True,
) -> int:
    """Rate a rating run's clips 1-100 until Q, end of input or none is left; Enter passes a
    clip over (for this session). Returns the number of ratings stored. Siblings (`prefrl
    collect --siblings`) are named as such, so that they are rated against each other."""
    run_id = store.run_id(run_uid, create=False)
    who, _ = store.annotator(store.add_annotator(annotator))
    stored, passed = 0, set()
    while True:
        todo = [s for s in store.segments_to_rate(run_id, who, len(passed) + 1) if s not in passed]
        if not todo:
            ids = store.segment_ids(run_id)
            missing = len(ids) - len(store.clips(ids))
            unseen = f"; {missing} segment(s) have no clip to show" if missing else ""
            print(f"nothing left to rate ({stored} rated this session{unseen})", file=out)
            return stored
        seg = todo[0]
        clip = run_dir / store.clips([seg])[seg]
        family = store.segment_infos([seg])[seg].get("family")
        sibling = "" if family is None else f" (family {family}: rate it against its siblings)"
        print(f"\nclip {seg}{sibling}\n  {clip}", file=out)
        if open_clips:
            open_with_viewer([clip])
        while True:
            print("rating 1-100, Enter: pass, [Q]uit > ", end="", file=out, flush=True)
            line = inp.readline()
            if not line or line.strip().lower() == "q":
                return stored
            if not line.strip():
                passed.add(seg)
                break
            try:
                value = parse_rating(line.strip())
            except ValueError as e:
                print(e, file=out)
                continue
            store.add_rating(seg, value, source="terminal", annotator_id=who)
            stored += 1
            print(f"saved: {value} ({stored} this session)", file=out)
            break
