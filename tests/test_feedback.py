"""Segments, labels, scripted teachers, query selection and label schedules."""

import math

import numpy as np
import pytest

from prefrl.data import Label, PreferenceData, SegmentPool, SegmentRecorder, Segments
from prefrl.feedback import (
    TEACHER_PRESETS,
    Answer,
    Query,
    ScheduleConfig,
    ScriptedTeacher,
    Teacher,
    TeacherConfig,
    TeacherParams,
    scripted_labels,
    select_pairs,
)


def _segments(returns_per_step: np.ndarray, length: int = 10, obs_dim: int = 3) -> Segments:
    """Segments whose every step has the given reward (so R = reward * length)."""
    n = len(returns_per_step)
    reward = np.repeat(np.asarray(returns_per_step, np.float32)[:, None], length, axis=1)
    z = np.zeros(n, np.int64)
    return Segments(
        obs=np.zeros((n, length, obs_dim), np.float32),
        action=np.zeros((n, length, 2), np.float32),
        reward=reward,
        state=np.zeros((n, length, 4)),
        id=np.arange(n, dtype=np.int64),
        step=z, episode=z, start=z,
    )  # fmt: skip


def test_label_parse_names_accepted_values():
    assert Label.parse("left") is Label.LEFT
    assert Label.parse("SKIP") is Label.SKIP
    assert Label.parse(2) is Label.EQUAL
    with pytest.raises(ValueError, match="left, right, equal, skip"):
        Label.parse("better")


def test_recorder_cuts_non_overlapping_segments_with_states():
    rec = SegmentRecorder(length=10)
    rng = np.random.default_rng(0)
    for t in range(35):
        rec.record(100 + t, np.full(3, t, np.float32), np.zeros(2), float(t), np.full(4, t))
    segs = rec.end_episode(rng, episode=7)
    assert len(segs) == 3 and segs.length == 10
    first = segs.start
    assert np.all(np.diff(first) == 10) and 0 <= first[0] <= 5
    for i in range(3):  # obs, reward and state of each step line up
        t = np.arange(first[i], first[i] + 10)
        np.testing.assert_array_equal(segs.obs[i, :, 0], t)
        np.testing.assert_array_equal(segs.reward[i], t)
        np.testing.assert_array_equal(segs.state[i, :, 0], t)
    np.testing.assert_array_equal(segs.step, 100 + first)
    assert segs.episode.tolist() == [7, 7, 7] and segs.id.tolist() == [0, 1, 2]
    rec.record(0, np.zeros(3), np.zeros(2), 0.0, np.zeros(4))
    assert rec.end_episode(rng, 8) is None  # shorter than a segment


def test_an_episode_that_ended_early_is_padded_with_its_final_state_held_still():
    rec = SegmentRecorder(length=10)
    rng = np.random.default_rng(0)
    for t in range(23):
        rec.record(t, np.full(3, t, np.float32), np.ones(2), 1.0, np.full(4, t))
    final = (np.full(3, 99, np.float32), np.full(4, 99))
    segs = rec.end_episode(rng, 0, final)
    assert len(segs) == 3 and segs.start.tolist() == [0, 10, 20]
    last = segs[2]
    np.testing.assert_array_equal(last.obs[0, :, 0], [20, 21, 22] + [99] * 7)
    np.testing.assert_array_equal(last.state[0, :, 0], [20, 21, 22] + [99] * 7)
    np.testing.assert_array_equal(last.action[0, 3:], 0.0)  # held still
    np.testing.assert_array_equal(last.reward[0], [1, 1, 1] + [0] * 7)
    assert segs.true_returns().tolist() == [10, 10, 3]  # the early end shows in the return
    for t in range(4):  # shorter than a segment: one padded segment
        rec.record(t, np.zeros(3), np.ones(2), 1.0, np.zeros(4))
    assert len(rec.end_episode(rng, 1, final)) == 1


