"""Sharing labels: export a run's labels as JSON, import them into another run, start a run with
another run's labels (`--load-labels`)."""

import base64
import json

import numpy as np
import pytest
from test_online import _config

from prefrl.cli import main
from prefrl.data import PreferenceData
from prefrl.feedback import ScheduleConfig
from prefrl.feedback.channel import StoreChannel
from prefrl.feedback.exchange import export_labels, import_labels, read_labels, write_labels
from prefrl.feedback.store import FeedbackStore, run_uid
from prefrl.online.learner import train_online
from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.rundir.metrics import read_metrics

OBS, ACT = 6, 2  # toy:point-reach


@pytest.fixture(scope="module")
def source_run(tmp_path_factory):
    """A finished run with 40 scripted labels."""
    tmp = tmp_path_factory.mktemp("source")
    cfg = _config(tmp, name="source", steps=900,
                  schedule=ScheduleConfig(budget=40, session_size=20, interval=300))  # fmt: skip
    return train_online(cfg).run_dir


def _fresh_run(tmp_path, name="target") -> str:
    """A run row (and directory) with no labels yet."""
    run_dir = tmp_path / name
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"env": "toy:point-reach"}))
    with FeedbackStore(run_dir) as store:
        store.run_id(name, env="toy:point-reach")
    return run_dir


def test_export_then_import_keeps_every_label_and_array(source_run, tmp_path):
    with FeedbackStore(source_run, create=False) as store:
        doc = export_labels(store, run_uid(source_run), source_run)
        run_id = store.run_id(run_uid(source_run), create=False)
        stored = store.labels(run_id)
        left, right = store.query_pairs(source_run, [x.query_id for x in stored])
    assert len(doc["labels"]) == 40
    path = tmp_path / "labels.json"
    write_labels(doc, path)
    doc = read_labels(path)  # through the file, as people share it

    target = _fresh_run(tmp_path)
    with FeedbackStore(target) as store:
        assert import_labels(store, run_uid(target), target, doc, OBS, ACT) == 40
        assert import_labels(store, run_uid(target), target, doc, OBS, ACT) == 0  # once only
        run_id = store.run_id(run_uid(target), create=False)
        got = store.labels(run_id)
        assert [x.label for x in got] == [x.label for x in stored]
        assert all(x.source.startswith("import:") for x in got)
        assert store.query_count(run_id) == 0  # imported pairs were never asked by this run
        assert store.next_query_key(run_id) == 0
        got_left, got_right = store.query_pairs(target, [x.query_id for x in got])
    for a, b in ((left, got_left), (right, got_right)):
        np.testing.assert_array_equal(a.obs, b.obs)
        np.testing.assert_array_equal(a.action, b.action)
        np.testing.assert_array_equal(a.state, b.state)
        np.testing.assert_array_equal(a.reward, b.reward)


def test_a_run_started_with_loaded_labels_trains_on_them_and_its_own(source_run, tmp_path):
    cfg = _config(tmp_path, name="reuse", steps=600, load_labels=source_run,
                  schedule=ScheduleConfig(budget=20, session_size=20, interval=300))  # fmt: skip
    result = train_online(cfg)
    assert result.labels == 40 + 20
    fits = [r for r in read_metrics(result.run_dir) if "feedback/labels" in r]
    assert fits[0]["feedback/labels"] == 60  # the loaded ones were in the first fit
    labels = PreferenceData.load(latest_checkpoint(result.run_dir) / "labels.npz")
    assert len(labels) == 60
    with FeedbackStore(result.run_dir, create=False) as store:
        run_id = store.run_id(run_uid(result.run_dir), create=False)
        assert store.query_count(run_id) == 20  # its own asks: the budget is untouched
        assert store.imported_from(run_id) == [run_uid(source_run)]

    # Resuming does not import them again.
    more = train_online(_config(tmp_path, name="reuse", steps=900, resume=result.run_dir,
                                load_labels=source_run,
                                schedule=ScheduleConfig(budget=20, session_size=20,
                                                        interval=300)))  # fmt: skip
    assert more.labels == 60


def test_a_person_is_not_waited_for_when_loaded_labels_are_there(source_run, tmp_path):
    target = _fresh_run(tmp_path)
    with FeedbackStore(target) as store:
        channel = StoreChannel(store, run_uid(target), target, "toy:point-reach", scripted=None)
        assert channel.is_human and not channel.has_loaded_labels()
        import_labels(store, run_uid(target), target, _doc(source_run), OBS, ACT)
        assert channel.has_loaded_labels()  # the trainer fits on these instead of waiting
        assert len(channel.poll().labels) == 40 and not channel.has_loaded_labels()
        assert channel.unanswered() == 0 and channel.asked() == 0


