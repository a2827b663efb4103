"""Clips of pixel envs stored as frames, and the CNN reward model on them."""

import jax
import numpy as np
import pytest

from prefrl.data.frame_clips import FrameClipRecorder
from prefrl.data.segments import Label, PreferenceData, SegmentPool, Segments
from prefrl.envs import FrameVectorEnv, make_pixel_env
from prefrl.envs.pool import seeded
from prefrl.reward.frames import FrameRewardConfig, FrameRewardModel, frame_stacks


def _record(n_envs=2, length=5, steps=12):
    envs = FrameVectorEnv(seeded(make_pixel_env, "movingdot", 0), n_envs)
    recorder = FrameClipRecorder(n_envs, length)
    obs, clips, seen = envs.reset(), [], []
    rng = np.random.default_rng(0)
    for t in range(steps):
        states = envs.get_states(np.flatnonzero(recorder.starting()))
        action = rng.integers(0, 5, n_envs)
        seen.append(obs.copy())
        nxt, reward, term, trunc, _ = envs.step(action)
        clips += recorder.record(t * n_envs, obs, action, reward, term | trunc, states)
        obs = nxt
    return clips, np.stack(seen)


def test_clips_hold_each_frame_once_and_give_back_the_stacks():
    clips, seen = _record()
    assert len(clips) == 4  # 2 envs x 2 whole clips of 5 in 12 steps
    clip = clips[0]
    assert clip.obs.shape == (1, 5 + 3, 84, 84) and clip.obs.dtype == np.uint8
    assert clip.length == 5
    stacks = np.asarray(frame_stacks(clip.obs))[0]
    env = 0 if clip.id[0] == 0 else 1
    np.testing.assert_array_equal(stacks, seen[:5, env])
    # The clip's state replays it: the same rewards from the same actions.
    replay = make_pixel_env("movingdot", seed=42)
    replay.reset()
    replay.set_state(clip.state[0, 0])
    rewards = [replay.step(int(a))[1] for a in clip.action[0, :, 0]]
    np.testing.assert_array_equal(rewards, clip.reward[0])
    pool = SegmentPool(10)
    for c in clips:
        pool.add(c)
    left, _right = pool.sample_pairs(np.random.default_rng(0), 3)
    assert left.obs.shape == (3, 8, 84, 84)


def _clips(brightness: float, n: int, rng) -> Segments:
    frames = rng.integers(0, 40, (n, 5 + 3, 84, 84)).astype(np.uint8)
    frames[:, :, 30:50, 30:50] = int(brightness)
    return Segments(obs=frames, action=np.zeros((n, 5, 1), np.float32),
                    reward=np.zeros((n, 5), np.float32), state=np.zeros((n, 1, 1), np.uint8),
                    id=np.arange(n), step=np.zeros(n, np.int64), episode=np.zeros(n, np.int64),
                    start=np.zeros(n, np.int64))  # fmt: skip


def test_validation_accuracy_is_left_out_while_every_held_out_pair_ties():
    """Early in a game most random-policy clips tie: no accuracy to report, and no NaN for the
    loop's divergence guard to stop on."""
    from prefrl.training.loop import check_finite

    rng = np.random.default_rng(0)
    model = FrameRewardModel(FrameRewardConfig(batch_size=4, steps_per_fit=1, val_fraction=0.5),
                             seed=0)  # fmt: skip
    left, right = _clips(250, 16, rng), _clips(0, 16, rng)
    right.id += 100
    ties = PreferenceData()
    ties.add(left, right, [Label.EQUAL] * 16)
    metrics = model.fit(ties)
    assert "reward/val_accuracy" not in metrics
    check_finite(metrics, 1)
    decided = PreferenceData()
    decided.add(left, right, [Label.LEFT] * 16)
    assert 0.0 <= model.fit(decided)["reward/val_accuracy"] <= 1.0


