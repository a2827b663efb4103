"""The demos RFCL takes (`prefrl.demos.rfcl_demos`): bad ones refused before any run exists,
stale ones left out, ends that slip named."""

import dataclasses
import re

import numpy as np
import pytest
from test_rfcl import _config, _maze

from prefrl.data.demos import DemoSet
from prefrl.demos.rfcl import load_demos, train_rfcl


def test_bad_demos_are_refused_before_any_run_exists(tmp_path, demo_file):
    from test_offline import synthetic

    with pytest.raises(ValueError, match="holds demos of toy:maze, not of toy:maze-open"):
        train_rfcl(_config(tmp_path, demo_file, env="toy:maze-open"))
    with pytest.raises(ValueError, match="--num-demos 5: .* holds 2 demos; ask for at most 2"):
        train_rfcl(_config(tmp_path, demo_file, num_demos=5))
    synthetic(env="toy:maze", obs_dim=7).save(tmp_path / "no-states")
    with pytest.raises(ValueError, match="no simulator states; RFCL starts episodes from demo"):
        train_rfcl(_config(tmp_path, tmp_path / "no-states"))
    bare = DemoSet.load(demo_file)
    bare = DemoSet("toy:maze", [dataclasses.replace(d, actions=None) for d in bare.demos])
    bare.save(tmp_path / "bare", action_dim=2)
    with pytest.raises(ValueError, match="has no actions: use --no-demo-actions"):
        train_rfcl(_config(tmp_path, tmp_path / "bare"))
    failing = DemoSet.load(demo_file)
    failing.demos[0].success[:] = False
    failing.demos[1].success[:] = False
    failing.save(tmp_path / "failing")
    with pytest.raises(ValueError, match="none of the demos of .* ends in success"):
        train_rfcl(_config(tmp_path, tmp_path / "failing"))
    assert not (tmp_path / "runs").exists()  # nothing written


def test_demos_that_no_longer_succeed_on_replay_are_left_out(tmp_path, demo_file, capsys):
    """Stored flags say success, but demo 0's actions (zeroed, as if recorded on another
    simulator) no longer reach the goal here: it is left out, named; with none left, an error
    before any run exists."""
    stale = DemoSet.load(demo_file)
    stale.demos[0].actions[:] = 0.0
    stale.save(tmp_path / "stale")
    config = _config(tmp_path, tmp_path / "stale")
    kept = load_demos(config, _maze())
    assert len(kept) == 1 and np.array_equal(kept[0].states[0], stale.demos[1].states[0])
    out = capsys.readouterr().out
    assert "demo 1" not in out and re.search(
        r"warning: demo 0 of .*: stored flags: success at the end; replayed here: no success at "
        r"the end \(states differ by up to .*\); left out", out)  # fmt: skip
    stale.demos[1].actions[:] = 0.0
    stale.save(tmp_path / "stale-all")
    with pytest.raises(ValueError, match="none of the demos of .* ends in success both by its "
                       "stored success flags and replayed here"):  # fmt: skip
        train_rfcl(_config(tmp_path, tmp_path / "stale-all"))
    assert not (tmp_path / "runs").exists()


def test_demos_ending_where_success_slips_away_are_named(tmp_path, demo_file, capsys):
    """Cut 1 step after their first success, the maze demos end with the point still moving:
    their last action held, it leaves the goal before stage 1's first time limit (17 steps)."""
    load_demos(_config(tmp_path, demo_file, trim_success=1), _maze())
    out = capsys.readouterr().out
    for i in (0, 1):
        assert re.search(rf"warning: demo {i} of .* keeps success for \d+ steps with its last "
                         r"action held; .* judged 17 steps later", out)  # fmt: skip
    load_demos(_config(tmp_path, demo_file), _maze())  # cut 50 steps on: at rest in the goal
    assert "keeps success" not in capsys.readouterr().out
    stale = DemoSet.load(demo_file)  # demo 0 left out: the warning still names demo 1 as 1
    stale.demos[0].actions[:] = 0.0
    stale.save(tmp_path / "stale")
    load_demos(_config(tmp_path, tmp_path / "stale", trim_success=1), _maze())
    out = capsys.readouterr().out
    assert re.search(r"warning: demo 1 of .* keeps success for", out)
    assert not re.search(r"warning: demo 0 of .* keeps success for", out)


def test_demos_check_and_rfcl_count_the_same_demos_and_say_by_what(tmp_path, demo_file,
                                                                   capsys):  # fmt: skip
    """Stored flags all False while the replayed states reach the goal: `prefrl demos check`
    and `prefrl rfcl` both refuse the demos, each saying what the stored flags and the replay
    say (the check once counted the replay alone, RFCL both)."""
    from prefrl.cli import main

    stale = DemoSet.load(demo_file)
    for demo in stale.demos:
        demo.success[:] = False
    stale.save(tmp_path / "flags")
    assert main(["demos", "check", str(tmp_path / "flags")]) == 1
    out = capsys.readouterr().out
    both = "stored flags: no success at the end; replayed here: success at the end"
    assert out.count(both) == 2
    assert "0 of 2 demos end in success both by their stored flags and replayed here" in out
    assert main(["rfcl", "--demos", str(tmp_path / "flags"), "--runs-dir",
                 str(tmp_path / "runs"), "--name", "r"]) == 2  # fmt: skip
    captured = capsys.readouterr()
    assert captured.out.count(f": {both}; left out") == 2
    assert f"demo 0: {both}\n  demo 1: {both}\n(`prefrl demos check" in captured.err
    assert not (tmp_path / "runs").exists()
