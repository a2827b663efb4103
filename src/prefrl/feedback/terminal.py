"""The terminal labeller (`prefrl label RUN_DIR`): one pair at a time, answered with a key.

Shows the two clips' paths (and opens them with the system viewer where there is one), then takes
L (left), R (right), E (equal), Enter (can't tell: skip) or Q (quit), as the original
learning-from-human-preferences interface did. Labels go to the same store as the web app's.

The terminal rater (`prefrl rate RUN_DIR --rater terminal`) does the same for a rating run's
clips: one clip at a time, answered with a rating from 1 to 100.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from prefrl.feedback.ratings import parse_rating
from prefrl.feedback.store import FeedbackStore, LabelConflict
from prefrl.feedback.waiting import no_pair_message
from prefrl.render.clips import pair_clip

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
    """Label until Q, end of input or `max_labels`; returns the number of labels stored. With
    `side_by_side`, a pair's side-by-side video is shown instead of its two clips once the
    renderer has written it (`prefrl label --side-by-side` asks it to)."""
    run_id = store.run_id(run_uid, create=False)
    who, _ = store.annotator(store.add_annotator(annotator))
    try:
        return _label_pairs(store, run_id, run_dir, who, inp, out, open_clips, wait_seconds,
                            max_labels, side_by_side)  # fmt: skip
    finally:  # Q, end of input, Ctrl-C: the pair on screen goes back to the others at once
        store.release_queries(run_id, who)


def _label_pairs(store, run_id, run_dir, who, inp, out, open_clips, wait_seconds, max_labels,
                 side_by_side) -> int:  # fmt: skip
    stored = 0
    said = None
    while max_labels is None or stored < max_labels:
        queries = store.assign_queries(run_id, who, n=1, need_clips=True)
        if not queries:
            message = no_pair_message(store, run_id, run_dir, who)
            if message != said:  # (said again only when it changes)
                print(f"{message} Waiting (Ctrl-C to stop)...", file=out)
                said = message
            out.flush()
            time.sleep(wait_seconds)
            continue
        said = None
        q = queries[0]
        left = store.query_count(run_id, status="open")
        paths = store.clips([q.left_segment, q.right_segment])
        clips = [run_dir / paths[q.left_segment], run_dir / paths[q.right_segment]]
        pair = run_dir / pair_clip(q.id)
        if side_by_side and pair.exists():
            clips = [pair]
            print(f"\npairs left: {left}\n  L | R: {pair}", file=out)
        else:
            print(f"\npairs left: {left}\n  L: {clips[0]}\n  R: {clips[1]}", file=out)
        if open_clips:
            open_with_viewer(clips)
        shown = time.monotonic()
        while True:
            print("better? [L]eft, [R]ight, [E]qual, Enter: can't tell, [Q]uit > ", end="",
                  file=out, flush=True)  # fmt: skip
            line = inp.readline()
            if not line:  # end of input
                return stored
            key = line.strip().lower()
            if key == "q":
                return stored
            if key in KEYS:
                break
            print(f"{line.strip()!r} is not an answer: type L, R, E, Q or just Enter", file=out)
        try:
            _, created = store.add_label(q.id, KEYS[key], source="terminal", annotator_id=who,
                                         response_ms=int(1000 * (time.monotonic() - shown)))  # fmt: skip
        except LabelConflict as e:
            print(f"not stored: {e}", file=out)
            continue
        stored += created
        print(f"saved: {KEYS[key]} ({stored} this session)", file=out)
    return stored


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