def test_pool_is_a_ring_and_pairs_are_distinct(tmp_path):
    pool = SegmentPool(capacity=5)
    pool.add(_segments(np.arange(4)))
    pool.add(_segments(np.arange(4, 7)))
    assert len(pool) == 5
    assert sorted(pool.all().reward[:, 0].tolist()) == [2, 3, 4, 5, 6]  # 0 and 1 left
    left, right = pool.sample_pairs(np.random.default_rng(0), 200)
    assert np.all(left.reward[:, 0] != right.reward[:, 0])
    pool.save(tmp_path / "p.npz")
    back = SegmentPool.load(tmp_path / "p.npz")
    np.testing.assert_array_equal(back.all().reward, pool.all().reward)
    assert (back.ptr, back.size) == (pool.ptr, pool.size)


def test_preference_data_roundtrip_and_counts(tmp_path):
    data = PreferenceData()
    data.add(_segments([1, 2]), _segments([3, 0]), ["right", "skip"])
    data.add(_segments([5]), _segments([5]), [Label.EQUAL])
    assert len(data) == 3
    assert data.counts() == {"left": 0, "right": 1, "equal": 1, "skip": 1}
    data.save(tmp_path / "l.npz")
    back = PreferenceData.load(tmp_path / "l.npz")
    np.testing.assert_array_equal(back.arrays()["label"], [1, 3, 2])
    with pytest.raises(ValueError, match="one label per pair"):
        data.add(_segments([1, 2]), _segments([1, 2]), ["left"])


def test_a_run_says_when_most_answers_are_ties():
    from prefrl.feedback.channel import mostly_ties

    data = PreferenceData()
    data.add(_segments(np.zeros(19)), _segments(np.zeros(19)), ["equal"] * 19)
    assert mostly_ties(data) is None  # (too few to say)
    data.add(_segments([1]), _segments([0]), ["left"])
    assert mostly_ties(data).startswith("19 of the 20 answers were 'equal' (95%)")
    data.add(_segments(np.zeros(18)), _segments(np.ones(18)), ["right"] * 18)
    assert mostly_ties(data) is None  # (19 of 38: half, not more)


def test_oracle_prefers_larger_return_and_ties_are_equal():
    left, right = _segments([1.0, 5.0, 2.0]), _segments([2.0, 1.0, 2.0])
    labels = scripted_labels(TEACHER_PRESETS["oracle"], left, right, np.random.default_rng(0), 1)
    assert labels.tolist() == [Label.RIGHT, Label.LEFT, Label.EQUAL]


def test_mistake_rate_is_applied_once():
    """About ε of the answers are flipped (not 2ε(1-ε) as with a doubled flip)."""
    rng = np.random.default_rng(0)
    n = 20_000
    left, right = _segments(np.zeros(n)), _segments(np.ones(n))
    labels = scripted_labels(TeacherParams(eps_mistake=0.1), left, right, rng, 1.0)
    wrong = (labels == Label.LEFT).mean()
    assert abs(wrong - 0.1) < 0.01


def test_stochastic_teacher_follows_bradley_terry():
    rng = np.random.default_rng(1)
    n = 20_000
    left, right = _segments(np.zeros(n), length=1), _segments(np.ones(n), length=1)
    labels = scripted_labels(TeacherParams(beta=1.0), left, right, rng, 1.0)
    assert abs((labels == Label.RIGHT).mean() - 1 / (1 + math.exp(-1))) < 0.01


def test_myopic_teacher_weights_late_steps():
    # Left is good early, right is good late: equal sums, the myopic teacher prefers right.
    length = 10
    left, right = _segments(np.zeros(1), length), _segments(np.zeros(1), length)
    left.reward[0, :5], right.reward[0, 5:] = 1.0, 1.0
    rng = np.random.default_rng(0)
    assert scripted_labels(TEACHER_PRESETS["oracle"], left, right, rng, 1)[0] == Label.EQUAL
    assert scripted_labels(TEACHER_PRESETS["myopic"], left, right, rng, 1)[0] == Label.RIGHT


