"""The feedback store on a real SQLite file and a real PostgreSQL server."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from sqlalchemy import inspect, text

from prefrl.data import Label, Segments
from prefrl.feedback import Query, ScriptedTeacher, TeacherConfig
from prefrl.feedback.channel import StoreChannel
from prefrl.feedback.store import (
    SCHEMA_VERSION,
    FeedbackStore,
    LabelConflict,
    NotFound,
    StoreError,
    parse_rating,
    wants_second_label,
)


def make_segments(ids, length=5, seed=0) -> Segments:
    rng = np.random.default_rng(seed)
    n = len(ids)
    return Segments(
        obs=rng.normal(size=(n, length, 3)).astype(np.float32),
        action=rng.uniform(-1, 1, (n, length, 2)).astype(np.float32),
        reward=rng.normal(size=(n, length)).astype(np.float32),
        state=rng.normal(size=(n, length, 4)),
        id=np.asarray(ids, np.int64),
        step=np.asarray(ids, np.int64) * 10,
        episode=np.zeros(n, np.int64),
        start=np.zeros(n, np.int64),
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        target = tmp_path
    else:
        target = request.getfixturevalue("postgres_server")()
    with FeedbackStore(target) as s:
        yield s


def _queries(store, tmp_path, n=4):
    run = store.run_id("run-a", env="toy:point-reach")
    left, right = make_segments(range(n)), make_segments(range(n, 2 * n), seed=1)
    rows = store.add_queries(run, tmp_path, list(range(n)), left, right)
    return run, rows, left, right


def test_segments_round_trip_and_are_stored_once(store, tmp_path):
    run, rows, left, right = _queries(store, tmp_path)
    got_left, got_right = store.query_pairs(tmp_path, rows[::-1])
    np.testing.assert_array_equal(got_left.obs, left.obs[::-1])
    np.testing.assert_array_equal(got_right.state, right.state[::-1])
    np.testing.assert_array_equal(got_left.id, left.id[::-1])
    # A segment asked about again (here: in two new pairs of one batch) keeps one row.
    again = store.add_segments(run, tmp_path, Segments.concatenate([left[:1], left[:1]]))
    first = store.add_segments(run, tmp_path, left[:1])
    assert again == first * 2
    with store._session() as s:
        assert s.execute(text("SELECT count(*) FROM segments")).scalar() == 8


def test_a_label_is_stored_once_and_never_silently_replaced(store, tmp_path):
    run, rows, *_ = _queries(store, tmp_path)
    label, created = store.add_label(rows[0], "left", source="web", response_ms=1200)
    assert created and label.label == Label.LEFT and label.query_key == 0
    label2, created2 = store.add_label(rows[0], "LEFT", source="web")  # a double click
    assert not created2 and label2.id == label.id
    with pytest.raises(LabelConflict, match="already labelled left"):
        store.add_label(rows[0], "right", source="web")
    assert [x.label for x in store.labels(run)] == [Label.LEFT]
    assert store.query(rows[0]).status == "labelled"
    assert store.label_counts(run)["left"] == 1


def test_bad_labels_and_ids_are_refused_and_store_nothing(store, tmp_path):
    run, rows, *_ = _queries(store, tmp_path)
    with pytest.raises(ValueError, match="expected one of left, right, equal, skip"):
        store.add_label(rows[0], "maybe", source="web")
    with pytest.raises(NotFound, match="query 9999 does not exist"):
        store.add_label(9999, "left", source="web")
    with pytest.raises(NotFound, match="unknown annotator token"):
        store.annotator("not-a-token")
    assert store.labels(run) == []


def test_concurrent_double_posts_store_one_label(store, tmp_path):
    _, rows, *_ = _queries(store, tmp_path)
    created, errors = [], []

    def post():
        try:
            created.append(store.add_label(rows[1], "equal", source="web")[1])
        except Exception as e:  # noqa: BLE001 - any error fails the test below
            errors.append(e)

    threads = [threading.Thread(target=post) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(created) == [False] * 7 + [True]


def test_annotators_get_different_queries_and_keep_their_own(store, tmp_path):
    run, rows, *_ = _queries(store, tmp_path)
    ann = {name: store.annotator(store.add_annotator(name))[0] for name in ("ana", "ben")}
    assert store.add_annotator("ana") == store.annotators()[0][1]  # same name, same token
    a = store.assign_queries(run, ann["ana"], n=2)
    b = store.assign_queries(run, ann["ben"], n=2)
    assert {q.id for q in a}.isdisjoint({q.id for q in b})
    assert len(a) == len(b) == 2
    assert [q.id for q in store.assign_queries(run, ann["ana"], n=2)] == [q.id for q in a]
    # A held query comes free when its lease runs out.
    c = store.assign_queries(run, ann["ben"], n=4, lease_s=0.0)
    assert len(c) == 4
    # Dropped (stale) and labelled queries are not handed out.
    store.add_label(a[0].id, "skip", source="web", annotator_id=ann["ana"])
    assert store.drop_queries([a[1].id]) == 1
    left = {q.id for q in store.assign_queries(run, ann["ana"], n=4, lease_s=0.0)}
    assert left == {q for q in rows} - {a[0].id, a[1].id}
    assert store.query_count(run) == 3 and store.next_query_key(run) == 4


def test_an_overlap_share_is_labelled_by_two_annotators_and_their_agreement_counted(
    store, tmp_path
):
    run, rows, *_ = _queries(store, tmp_path)
    ana, ben, cy = (store.annotator(store.add_annotator(n))[0] for n in ("ana", "ben", "cy"))
    twice = [q for q in rows if wants_second_label(q, 0.5)]
    once = [q for q in rows if q not in twice]
    assert twice and once  # (the fixed hash splits these four ids both ways)
    for q in rows:
        store.add_label(q, "left", "web", annotator_id=ana, overlap=0.5)
    # Only the queries in the share come back, and never to their first annotator.
    assert store.assign_queries(run, ana, n=4) == []
    handed = store.assign_queries(run, ben, n=4)
    assert sorted(q.id for q in handed) == sorted(twice)
    assert store.assign_queries(run, cy, n=4) == []  # (ben holds them)
    with pytest.raises(LabelConflict, match="already labelled left"):
        store.add_label(once[0], "right", "web", annotator_id=ben, overlap=0.5)
    second, created = store.add_label(twice[0], "right", "web", annotator_id=ben, overlap=0.5)
    assert created and second.annotator == "ben" and second.label == Label.RIGHT and second.second
    again, created = store.add_label(twice[0], "right", "web", annotator_id=ben, overlap=0.5)
    assert not created and again.id == second.id
    with pytest.raises(LabelConflict, match="already labelled right"):
        store.add_label(twice[0], "left", "web", annotator_id=ben)
    with pytest.raises(LabelConflict, match="already labelled left"):  # a third one
        store.add_label(twice[0], "right", "web", annotator_id=cy)
    for q in twice[1:]:
        store.add_label(q, "left", "web", annotator_id=ben, overlap=0.5)
    # The trainer reads each query's first label only.
    assert sorted(x.query_id for x in store.labels(run)) == sorted(rows)
    assert [(x.query_id, x.annotator) for x in store.second_labels(run)] == [
        (q, "ben") for q in twice
    ]
    stats = store.annotator_stats(run)
    assert stats.doubly_labelled == len(twice) and stats.agreed == len(twice) - 1
    assert stats.agreement == pytest.approx((len(twice) - 1) / len(twice))
    assert stats.waiting_for_second == 0
    by_name = {t.name: t for t in stats.annotators}
    assert by_name["ana"].labels == 4 and by_name["ben"].labels == len(twice)
    assert by_name["ben"].doubly_labelled == len(twice) and "cy" not in by_name
    with pytest.raises(ValueError, match="overlap 1.5 is invalid"):
        store.add_label(once[0], "left", "web", annotator_id=ana, overlap=1.5)


def test_a_released_second_label_goes_to_another_annotator(store, tmp_path):
    run, rows, *_ = _queries(store, tmp_path, n=1)
    ana, ben, cy = (store.annotator(store.add_annotator(n))[0] for n in ("ana", "ben", "cy"))
    store.add_label(rows[0], "equal", "web", annotator_id=ana, overlap=1.0)
    assert [q.id for q in store.assign_queries(run, ben)] == rows
    assert store.release_queries(run, ben) == 1
    assert [q.id for q in store.assign_queries(run, cy)] == rows
    assert store.assign_queries(run, ben) == []  # (cy holds it)
    # A lease that ran out hands it on too.
    assert [q.id for q in store.assign_queries(run, ben, lease_s=0.0)] == rows


def test_a_bulk_of_queries_refreshes_the_planners_statistics(store, tmp_path):
    if store.is_sqlite:
        pytest.skip("SQLite plans without statistics")
    run = store.run_id("bulk", env="toy:point-reach")
    n = 1000
    left, right = make_segments(range(n)), make_segments(range(n, 2 * n), seed=1)
    store.add_queries(run, tmp_path, list(range(n)), left, right)
    with store.engine.connect() as c:
        analysed = c.execute(text(
            "SELECT last_analyze FROM pg_stat_user_tables WHERE relname = 'queries'"
        )).scalar()  # fmt: skip
    assert analysed is not None


def test_only_queries_with_clips_when_asked(store, tmp_path):
    run, rows, *_ = _queries(store, tmp_path, n=2)
    who = store.annotator(store.add_annotator("ana"))[0]
    assert store.assign_queries(run, who, n=2, need_clips=True) == []
    todo = store.segments_to_render(run, limit=1)  # the newest open query's two segments
    q = store.query(rows[1])
    assert todo == [q.left_segment, q.right_segment]
    for seg in todo:
        store.add_clip(seg, f"clips/{seg}.mp4", 64, 64, 5, 20.0)
    store.add_clip(todo[0], "clips/again.mp4", 64, 64, 5, 20.0)  # a second renderer: ignored
    assert store.clip(todo[0]) == f"clips/{todo[0]}.mp4"
    assert [x.id for x in store.assign_queries(run, who, n=2, need_clips=True)] == [rows[1]]


def test_ratings(store, tmp_path):
    run, rows, *_ = _queries(store, tmp_path, n=1)
    seg = store.query(rows[0]).left_segment
    who = store.annotator(store.add_annotator("ana"))[0]
    assert store.add_rating(seg, "73", source="web", annotator_id=who)
    assert not store.add_rating(seg, 80, source="web", annotator_id=who)  # changed, not doubled
    assert store.ratings(run) == [(seg, 80, "ana")]
    for bad in (0, 101, "abc", 2.5, None, True, float("nan")):
        with pytest.raises(ValueError, match="expected a whole number from 1 to 100"):
            store.add_rating(seg, bad, source="web")
    with pytest.raises(NotFound):
        store.add_rating(123456, 50, source="web")
    assert parse_rating(1.0) == 1


def test_channel_with_a_scripted_teacher(store, tmp_path):
    teacher = ScriptedTeacher(TeacherConfig("oracle"), seed=0, episode_length=100)
    channel = StoreChannel(store, "run-b", tmp_path, "toy:point-reach", teacher)
    assert channel.poll() is None
    left, right = make_segments(range(6)), make_segments(range(6, 12), seed=1)
    channel.submit(Query(np.arange(6), left, right))
    got = channel.poll()
    expected = [Label.RIGHT if r > l else Label.LEFT
                for l, r in zip(left.true_returns(), right.true_returns())]  # fmt: skip
    assert got.labels == expected and set(got.sources) == {"scripted:oracle"}
    np.testing.assert_array_equal(got.left.obs, left.obs)
    assert channel.poll() is None  # nothing new
    assert channel.asked() == 6 and channel.unanswered() == 0 and channel.next_query_id() == 6
    # A channel restored from an earlier state sees the labels that came after it.
    again = StoreChannel(store, "run-b", tmp_path, "toy:point-reach", None)
    again.load_state_dict({"cursor": 0, "scripted": None})
    assert again.is_human and len(again.poll().labels) == 6


def test_a_store_from_a_newer_prefrl_is_refused(tmp_path):
    FeedbackStore(tmp_path).close()
    with FeedbackStore(tmp_path) as s, s.engine.begin() as c:
        c.execute(text("UPDATE prefrl_meta SET value = :v"), {"v": str(SCHEMA_VERSION + 1)})
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}.*upgrade prefrl"):
        FeedbackStore(tmp_path)


def test_a_version_1_store_is_upgraded_in_place(store, tmp_path):
    """Version 1 (prefrl before the query indexes and second labels) still opens: the
    migrations add the indexes, the column and the table, and every row is kept."""
    run, rows, _, _ = _queries(store, tmp_path)
    store.add_label(rows[0], "left", "web")
    with store.engine.begin() as c:  # make it a version-1 store
        for index in (
            "ix_queries_open",
            "ix_queries_assigned_to",
            "ix_queries_free",
            "ix_queries_second_free",
        ):
            c.execute(text(f"DROP INDEX {index}"))
        c.execute(text("ALTER TABLE queries DROP COLUMN second_wanted"))
        c.execute(text("DROP TABLE second_labels"))
        c.execute(text("UPDATE prefrl_meta SET value = '1' WHERE key = 'schema_version'"))
    target = str(tmp_path) if store.is_sqlite else store.url
    with FeedbackStore(target, create=False) as upgraded:
        assert upgraded.schema_version() == SCHEMA_VERSION == 3
        names = {ix["name"] for ix in inspect(upgraded.engine).get_indexes("queries")}
        assert {
            "ix_queries_open",
            "ix_queries_assigned_to",
            "ix_queries_free",
            "ix_queries_second_free",
        } <= names
        assert [x.label for x in upgraded.labels(run)] == [Label.LEFT]
        assert upgraded.query_count(run, status="open") == len(rows) - 1
        ana = upgraded.annotator(upgraded.add_annotator("ana"))[0]
        upgraded.add_label(rows[1], "right", "web", annotator_id=ana, overlap=1.0)
        assert upgraded.annotator_stats(run).waiting_for_second == 1


def test_unreachable_and_malformed_stores_fail_clearly(tmp_path):
    with pytest.raises(StoreError, match=r"cannot reach the feedback store at postgresql\+psycopg"
                                         r"://bob:\*\*\*@127.0.0.1:1/x"):  # fmt: skip
        FeedbackStore("postgresql://bob:secret@127.0.0.1:1/x")
    with pytest.raises(StoreError, match="backend 'mysql' is not supported"):
        FeedbackStore("mysql://localhost/x")
    with pytest.raises(StoreError, match="no feedback store at"):
        FeedbackStore(tmp_path / "nothing.db", create=False)


def _open_store_at(path, start, out) -> None:
    import time

    from prefrl.feedback.store import FeedbackStore

    time.sleep(max(0.0, start - time.time()))
    try:
        FeedbackStore(path).close()
        out.put("ok")
    except Exception as e:  # noqa: BLE001 (reported to the test)
        out.put(repr(e))


def test_processes_opening_a_new_store_at_once_all_find_it_whole(tmp_path):
    """The trainer, a server and a labeller may all open a run's store before it exists: each
    either makes it or finds it, with its version (seen failing without the fix: a table made
    by another, or the tables without their version row)."""
    import multiprocessing
    import time

    ctx = multiprocessing.get_context("spawn")
    for round_ in range(3):
        out = ctx.Queue()
        start = time.time() + 4  # (after every process has imported prefrl)
        procs = [ctx.Process(target=_open_store_at, args=(tmp_path / f"r{round_}.db", start, out))
                 for _ in range(6)]  # fmt: skip
        for p in procs:
            p.start()
        results = [out.get(timeout=60) for _ in procs]
        for p in procs:
            p.join()
        assert results == ["ok"] * 6, results
        with FeedbackStore(tmp_path / f"r{round_}.db") as store:
            assert store.schema_version() == SCHEMA_VERSION
