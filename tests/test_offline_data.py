"""Offline datasets (Minari, D4RL HDF5) and their queries: sampling, labels, imports."""

from __future__ import annotations

import dataclasses
import json
import pickle

import h5py
import numpy as np
import pytest
from test_offline import synthetic

from prefrl.cli import main
from prefrl.data.dataset import OfflineDataset, import_d4rl_hdf5
from prefrl.data.segments import Label
from prefrl.feedback.dataset_queries import (
    DatasetQueries,
    import_pt_labels,
    label_queries,
    sample_queries,
)
from prefrl.feedback.teachers import TeacherConfig
from prefrl.reward.segment_models import SegmentRewardConfig, SegmentRewardModel


# ------------------------------------------------------------------------------------ datasets
def test_dataset_minari_round_trip(tmp_path, monkeypatch):
    import minari

    monkeypatch.chdir(tmp_path)  # a relative path, as users type it
    data = synthetic()
    data.info = {"kind": "test"}
    data.save("ds")
    back = OfflineDataset.load("ds")
    for key in ("observations", "actions", "next_observations", "terminals", "timeouts"):
        np.testing.assert_array_equal(getattr(back, key), getattr(data, key))
    np.testing.assert_allclose(back.rewards, data.rewards)
    assert (back.env_id, back.ref_min_score, back.ref_max_score) == ("toy:point-reach", -50, 10)
    assert back.info["kind"] == "test"
    np.testing.assert_array_equal(back.episode_bounds()[0], data.episode_bounds()[0])
    # Minari's own reader sees the same episodes.
    m = minari.MinariDataset(tmp_path / "ds" / "data")
    assert m.total_steps == len(data) and m.total_episodes == len(data.episode_bounds()[0])
    with pytest.raises(FileExistsError, match="already holds a dataset"):
        data.save(tmp_path / "ds")
    with pytest.raises(FileNotFoundError, match="not a Minari dataset"):
        OfflineDataset.load(tmp_path)
    # A write stopped half-way (all written, not yet renamed) leaves nothing that looks like a
    # dataset; the next one succeeds.
    import types

    from prefrl.data import minari_io

    def stopped(partial, path):
        raise KeyboardInterrupt

    monkeypatch.setattr(minari_io, "os", types.SimpleNamespace(replace=stopped))
    with pytest.raises(KeyboardInterrupt):
        data.save("ds2")
    assert not (tmp_path / "ds2").exists()
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    data.save("ds2")
    assert len(OfflineDataset.load("ds2")) == len(data)


def test_normalized_score_and_episodes():
    data = synthetic()
    np.testing.assert_allclose(data.normalized_score([-50.0, 10.0, -20.0]), [0.0, 100.0, 50.0])
    starts, ends = data.episode_bounds()
    assert starts[1] == 21 and ends[0] == 21  # the early terminal at index 20
    np.testing.assert_allclose(data.episode_returns().sum(), data.rewards.sum(), rtol=1e-5)
    assert data.episode_index()[21] == 0 and data.episode_index()[25] == 4
    no_refs = OfflineDataset(**{k: getattr(data, k) for k in _ARRAYS}, env_id="toy:point-reach")
    with pytest.raises(ValueError, match="no reference returns"):
        no_refs.normalized_score([0.0])


_ARRAYS = ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts")


