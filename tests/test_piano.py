"""The piano: robopianist envs with task flags, key-press metrics, clips and videos with sound,
MIDI tools. Songs are small MIDI files made here (no copyrighted music in the repo)."""

from __future__ import annotations

import shutil
import sys

import av
import numpy as np
import pytest

pytest.importorskip("robopianist", reason="the piano extra is not installed")
pretty_midi = pytest.importorskip("pretty_midi")

from prefrl.cli import main
from prefrl.envs import make_env
from prefrl.envs.piano_task import key_press_metrics
from prefrl.feedback.clips import ClipRenderer
from prefrl.render.audio import SAMPLE_RATE, key_notes, keys_audio


def write_song(path, pitches=(60, 62, 64, 65), step=0.5, start=0.0, pedal=None):
    """One note per `step` seconds from `start`; `pedal`: (down, up) seconds of sustain."""
    midi = pretty_midi.PrettyMIDI()
    piano = pretty_midi.Instrument(0)
    for i, pitch in enumerate(pitches):
        t = start + i * step
        piano.notes.append(pretty_midi.Note(90, pitch, t, t + 0.9 * step))
    if pedal is not None:
        piano.control_changes += [pretty_midi.ControlChange(64, 127, pedal[0]),
                                  pretty_midi.ControlChange(64, 0, pedal[1])]  # fmt: skip
    midi.instruments.append(piano)
    midi.write(str(path))
    return path


@pytest.fixture
def song(tmp_path):
    return write_song(tmp_path / "song.mid")


def test_importing_the_piano_prints_nothing_even_on_ci():
    """pyfluidsynth prints where it found the library when $CI is set; commands whose output is
    read by people or scripts (`prefrl annotators add`) must not carry that line."""
    import os
    import subprocess

    code = "from prefrl.envs.piano_task import piano_installed; assert piano_installed()"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "CI": "1"},
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert out.stdout == ""


def test_piano_env_flags_state_restore_and_episode_metrics(song):
    env = make_env(
        f"robopianist:{song} --control-timestep 0.1 --n-steps-lookahead 2 --attachment-yaw 5",
        seed=0,
    )
    # 2 s of song at 10 steps/s; goal (3 x 89) + fingering + piano + hands + last action/reward.
    assert env.max_episode_steps == 20 and env.fps == 10.0
    assert env.action_space.low.min() == -1 and env.action_space.high.max() == 1
    lean = make_env(f"robopianist:{song} --no-action-reward-observation --n-steps-lookahead 2")
    assert env.obs_dim == lean.obs_dim + env.action_dim + 1
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (20, env.action_dim))
    env.reset(seed=0)
    for a in actions[:5]:
        env.step(a)
    state = env.get_state()
    first = [env.step(a) for a in actions[5:]]
    assert env.set_state(state).shape == (env.obs_dim,)
    again = [env.step(a) for a in actions[5:]]
    for (o1, r1, *_), (o2, r2, *_) in zip(first, again, strict=True):
        np.testing.assert_array_equal(o1, o2)
        assert r1 == r2
    *_, truncated, info = first[-1]
    assert truncated  # the song's end is a time limit, not a failure
    metrics = info["episode_metrics"]
    assert set(metrics) == {"precision", "recall", "f1"} and 0 <= metrics["f1"] <= 1
    base = env.unwrapped
    expected = key_press_metrics(base.pressed_keys(), base.target_keys())
    assert metrics == expected


def test_key_press_metrics_are_robopianists_definitions():
    from sklearn.metrics import precision_recall_fscore_support

    rng = np.random.default_rng(1)
    pressed = rng.random((50, 88)) < 0.03
    target = rng.random((50, 88)) < 0.03
    target[:5] = False  # steps with nothing to press
    pressed[:3] = False  # ... and nothing pressed
    expected = np.mean(
        [precision_recall_fscore_support(t, p, average="binary", zero_division=1)[:3]
         for t, p in zip(target, pressed, strict=True)], axis=0,
    )  # fmt: skip
    got = key_press_metrics(pressed, target)
    np.testing.assert_allclose([got["precision"], got["recall"], got["f1"]], expected)
    perfect = key_press_metrics(target, target)
    assert perfect == {"precision": 1.0, "recall": 1.0, "f1": 1.0}