def test_a_stop_ends_a_fit_at_its_next_gradient_step():
    """A fit asked to stop (Ctrl-C during a fit) ends before its next gradient step, with the
    steps it made counted, normalised, and without the validation pass; its progress is told
    after every step."""
    from prefrl.training.loop import check_finite

    rng = np.random.default_rng(0)
    model = FrameRewardModel(FrameRewardConfig(batch_size=4, steps_per_fit=10), seed=0)
    data = PreferenceData()
    data.add(_clips(250, 16, rng), _clips(0, 16, rng), [Label.LEFT] * 16)
    told = []
    metrics = model.fit(data, should_stop=lambda: len(told) >= 2,
                        on_step=lambda done, steps: told.append((done, steps)))  # fmt: skip
    assert told == [(1, 10), (2, 10)] and model.steps == 2
    assert metrics["reward/fit_steps"] == 2 and "reward/val_accuracy" not in metrics
    check_finite(metrics, 0)
    assert abs(model.member_rewards(_clips(100, 16, rng).obs).std() - 0.05) < 0.03
    stopped_at_once = model.fit(data, should_stop=lambda: True)
    assert stopped_at_once["reward/fit_steps"] == 0 and model.steps == 2
    check_finite(stopped_at_once, 0)
    assert model.fit(data, steps=3)["reward/fit_steps"] == 3 and model.steps == 5


@pytest.mark.parametrize("batch_norm", [False, True])
def test_reward_model_learns_a_preference_and_scales_its_output(batch_norm):
    rng = np.random.default_rng(0)
    model = FrameRewardModel(
        FrameRewardConfig(batch_size=8, steps_per_fit=40, val_fraction=0.0, lr=1e-3,
                          batch_norm=batch_norm), seed=0,
    )  # fmt: skip
    stats_before = jax.tree.map(np.asarray, model.params.get("batch_stats"))
    data = PreferenceData()
    bright, dark = _clips(250, 32, rng), _clips(0, 32, rng)
    flip = rng.random(32) < 0.5  # bright on either side
    left = Segments.concatenate([bright[i] if f else dark[i] for i, f in enumerate(flip)])
    right = Segments.concatenate([dark[i] if f else bright[i] for i, f in enumerate(flip)])
    right.id += 100
    data.add(left, right, [Label.LEFT if f else Label.RIGHT for f in flip])
    metrics = model.fit(data)
    assert metrics["reward/train_accuracy"] > 0.5
    assert (model.predict(bright.obs, None).sum(-1) > model.predict(dark.obs, None).sum(-1)).all()
    # Outputs scaled to std 0.05 per step: sums of 5 steps differ by about 0.5 (P about 0.62).
    p = model.pair_probs(dark.obs[:8], None, bright.obs[:8], None)
    assert p.shape == (1, 8) and (p > 0.55).all()
    rewards = model.member_rewards(left.obs)  # (M, N, H), normalised on labelled clips
    assert rewards.shape == (1, 32, 5)
    assert abs(rewards.std() - 0.05) < 0.02 and abs(rewards.mean()) < 0.02
    stacks = np.asarray(frame_stacks(left.obs[:2]))  # the agent's stacks give the same rewards
    np.testing.assert_allclose(model.predict(stacks, None), rewards[0, :2], rtol=1e-4, atol=1e-5)
    if batch_norm:  # read with the running statistics, which training moved
        stats = model.params["batch_stats"]
        mean = stats["BatchNorm_0"]["mean"]
        assert not np.allclose(mean, stats_before["BatchNorm_0"]["mean"])
        assert mean.shape == (1, 16) and len(stats) == 4
        # so a clip's reward does not depend on what else is in the batch it is read with
        alone = model.predict(stacks[:1], None)
        np.testing.assert_allclose(alone, rewards[0, :1], rtol=1e-4, atol=1e-5)
    else:
        assert stats_before is None and "batch_stats" not in model.params


def test_reward_step_pair_by_pair_matches_one_pass():
    """On a CPU the reward CNN's gradients are computed a pair at a time and summed (faster):
    the same gradients, loss and accuracy as one pass over the batch."""
    rng = np.random.default_rng(0)
    pairs, h = 3, 5
    left, right = (rng.integers(0, 255, (pairs, h + 3, 84, 84), np.uint8) for _ in range(2))
    act = np.zeros((pairs, h), np.int32)
    target = np.array([1.0, 0.0, 0.5], np.float32)
    model = FrameRewardModel(FrameRewardConfig(members=2, dropout=0.0))
    data = (left, right, act, act, target)
    results = []
    for chunk in (None, 1):
        model._grads.chunk = chunk
        results.append(model._grads(model.params, data, np.arange(pairs), jax.random.key(0)))
    (g1, p1), (g2, p2) = results
    scale = max(float(np.abs(x).max()) for x in jax.tree.leaves(g1))
    assert scale > 1e-3
    # (a gradient that is 0 in exact arithmetic, as the last layer's bias is: a constant added
    # to every step's reward cancels in a preference, is rounding noise in both ways, and
    # differs between CPUs: compared on the scale of the whole gradient)
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g2), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-5 * scale)
    assert float(np.abs(g1["params"]["Dense_1"]["bias"]).max()) < 1e-5 * scale
    for name in ("loss", "correct", "decided"):
        np.testing.assert_allclose(p1[name], p2[name], rtol=1e-5)
    assert float(p1["decided"]) == pytest.approx(2 / 3)