def test_d4rl_import_drops_timeout_steps_like_qlearning_dataset(tmp_path):
    rng = np.random.default_rng(0)
    n = 30
    obs = rng.normal(size=(n, 3)).astype(np.float32)
    timeouts = np.zeros(n, bool)
    timeouts[[9, 19]] = True  # episodes of 10 steps; step 9's successor is a reset
    terminals = np.zeros(n, bool)
    terminals[24] = True
    path = tmp_path / "d4rl.hdf5"
    with h5py.File(path, "w") as f:
        f["observations"], f["actions"] = obs, rng.uniform(-1, 1, (n, 2)).astype(np.float32)
        f["rewards"], f["terminals"], f["timeouts"] = (
            np.arange(n, dtype=np.float32),
            terminals,
            timeouts,
        )
    data = import_d4rl_hdf5(path, "toy:point-reach", ref_min_score=0.0, ref_max_score=1.0)
    kept = [i for i in range(n - 1) if not timeouts[i]]
    np.testing.assert_array_equal(data.rewards, np.asarray(kept, np.float32))
    np.testing.assert_array_equal(data.next_observations, obs[np.asarray(kept) + 1])
    starts, ends = data.episode_bounds()
    # 0-8 (step 9 dropped), 10-18, 20-24 (terminal), 25-28 (end of data).
    assert list(ends - starts) == [9, 9, 5, 4]
    with h5py.File(tmp_path / "bad.hdf5", "w") as f:
        f["observations"] = obs
    with pytest.raises(ValueError, match=r"lacks the D4RL key\(s\) \['actions'"):
        import_d4rl_hdf5(tmp_path / "bad.hdf5", "toy:point-reach")


def test_d4rl_import_refuses_what_is_not_hdf5_nan_and_sizes_of_another_env(tmp_path):
    (tmp_path / "text.hdf5").write_text("not an HDF5 file")
    with pytest.raises(ValueError, match="text.hdf5 is not an HDF5 file"):
        import_d4rl_hdf5(tmp_path / "text.hdf5", "toy:point-reach")
    rng = np.random.default_rng(0)

    def write(name, obs_dim=4, nan_row=None):
        obs = rng.normal(size=(20, obs_dim)).astype(np.float32)
        if nan_row is not None:
            obs[nan_row, 1] = np.nan
        with h5py.File(tmp_path / name, "w") as f:
            f["observations"], f["actions"] = obs, np.zeros((20, 2), np.float32)
            f["rewards"], f["terminals"] = np.zeros(20, np.float32), np.zeros(20, bool)
            f["timeouts"] = np.zeros(20, bool)
        return tmp_path / name

    with pytest.raises(ValueError, match="observations holds NaN or inf in 1 row.*row 7"):
        import_d4rl_hdf5(write("nan.hdf5", nan_row=7), "toy:point-reach", dims=(4, 2))
    with pytest.raises(
        ValueError, match="observations have 5 values per step; Hopper-v5's have 11"
    ):
        import_d4rl_hdf5(write("wide.hdf5", obs_dim=5), "Hopper-v5", dims=(11, 3))
    assert len(import_d4rl_hdf5(write("ok.hdf5"), "toy:point-reach", dims=(4, 2))) == 19


def test_held_out_pairs_share_no_segment_with_the_trained_ones():
    data = synthetic(n_episodes=4, length=14)  # few distinct 10-step segments
    queries = label_queries(sample_queries(data, 40, length=10), data, TeacherConfig())
    cfg = SegmentRewardConfig(kind="mr", epochs=1, batch_size=8)
    model = SegmentRewardModel(cfg, data.obs_dim, data.action_dim, seq_len=10, seed=0)
    fit = model.fit(queries.preference_data(data))
    usable = int((queries.labels != Label.SKIP).sum())
    assert fit["reward/labels_val"] > 0
    assert fit["reward/labels_train"] + fit["reward/labels_val"] < usable  # overlapping: left out


def test_queries_of_another_dataset_of_the_same_env_are_refused():
    queries = sample_queries(synthetic(seed=0), 10, length=10)
    queries.check(synthetic(seed=0))  # the same data, however named
    other = synthetic(seed=1)
    other.name = "other"
    with pytest.raises(ValueError, match="made on another dataset"):
        queries.check(other)
    with pytest.raises(ValueError, match="made on another dataset"):
        label_queries(queries, other, TeacherConfig())


