"""A person can teach it, and nothing they gave is lost: clips render on every env family, a
renderer that dies is said and restarted, labels stay on the clips that were shown after a
crash and resume, damaged runs recover or say exactly what is damaged."""

from __future__ import annotations

import importlib.util
import json
import shutil
import threading
import time

import numpy as np
import pytest
from test_online import _config

from prefrl.data import PreferenceData, SegmentPool, Segments
from prefrl.data.segments import pair_keys
from prefrl.envs import make_env
from prefrl.feedback import ScheduleConfig
from prefrl.feedback.clips import ClipRenderer
from prefrl.feedback.exchange import export_labels, import_labels
from prefrl.feedback.store import FeedbackStore, StoreError, run_info, run_uid
from prefrl.feedback.waiting import first_labels_status, no_pair_message
from prefrl.online.learner import train_online
from prefrl.render.video import read_video, write_video
from prefrl.rundir import workers
from prefrl.rundir.checkpoints import checkpoints, latest_checkpoint

FAMILIES = [
    "Pendulum-v1",  # classic control: no state until reset
    "MountainCarContinuous-v0",
    "Hopper-v5",  # Gymnasium MuJoCo
    "dmc:cartpole-swingup",  # DeepMind Control
    "toy:point-reach",  # prefrl's own
    pytest.param(
        "metaworld:reach",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("metaworld") is None, reason="metaworld is not installed"
        ),
    ),
]


@pytest.mark.parametrize("env_id", FAMILIES)
def test_a_fresh_renderer_restores_and_renders_states_of_every_family(env_id):
    env = make_env(env_id, seed=3)
    env.reset(seed=3)
    states = []
    for _ in range(4):
        states.append(env.get_state())
        env.step(env.action_space.sample())
    env.close()
    renderer = ClipRenderer(env_id, size=32)  # never reset: a clip renderer's env
    try:
        frames = renderer.frames(np.stack(states))
    finally:
        renderer.close()
    assert len(frames) == 4 and all(f.shape == (32, 32, 3) and f.dtype == np.uint8 for f in frames)
    assert any(not np.array_equal(frames[0], f) for f in frames[1:])  # the states differ