@pytest.mark.parametrize("batch_norm", [False, True])
def test_reward_model_saves_and_loads(tmp_path, batch_norm):
    rng = np.random.default_rng(1)
    model = FrameRewardModel(
        FrameRewardConfig(batch_size=4, steps_per_fit=2, batch_norm=batch_norm), seed=3
    )
    data = PreferenceData()
    data.add(_clips(200, 8, rng), _clips(10, 8, rng), [Label.LEFT] * 8)
    model.fit(data)
    model.save(tmp_path / "m")
    from prefrl.reward import load_reward_model

    loaded = load_reward_model(tmp_path / "m")
    clips = _clips(100, 2, rng).obs
    np.testing.assert_allclose(loaded.predict(clips, None), model.predict(clips, None), rtol=1e-5)


def test_frame_clips_are_rendered_in_colour_from_the_store(tmp_path):
    import av

    from prefrl.feedback.clips import make_clip_renderer, render_pending
    from prefrl.feedback.store import FeedbackStore

    clips, _ = _record(n_envs=2, length=5, steps=12)
    left, right = Segments.concatenate(clips[:2]), Segments.concatenate(clips[2:4])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    renderer = make_clip_renderer("movingdot", size=420)  # 2x the 210-row screen
    with FeedbackStore(run_dir) as store:
        run_id = store.run_id("frames", env="movingdot")
        store.add_queries(run_id, run_dir, range(2), left, right)
        counts = render_pending(store, run_id, run_dir, renderer, queue=5, pairs=True)
        assert counts["rendered"] == 4 and counts["pairs"] == 2
        q = store.open_queries(run_id)[0]
        clip = run_dir / store.clip(q.left_segment)
        seg = store.segments(run_dir, [q.left_segment])
    with av.open(str(clip)) as f:
        frames = [fr.to_ndarray(format="rgb24") for fr in f.decode(video=0)]
        assert float(f.streams.video[0].average_rate) == 60  # every emulator frame
    assert len(frames) == 5 * 4 and frames[0].shape == (420, 320, 3)
    # The first frame is the game's screen after the clip's first emulator frame, scaled 2x.
    env = make_pixel_env("movingdot")
    env.reset()
    env.set_state(seg.state[0, 0])
    screen = []
    env.step(int(seg.action[0, 0, 0]), colour=screen)
    expected = np.repeat(np.repeat(screen[0], 2, 0), 2, 1)
    assert np.abs(frames[0].astype(int) - expected.astype(int)).mean() < 4  # (H.264 loss)
    renderer.close()


def test_reward_model_refuses_state_vectors():
    import pytest

    model = FrameRewardModel(FrameRewardConfig())
    with pytest.raises(ValueError, match=r"\(10, 17\) are not frames.*MLP ensemble"):
        model.predict(np.zeros((10, 17), np.float32), None)


def test_memory_stays_bounded_while_clips_pile_up():
    rng = np.random.default_rng(2)
    pool = SegmentPool(8)
    sizes = []
    for i in range(40):  # 5 times the pool's capacity
        clip = _clips(float(i), 1, rng)
        clip.id[:] = i
        pool.add(clip)
        sizes.append(pool.all().obs.nbytes)
    assert sizes[-1] == sizes[7] == 8 * (5 + 3) * 84 * 84  # each frame once, 8 clips at most
    assert pool.all().id.tolist() == list(range(32, 40))
    for i in (40, 41):
        clip = _clips(float(i), 1, rng)
        clip.id[:] = i
        pool.add(clip)
    assert pool.newest(3).id.tolist() == [39, 40, 41]  # (across the ring's wrap)
    data = PreferenceData()
    for i in range(100):
        data.add(_clips(i, 3, rng), _clips(i, 3, rng), [Label.LEFT] * 3)
        data.keep_newest(12)
    assert len(data) == 12 and data.arrays()["obs_left"].nbytes == 12 * 8 * 84 * 84
    assert data.arrays()["obs_left"][-1, 0, 30, 30] == 99  # the newest kept
    live = sum(v.nbytes for v in data.arrays().values())
    assert data.nbytes <= 1.5 * live  # (the spare rows)


