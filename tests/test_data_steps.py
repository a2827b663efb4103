"""The CLI's data steps as Python functions (`prefrl.collect_dataset`, `prefrl.make_queries`,
`prefrl.collect_rating_run`, `prefrl.rate_scripted`, `prefrl.script_demos`, ...) and
`prefrl.evaluate`: each called directly, what it made checked, and a wrong argument named as
the Python argument it was given as (the `prefrl` command names it as its flag)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import prefrl
from prefrl.cli import main


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory):
    """A short SAC run on toy:point-reach with checkpoints at steps 500 and 1000."""
    from conftest import short_sac_run

    return short_sac_run(tmp_path_factory.mktemp("sac"), "sac", steps=1000)


def _d4rl_file(path, episodes=6, length=30, obs_dim=6, action_dim=2):
    """A D4RL-layout HDF5 file of random steps whose reward is obs[0] (toy:point-reach sizes)."""
    rng = np.random.default_rng(0)
    n = episodes * length
    obs = rng.normal(size=(n, obs_dim)).astype(np.float32)
    timeouts = np.zeros(n, bool)
    timeouts[length - 1 :: length] = True
    with h5py.File(path, "w") as f:
        f["observations"], f["rewards"] = obs, obs[:, 0]
        f["actions"] = rng.uniform(-1, 1, (n, action_dim)).astype(np.float32)
        f["terminals"], f["timeouts"] = np.zeros(n, bool), timeouts
    return path


def test_a_dataset_imported_then_queried_and_labelled_from_python(tmp_path, capsys):
    data = prefrl.import_d4rl_dataset(_d4rl_file(tmp_path / "d4rl.hdf5"), "toy:point-reach",
                                      tmp_path / "mine", ref_min_score=0.0, ref_max_score=10.0)  # fmt: skip
    assert (tmp_path / "mine" / "data").is_dir() and data.env_id == "toy:point-reach"
    made = prefrl.make_queries(tmp_path / "mine", tmp_path / "q.json", num=20, length=5)
    queries = made.queries
    assert len(queries) == 20 and queries.source == "oracle" and (tmp_path / "q.json").is_file()
    left = data.segments(queries.start_left, 5)[2].sum(1)
    right = data.segments(queries.start_right, 5)[2].sum(1)
    np.testing.assert_array_equal(queries.labels == prefrl.Label.RIGHT, right > left)
    # A wrong argument is named as the Python argument; the command names its flag.
    with pytest.raises(ValueError, match=r"^num=0 is invalid: expected a positive number"):
        prefrl.make_queries(tmp_path / "mine", tmp_path / "q2.json", num=0)
    args = ["dataset", "queries", str(tmp_path / "mine"), "--out", str(tmp_path / "q3.json")]
    assert main([*args, "--num", "0"]) == 2
    assert "--num=0 is invalid" in capsys.readouterr().err
    with pytest.raises(ValueError, match="observations have 4 values per step"):
        prefrl.import_d4rl_dataset(_d4rl_file(tmp_path / "narrow.hdf5", obs_dim=4),
                                   "toy:point-reach", tmp_path / "narrow")  # fmt: skip


def test_a_dataset_collected_from_a_sac_run_from_python(sac_run, tmp_path):
    data = prefrl.collect_dataset(sac_run, "random", out=tmp_path / "rand", steps=120,
                                  reference_episodes=2)  # fmt: skip
    assert len(data) == 120 and data.info["kind"] == "random"
    from prefrl.data.dataset import OfflineDataset

    assert len(OfflineDataset.load(tmp_path / "rand")) == 120
    with pytest.raises(ValueError, match=r"^medium_step=700: .* has no checkpoint there"):
        prefrl.collect_dataset(sac_run, "medium", steps=10, medium_step=700,
                               reference_episodes=2)  # fmt: skip
    with pytest.raises(FileExistsError, match="already holds a dataset"):
        prefrl.collect_dataset(sac_run, "random", out=tmp_path / "rand", steps=10)


def test_a_rating_run_collected_and_rated_from_python(sac_run, tmp_path):
    from prefrl.feedback.raters import ratings_held

    made = prefrl.collect_rating_run(sac_run, tmp_path / "ratings", noise=(0.0, 0.3),
                                     segments=6, length=10, clip_size=0)  # fmt: skip
    assert made.run_dir == tmp_path / "ratings" and len(made.segments) == 6
    assert prefrl.rate_scripted(made.run_dir, "return") == 6
    assert ratings_held(made.run_dir) == {"scripted:return": 6}
    with pytest.raises(ValueError, match=r"^siblings 2 needs every noise above 0"):
        prefrl.collect_rating_run(sac_run, tmp_path / "more", noise=(0.0,), siblings=2)
    with pytest.raises(ValueError, match="rater 'loudest' is invalid"):
        prefrl.rate_scripted(made.run_dir, "loudest")


def test_demos_scripted_saved_and_checked_from_python(tmp_path, capsys):
    out = tmp_path / "maze"
    demos = prefrl.script_demos("toy:maze", 2, out=out, hold=5)
    assert len(prefrl.DemoSet.load(out)) == 2 == len(demos)
    checks = prefrl.check_demos(out, hold_horizon=3)
    assert [(c.usable, c.holds) for c in checks] == [(True, 3), (True, 3)]
    with pytest.raises(FileExistsError, match=r"in Python, replace=True"):
        prefrl.script_demos("toy:maze", 1, out=out)
    assert len(prefrl.script_demos("toy:maze", 1, out=out, replace=True, hold=5)) == 1
    assert len(prefrl.DemoSet.load(out)) == 1
    with pytest.raises(ValueError, match=r"^hold -1 is invalid"):
        prefrl.script_demos("toy:maze", 1, hold=-1)
    with pytest.raises(ValueError, match=r"^hold_horizon 0 is invalid"):
        prefrl.check_demos(out, hold_horizon=0)
    assert main(["demos", "check", str(out), "--hold-horizon", "0"]) == 2
    assert "--hold-horizon 0 is invalid" in capsys.readouterr().err


def test_evaluate_a_policy_from_python_as_prefrl_eval_does(sac_run):
    from prefrl.rl.compare import compare_policies

    policy = prefrl.load_policy(sac_run)
    cli = compare_policies([sac_run], episodes=3).results[0]
    result = prefrl.evaluate(policy, episodes=3)
    np.testing.assert_allclose(result.returns, cli.returns)
    assert result.mean == pytest.approx(cli.returns.mean()) and len(result.lengths) == 3
    env = prefrl.make_env("toy:point-reach", seed=0)
    try:  # an env object (left open), and any function from one observation to an action
        one_by_one = prefrl.evaluate(lambda obs: policy(obs), env, episodes=3)
    finally:
        env.close()
    np.testing.assert_allclose(one_by_one.returns, cli.returns, rtol=1e-5)
    np.testing.assert_allclose(prefrl.evaluate(sac_run, "toy:point-reach", 3).returns,
                               cli.returns)  # fmt: skip
    with pytest.raises(ValueError, match=r"^episodes=0 is invalid"):
        prefrl.evaluate(policy, episodes=0)
    with pytest.raises(TypeError, match="env=None: give the env"):
        prefrl.evaluate(lambda obs: obs[:2])
