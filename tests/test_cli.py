import json
import os
import signal
import subprocess
import sys
import time

import av
import pytest

from prefrl.cli import main

TOY = [
    "--env",
    "toy:point-reach",
    "--warmstart-steps",
    "200",
    "--eval-episodes",
    "2",
    "--sac.hidden-dims",
    "32",
    "32",
    "--buffer-size",
    "5000",
    "--no-progress",
]


def test_top_level_help_lists_commands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "rl" in out and "eval" in out


def test_rl_help_documents_every_flag_with_its_default(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["rl", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for flag in [
        "--env",
        "--steps",
        "--warmstart-steps",
        "--eval-interval",
        "--eval-episodes",
        "--resume",
        "--sac.discount",
        "--sac.hidden-dims",
        "--sac.critic-dropout",
        "--sac.critic-layer-norm",
        "--sac.tau",
        "--sac.actor-lr",
        "--sac.batch-size",
        "--sac.init-temperature",
        "--sac.utd-ratio",
    ]:
        assert flag in out, flag
    flat = " ".join(out.replace("│", " ").split())  # undo the help box's line wrapping
    assert "(default: HalfCheetah-v5)" in flat
    assert (
        "--sac.discount FLOAT Discount factor γ of the TD target, in [0, 1]. (default: 0.99)"
        in flat
    )
    assert "--preset" in out and "sac-mujoco" in out


def test_bad_flag_exits_with_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["rl", "--sac.discout", "0.9"])
    assert exit_info.value.code == 2
    assert "discout" in capsys.readouterr().err


def test_renamed_flags_still_work_and_say_their_new_name(capsys):
    from prefrl.cli.common import parse_config
    from prefrl.online.learner import OnlineConfig

    config = parse_config(OnlineConfig, {}, ["--agent.tau", "0.01"], "prefrl train", "")
    assert config.sac.tau == 0.01
    assert "--agent.* flags are now --sac.*" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--env", "Hoper-v5"], "Closest matches: Hopper-v5"),
        (["--sac.discount", "2"], "SACConfig.discount=2.0 is invalid"),
        (["--steps", "-1"], "--steps=-1 is invalid"),
    ],
)
def test_bad_values_are_usage_errors_that_name_them(capsys, args, expected):
    with pytest.raises(SystemExit) as exit_info:
        main(["rl", *args])
    assert exit_info.value.code == 2
    assert expected in " ".join(capsys.readouterr().err.split())


def test_unknown_preset_command_and_run_are_usage_errors(capsys, tmp_path):
    assert main(["rl", "--preset", "nope"]) == 2
    assert "prefrl rl: error: unknown --preset 'nope'; known: quickstart" in capsys.readouterr().err
    assert main(["rfcl", "--resume", str(tmp_path)]) == 2
    assert "no config.json there (not a run directory)" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err


def test_resuming_a_run_of_another_kind_names_what_made_it(capsys, tmp_path):
    """Every kind of run directory prefrl writes, resumed by a command that did not make it, is
    refused naming the command that made it and what to do with it, not its config's fields."""
    from prefrl.finetuning.learner import FinetuneConfig
    from prefrl.offline.cpl import OfflineCPLConfig
    from prefrl.rundir.config import config_to_dict

    then = "prefrl dataset queries d --queries q.json --from-run x --out l.json"
    once = (
        "run was made by prefrl offline-cpl, which does not resume runs (they are minutes "
        "long: run it again); evaluate its policy with prefrl eval {run}"
    )
    rated = (
        "a rating run made by prefrl collect, not a training run: rate its clips with "
        "prefrl rate {run}"
    )
    asked = (
        "a labelling run made by prefrl dataset queries, not a training run: label its "
        "pairs with prefrl serve {run} (or prefrl label {run}), then " + then
    )
    kinds = {  # (the config.json each command writes)
        "ocpl": (config_to_dict(OfflineCPLConfig()), once),
        "tuned": (config_to_dict(FinetuneConfig()), "run was made by prefrl finetune, which"),
        "rated": ({"env": "toy:maze", "kind": "ratings", "segments": 4}, rated),
        "asked": ({"env": "toy:maze", "dataset": "d", "queries": 4, "next": then}, asked),
    }  # fmt: skip
    for name, (config, said) in kinds.items():
        run = tmp_path / name
        run.mkdir()
        (run / "config.json").write_text(json.dumps(config))
        for command in ("rl", "train", "offline", "frames", "rfcl"):
            assert main([command, "--resume", str(run)]) == 2
            err = " ".join(capsys.readouterr().err.split())
            assert said.format(run=run) in err and "unknown" not in err, (command, err)
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(json.dumps({"runs": {}}))
    assert main(["train", "--resume", str(sweep)]) == 2
    assert "that is a sweep's directory (prefrl sweep)" in capsys.readouterr().err


