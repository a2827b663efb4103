"""Learning from frames: A2C and PPO (returns, chunked updates, resume, env workers) and the
preference loop on frames (labels, fits, gather-only and pretrain-only runs, a person)."""

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest

from prefrl.agents.a2c import nstep_returns
from prefrl.data import PreferenceData
from prefrl.feedback.store import FeedbackStore, NotFound, run_uid


def test_nstep_returns():
    reward = jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    done = jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    returns = nstep_returns(reward, done, jnp.array([10.0, 20.0]), 0.5)
    # env 0: the episode ends after step 1, so steps 0-1 do not see the bootstrap.
    np.testing.assert_allclose(returns[:, 0], [1.0, 0.0, 1.0 + 0.5 * 10.0])
    np.testing.assert_allclose(returns[:, 1], [0.5 * 6.0, 1.0 + 0.5 * 10.0, 0.5 * 20.0])


def _small_a2c():
    from prefrl.agents.a2c import A2CConfig

    return A2CConfig(n_envs=4, n_steps=5)


def test_a2c_run_on_frames_resumes(tmp_path):
    from prefrl.rl.config import RLConfig
    from prefrl.rl.learner import train_rl
    from prefrl.rundir.metrics import read_metrics

    config = RLConfig(env="movingdot", algo="a2c", steps=200, eval_interval=200, eval_episodes=1,
                      video=False, checkpoint_interval=100, log_interval=100, a2c=_small_a2c(),
                      runs_dir=tmp_path, name="a2c", progress=False)  # fmt: skip
    first = train_rl(config)
    assert first.steps == 200 and first.final_eval.lengths[0] == 250
    more = train_rl(replace_config(config, steps=400, resume=tmp_path / "a2c"))
    assert more.steps == 400
    rows = read_metrics(tmp_path / "a2c")
    assert [r["step"] for r in rows if "eval/return_mean" in r] == [200, 400]
    assert any("train/policy_loss" in r for r in rows)


def test_eval_videos_of_frames_are_enlarged_at_the_games_frame_rate(tmp_path):
    """Every emulator frame of the episode (1 + 4 per agent step) at 60 frames/s, each screen
    pixel a uniform 2x2 block (420x320 at the default --render-size 256)."""
    import av

    from prefrl.rl.config import RLConfig
    from prefrl.rl.learner import train_rl

    config = RLConfig(env="movingdot", algo="a2c", steps=20, eval_interval=20, eval_episodes=1,
                      log_interval=20, a2c=_small_a2c(), runs_dir=tmp_path, name="video",
                      progress=False)  # fmt: skip
    result = train_rl(config)
    with av.open(str(result.video)) as f:
        stream = f.streams.video[0]
        assert (stream.width, stream.height, stream.average_rate) == (320, 420, 60)
        frames = [x.to_ndarray(format="rgb24").astype(int) for x in f.decode(video=0)]
    assert len(frames) == 1 + 4 * 250  # (MovingDot's episodes: 250 agent steps)
    for frame in frames[::50]:
        blocks = frame.reshape(210, 2, 160, 2, 3)
        assert (blocks.max((1, 3)) - blocks.min((1, 3))).max() <= 16  # (H.264's noise)
        rows, cols = np.nonzero(frame.min(-1) > 128)
        assert np.ptp(rows) + 1 == 8 and np.ptp(cols) + 1 == 8  # (the 4x4 dot)


def test_a2c_with_env_workers_learns_as_with_envs_here(tmp_path):
    """The envs stepped in two worker processes: the same steps, so the same losses."""
    from prefrl.rl.config import RLConfig
    from prefrl.rl.learner import train_rl
    from prefrl.rundir.metrics import read_metrics

    losses = []
    for workers in (0, 2):
        config = RLConfig(env="movingdot", algo="a2c", steps=160, eval_interval=160,
                          eval_episodes=1, video=False, log_interval=80, a2c=_small_a2c(),
                          env_workers=workers, runs_dir=tmp_path, name=f"w{workers}",
                          progress=False)  # fmt: skip
        assert train_rl(config).steps == 160
        rows = read_metrics(tmp_path / f"w{workers}")
        losses.append([r["train/policy_loss"] for r in rows if "train/policy_loss" in r])
    assert len(losses[0]) == 2
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match=r"env-workers=2 is invalid: expected 0 for one env of "
                       r"states \(Pendulum-v1\): worker processes step several, with --envs N"):  # fmt: skip
        RLConfig(env="Pendulum-v1", env_workers=2)


def replace_config(config, **changes):
    import dataclasses

    return dataclasses.replace(config, **changes)


def test_frame_algos_and_envs_must_fit():
    from prefrl.rl.config import RLConfig

    with pytest.raises(ValueError, match="a2c, ppo for movingdot, an env of frames"):
        RLConfig(env="movingdot", algo="sac")
    with pytest.raises(ValueError, match="a2c is for envs of frames"):
        RLConfig(env="Pendulum-v1", algo="a2c")
    from prefrl.pixels.preferences import FramePreferenceConfig

    with pytest.raises(ValueError, match="state envs: prefrl train"):
        FramePreferenceConfig(env="Hopper-v5")
    with pytest.raises(ValueError, match=r"initial.labels.*between 1 and --labels \(10\)"):
        FramePreferenceConfig(initial_labels=20, labels=10)
    with pytest.raises(ValueError, match="web.port.*1-65535"):
        FramePreferenceConfig(web_port=70000)