def test_bad_piano_ids_say_what_is_wrong(tmp_path, song, monkeypatch):
    (tmp_path / "text.mid").write_text("not midi")
    empty = pretty_midi.PrettyMIDI()
    empty.instruments.append(pretty_midi.Instrument(0))
    empty.write(str(tmp_path / "empty.mid"))
    cases = {
        f"robopianist:{tmp_path / 'missing.mid'}": "does not exist",
        f"robopianist:{tmp_path / 'text.mid'}": "could not be read as MIDI",
        f"robopianist:{tmp_path / 'empty.mid'}": "has no notes",
        "robopianist:twinkle": "not a bundled song",
        f"robopianist:{song} --no-such-flag": "bad task flags",
        f"robopianist:{song} --physics-timestep 0.1": "physics-timestep|bad task flags",
    }
    for env_id, message in cases.items():
        with pytest.raises((ValueError, FileNotFoundError), match=message):
            make_env(env_id)
    # Without the piano extra, configs naming piano tasks (the presets) still load; making the
    # env gives the install command.
    from prefrl.rl.config import RLConfig

    for name in ("robopianist", "robopianist.music", "robopianist.suite"):
        monkeypatch.setitem(sys.modules, name, None)
    assert RLConfig(env="robopianist:debug-TwinkleTwinkleRousseau").env.startswith("robopianist")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        RLConfig(env=f"robopianist:{tmp_path / 'missing.mid'}")
    with pytest.raises(ImportError, match=r"pip install 'prefrl\[piano\]'"):
        make_env(f"robopianist:{song}")


def test_clip_audio_sounds_when_keys_are_down():
    pressed = np.zeros((40, 88), bool)
    pressed[10:20, 39] = True  # middle C (pitch 60) from 0.5 s to 1.0 s at 20 fps
    assert key_notes(pressed, 20.0) == [(60, 0.5, 1.0, 80)]
    audio = keys_audio(pressed, 20.0)
    assert audio.dtype == np.int16 and len(audio) == 2 * SAMPLE_RATE
    loudness = [np.abs(audio[int(a * SAMPLE_RATE) : int(b * SAMPLE_RATE)]).mean()
                for a, b in ((0.0, 0.5), (0.5, 1.0))]  # fmt: skip
    assert loudness[0] < 2 and loudness[1] > 100  # (FluidSynth dithers the silence slightly)


def test_eval_video_and_labelling_clips_carry_the_sound(tmp_path, song):
    env_id = f"robopianist:{song} --control-timestep 0.1"
    env = make_env(env_id, seed=0)
    env.reset(seed=0)
    states = []
    for _ in range(10):
        states.append(env.get_state())
        env.step(np.zeros(env.action_dim))
    renderer = ClipRenderer(env_id, size=64)
    assert renderer.write(tmp_path / "clip.mp4", np.stack(states)) == 10
    renderer.close()
    with av.open(str(tmp_path / "clip.mp4")) as f:
        kinds = sorted(s.codec_context.name for s in f.streams)
        assert kinds == ["aac", "h264"]
        assert f.streams.audio[0].codec_context.sample_rate == SAMPLE_RATE
    # Training on the piano logs F1 with every evaluation; the eval video has the sound.
    args = ["rl", "--env", env_id, "--steps", "40", "--warmstart-steps", "20", "--eval-interval",
            "40", "--eval-episodes", "1", "--render-size", "64", "--runs-dir", str(tmp_path),
            "--name", "piano", "--no-progress", "--sac.hidden-dims", "32", "32"]  # fmt: skip
    assert main(args) == 0
    rows = (tmp_path / "piano" / "metrics.jsonl").read_text()
    assert '"eval/f1_mean"' in rows and '"eval/precision_mean"' in rows
    video = next((tmp_path / "piano" / "videos").glob("*.mp4"))
    with av.open(str(video)) as f:
        assert len(f.streams.audio) == 1