def test_skip_and_equal_thresholds_scale_with_recent_returns():
    # Recent episodes return 100 over 100 steps; segments of 10 steps -> scale 10.
    teacher = ScriptedTeacher(TeacherConfig("skip"), seed=0, episode_length=100)
    teacher.observe_episode(100.0, 100)
    left, right = _segments([0.05, 0.5]), _segments([0.05, 0.2])  # returns 0.5/0.5, 5/2
    teacher.submit(Query(np.array([10, 11]), left, right))
    answers = teacher.poll()
    assert [a.query_id for a in answers] == [10, 11]
    assert answers[0].label == Label.SKIP  # max return 0.5 < 0.1 * 10
    assert answers[1].label == Label.LEFT
    assert teacher.poll() == []  # each answer is delivered once

    equal = ScriptedTeacher(TeacherConfig("equal"), seed=0, episode_length=100)
    equal.observe_episode(100.0, 100)
    equal.submit(Query(np.array([0, 1]), _segments([0.5, 0.5]), _segments([0.59, 0.8])))
    assert [a.label for a in equal.poll()] == [Label.EQUAL, Label.RIGHT]


def test_teacher_config_errors_name_the_bad_value():
    with pytest.raises(
        ValueError,
        match="'perfect' does not exist; scripted: oracle, stoc.*a person: web, terminal",
    ):
        TeacherConfig("perfect")
    with pytest.raises(ValueError, match="gamma=1.5"):
        TeacherConfig("oracle", gamma=1.5)
    assert TeacherConfig("stoc", eps_mistake=0.2).resolved() == TeacherParams(1.0, 1.0, 0.2)


class _FixedModel:
    """A stand-in reward model whose members disagree on chosen pairs."""

    num_members = 2

    def pair_probs(self, obs_l, act_l, obs_r, act_r):
        contested = obs_l[:, 0, 0] > 5  # segments with a large id disagree
        p = np.full((2, len(obs_l)), 0.9)
        p[1, contested] = 0.1
        return p


def test_disagreement_and_entropy_pick_contested_pairs():
    pool = SegmentPool(capacity=100)
    segs = _segments(np.zeros(100))
    segs.obs[:, :, 0] = np.arange(100)[:, None] / 10  # left ids > 50 are contested
    pool.add(segs)
    rng = np.random.default_rng(0)
    left, _ = select_pairs("disagreement", pool, 10, rng, _FixedModel(), oversample=10)
    assert np.all(left.obs[:, 0, 0] > 5)
    left, _ = select_pairs("uniform", pool, 1000, rng, _FixedModel())
    assert 0.3 < (left.obs[:, 0, 0] > 5).mean() < 0.7
    with pytest.raises(ValueError, match="known: uniform, disagreement, entropy"):
        select_pairs("random", pool, 1, rng)


def test_entropy_prefers_uncertain_pairs():
    class Model:
        def pair_probs(self, obs_l, *_):
            p = np.where(obs_l[:, 0, 0] > 5, 0.5, 0.99)
            return np.stack([p, p])

    pool = SegmentPool(capacity=100)
    segs = _segments(np.zeros(100))
    segs.obs[:, :, 0] = np.arange(100)[:, None] / 10
    pool.add(segs)
    left, _ = select_pairs("entropy", pool, 10, np.random.default_rng(0), Model())
    assert np.all(left.obs[:, 0, 0] > 5)


def test_sessions_schedule():
    s = ScheduleConfig(kind="sessions", budget=120, session_size=50, interval=100)
    wanted = [
        s.wanted(t, first_step=1000, total_steps=5000)
        for t in (0, 999, 1000, 1099, 1100, 1200, 9000)
    ]
    assert wanted == [0, 0, 50, 50, 100, 120, 120]


def test_annealed_schedule_matches_rl_teacher_formula():
    s = ScheduleConfig(kind="annealed", budget=1000)
    assert s.initial_labels == 250
    assert s.wanted(0, 0, 10_000) == 250
    assert s.wanted(5_000, 0, 10_000) == math.floor(1000 * (0.25 + 0.75 * (1 - 0.01**0.5) / 0.99))
    assert s.wanted(10_000, 0, 10_000) == 1000


def test_decay_schedule_is_concave_and_reaches_the_budget():
    s = ScheduleConfig(kind="decay", budget=1000, decay_constant=1e4)
    w = np.array([s.wanted(t, 0, 100_000) for t in range(0, 100_001, 10_000)])
    assert w[0] == 250 and w[-1] == 1000
    gains = np.diff(w)
    assert np.all(gains >= 0) and gains[0] > 3 * gains[-1]


def test_budget_smaller_than_initial_share_is_an_error():
    with pytest.raises(
        ValueError, match=r"budget \(100\) is smaller than the initial share \(200\)"
    ):
        ScheduleConfig(budget=100, initial=200)
    with pytest.raises(ValueError, match="'linear' is unknown"):
        ScheduleConfig(kind="linear")