def test_the_pong_presets_have_the_papers_settings():
    """Christiano et al. 2017 on Atari: 16 envs x 5 steps of A2C, clips of 25 steps, 500
    random-policy labels of 5.5k, batches of 32 pairs, dropout 0.5, and the reward model
    processing about one labelled pair per 10 agent steps; pong-ppo the same with PPO's
    longer updates, in 5M agent steps."""
    from prefrl.presets import FRAME_PRESETS

    def pairs_per_agent_step(c) -> float:
        per_update = c.agent.n_envs * c.agent.n_steps
        return c.reward.steps_per_fit * c.reward.batch_size / (c.fit_every * per_update)

    c = FRAME_PRESETS["pong"].config
    assert c.algo == "a2c" and pairs_per_agent_step(c) == pytest.approx(0.1)
    assert (c.a2c.n_envs * c.a2c.n_steps, c.segment_length, c.initial_labels, c.labels) == (
        80, 25, 500, 5500)  # fmt: skip
    assert (c.reward.batch_size, c.reward.dropout) == (32, 0.5)
    ppo = FRAME_PRESETS["pong-ppo"].config
    assert ppo.algo == "ppo" and ppo.steps == 5_000_000
    assert pairs_per_agent_step(ppo) == pytest.approx(0.1, rel=0.05)  # (20 x 32 / 6,144)
    assert (ppo.reward, ppo.labels, ppo.segment_length) == (c.reward, c.labels, c.segment_length)


def test_preferences_on_frames_label_and_fit(tmp_path):
    from prefrl.pixels.preferences import FramePreferenceConfig, train_frames_from_preferences
    from prefrl.reward.frames import FrameRewardConfig
    from prefrl.rundir.metrics import read_fit_scatter, read_metrics

    config = FramePreferenceConfig(
        steps=400, segment_length=5, initial_labels=8, pretrain_steps=2, labels=16, fit_every=5,
        pool_size=20, a2c=_small_a2c(), reward=FrameRewardConfig(batch_size=4, steps_per_fit=2),
        eval_interval=400, eval_episodes=1, video=False, checkpoint_interval=200,
        log_interval=100, runs_dir=tmp_path, name="prefs", progress=False,
    )  # fmt: skip
    result = train_frames_from_preferences(config)
    assert result.steps == 400
    rows = read_metrics(tmp_path / "prefs")
    assert rows[0]["pretrain/random_steps"] >= 20
    labelled = [r["labels/total"] for r in rows if "labels/total" in r]
    assert labelled and labelled[-1] == 16  # the budget, spread over the fits
    assert np.isfinite([r["reward/train_loss"] for r in rows if "reward/train_loss" in r]).all()
    scatter = read_fit_scatter(tmp_path / "prefs")  # (the run page's: the last fit's clips)
    assert scatter["step"] == [r["step"] for r in rows if "reward/clip_return_corr" in r][-1]
    assert len(scatter["true"]) == len(scatter["learned"]) == 20
    ckpt = tmp_path / "prefs" / "checkpoints"
    latest = ckpt / (ckpt / "latest").read_text().strip()
    assert (latest / "reward_model" / "config.json").exists() and (latest / "labels.npz").exists()
    with FeedbackStore(tmp_path / "prefs") as store:  # the store is the record
        run_id = store.run_id(run_uid(tmp_path / "prefs"), create=False)
        assert sum(store.label_counts(run_id).values()) == 16
    more = train_frames_from_preferences(replace_config(
        config, steps=800, labels=24, resume=tmp_path / "prefs"))  # fmt: skip
    assert more.steps == 800
    with FeedbackStore(tmp_path / "prefs") as store:
        keys = [q.key for q in store.open_queries(run_id)]
        assert sum(store.label_counts(run_id).values()) == 24 and keys == []
    # A new run trains on the first one's 24 labels from its pre-training on, beside its own 8
    # (its envs in two worker processes: its clips' start states come from there).
    loaded = train_frames_from_preferences(replace_config(
        config, steps=100, name="loaded", load_labels=tmp_path / "prefs", env_workers=2))  # fmt: skip
    with FeedbackStore(loaded.run_dir) as store:
        stored = store.labels(store.run_id(run_uid(loaded.run_dir), create=False))
    assert len([x for x in stored if x.source.startswith("import:")]) == 24
    ckpt = loaded.run_dir / "checkpoints"
    trained_on = PreferenceData.load(ckpt / (ckpt / "latest").read_text().strip() / "labels.npz")
    assert len(trained_on) == len(stored) >= 24 + 8


def test_clips_are_paired_once_each_in_either_order(tmp_path):
    """A pool of 3 clips holds 3 pairs: asked for 3, each comes once."""
    from prefrl.feedback.teachers import TeacherConfig
    from prefrl.pixels.preferences import FramePreferenceConfig, train_frames_from_preferences

    config = FramePreferenceConfig(
        steps=40, segment_length=5, initial_labels=3, labels=3, pool_size=3, a2c=_small_a2c(),
        teacher=TeacherConfig("terminal"), stop_after="gather", video=False, runs_dir=tmp_path,
        name="pairs", progress=False,
    )  # fmt: skip
    run = train_frames_from_preferences(config)
    with FeedbackStore(run.run_dir) as store:
        run_id = store.run_id(run_uid(run.run_dir), create=False)
        assert len(store.open_queries(run_id)) == 3
        assert len(store.asked_pairs(run_id)) == 3