def test_two_writers_of_one_clip_leave_a_whole_video(tmp_path):
    """Two renderers on one run (`prefrl serve` beside `prefrl label`) render the same clip at
    the same time: whichever finishes last, the clip decodes whole."""
    path = tmp_path / "clips" / "seg000000001.mp4"
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 255, (48, 48, 3), dtype=np.uint8) for _ in range(40)]
    errors = []

    def write():
        try:
            for _ in range(4):
                write_video(path, frames, fps=20)
        except Exception as e:  # noqa: BLE001 (collected and asserted below)
            errors.append(e)

    threads = [threading.Thread(target=write) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(read_video(path)) == 40
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no partial file left


def _labelled_pairs_match_the_store(run_dir) -> int:
    """Every pair the run trained on (its checkpoint's labels.npz) is the pair the store holds
    for that label, array for array; returns how many were compared."""
    labels = PreferenceData.load(latest_checkpoint(run_dir) / "labels.npz").arrays()
    with FeedbackStore(run_dir, create=False) as store:
        stored = store.labels(store.run_id(run_uid(run_dir), create=False))
        left, right = store.query_pairs(run_dir, [x.query_id for x in stored])
    assert len(stored) == len(labels["label"])
    np.testing.assert_array_equal(left.obs, labels["obs_left"])
    np.testing.assert_array_equal(right.obs, labels["obs_right"])
    # The Oracle answered each by the true returns of the segments stored for its query.
    prefer_right = right.true_returns() > left.true_returns()
    assert all(
        (x.label.name == "RIGHT") == bool(r) for x, r in zip(stored, prefer_right, strict=True)
    )
    return len(stored)


SCHEDULE = ScheduleConfig(budget=100, session_size=20, interval=300)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 600-step run (checkpoints at 300 and 600, 40 labels asked at 300 and 600) that each
    test copies: a copied run directory is a whole run (its store key is in run.json)."""
    return train_online(_config(tmp_path_factory.mktemp("trained"), steps=600,
                                schedule=SCHEDULE)).run_dir  # fmt: skip


def _copy(run, tmp_path, name="run"):
    return shutil.copytree(run, tmp_path / name)


def _resume(tmp_path, run, steps):
    return train_online(_config(tmp_path, name=run.name, steps=steps, schedule=SCHEDULE,
                                resume=run))  # fmt: skip


def test_segments_cut_after_a_resume_never_take_the_ids_of_stored_ones(trained, tmp_path):
    """A crash after a checkpoint: the segments the store received after it keep their ids, so
    the resumed run must cut new segments under new ids, or new labels land on old clips."""
    run = _copy(trained, tmp_path)
    # The crash: the last checkpoint (step 600) is lost; the store holds the pairs asked at 600.
    shutil.rmtree(checkpoints(run)[0])
    assert json.loads((latest_checkpoint(run) / "loop.json").read_text())["step"] == 300
    assert _resume(tmp_path, run, 1200).steps == 1200
    assert _labelled_pairs_match_the_store(run) == 80


def _damage(path, how):
    if how == "deleted":
        path.unlink()
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:  # a byte changed in place
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "name, how",
    [
        ("agent.msgpack", "truncated"),
        ("buffer.npz", "deleted"),
        ("loop.json", "flipped"),
    ],
)
def test_resume_goes_back_to_the_newest_whole_checkpoint_and_says_what_was_damaged(
    trained, tmp_path, capsys, name, how
):
    run = _copy(trained, tmp_path)
    newest = checkpoints(run)[0]
    _damage(newest / name, how)
    resumed = _resume(tmp_path, run, 600)
    out = capsys.readouterr().out
    assert f"checkpoint {newest.name} is damaged" in out and name in out
    assert "resumed from step_000000300" in out
    assert resumed.steps == 600 and (newest.parent / f"{newest.name}.damaged").is_dir()
    assert len((run / "sessions.jsonl").read_text().splitlines()) == 2


def test_a_run_whose_every_checkpoint_is_damaged_is_left_as_it_was(trained, tmp_path):
    run = _copy(trained, tmp_path)
    for ckpt in checkpoints(run):
        _damage(ckpt / "agent.msgpack", "truncated")
    before = {p: (run / p).read_bytes() for p in ("config.json", "sessions.jsonl")}
    with pytest.raises(FileNotFoundError, match="every checkpoint is damaged") as e:
        _resume(tmp_path, run, 900)
    assert "step_000000600: agent.msgpack has" in str(e.value)
    assert "--load-labels" in str(e.value)
    assert {p: (run / p).read_bytes() for p in before} == before


def test_a_run_stopped_before_its_first_checkpoint_starts_again_under_its_name(
    trained, tmp_path, capsys
):
    run = _copy(trained, tmp_path)
    shutil.rmtree(run / "checkpoints")  # as if killed before the first checkpoint
    with pytest.raises(FileExistsError, match="--resume"):
        train_online(_config(tmp_path, steps=400))  # the name is taken: resume it
    resumed = _resume(tmp_path, run, 400)
    assert "no checkpoint yet" in capsys.readouterr().out
    assert resumed.steps == 400
    # The 40 questions asked before were not asked again, and the labels kept their segments.
    assert _labelled_pairs_match_the_store(run) == 40


def test_a_run_started_again_from_step_0_keeps_each_segment_and_pair_once(trained, tmp_path):
    """The same seed cuts the same segments again after a restart from step 0: they keep the
    stored segments' keys, so the store and the pool hold each once, and no pair asked before
    the restart is asked again (20 more are asked at step 900)."""
    run = _copy(trained, tmp_path)
    shutil.rmtree(run / "checkpoints")  # as if killed before the first checkpoint
    assert _resume(tmp_path, run, 900).steps == 900
    with FeedbackStore(run, create=False) as store:
        run_id = store.run_id(run_uid(run), create=False)
        stored = store.segments(run, store.segment_ids(run_id))
    assert len(set(stored.fingerprints())) == len(stored)
    pool = SegmentPool.load(latest_checkpoint(run) / "segments.npz").all()
    assert len(set(pool.fingerprints())) == len(pool) and len(set(pool.id.tolist())) == len(pool)
    # What the first session asked about was cut before step 300, as it is again now, under the
    # stored keys (after 300 the run differs: it fits on all 40 stored labels at once).
    first = {int(k) for k, step in zip(stored.id, stored.step, strict=True) if step + 10 <= 300}
    assert len(first) > 20 and first <= set(pool.id.tolist())
    labels = PreferenceData.load(latest_checkpoint(run) / "labels.npz").arrays()
    assert len(set(pair_keys(labels["id_left"], labels["id_right"]))) == len(labels["label"]) == 60
    assert _labelled_pairs_match_the_store(run) == 60


def test_a_renamed_run_keeps_its_store_record_and_a_lost_store_is_an_error(trained, tmp_path):
    moved = _copy(trained, tmp_path, "renamed")
    info = run_info(moved)
    assert info.uid == run_uid(moved) != "renamed"
    with FeedbackStore(info.store, create=False) as store:
        assert len(export_labels(store, info.uid, moved)["labels"]) == 40
    assert _resume(tmp_path, moved, 600).labels == 40  # (already at its last step)
    (moved / "feedback.db").unlink()
    with pytest.raises(StoreError, match="no feedback store at .*feedback.db.*Put the file back"):
        _resume(tmp_path, moved, 900)


def test_importing_a_runs_own_export_adds_nothing(trained, tmp_path):
    run = _copy(trained, tmp_path)
    uid = run_uid(run)
    with FeedbackStore(run, create=False) as store:
        doc = export_labels(store, uid, run)
        env = make_env("toy:point-reach")
        assert import_labels(store, uid, run, doc, env.obs_dim, env.action_dim) == 0
        assert len(store.labels(store.run_id(uid))) == 40


def _labelling_run(tmp_path, config: dict, n: int = 3):
    run_dir = tmp_path / "labelling"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"env": "toy:point-reach", **config}))
    segs = make_segments(2 * n)
    store = FeedbackStore(run_dir)
    run_id = store.run_id(run_uid(run_dir), env="toy:point-reach")
    ids = store.add_queries(run_id, run_dir, range(n), segs[:n], segs[n:])
    for seg in store.segment_ids(run_id):
        store.add_clip(seg, f"clips/seg{seg}.mp4", 8, 8, 10, 20.0)
    return run_dir, store, run_id, ids


def make_segments(n: int) -> Segments:
    from prefrl.finetuning.rating_runs import random_segments

    return random_segments("toy:point-reach", count=n, length=10)[:n]


def test_pairs_held_by_someone_are_said_and_given_back_when_they_leave(tmp_path):
    run_dir, store, run_id, ids = _labelling_run(tmp_path, {"steps": 1000})
    alice = store.annotator(store.add_annotator("alice"))[0]
    bob = store.annotator(store.add_annotator("bob"))[0]
    assert len(store.assign_queries(run_id, alice, n=3)) == 3
    assert store.assign_queries(run_id, bob, n=3) == []
    said = no_pair_message(store, run_id, run_dir, bob)
    assert "3 open pair(s) are being labelled by alice" in said and "5 min" in said
    assert "3 on alice's screen" in first_labels_status(store, run_id, run_dir, 3)
    assert store.release_queries(run_id, alice) == 3  # alice closed her page
    assert len(store.assign_queries(run_id, bob, n=3)) == 3
    for q in ids:
        store.add_label(q, "left", source="web", annotator_id=bob)
    trainer = workers.hold_trainer(run_dir)  # a trainer runs: it asks for more
    assert "answered: the agent asks for more" in no_pair_message(store, run_id, run_dir, bob)
    # ... unless its budget is all asked: then it asks no more.
    (run_dir / "config.json").write_text(json.dumps({"env": "toy:point-reach", "steps": 1000,
                                                     "schedule": {"budget": 3}}))  # fmt: skip
    assert no_pair_message(store, run_id, run_dir, bob) == (
        "Every pair is answered, and the run has asked all 3 of its budget (--schedule.budget): "
        "it trains on them to its end, asking no more."
    )
    trainer.close()  # no trainer: say so, and what to run
    (run_dir / "config.json").write_text(json.dumps({"env": "toy:point-reach", "steps": 1000}))
    (run_dir / "metrics.jsonl").write_text(json.dumps({"step": 600}) + "\n")
    assert no_pair_message(store, run_id, run_dir, bob) == (
        "The trainer is not running: it stopped at step 600 of 1,000 with 3 label(s). Resume it "
        f"to be asked for more: `prefrl train --resume {run_dir}`."
    )
    # Stopped with Ctrl-C: its checkpoint is where it stopped, after the last metrics row.
    ckpt = run_dir / "checkpoints" / "step_000000640"
    ckpt.mkdir(parents=True)
    (ckpt / "loop.json").write_text(json.dumps({"step": 640}))
    (run_dir / "checkpoints" / "latest").write_text(ckpt.name)
    assert "it stopped at step 640 of 1,000" in no_pair_message(store, run_id, run_dir, bob)
    shutil.rmtree(run_dir / "checkpoints")
    (run_dir / "config.json").write_text(json.dumps({"env": "toy:point-reach", "steps": 1000,
                                                     "schedule": {"budget": 3}}))  # fmt: skip
    assert no_pair_message(store, run_id, run_dir, bob).endswith(  # (its budget is all asked)
        f"Resume it to train on them to its end (it has asked all its budget): `prefrl train "
        f"--resume {run_dir}`."
    )
    (run_dir / "config.json").write_text(json.dumps({"env": "toy:point-reach", "steps": 1000}))
    (run_dir / "metrics.jsonl").write_text(json.dumps({"step": 1000}) + "\n")
    assert no_pair_message(store, run_id, run_dir, bob) == (
        "The run has finished (1,000 steps) with 3 label(s). Next: see what it learned with "
        f"`prefrl eval {run_dir}`, or train it further (and be asked for more): "
        f"`prefrl train --resume {run_dir} --steps 2000`."
    )
    store.close()


def test_a_waiting_trainer_says_to_start_a_labeller_while_nothing_renders(tmp_path):
    """`--teacher terminal`: nothing renders the clips until someone starts `prefrl label`;
    the trainer's wait says so, not that they are being rendered."""
    run_dir, store, run_id, _ = _labelling_run(tmp_path, {"steps": 1000})
    segs = make_segments(4)
    segs.id += 100  # (other segments than the first three pairs')
    store.add_queries(run_id, run_dir, range(3, 5), segs[:2], segs[2:])  # (no clips yet)
    said = first_labels_status(store, run_id, run_dir, 5)
    assert said == (f"5 label(s) to go; their clips are made once you label: start `prefrl label "
                    f"{run_dir}` (or `prefrl serve {run_dir}` for the browser) in another "
                    "terminal")  # fmt: skip
    # A trainer that started a labelling server (--teacher web), or a labeller's renderer.
    assert "2 pair(s) still being rendered" in first_labels_status(store, run_id, run_dir, 5,
                                                                    serving=True)  # fmt: skip
    renderer = workers.hold(run_dir, workers.RENDERER_LOCK)
    assert workers.renderer_running(run_dir)
    assert first_labels_status(store, run_id, run_dir, 5) == (
        "5 label(s) to go; 2 pair(s) still being rendered"
    )
    renderer.close()
    assert workers.renderer_running(run_dir) is False
    store.close()


def test_a_dataset_labelling_run_says_what_to_do_once_answered_and_a_dead_renderer_is_said(
    tmp_path,
):
    run_dir, store, run_id, ids = _labelling_run(tmp_path, {"next": "prefrl dataset queries X"})
    for q in ids:
        store.add_label(q, "right", source="terminal")
    said = no_pair_message(store, run_id, run_dir)
    assert "Every pair is answered" in said and "Next: prefrl dataset queries X" in said
    workers.report(run_dir, "renderer", "failed", "AttributeError: no attribute 'state'")
    said = no_pair_message(store, run_id, run_dir)
    assert said.startswith("The clip renderer stopped: AttributeError: no attribute 'state'")
    store.close()


def test_a_failing_renderer_reports_why_and_is_started_again(tmp_path):
    from prefrl.feedback.renderer import RendererSupervisor

    run_dir = tmp_path / "broken"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"env": "toy:point-reach"}))
    with FeedbackStore(run_dir) as store:
        store.run_id(run_uid(run_dir), env="toy:no-such-env")  # a record it cannot render
    supervisor = RendererSupervisor(run_info(run_dir), size=16, max_pause=0.2)
    try:
        deadline = time.time() + 240
        while supervisor.restarts < 2:
            assert time.time() < deadline, "the renderer was not restarted"
            time.sleep(0.2)
    finally:
        supervisor.terminate()
    status = workers.read_status(run_dir, "renderer")
    assert status.failed and "no-such-env" in status.error and "Traceback" in status.details


def test_a_damaged_store_file_is_a_message(tmp_path):
    (tmp_path / "feedback.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="feedback.db is damaged"):
        FeedbackStore(tmp_path, create=False)