def test_labelled_pairs_added_and_dropped_read_as_one_concatenation():
    """Pairs kept with room to grow read back as the plain concatenation of what was added and
    kept; arrays handed out earlier keep their rows; a wider dtype widens the store; another
    clip shape is refused."""
    rng = np.random.default_rng(3)
    data, added, held = PreferenceData(), [], []
    for i in range(30):
        n = 1 + i % 4
        left, right = _clips(i, n, rng), _clips(100 + i, n, rng)
        labels = rng.choice([Label.LEFT, Label.RIGHT, Label.EQUAL], n)
        data.add(left, right, labels)
        added.append((left.obs, right.obs, labels))
        if i % 7 == 6:
            data.keep_newest(10)
            held.append((data.arrays(), len(data)))
    expected = np.concatenate([a[1] for a in added])
    n = len(data)
    np.testing.assert_array_equal(data.arrays()["obs_right"], expected[-n:])
    np.testing.assert_array_equal(
        data.arrays()["label"], np.concatenate([a[2] for a in added])[-n:]
    )
    first, first_len = held[0]
    assert len(first["label"]) == first_len == 10  # (unchanged by the adds since)
    wide = _clips(7, 2, rng)
    wide.obs = wide.obs.astype(np.float32) + 0.5
    data.add(wide, wide, [Label.LEFT, Label.RIGHT])
    assert data.arrays()["obs_left"].dtype == np.float32
    np.testing.assert_array_equal(data.arrays()["obs_left"][-2:], wide.obs)
    np.testing.assert_array_equal(data.arrays()["obs_right"][:-2], expected[-n:])
    small = _clips(8, 1, rng)
    small.obs = small.obs[:, :, :42]
    with pytest.raises(ValueError, match=r"obs_left of shape \(8, 42, 84\) per pair cannot join"):
        data.add(small, small, [Label.LEFT])


def _random_clips(seed: int, n_envs: int, steps: int, length: int) -> Segments:
    envs = FrameVectorEnv(seeded(make_pixel_env, "movingdot", 100 * seed), n_envs)
    recorder, obs, clips = FrameClipRecorder(n_envs, length), envs.reset(), []
    rng = np.random.default_rng(seed)
    for t in range(steps):
        states = envs.get_states(np.flatnonzero(recorder.starting()))
        action = rng.integers(0, 5, n_envs)
        nxt, reward, term, trunc, _ = envs.step(action)
        clips += recorder.record(t * n_envs, obs, action, reward, term | trunc, states)
        obs = nxt
    return Segments.concatenate(clips)


def test_dot_network_learns_movingdot_from_preferences_between_random_clips():
    """The seed's MovingDot reward network (dot position + action) generalises to clips of
    other episodes from a few dozen labels; it cannot score a step without its action."""
    clips = _random_clips(0, n_envs=8, steps=100, length=10)  # 80 clips
    left, right = clips[np.arange(40)], clips[np.arange(40, 80)]
    right.id += 1000
    r_left, r_right = left.reward.sum(-1), right.reward.sum(-1)
    labels = np.where(r_left > r_right, Label.LEFT,
                      np.where(r_right > r_left, Label.RIGHT, Label.EQUAL))  # fmt: skip
    data = PreferenceData()
    data.add(left, right, labels)
    model = FrameRewardModel(FrameRewardConfig(network="dot", lr=1e-3, steps_per_fit=300,
                                               val_fraction=0.0), seed=0)  # fmt: skip
    model.fit(data)
    held_out = _random_clips(1, n_envs=8, steps=50, length=10)
    learned = model.predict(held_out.obs, held_out.action)
    assert learned.shape == held_out.reward.shape
    assert np.corrcoef(learned.ravel(), held_out.reward.ravel())[0, 1] > 0.5
    with pytest.raises(ValueError, match="needs the action of every step"):
        model.predict(held_out.obs, None)


def test_dot_network_is_refused_on_atari_and_unknown_networks():
    from prefrl.pixels.preferences import FramePreferenceConfig

    with pytest.raises(ValueError, match=r"--reward.network dot is for movingdot, not atari:Pong"):
        FramePreferenceConfig(env="atari:Pong", reward=FrameRewardConfig(network="dot"))
    with pytest.raises(ValueError, match=r"network='mlp' is invalid: expected cnn or dot"):
        FrameRewardConfig(network="mlp")