def test_cli_export_and_import(source_run, tmp_path, capsys):
    out = tmp_path / "shared.json"
    assert main(["labels", "export", str(source_run), "--out", str(out)]) == 0
    assert "40 labels of source" in capsys.readouterr().out
    target = _fresh_run(tmp_path)
    assert main(["labels", "import", str(out), str(target)]) == 0
    assert "40 labels imported" in capsys.readouterr().out
    assert main(["labels", "import", str(out), str(target)]) == 0
    assert "imported before" in capsys.readouterr().out


def test_python_export_and_import(source_run, tmp_path):
    import prefrl

    doc = prefrl.export_run_labels(source_run, tmp_path / "shared.json")
    assert len(doc["labels"]) == 40 and doc["path"] == str(tmp_path / "shared.json")
    target = _fresh_run(tmp_path)
    assert prefrl.import_run_labels(tmp_path / "shared.json", target).count == 40
    again = prefrl.import_run_labels(source_run, target)  # (a run directory: its labels)
    assert again.count == 0 and "imported before" in again.why_none
    with pytest.raises(FileNotFoundError, match="labels source '.*missing.json' does not exist"):
        prefrl.import_run_labels(tmp_path / "missing.json", target)


def _doc(source_run):
    with FeedbackStore(source_run, create=False) as store:
        return export_labels(store, run_uid(source_run), source_run)


def test_bad_documents_are_named_and_nothing_is_stored(source_run, tmp_path):
    target = _fresh_run(tmp_path)
    good = _doc(source_run)
    bad_label = json.loads(json.dumps(good))
    bad_label["labels"][3]["label"] = "maybe"
    bad_index = json.loads(json.dumps(good))
    bad_index["labels"][0]["right"] = 10_000
    other_env = dict(good, env="Hopper-v5")
    nan_obs = json.loads(json.dumps(good))
    obs = np.frombuffer(base64.b64decode(good["segments"]["obs"]["base64"]), np.float32).copy()
    obs[7] = np.nan
    nan_obs["segments"]["obs"]["base64"] = base64.b64encode(obs.tobytes()).decode()
    no_right = json.loads(json.dumps(good))
    del no_right["labels"][5]["right"]
    cases = [
        (no_right, "every label needs 'left', 'right' and 'label'"),
        (nan_obs, "segment observations hold NaN or infinite values"),
        ({"labels": "all of them"}, "'env' .* is missing; 'labels' must be a list of objects"),
        (bad_label, "label 'maybe' is invalid: expected one of left, right, equal, skip"),
        (bad_index, "segment index 10000 is out of range"),
        (other_env, "labels are of 'Hopper-v5'.*of 'toy:point-reach'"),
    ]
    with FeedbackStore(target) as store:
        run_id = store.run_id(run_uid(target), create=False)
        for doc, message in cases:
            with pytest.raises(ValueError, match=message):
                import_labels(store, run_uid(target), target, doc, OBS, ACT)
        with pytest.raises(ValueError, match=r"observations \(6,\).*this environment has \(7,\)"):
            import_labels(store, run_uid(target), target, good, OBS + 1, ACT)
        assert store.labels(run_id) == [] and store.imported_from(run_id) == []

    (tmp_path / "old.json").write_text(json.dumps(dict(good, version=0)))
    (tmp_path / "other.json").write_text(json.dumps({"labels": []}))
    with pytest.raises(ValueError, match="version 0 is not readable"):
        read_labels(tmp_path / "old.json")
    with pytest.raises(ValueError, match="not a prefrl labels document"):
        read_labels(tmp_path / "other.json")
    with pytest.raises(FileNotFoundError, match="expected a run directory or a labels .json"):
        read_labels(tmp_path / "missing.json")


def test_cli_train_counts_loaded_labels_apart_from_its_teachers(source_run, tmp_path, capsys):
    code = main(["train", "--env", "toy:point-reach", "--steps", "600", "--warmstart-steps",
                 "300", "--segment-length", "10", "--schedule.budget", "20",
                 "--schedule.session-size", "20", "--schedule.interval", "300",
                 "--reward.hidden-dims", "32", "32", "--reward.max-epochs", "5",
                 "--sac.hidden-dims", "32", "32", "--eval-episodes", "2", "--no-video",
                 "--load-labels", str(source_run), "--runs-dir", str(tmp_path), "--name", "cli",
                 "--no-progress"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert (f"labels: 60, 40 of them loaded from {source_run} (--load-labels) and 20 from the "
            "oracle teacher; learned vs true reward") in out  # fmt: skip


def test_load_labels_of_another_env_fails_before_the_run_starts(source_run, tmp_path, capsys):
    code = main(["train", "--env", "Pendulum-v1", "--load-labels", str(source_run),
                 "--runs-dir", str(tmp_path), "--name", "x", "--no-progress"])  # fmt: skip
    assert code == 2
    assert "its labels are of 'toy:point-reach', this run is of 'Pendulum-v1'" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "x").exists()