def test_clips_frames_are_stored_deflated_and_read_back_as_recorded(tmp_path):
    """The store's clip files, the pool and the labelled pairs of a checkpoint: frames (uint8)
    are deflated (MovingDot's black frames to a small share of their size), floats stored as
    they are, and all of it reads back equal."""
    import zipfile

    from prefrl.data.frame_clips import FrameClipRecorder
    from prefrl.data.segments import SegmentPool, Segments, load_segments, save_segments
    from prefrl.envs import FrameVectorEnv, make_pixel_env
    from prefrl.envs.pool import seeded

    envs = FrameVectorEnv(seeded(make_pixel_env, "movingdot", 0), 4)
    recorder, rng = FrameClipRecorder(4, 10), np.random.default_rng(0)
    obs, clips = envs.reset(), []
    for t in range(30):
        states = envs.get_states(np.flatnonzero(recorder.starting()))
        action = rng.integers(0, envs.n_actions, 4)
        nxt, reward, term, trunc, _ = envs.step(action)
        clips += recorder.record(4 * t, obs, action, reward, term | trunc, states)
        obs = nxt
    envs.close()
    segments = Segments.concatenate(clips)
    assert len(segments) == 12 and segments.obs.dtype == np.uint8

    save_segments(tmp_path / "clips.npz", segments)
    with zipfile.ZipFile(tmp_path / "clips.npz") as npz:
        frames, actions = npz.getinfo("obs.npy"), npz.getinfo("action.npy")
    assert frames.compress_type == zipfile.ZIP_DEFLATED
    assert frames.compress_size < segments.obs.nbytes / 10
    assert actions.compress_type == zipfile.ZIP_STORED
    loaded = load_segments(tmp_path / "clips.npz")
    for field in dataclasses.fields(Segments):
        want, got = getattr(segments, field.name), getattr(loaded, field.name)
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), field.name

    labels = PreferenceData()
    labels.add(segments[:6], segments[6:], [0, 1, 2, 0, 1, 3])
    labels.save(tmp_path / "labels.npz")
    for name, array in PreferenceData.load(tmp_path / "labels.npz").arrays().items():
        assert np.array_equal(array, labels.arrays()[name]), name
    pool = SegmentPool(20)
    pool.add(segments)
    pool.save(tmp_path / "pool.npz")
    assert np.array_equal(SegmentPool.load(tmp_path / "pool.npz").all().obs, segments.obs)
    assert (tmp_path / "pool.npz").stat().st_size < segments.obs.nbytes / 5


def test_gather_only_and_pretrain_only_runs_go_on_when_resumed(tmp_path):
    """The seed's workflow in pieces: clips asked about with nobody waiting, labelled later
    (here straight into the store), then pre-training, then the agent."""
    from prefrl.feedback.teachers import TeacherConfig
    from prefrl.pixels.preferences import FramePreferenceConfig, train_frames_from_preferences
    from prefrl.reward.frames import FrameRewardConfig
    from prefrl.rundir.metrics import read_metrics

    config = FramePreferenceConfig(
        steps=40, segment_length=5, initial_labels=4, pretrain_steps=1, labels=4, pool_size=8,
        a2c=_small_a2c(), reward=FrameRewardConfig(batch_size=2, steps_per_fit=1),
        teacher=TeacherConfig("terminal"), stop_after="gather", eval_interval=40,
        eval_episodes=1, video=False, log_interval=40, runs_dir=tmp_path, name="pieces",
        progress=False,
    )  # fmt: skip
    gathered = train_frames_from_preferences(config)  # (a person's teacher: it does not wait)
    assert gathered.steps == 0 and gathered.final_eval is None
    with FeedbackStore(gathered.run_dir) as store:
        run_id = store.run_id(run_uid(gathered.run_dir), create=False)
        asked = store.open_queries(run_id)
        assert len(asked) == 4
        for q, label in zip(asked, ("left", "right", "left", "equal"), strict=True):
            store.add_label(q.id, label, source="web")
    pretrained = train_frames_from_preferences(replace_config(
        config, stop_after="pretrain", resume=gathered.run_dir))  # fmt: skip
    assert pretrained.steps == 0 and pretrained.final_eval is None
    assert "reward/train_loss" in read_metrics(gathered.run_dir)[-1]
    assert not (gathered.run_dir / "phase.json").exists()  # (`prefrl runs`' only while it runs)
    done = train_frames_from_preferences(replace_config(
        config, stop_after=None, resume=gathered.run_dir))  # fmt: skip
    assert done.steps == 40 and done.final_eval is not None
    fits = [r for r in read_metrics(gathered.run_dir) if "pretrain/seconds" in r]
    assert len(fits) == 1  # pre-trained once: the last resume went straight to the agent
    # The checkpoint viewer: an episode in colour with the learned reward drawn under it.
    import av

    from prefrl.cli import main
    from prefrl.pixels.viewer import GRAPH_HEIGHT

    assert main(["eval", str(done.run_dir), "--video", str(tmp_path / "view.mp4")]) == 0
    with av.open(str(tmp_path / "view.mp4")) as f:
        frames = [x.to_ndarray(format="rgb24") for x in f.decode(video=0)]
    strip = frames[-1][-GRAPH_HEIGHT:].astype(int)
    trace = (strip[..., 0] > 180) & (strip[..., 1] > 140) & (strip[..., 2] < 130)
    assert len(frames) >= 4 and trace.sum() >= 10  # the reward's trace, drawn in its colour
    assert frames[-1].shape[0] > GRAPH_HEIGHT + 100  # (the game above it, scaled up)
    with pytest.raises(ValueError, match="--stop-after.*gather, pretrain or None"):
        replace_config(config, stop_after="labels")