class Nearer(Teacher):
    """A rule of its own: prefers the segment whose first observation is the larger (equal
    when the same), answering each batch `late` polls after the poll that took it."""

    def __init__(self, late: int = 0):
        self.late, self.held = late, []

    def answer(self, left, right):
        diff = right.obs[:, 0, 0] - left.obs[:, 0, 0]
        return np.select([diff > 0, diff < 0], [Label.RIGHT, Label.LEFT], Label.EQUAL)

    def poll(self):
        self.held.append(super().poll())
        return self.held.pop(0) if len(self.held) > self.late else []


def _query(ids, left_obs, right_obs) -> Query:
    left, right = _segments(np.zeros(len(ids))), _segments(np.zeros(len(ids)))
    left.obs[:, 0, 0], right.obs[:, 0, 0] = left_obs, right_obs
    return Query(np.asarray(ids, np.int64), left, right)


@pytest.fixture(params=["memory", "store"])
def channel_for(request, tmp_path):
    """A feedback channel (in memory, or the store's as the CLI's) that asks `teacher`."""
    from prefrl.feedback.channel import InMemoryChannel, StoreChannel
    from prefrl.feedback.store import FeedbackStore

    stores = []

    def make(teacher):
        if request.param == "memory":
            return InMemoryChannel(teacher)
        stores.append(FeedbackStore(tmp_path))
        return StoreChannel(stores[-1], "run", tmp_path, "toy:point-reach", teacher)

    yield make
    for store in stores:
        store.close()


def test_a_teacher_subclass_answers_by_its_rule_and_late_answers_are_taken(channel_for):
    channel = channel_for(Nearer(late=4))
    channel.submit(_query([0, 1, 2], [1.0, 2.0, 3.0], [2.0, 1.0, 3.0]))
    assert channel.poll() is None and channel.unanswered() == 3  # (each polls the teacher)
    got = next(got for _ in range(5) if (got := channel.poll()) is not None)
    assert got.labels == [Label.RIGHT, Label.LEFT, Label.EQUAL]
    np.testing.assert_array_equal(got.left.obs[:, 0, 0], [1.0, 2.0, 3.0])
    assert channel.unanswered() == 0 and channel.poll() is None


@pytest.mark.parametrize("answers", [[Answer(7, Label.LEFT)], [Answer(0, Label.LEFT)] * 2])
def test_an_answer_to_an_id_never_asked_or_answered_already_is_refused(channel_for, answers):
    class Wrong(Teacher):
        def submit(self, query):
            pass

        def poll(self):
            return answers

    channel = channel_for(Wrong())
    with pytest.raises(ValueError, match=f"answered query {answers[-1].query_id}, which is not"):
        channel.submit(_query([0], [1.0], [2.0]))  # (the store's channel polls at once)
        channel.poll()


def test_the_teacher_base_class_checks_what_answer_gives():
    from prefrl.feedback.teachers import check_teacher

    class Bad(Teacher):
        def __init__(self, labels):
            self.labels = labels

        def answer(self, left, right):
            return self.labels

    query = _query([0, 1], [1.0, 2.0], [2.0, 1.0])
    for labels, message in [([Label.LEFT], "Bad.answer gave 1 labels for 2 pairs"),
                            (Label.LEFT, "Bad.answer gave 1 labels for 2 pairs"),
                            ([0, 7], "Bad.answer: label 7 is invalid: expected one of left")]:  # fmt: skip
        teacher = Bad(labels)
        teacher.submit(query)
        with pytest.raises(ValueError, match=message):
            teacher.poll()
    good = Bad(["left", 1])
    good.submit(query)
    assert good.poll() == [Answer(0, Label.LEFT), Answer(1, Label.RIGHT)]
    assert good.poll() == []  # (each batch answered once)
    with pytest.raises(TypeError, match="Teacher defines neither answer\\(left, right\\)"):
        check_teacher(Teacher())
    check_teacher(Bad([]))
    assert issubclass(ScriptedTeacher, Teacher) and not Teacher.needs_true_reward
    assert Teacher().observe_episode(1.0, 10) is None