def test_rl_then_eval_with_video(tmp_path, capsys):
    assert (
        main(
            [
                "rl",
                *TOY,
                "--steps",
                "600",
                "--eval-interval",
                "300",
                "--checkpoint-interval",
                "300",
                "--keep-checkpoints",
                "0",
                "--runs-dir",
                str(tmp_path),
                "--name",
                "r",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"SAC on {TOY[1]} after 600 steps: return " in out and "video:" in out
    assert main(["rl", "--resume", str(tmp_path / "r")]) == 0  # a finished run: nothing to do
    assert "at step 600: nothing left to train" in capsys.readouterr().out
    video = tmp_path / "out.mp4"
    assert main(["eval", str(tmp_path / "r"), "--episodes", "3", "--video", str(video)]) == 0
    out = capsys.readouterr().out
    assert "over 3 episodes" in out
    with av.open(str(video)) as container:
        assert container.streams.video[0].codec_context.name == "h264"
        assert sum(1 for _ in container.decode(video=0)) == 51  # reset frame + 50 steps
        width = container.streams.video[0].codec_context.width
    # Two policies (a checkpoint and the run's latest), same seeds: a row each, videos side by side.
    first = tmp_path / "r" / "checkpoints" / "step_000000300"
    both = tmp_path / "both.mp4"
    args = ["eval", str(first), str(tmp_path / "r"), "--episodes", "2", "--video", str(both)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "r step 300: evaluation return" in out and "r step 600: evaluation return" in out
    assert "left to right: r step 300, r step 600" in out
    with av.open(str(both)) as container:
        assert container.streams.video[0].codec_context.width == 2 * width + 8
    # The run's best-evaluated policy plays as a run does.
    assert main(["eval", str(tmp_path / "r" / "best"), "--episodes", "2"]) == 0
    assert "over 2 episodes" in capsys.readouterr().out


def test_the_eval_table_gives_each_policy_the_envs_own_figures(capsys):
    """`prefrl eval` on a task with its own figures (a goal's success, the piano's F1): a column
    each in the table, beside the returns, for every policy compared."""
    from types import SimpleNamespace

    import numpy as np

    from prefrl.cli.common import print_eval

    def result(success: float):
        return SimpleNamespace(returns=np.array([1.0, 3.0]), lengths=np.array([200, 200]),
                               extra={"eval/success_at_end": success})  # fmt: skip

    print_eval([result(0.25), result(0.75)], ["a", "b"], "two policies")
    table = capsys.readouterr().out.split("a: evaluation return")[0]
    assert "success" in table and "0.250" in table and "0.750" in table


def test_the_eval_table_names_policies_by_run_and_step(tmp_path):
    """A terminal-wide table: each policy by its run's folder and step, not its whole path;
    whole paths where two would read alike."""
    from prefrl.rl.compare import policy_names

    run = tmp_path / "runs" / "hopper_sac_s0"
    names = policy_names([run / "checkpoints/step_000475000",
                          run / "best/checkpoints/step_000480000", tmp_path / "elsewhere"])  # fmt: skip
    assert names == ["hopper_sac_s0 step 475,000", "hopper_sac_s0 best, step 480,000",
                     str(tmp_path / "elsewhere")]  # fmt: skip
    twins = [tmp_path / f"{a}/hopper_sac_s0/checkpoints/step_000000100" for a in "ab"]
    assert policy_names(twins) == [str(t) for t in twins]


def test_preset_then_flag_override(tmp_path, capsys):
    assert (
        main(
            [
                "rl",
                "--preset",
                "quickstart",
                *TOY,
                "--steps",
                "300",
                "--eval-interval",
                "300",
                "--no-video",
                "--runs-dir",
                str(tmp_path),
                "--name",
                "p",
            ]
        )
        == 0
    )
    import json

    config = json.loads((tmp_path / "p" / "config.json").read_text())
    assert config["env"] == "toy:point-reach"  # the flag wins over the preset
    assert config["checkpoint_interval"] == 3000  # the preset's value


def test_kill_then_resume(tmp_path):
    """SIGTERM (kill) checkpoints like Ctrl-C; --resume continues to the new --steps."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [
        sys.executable,
        "-m",
        "prefrl",
        "rl",
        *TOY,
        "--steps",
        "200000",
        "--eval-interval",
        "100000",
        "--checkpoint-interval",
        "100000",
        "--runs-dir",
        str(tmp_path),
        "--name",
        "k",
        "--no-video",
    ]
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    metrics = tmp_path / "k" / "metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (
        not metrics.exists() or "critic_loss" not in metrics.read_text()
    ):
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert "prefrl rl --resume" in out
    ckpts = [p.name for p in (tmp_path / "k" / "checkpoints").glob("step_*")]
    assert len(ckpts) == 1
    stopped_at = int(ckpts[0].removeprefix("step_"))
    assert 500 <= stopped_at < 200_000
    assert (
        main(
            [
                "rl",
                "--resume",
                str(tmp_path / "k"),
                "--steps",
                str(stopped_at + 200),
                "--eval-interval",
                "100",
            ]
        )
        == 0
    )
    assert (tmp_path / "k" / "checkpoints" / f"step_{stopped_at + 200:09d}").is_dir()


def test_eval_of_missing_run_is_a_clear_error(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_dataset_help_says_what_each_action_does(capsys):
    assert main(["dataset", "--help"]) == 0
    out = capsys.readouterr().out
    assert "import-d4rl" in out and "Import a D4RL-layout HDF5 file" in out
    assert "info" in out and "print a dataset's size" in out


def test_annotator_links_point_where_the_run_is_served(tmp_path, capsys):
    import json

    from prefrl.feedback.store import FeedbackStore
    from prefrl.web.app import record_address

    (tmp_path / "config.json").write_text(json.dumps({"env": "toy:point-reach"}))
    FeedbackStore(tmp_path).close()
    assert main(["annotators", "list", "--run-dir", str(tmp_path)]) == 0
    assert "no annotators yet: prefrl annotators add NAME" in capsys.readouterr().out
    assert main(["annotators", "add", "alice", "--run-dir", str(tmp_path)]) == 0
    assert "http://127.0.0.1:8000/compare?token=" in capsys.readouterr().out
    assert main(["annotators", "add", "bob", "--run-dir", str(tmp_path), "--url",
                 "http://myhost:8000"]) == 0  # fmt: skip
    assert "bob: http://myhost:8000/compare?token=" in capsys.readouterr().out
    record_address(tmp_path, "http://127.0.0.1:8123")  # what `prefrl serve --port 8123` does
    with FeedbackStore(tmp_path) as store:
        store.add_annotator("local")  # (what the server makes for its own page)
    assert main(["annotators", "list", "--run-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "alice: http://127.0.0.1:8123/compare?token=" in out
    assert "bob: http://myhost:8000/compare?token=" in out  # (the link bob was given)
    assert "local: whoever labels on the page served on 127.0.0.1 (no link)" in out
    assert "local: http" not in out
    rating_run = tmp_path / "ratings"  # (a rating run's page is /rate)
    rating_run.mkdir()
    (rating_run / "config.json").write_text(json.dumps({"env": "toy:point-reach",
                                                        "kind": "ratings"}))  # fmt: skip
    FeedbackStore(rating_run).close()
    assert main(["annotators", "add", "cleo", "--run-dir", str(rating_run)]) == 0
    assert "cleo: http://127.0.0.1:8000/rate?token=" in capsys.readouterr().out


def test_every_preset_makes_a_config_of_its_commands_kind():
    """Some presets are made on first use (the piano's check their song, a slow import): each
    must still make a valid config, and be made once."""
    from prefrl import presets
    from prefrl.demos.rfcl import RFCLConfig
    from prefrl.offline.learner import OfflineConfig
    from prefrl.online.learner import OnlineConfig
    from prefrl.pixels.preferences import FramePreferenceConfig
    from prefrl.rl.config import RLConfig

    families = [(presets.RL_PRESETS, RLConfig), (presets.ONLINE_PRESETS, OnlineConfig),
                (presets.OFFLINE_PRESETS, OfflineConfig), (presets.RFCL_PRESETS, RFCLConfig),
                (presets.FRAME_PRESETS, FramePreferenceConfig)]  # fmt: skip
    for family, kind in families:
        for name, preset in family.items():
            assert isinstance(preset.config, kind), name
            assert preset.config is preset.config, name
    assert callable(presets.RL_PRESETS["robopianist-debug"].settings)  # (made lazily)
    assert presets.RL_PRESETS["robopianist-debug"].config.env.startswith("robopianist:debug-")


def test_a_persons_labels_are_said_to_be_theirs_not_a_teachers(monkeypatch, tmp_path):
    """`prefrl train`'s last lines: who gave the labels (a person, not "the web teacher"), and
    where, by the store's record (a person may label in the browser and the terminal)."""
    from collections import Counter
    from types import SimpleNamespace

    from prefrl.cli import train as cli_train
    from prefrl.feedback import TeacherConfig, run_labels

    (tmp_path / "config.json").write_text("{}")
    result = SimpleNamespace(labels=12, run_dir=tmp_path)
    for preset, sources, said in [
        ("web", {"web": 12}, "12 from you (12 in the browser)"),
        ("web", {"web": 9, "terminal": 3}, "12 from you (3 in the terminal, 9 in the browser)"),
        ("terminal", {"terminal": 12}, "12 from you (12 in the terminal)"),
        ("oracle", {"oracle": 12}, "12 from the oracle teacher"),
        ("web", {"web": 8, "import:run-a": 4},
         ("12, 4 of them loaded from other runs (prefrl labels import) and 8 from you (8 in "
          "the browser)")),
    ]:  # fmt: skip
        monkeypatch.setattr(
            run_labels, "label_sources", lambda run_dir, store, s=sources: Counter(s)
        )
        config = SimpleNamespace(teacher=TeacherConfig(preset=preset), store=None)
        assert cli_train._label_origins(result, config) == said