def test_an_interrupted_frames_run_says_how_to_resume(tmp_path, monkeypatch, capsys):
    """Ctrl-C after the agent started: the command names --resume, not --stop-after."""
    from prefrl.cli import main
    from prefrl.pixels import preferences as frames_prefs
    from prefrl.training.result import TrainResult

    stopped = TrainResult(tmp_path / "run", 20_000, interrupted=True)
    monkeypatch.setattr(frames_prefs, "train_frames_from_preferences", lambda config: stopped)
    assert main(["frames", "--steps", "100000"]) == 130
    out = capsys.readouterr().out
    assert f"continue with: prefrl frames --resume {tmp_path / 'run'}" in out
    assert "--stop-after" not in out


def test_reward_graph_is_labelled_and_its_trace_keeps_clear_of_the_labels():
    from prefrl.pixels.viewer import FONT_SIZE, GRAPH_HEIGHT, MARGIN, TRACE, reward_graph

    trace = np.sin(np.arange(100) / 5.0) * 0.05
    graph = reward_graph(trace, 60, 320)
    assert graph.shape == (GRAPH_HEIGHT, 320, 3) and graph.dtype == np.uint8
    drawn = (graph == TRACE).all(-1)
    rows = np.nonzero(drawn.any(1))[0]
    assert rows.min() >= MARGIN and rows.max() < GRAPH_HEIGHT - MARGIN  # (clear of the labels)
    assert not drawn[:, 200:].any()  # (60 of 100 steps drawn: the right part still empty)
    grey = graph.astype(int)
    text = (grey.min(-1) > 60) & (grey.max(-1) - grey.min(-1) < 10)  # (anti-aliased grey)
    assert text[:MARGIN].sum() > 200 and text[-MARGIN:, :80].sum() > 60
    assert text[-MARGIN:, -100:].sum() > 60
    letters = np.nonzero(text[:MARGIN].any(1))[0]  # (readable: letters of about FONT_SIZE)
    assert letters.max() - letters.min() + 1 >= FONT_SIZE * 0.7


def test_labels_of_another_game_or_frame_size_are_refused(tmp_path):
    from prefrl.feedback.exchange import _decode, _encode
    from prefrl.feedback.run_labels import export_run_labels
    from prefrl.pixels.preferences import FramePreferenceConfig, train_frames_from_preferences
    from prefrl.reward.frames import FrameRewardConfig

    config = FramePreferenceConfig(
        steps=40, segment_length=5, initial_labels=4, pretrain_steps=1, labels=4, pool_size=8,
        a2c=_small_a2c(), reward=FrameRewardConfig(batch_size=2, steps_per_fit=1),
        eval_interval=40, eval_episodes=1, video=False, log_interval=40, runs_dir=tmp_path,
        name="source", progress=False,
    )  # fmt: skip
    train_frames_from_preferences(config)
    doc = export_run_labels(tmp_path / "source", tmp_path / "labels.json")
    other = tmp_path / "pong.json"
    other.write_text(json.dumps({**doc, "env": "atari:Pong"}))
    with pytest.raises(ValueError, match="labels are of 'atari:Pong', this run is of 'movingdot'"):
        train_frames_from_preferences(replace_config(config, name="a", load_labels=other))
    obs = _decode("obs", doc["segments"]["obs"])
    smaller = tmp_path / "small.json"
    smaller.write_text(json.dumps({**doc, "segments": {**doc["segments"],
                                                       "obs": _encode(obs[:, :, :80, :80])}}))  # fmt: skip
    with pytest.raises(ValueError, match="frames of 80x80; this environment's are 84x84"):
        train_frames_from_preferences(replace_config(config, name="b", load_labels=smaller))


def test_preferences_on_frames_wait_for_a_person(tmp_path, capsys):
    """The run waits for a person's first labels; the later pairs, asked as the agent trains,
    left unanswered at its last step are said to be, in the result and its output."""
    import threading
    import time

    from prefrl.feedback.teachers import TeacherConfig
    from prefrl.pixels.preferences import FramePreferenceConfig, train_frames_from_preferences
    from prefrl.reward.frames import FrameRewardConfig

    config = FramePreferenceConfig(
        steps=100, segment_length=5, initial_labels=4, pretrain_steps=1, labels=8, fit_every=2,
        pool_size=20, a2c=_small_a2c(), reward=FrameRewardConfig(batch_size=2, steps_per_fit=1),
        teacher=TeacherConfig("terminal"), poll_seconds=0.05, eval_interval=100,
        eval_episodes=1, video=False, log_interval=100, runs_dir=tmp_path, name="person",
        progress=False,
    )  # fmt: skip
    result = {}
    # A daemon: should the test fail, a trainer left waiting for labels must not keep pytest alive.
    run = threading.Thread(
        target=lambda: result.update(r=train_frames_from_preferences(config)), daemon=True
    )
    run.start()
    deadline = time.time() + 300
    answered = 0
    while answered < 4 and time.time() < deadline:  # a person answering, as the web app does
        if (tmp_path / "person" / "feedback.db").exists():
            with FeedbackStore(tmp_path / "person") as store:
                try:  # the store file exists a moment before the trainer writes its run's row
                    run_id = store.run_id(run_uid(tmp_path / "person"), create=False)
                except NotFound:
                    time.sleep(0.05)
                    continue
                open_ = store.open_queries(run_id)
                if open_:
                    store.add_labels([q.id for q in open_], ["left"] * len(open_), "human")
                    answered += len(open_)
        time.sleep(0.2)
    run.join(timeout=300)
    assert answered == 4 and result["r"].steps == 100
    note = ("4 of the 8 pairs asked were unanswered at the run's last step: their labels were not "
            "trained on")  # fmt: skip
    assert result["r"].details["notes"] == [note] and result["r"].details["unanswered"] == 4
    assert f"note: {note}" in capsys.readouterr().out