def test_a_dataset_with_nan_is_refused_where_it_is_opened(tmp_path, capsys):
    """One NaN in one episode: `dataset info`, `dataset queries` and `offline` refuse the
    dataset naming the episode, field and index, before any run directory; queries made before
    the dataset was edited say that it changed."""
    data = synthetic(n_episodes=14, length=20, obs_dim=6)  # toy:point-reach's sizes
    data.save(tmp_path / "ds")
    q = tmp_path / "q.json"
    assert main(["dataset", "queries", str(tmp_path / "ds"), "--num", "8", "--length", "5",
                 "--out", str(q)]) == 0  # fmt: skip
    with h5py.File(tmp_path / "ds/data/main_data.hdf5", "r+") as f:
        f["episode_11/observations"][3, 2] = np.nan
    capsys.readouterr()
    runs = tmp_path / "runs"
    for args in (
        ["dataset", "info", str(tmp_path / "ds")],
        ["dataset", "queries", str(tmp_path / "ds"), "--num", "8", "--length", "5",
         "--out", str(tmp_path / "q2.json")],
        ["offline", "--dataset", str(tmp_path / "ds"), "--reward", "mr", "--labels", str(q),
         "--runs-dir", str(runs), "--no-progress"],
    ):  # fmt: skip
        assert main(args) == 2, args
        assert "episode_11/observations[3, 2] is nan" in capsys.readouterr().err, args
    assert not runs.exists() and not (tmp_path / "q2.json").exists()
    # In memory too: the field, its row, and where that row lies.
    data.rewards[45] = np.inf
    with pytest.raises(ValueError, match=r"rewards\[45\] \(episode 3, its step 5\) is inf"):
        OfflineDataset(**{k: getattr(data, k) for k in (
            "observations", "actions", "rewards", "next_observations", "terminals", "timeouts",
        )}, env_id=data.env_id)  # fmt: skip
    # Edited to other finite values: the queries made before say that the dataset changed.
    with h5py.File(tmp_path / "ds/data/main_data.hdf5", "r+") as f:
        f["episode_11/observations"][3, 2] = 7.0
    with pytest.raises(ValueError, match="'synthetic' changed since these queries were made"):
        DatasetQueries.load(q).check(OfflineDataset.load(tmp_path / "ds"))


def test_dataset_queries_never_pair_a_segment_with_itself_and_warn_of_a_small_pool(capsys):
    data = synthetic(n_episodes=2, length=12)  # 12-step episodes: few 10-step segments
    queries = sample_queries(data, 50, length=10, seed=0)
    assert np.all(queries.start_left != queries.start_right)
    assert "possible 10-step segments for 50 pairs" in capsys.readouterr().err
    sample_queries(synthetic(), 10, length=10, seed=0)
    assert capsys.readouterr().err == ""


def test_offline_steps_are_one_setting_and_eval_names_what_it_takes(tmp_path, capsys):
    from prefrl.agents.iql import IQLConfig
    from prefrl.offline.learner import OfflineConfig
    from prefrl.training.policies import load_policy

    # A queries file holding a person's labels is never written over.
    people = sample_queries(synthetic(), 4, length=10)
    people = dataclasses.replace(people, labels=np.zeros(4, np.int64), source="human")
    people.save(tmp_path / "human.json")
    synthetic().save(tmp_path / "ds")
    args = ["dataset", "queries", str(tmp_path / "ds"), "--out", str(tmp_path / "human.json")]
    assert main(args) == 2
    assert "holds 4 labels given by people" in capsys.readouterr().err
    assert main(["offline", "--steps", "2000", "--iql.steps", "5000"]) == 2
    assert "--iql.steps is not a setting of its own" in capsys.readouterr().err
    # What the run records is what IQL takes.
    assert OfflineConfig(dataset=tmp_path, steps=2000, iql=IQLConfig(steps=5)).iql.steps == 2000
    ckpt = tmp_path / "run" / "checkpoints" / "step_000001000"
    ckpt.mkdir(parents=True)
    (ckpt / "agent.msgpack").write_bytes(b"")
    (tmp_path / "run" / "config.json").write_text(json.dumps({"dataset": "d"}))
    with pytest.raises(ValueError,
                       match=r"offline \(IQL\) run's checkpoint: load_policy \(and prefrl eval"):  # fmt: skip
        load_policy(ckpt)