def test_midi_tools(tmp_path, capsys, song):
    assert main(["midi", "info", str(song)]) == 0
    out = capsys.readouterr().out
    assert "1.95 s, 4 notes" in out and "C4" in out and "F4" in out
    # The middle 1 s of the 1.95 s song, 0.475-1.475 s, holds the 2nd and 3rd notes.
    clipped = tmp_path / "middle.mid"
    assert main(["midi", "clip", str(song), "--out", str(clipped), "--middle", "1"]) == 0
    notes = pretty_midi.PrettyMIDI(str(clipped)).instruments[0].notes
    assert [n.pitch for n in notes] == [62, 64]
    assert notes[0].start == pytest.approx(0.025, abs=0.01)
    # Notes crossing a bound are cut at it: 0.2-1.2 s.
    assert main(["midi", "clip", str(song), "--out", str(clipped), "--start", "0.2", "--end",
                 "1.2"]) == 0  # fmt: skip
    notes = pretty_midi.PrettyMIDI(str(clipped)).instruments[0].notes
    spans = [(n.pitch, round(n.start, 2), round(n.end, 2)) for n in notes]
    assert spans == [(60, 0.0, 0.25), (62, 0.3, 0.75), (64, 0.8, 1.0)]
    # The held pedal carries into a window, and rendering makes a playable file.
    pedalled = write_song(tmp_path / "pedal.mid", pedal=(0.2, 1.2))
    assert main(["midi", "clip", str(pedalled), "--out", str(clipped), "--start", "0.6"]) == 0
    ccs = pretty_midi.PrettyMIDI(str(clipped)).instruments[0].control_changes
    assert (ccs[0].number, ccs[0].value, ccs[0].time) == (64, 127, 0.0)
    for name in ("song.wav", "song.m4a"):
        assert main(["midi", "render", str(song), "--out", str(tmp_path / name)]) == 0
    with av.open(str(tmp_path / "song.m4a")) as f:
        assert f.streams.audio[0].codec_context.name == "aac"
        assert float(f.duration) / 1e6 == pytest.approx(2.95, abs=0.1)  # the song + 1 s tail
    capsys.readouterr()
    # Bad input: a window outside the song, two ways of naming one, a missing file.
    assert main(["midi", "clip", str(song), "--out", str(clipped), "--start", "3"]) == 2
    assert "outside the song (0 to 1.95 s)" in capsys.readouterr().err
    assert (
        main(["midi", "clip", str(song), "--out", str(clipped), "--first", "1", "--last", "1"]) == 2
    )
    assert "one way" in capsys.readouterr().err
    assert main(["midi", "info", str(tmp_path / "none.mid")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_piano_raters_and_the_cpl_workflow(tmp_path, song, capsys):
    """Pre-train on a song -> clips (with sound) from checkpoints x noise -> the F1 rater ->
    CPL -> evaluation of both policies with F1, as the README's RoboPianist workflow."""
    import dataclasses

    from prefrl.agents.cpl import CPLConfig
    from prefrl.data.segments import Label
    from prefrl.feedback.raters import rate_scripted, segment_scores
    from prefrl.finetuning.learner import FinetuneConfig, finetune
    from prefrl.finetuning.rating_runs import make_rating_run, policy_segments
    from prefrl.presets import RL_PRESETS
    from prefrl.rl.config import RLConfig
    from prefrl.rl.learner import train_rl

    env_id = f"robopianist:{song} --control-timestep 0.1"
    # The stored states replay the keys the episode pressed, one step behind the history.
    env = make_env(env_id, seed=0)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    states = []
    for _ in range(15):
        states.append(env.get_state())
        env.step(rng.uniform(-1, 1, env.action_dim))
    history = env.unwrapped.pressed_keys()
    pressed, target = env.unwrapped.keys_of_states(np.stack(states))
    np.testing.assert_array_equal(pressed[1:], history[:-1])
    np.testing.assert_array_equal(target[1:], env.unwrapped.target_keys()[:14])

    config = dataclasses.replace(
        RL_PRESETS["robopianist-debug"].config, env=env_id, steps=60, warmstart_steps=30,
        eval_interval=30, checkpoint_interval=30, keep_checkpoints=0, video=False,
        progress=False, runs_dir=tmp_path, name="sac", sac=RLConfig().sac,
    )  # fmt: skip
    run = train_rl(config).run_dir
    ckpts = sorted((run / "checkpoints").glob("step_*"))
    segments, infos = policy_segments(ckpts, [0.0, 0.5], count=8, length=5)
    rating_run = make_rating_run(tmp_path / "rate", env_id, segments, infos, 32)
    clip = next((rating_run / "clips").glob("*.mp4"))
    with av.open(str(clip)) as f:
        assert len(f.streams.audio) == 1
    f1 = segment_scores(segments, "piano-f1", env_id)
    wrong = segment_scores(segments, "piano-wrong-keys", env_id)
    assert f1.shape == wrong.shape == (8,) and (0 <= f1).all() and (f1 <= 1).all()
    assert (wrong <= 0).all()
    with pytest.raises(ValueError, match="judges piano segments"):
        segment_scores(segments, "piano-f1", "Hopper-v5")
    # The online teacher judging by F1 agrees with the F1 rater on every decided pair.
    from prefrl.feedback.teachers import Query, ScriptedTeacher, TeacherConfig

    teacher = ScriptedTeacher(TeacherConfig("oracle", judge="piano-f1"), 0, None, env_id)
    left, right = np.arange(4), np.arange(4, 8)
    teacher.submit(Query(np.arange(4), segments[left], segments[right]))
    labels = [a.label for a in teacher.poll()]
    for label, a, b in zip(labels, f1[left], f1[right], strict=True):
        assert label == (Label.EQUAL if a == b else Label.RIGHT if b > a else Label.LEFT)
    with pytest.raises(ValueError, match="judge='loudness' is invalid"):
        TeacherConfig("oracle", judge="loudness")
    assert rate_scripted(rating_run, "piano-f1") == 8
    result = finetune(FinetuneConfig(policy=run, ratings=rating_run, steps=10, eval_episodes=1,
                                     runs_dir=tmp_path, name="cpl", cpl=CPLConfig(batch_size=4)))  # fmt: skip
    assert np.isfinite(result.final_eval.returns).all()
    # Fine-tuning and eval report the piano's own figure, key-press F1, beside the returns.
    m = result.details["metrics"]
    assert 0 <= m["eval/f1_mean"] <= 1 and 0 <= m["start/f1_mean"] <= 1
    assert main(["eval", str(run), str(result.run_dir), "--episodes", "1", "--render-size", "64",
                 "--video", str(tmp_path / "both.mp4")]) == 0  # fmt: skip
    assert capsys.readouterr().out.count("f1_mean: ") == 2  # each policy's
    with av.open(str(tmp_path / "both.mp4")) as f:
        assert f.streams.audio[0].codec_context.channels == 2  # each policy on its side


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian chromium not installed")
def test_rating_page_plays_piano_clips_with_sound_in_chromium(tmp_path):
    """A person rates by ear: Chromium decodes the clip's AAC track once Listen is pressed."""
    from conftest import launch_chromium, served
    from playwright.sync_api import sync_playwright

    from prefrl.feedback.store import FeedbackStore, run_info
    from prefrl.finetuning.rating_runs import make_rating_run, random_segments
    from prefrl.web.app import create_app

    # Four notes a step apart at 10 steps/s; random hands press keys now and then.
    env_id = f"robopianist:{write_song(tmp_path / 'song.mid')} --control-timestep 0.1"
    segments = random_segments(env_id, count=2, length=15)[:2]
    rating_run = make_rating_run(tmp_path / "rate", env_id, segments, [{}, {}], 96)
    run = run_info(rating_run)
    with served(create_app(run)) as port, sync_playwright() as p:
        browser = launch_chromium(p, "--autoplay-policy=no-user-gesture-required")
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{port}/rate")
        page.wait_for_function("document.querySelectorAll('#clips video').length == 2")
        page.wait_for_function("document.querySelector('#clips video').readyState >= 2")
        page.locator("#clips figure").first.locator(".listen").click()
        page.wait_for_function(
            "(() => { const v = document.querySelectorAll('#clips video');"
            " return !v[0].muted && v[1].muted && v[0].webkitAudioDecodedByteCount > 0; })()",
            timeout=20_000,
        )
        page.locator("#clips figure").first.locator(".save").click()
        page.wait_for_function("document.querySelectorAll('#clips video').length == 1")
        browser.close()
    with FeedbackStore(run.store) as store:
        assert len(store.ratings(store.run_id(run.uid))) == 1