def test_gae_matches_a_hand_computation():
    from prefrl.agents.frame_ppo import gae

    reward = jnp.array([[1.0], [0.0], [2.0]])
    done = jnp.array([[0.0], [1.0], [0.0]])
    value = jnp.array([[0.5], [0.2], [1.0]])
    adv, ret = gae(reward, done, value, jnp.array([3.0]), 0.9, 0.5)
    d2 = 2.0 + 0.9 * 3.0 - 1.0  # the last step bootstraps from the value after the rollout
    d1 = 0.0 - 0.2  # the episode ends after step 1
    d0 = 1.0 + 0.9 * 0.2 - 0.5
    np.testing.assert_allclose(adv[:, 0], [d0 + 0.45 * d1, d1, d2], rtol=1e-6)
    np.testing.assert_allclose(ret, adv + value, rtol=1e-6)


def _random_rollout(T: int, N: int):
    """A rollout of T steps of N envs of random frames, actions, values and rewards."""
    from prefrl.agents.a2c import FrameRollout

    rng = np.random.default_rng(0)
    return FrameRollout(
        rng.integers(0, 255, (T, N, 84, 84, 4), np.uint8), rng.integers(0, 6, (T, N)),
        rng.normal(size=(T, N)).astype(np.float32), rng.normal(size=(T, N)).astype(np.float32),
        rng.normal(size=(T, N)).astype(np.float32), np.zeros((T, N), np.float32),
        rng.integers(0, 255, (N, 84, 84, 4), np.uint8),
    )  # fmt: skip