# ------------------------------------------------------------------------------------ queries
def test_queries_lie_inside_episodes_and_oracle_labels_follow_returns(tmp_path):
    data = synthetic()
    queries = sample_queries(data, 200, length=15, seed=1)
    pos = data.episode_index()
    for starts in (queries.start_left, queries.start_right):
        # Every segment's last step is in the same episode as its first.
        assert np.all(pos[starts + 14] == pos[starts] + 14)
    labelled = label_queries(queries, data, TeacherConfig("oracle"))
    r_left = data.segments(queries.start_left, 15)[2].sum(1)
    r_right = data.segments(queries.start_right, 15)[2].sum(1)
    np.testing.assert_array_equal(labelled.labels == Label.RIGHT, r_right > r_left)
    labelled.save(tmp_path / "q.json")
    back = DatasetQueries.load(tmp_path / "q.json")
    np.testing.assert_array_equal(back.labels, labelled.labels)
    assert back.source == "oracle" and back.length == 15
    pref = back.preference_data(data).arrays()
    assert pref["obs_left"].shape == (200, 15, 4)
    mistaken = label_queries(queries, data, TeacherConfig("mistake"), seed=3)
    flipped = (mistaken.labels != labelled.labels).mean()
    assert 0.03 < flipped < 0.2  # ε = 0.1


def test_bad_queries_are_refused_with_the_bad_value(tmp_path):
    data = synthetic()
    q = sample_queries(data, 5, length=10)
    with pytest.raises(ValueError, match="start index 100000 .* out of range"):
        DatasetQueries("s", data.env_id, 10, [0, 100000], [1, 2], None).check(data)
    with pytest.raises(ValueError, match="runs past the end of its episode"):
        DatasetQueries("s", data.env_id, 10, [15], [0], None).check(data)
    with pytest.raises(ValueError, match="3 labels for 5 queries"):
        DatasetQueries("s", data.env_id, 10, q.start_left, q.start_right, ["left"] * 3)
    with pytest.raises(ValueError, match="made on env 'Hopper-v5'"):
        DatasetQueries("s", "Hopper-v5", 10, q.start_left, q.start_right).check(data)
    with pytest.raises(ValueError, match="no episode .* is 500 steps long"):
        sample_queries(data, 5, length=500)
    with pytest.raises(ValueError, match="label 'better' is invalid"):
        DatasetQueries("s", data.env_id, 10, [0], [1], ["better"])
    (tmp_path / "other.json").write_text(json.dumps({"format": "something"}))
    with pytest.raises(ValueError, match="not a prefrl dataset query file"):
        DatasetQueries.load(tmp_path / "other.json")


def test_preference_transformer_label_import(tmp_path):
    data = synthetic()
    left, right = np.array([0, 45, 90]), np.array([50, 100, 130])
    for name, arr in (("i1", left), ("i2", right), ("lab", np.array([0, 1, -1]))):
        with (tmp_path / name).open("wb") as f:
            pickle.dump(arr, f)
    q = import_pt_labels(data, tmp_path / "i1", tmp_path / "i2", tmp_path / "lab", length=10)
    assert list(q.labels) == [Label.LEFT, Label.RIGHT, Label.EQUAL] and q.source == "pt-human"
    with (tmp_path / "lab2").open("wb") as f:
        pickle.dump(np.array([0, 2, 1]), f)
    with pytest.raises(ValueError, match=r"0, 1 or -1; found \[2\]"):
        import_pt_labels(data, tmp_path / "i1", tmp_path / "i2", tmp_path / "lab2", length=10)

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    with (tmp_path / "evil").open("wb") as f:
        pickle.dump(Evil(), f)
    with pytest.raises(ValueError, match="refusing to load builtins.print"):
        import_pt_labels(data, tmp_path / "evil", tmp_path / "i2", tmp_path / "lab", length=10)


# ------------------------------------------------------------------------------------ reward models