@pytest.mark.parametrize("algo", ["a2c", "ppo"])
def test_updates_in_chunks_of_frames_match_one_pass(algo):
    """The gradients summed over chunks of frames (how a CPU computes them, faster) are those of
    one pass over the whole batch, and so is the step."""
    import jax

    from prefrl.agents.a2c import A2C, A2CConfig
    from prefrl.agents.frame_ppo import FramePPO, FramePPOConfig

    T, N = 5, 3  # 15 frames: chunks of 4, 4, 4 and 3
    make = lambda: (A2C(A2CConfig(n_envs=N, n_steps=T), (84, 84, 4), 6) if algo == "a2c" else
                    FramePPO(FramePPOConfig(n_envs=N, n_steps=T, minibatches=1, epochs=1),
                             (84, 84, 4), 6))  # fmt: skip
    whole, chunked = make(), make()
    whole._grads.chunk, chunked._grads.chunk = None, 4
    rollout = _random_rollout(T, N)
    state = whole.init(jax.random.key(0))
    data = whole._prepare(state.params, rollout)
    rows = np.arange(T * N)
    extra = () if algo == "a2c" else (*whole._adv_stats(data[3], rows), np.float32(0.1))
    (g1, m1), (g2, m2) = (a._grads(state.params, data, rows, *extra) for a in (whole, chunked))
    for a, b in zip(jax.tree.leaves((g1, m1)), jax.tree.leaves((g2, m2)), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-6)
    assert max(float(np.abs(x).max()) for x in jax.tree.leaves(g1)) > 1e-3  # (not all zero)
    s1, s2 = (
        a.update(a.init(jax.random.key(0)), rollout, jax.random.key(1))[0] for a in (whole, chunked)
    )  # (an update donates its state)
    for a, b in zip(jax.tree.leaves(s1.params), jax.tree.leaves(s2.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_annealed_ppo_steps_shrink_with_the_updates_left_and_need_the_run_length():
    """--ppo-frames.anneal: the learning rate and the clip fall linearly over the run's updates
    (the PPO paper's Atari runs); a step late in the run is that share of the full one."""
    import jax

    from prefrl.agents.frame_ppo import FramePPO, FramePPOConfig

    T, N = 4, 2
    rollout = _random_rollout(T, N)
    config = FramePPOConfig(n_envs=N, n_steps=T, minibatches=1, epochs=1)
    steady = FramePPO(config, (84, 84, 4), 6)
    annealed = FramePPO(dataclasses.replace(config, anneal=True), (84, 84, 4), 6,
                        total_updates=100)  # fmt: skip
    assert [annealed.remaining(k) for k in (0, 50, 99)] == [1.0, 0.5, pytest.approx(0.01)]
    assert steady.remaining(99) == 1.0

    def moved(agent, updates_done: int) -> list[np.ndarray]:
        """The parameters' change in one update after `updates_done` (one epoch of one
        minibatch: its ratios are all 1, so the clip cannot change its gradient)."""
        state = agent.init(jax.random.key(0))
        state = state.replace(step=jax.numpy.asarray(updates_done, jax.numpy.int32))
        before = [np.asarray(x) for x in jax.tree.leaves(state.params)]
        after = agent.update(state, rollout, jax.random.key(1))[0]  # (it donates `state`)
        return [np.asarray(a) - b for a, b in zip(jax.tree.leaves(after.params), before)]

    full, late = moved(steady, 75), moved(annealed, 75)
    assert max(float(np.abs(x).max()) for x in full) > 1e-5
    for f, a in zip(full, late, strict=True):
        np.testing.assert_allclose(a, 0.25 * f, rtol=1e-3, atol=2e-8)  # (float32 spacing)
    with pytest.raises(ValueError, match="anneal needs the run's number of updates"):
        FramePPO(dataclasses.replace(config, anneal=True), (84, 84, 4), 6)


def test_summed_grads_refuses_a_bad_chunk_or_no_rows():
    from prefrl.xla import SummedGrads

    loss = lambda p, data, rows: ((data[rows] * p).mean(), {})
    with pytest.raises(ValueError, match="chunk=0 is invalid"):
        SummedGrads(loss, 0)
    with pytest.raises(ValueError, match="no rows"):
        SummedGrads(loss, 2)(jnp.float32(1.0), jnp.arange(4.0), np.arange(0))


def test_ppo_on_frames_runs_and_checkpoints(tmp_path):
    from prefrl.agents.frame_ppo import FramePPOConfig
    from prefrl.rl.config import RLConfig
    from prefrl.rl.learner import train_rl
    from prefrl.rundir.metrics import read_metrics

    config = RLConfig(env="movingdot", algo="ppo", steps=64, eval_interval=64, eval_episodes=1,
                      video=False, checkpoint_interval=64, log_interval=32,
                      ppo_frames=FramePPOConfig(n_envs=2, n_steps=16, minibatches=2, epochs=2),
                      runs_dir=tmp_path, name="ppo", progress=False)  # fmt: skip
    result = train_rl(config)
    assert result.steps == 64
    rows = read_metrics(tmp_path / "ppo")
    assert any("train/clip_fraction" in r for r in rows)
    with pytest.raises(ValueError, match="at least one PPO rollout"):
        replace_config(config, steps=16)


def test_ppo_learns_from_preferences_on_frames(tmp_path):
    from prefrl.agents.frame_ppo import FramePPOConfig
    from prefrl.pixels.preferences import FramePreferenceConfig, train_frames_from_preferences
    from prefrl.reward.frames import FrameRewardConfig
    from prefrl.rundir.metrics import read_metrics

    config = FramePreferenceConfig(
        algo="ppo", steps=128, segment_length=5, initial_labels=4, pretrain_steps=1, labels=8,
        fit_every=1, pool_size=8, reward=FrameRewardConfig(batch_size=2, steps_per_fit=1),
        ppo_frames=FramePPOConfig(n_envs=2, n_steps=16, minibatches=2, epochs=2),
        eval_interval=128, eval_episodes=1, video=False, log_interval=64, runs_dir=tmp_path,
        name="ppo-prefs", progress=False,
    )  # fmt: skip
    events = []
    result = train_frames_from_preferences(config, callback=events.append)
    assert result.steps == 128 and result.final_eval is not None
    rows = read_metrics(tmp_path / "ppo-prefs")
    assert any("train/clip_fraction" in r for r in rows)  # PPO's update, on the learned reward
    assert [r["labels/total"] for r in rows if "labels/total" in r][-1] == 8
    # The result: its labels, the learned reward's agreement (clip returns); events of both.
    fits = [e for e in events if e.kind == "fit"]
    assert result.labels == 8 and result.agreement == fits[-1].metrics["reward/clip_return_corr"]
    assert fits[0].step == 0 and "pretrain/seconds" in fits[0].metrics
    assert [e.metrics["labels/total"] for e in events if e.kind == "labels"][-1] == 8
    assert {e.kind for e in events} == {"fit", "labels", "log", "eval", "checkpoint"}
    with pytest.raises(ValueError, match="is of a run on frames \\(movingdot, ppo\\)"):
        result.policy  # noqa: B018
    with pytest.raises(ValueError, match="--algo.*a2c or ppo"):
        replace_config(config, algo="sac")


def test_resumes_and_flags_that_do_not_fit_are_refused_before_any_run_directory(tmp_path, capsys):
    """A run resumed by another command names the command that made it; another env is named
    before the settings that go with the run's env; --render-size 0 and an unknown game are
    refused without leaving a run directory behind."""
    from prefrl.cli import main

    runs = tmp_path / "runs"
    small = ["--segment-length", "5", "--initial-labels", "4", "--labels", "4", "--pool-size",
             "8", "--runs-dir", str(runs), "--no-progress"]  # fmt: skip
    assert main(["frames", "--preset", "movingdot", "--stop-after", "gather", "--name", "dot",
                 *small]) == 0  # fmt: skip
    assert "note:" not in capsys.readouterr().err
    # The preset's fits counted in the other agent's updates: said, with the flag that fixes it.
    assert main(["frames", "--preset", "movingdot", "--algo", "ppo", "--stop-after", "gather",
                 "--name", "dot-ppo", *small]) == 0  # fmt: skip
    assert ("note: --algo ppo keeps the movingdot preset's --fit-every 64, counted in PPO "
            "updates: a reward fit every 65,536 agent steps where the preset fits every 320; "
            "--fit-every 1 keeps its rate") in capsys.readouterr().err  # fmt: skip
    run = runs / "dot"
    assert main(["rl", "--resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"that run was made by prefrl frames, not prefrl rl; resume it with prefrl frames " \
           f"--resume {run}" in err and "unknown" not in err  # fmt: skip
    assert main(["frames", "--resume", str(run), "--env", "atari:Pong"]) == 2
    err = capsys.readouterr().err
    assert f"--env atari:Pong: {run} was run with --env movingdot" in err
    assert "network" not in err
    with pytest.raises(SystemExit) as exit_info:  # (tyro's error box)
        main(["frames", "--render-size", "0", "--name", "zero", *small])
    assert exit_info.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--render-size=0 is invalid: expected a positive integer" in err
    for command in (["rl", "--algo", "a2c"], ["frames"]):
        assert main([*command, "--env", "atari:Breakot", "--name", "typo", "--runs-dir",
                     str(runs)]) == 2  # fmt: skip
        assert "atari:Breakot is not an Atari game ale-py knows; close: atari:Breakout" in (
            capsys.readouterr().err
        )
    assert sorted(p.name for p in runs.iterdir()) == ["dot", "dot-ppo"]


def test_plain_progress_lines_come_at_the_log_steps_with_the_logged_rate(tmp_path, capsys):
    """Output that is no terminal gets a line at each multiple of --log-interval, saying agent
    steps/s as metrics.jsonl has them; steps counted a rollout at a time (2 envs x 16 steps)
    are timed per rollout, so a rollout's second log row has no rate of its own; the line of a
    step that is evaluated too shows that evaluation."""
    import re

    from prefrl.agents.frame_ppo import FramePPOConfig
    from prefrl.rl.config import RLConfig
    from prefrl.rl.learner import train_rl
    from prefrl.rundir.metrics import read_metrics
    from prefrl.rundir.progress import format_rate

    config = RLConfig(env="movingdot", algo="ppo", steps=128, eval_interval=64,
                      eval_episodes=1, video=False, log_interval=16,
                      ppo_frames=FramePPOConfig(n_envs=2, n_steps=16, minibatches=2, epochs=1),
                      runs_dir=tmp_path, name="lines")  # fmt: skip
    train_rl(config)
    out = capsys.readouterr().out
    lines = re.findall(r"^step ([\d,]+)/128 .*?, ([\d,.]+) agent steps/s", out, re.MULTILINE)
    assert [int(s) for s, _ in lines] == list(range(16, 129, 16))
    evals = dict(re.findall(r"^step ([\d,]+)/128 .*, eval return (.+)$", out, re.MULTILINE))
    returns = {r["step"]: r["eval/return_mean"] for r in read_metrics(tmp_path / "lines")
               if "eval/return_mean" in r}  # fmt: skip
    assert evals["48"] == "(none yet)" and sorted(returns) == [64, 128]
    assert (
        evals["64"] == evals["80"] == f"{returns[64]:,.1f}"
        and evals["128"] == f"{returns[128]:,.1f}"
    )
    rows = [r for r in read_metrics(tmp_path / "lines") if "train/policy_loss" in r]
    rates = {r["step"]: r["train/steps_per_s"] for r in rows if "train/steps_per_s" in r}
    assert sorted(rates) == [16, 48, 80, 112]  # (one per rollout)
    shown = dict(lines)
    for step, rate in rates.items():
        assert shown[f"{step}"] == shown[f"{step + 16}"] == format_rate(rate)


def test_a_stop_in_pretraining_or_a_fit_is_said_at_once_and_ends_it_at_the_next_step(
    tmp_path, capsys, monkeypatch
):
    """Ctrl-C while the reward model trains: said at once, the fit ends before its next gradient
    step, a checkpoint is written; resumed, the pre-training goes on where it stopped. The run
    directory is said before anything slow (the envs and networks being built)."""
    import signal
    import time

    from prefrl.pixels import preferences as frames_prefs
    from prefrl.pixels.preferences import FramePreferenceConfig, train_frames_from_preferences
    from prefrl.reward.frames import FrameRewardConfig, FrameRewardModel
    from prefrl.rundir import stop as stop_module
    from prefrl.rundir.checkpoints import latest_checkpoint

    config = FramePreferenceConfig(
        steps=60, segment_length=5, initial_labels=4, pretrain_steps=6, labels=8, fit_every=1,
        pool_size=8, a2c=_small_a2c(), reward=FrameRewardConfig(batch_size=2, steps_per_fit=2),
        eval_interval=60, eval_episodes=1, video=False, log_interval=20, runs_dir=tmp_path,
        name="stop", progress=False,
    )  # fmt: skip
    run = tmp_path / "stop"
    said_before_building = []
    build = frames_prefs.FramePreferenceRun.__init__

    def building(self, *args):
        said_before_building.append(capsys.readouterr().out)
        build(self, *args)

    monkeypatch.setattr(frames_prefs.FramePreferenceRun, "__init__", building)
    said, acknowledge = [], stop_module._acknowledge
    monkeypatch.setattr(stop_module, "_acknowledge",
                        lambda stop, message: said.append(message) or acknowledge(stop, message))  # fmt: skip
    steps, stop_at = [], [3]
    step = FrameRewardModel.train_step

    def train_step(self, *args):
        steps.append(len(steps) + 1)
        if len(steps) in stop_at:
            # Ctrl-C, said by the stop's own thread: waited for, as a person's Ctrl-C comes
            # mid-step (the fit's 2 steps would otherwise end before a loaded machine runs it).
            heard = len(said)
            signal.raise_signal(signal.SIGINT)
            deadline = time.monotonic() + 60
            while len(said) == heard and time.monotonic() < deadline:
                time.sleep(0.01)
        return step(self, *args)

    monkeypatch.setattr(FrameRewardModel, "train_step", train_step)
    stopped = train_frames_from_preferences(config)
    out = capsys.readouterr().out
    setting_up = "setting up the envs and the networks (compiling them can take a minute)"
    assert said_before_building[0].splitlines()[:2] == [f"run directory: {run}", setting_up]
    assert stopped.interrupted and stopped.steps == 0 and len(steps) == 3  # (of 6)
    assert ("Ctrl-C: stopping: the pre-training ends after its current gradient step, then a "
            "checkpoint to resume it from") in out  # fmt: skip
    ckpt = latest_checkpoint(run)
    assert FrameRewardModel.load(ckpt / "reward_model").steps == 3
    # Resumed: 3 more steps of pre-training, then the agent; Ctrl-C in its first fit's first step.
    steps.clear()
    stop_at[:] = [4]
    stopped = train_frames_from_preferences(replace_config(config, resume=run))
    out = capsys.readouterr().out
    assert "pre-training the reward model on 4 labels (6 gradient steps, 3 done)" in out
    assert f"loading {ckpt.name}" in out
    assert "Ctrl-C: stopping: the reward model's fit ends after its gradient step" in out
    assert stopped.interrupted and stopped.steps == 20 and len(steps) == 4  # (1 of the fit's 2)
    assert FrameRewardModel.load(latest_checkpoint(run) / "reward_model").steps == 7
    stop_at.clear()
    done = train_frames_from_preferences(replace_config(config, resume=run))
    assert done.steps == 60 and not done.interrupted


def test_a_resumed_frames_run_a_person_labels_in_the_browser_serves_its_later_pairs(
    tmp_path, monkeypatch
):
    """With --teacher.preset web, a session that asks pairs starts its labelling server, also a
    resumed one past its first labels (which never waits): it used to start only in that wait."""
    from prefrl.feedback.teachers import TeacherConfig
    from prefrl.pixels import preferences
    from prefrl.reward.frames import FrameRewardConfig

    started = []

    class Server:  # (stands in for the `prefrl serve` process)
        url = "http://127.0.0.1:8000"

        def __init__(self, run_dir, port, store):
            started.append(run_dir)

        def check(self):
            return None

        def stop(self):
            pass

    monkeypatch.setattr(preferences, "LabellingServer", Server)
    config = preferences.FramePreferenceConfig(
        steps=40, segment_length=5, initial_labels=4, pretrain_steps=1, labels=8, pool_size=8,
        a2c=_small_a2c(), reward=FrameRewardConfig(batch_size=2, steps_per_fit=1), fit_every=1,
        teacher=TeacherConfig("web"), stop_after="gather", eval_interval=40, eval_episodes=1,
        video=False, log_interval=40, runs_dir=tmp_path, name="web", progress=False,
    )  # fmt: skip
    run_dir = preferences.train_frames_from_preferences(config).run_dir
    with FeedbackStore(run_dir) as store:
        run_id = store.run_id(run_uid(run_dir), create=False)
        store.add_labels([q.id for q in store.open_queries(run_id)], ["left"] * 4, "web")
    preferences.train_frames_from_preferences(
        replace_config(config, stop_after="pretrain", resume=run_dir))  # fmt: skip
    before = len(started)
    preferences.train_frames_from_preferences(
        replace_config(config, stop_after=None, resume=run_dir))  # fmt: skip
    with FeedbackStore(run_dir) as store:
        assert len(store.open_queries(run_id)) > 0, "the last session asked later pairs"
    assert len(started) == before + 1, "and served them"


def test_the_pretraining_and_the_fits_show_their_progress(tmp_path, capsys, monkeypatch):
    """Without a bar (a log file, --no-progress), plain lines: the pre-training's gradient steps
    as they go, and a fit's steps on the agent's lines."""
    from prefrl.pixels.preferences import FramePreferenceConfig, train_frames_from_preferences
    from prefrl.reward.frames import FrameRewardConfig
    from prefrl.rundir import progress

    monkeypatch.setattr(progress, "PLAIN_EVERY_S", 0.0)  # (a line at every update)
    config = FramePreferenceConfig(
        steps=40, segment_length=5, initial_labels=4, pretrain_steps=6, labels=8, fit_every=1,
        pool_size=8, a2c=_small_a2c(), reward=FrameRewardConfig(batch_size=2, steps_per_fit=2),
        eval_interval=40, eval_episodes=1, video=False, log_interval=1_000, runs_dir=tmp_path,
        name="shown", progress=False,
    )  # fmt: skip
    train_frames_from_preferences(config)
    out = capsys.readouterr().out
    for step in (2, 4, 6):
        assert f"pre-training the reward model: step {step}/6 ({100 * step / 6:.0f}%)" in out, out
    assert ", reward fit 1/2" in out and ", reward fit 2/2" in out, out
