"""RFCL's curricula, rule by rule, without an env."""

import numpy as np
import pytest

from prefrl.demos.curriculum import START_OFFSETS, ForwardCurriculum, ReverseCurriculum, Start


def test_the_reverse_frontier_starts_at_the_last_state_and_moves_only_after_a_streak():
    c = ReverseCurriculum([20, 10], delta=4, streak=2, time_divisor=1)
    assert c.frontier.tolist() == [19, 9] and not c.solved.any()
    at = Start(0, 19, 17, True)
    c.record(Start(0, 19, 17, False), True)  # not from the frontier: not counted
    c.record(at, False)  # a failure breaks the streak
    assert c.frontier[0] == 19 and c.successes[0] == 0
    c.record(at, True)
    c.record(Start(1, 9, 17, True), True)  # another demo's streak is its own
    c.record(at, True)
    assert c.frontier.tolist() == [15, 9] and c.successes[0] == 0
    c.record(at, True)  # a start at the old frontier no longer counts
    assert c.successes[0] == 0
    for _ in range(3):  # 15 -> 11 -> 7 -> 3
        for _ in range(2):
            c.record(Start(0, int(c.frontier[0]), 0, True), True)
    assert c.frontier[0] == 3
    for _ in range(2):
        c.record(Start(0, 3, 0, True), True)
    assert c.frontier[0] == 0 and not c.solved[0]  # at the first state, not yet solved from it
    c.record(Start(0, 0, 0, True), True)
    c.record(Start(0, 0, 0, True), False)
    assert not c.solved[0] and c.successes[0] == 0
    for _ in range(2):
        c.record(Start(0, 0, 0, True), True)
    assert c.frontier[0] == 0 and c.solved[0] and not c.done  # 1 of 2 solved: not over 90%
    c.record(Start(0, 0, 0, True), False)  # a solved demo stays solved
    assert c.solved[0]


def test_reverse_starts_weights_and_time_limits():
    c = ReverseCurriculum([100, 50, 10], time_divisor=3)
    c.frontier[:] = [40, 0, 9]
    w = c.weights()
    np.testing.assert_allclose(w / w[0], [1.0, 1e-6 / (40 / 100), (9 / 10) / (40 / 100)])
    rng = np.random.default_rng(0)
    starts = [c.next_start(rng) for _ in range(20_000)]
    first = [s for s in starts if s.demo == 0]
    offsets = np.bincount([s.step - 40 for s in first], minlength=5) / len(first)
    np.testing.assert_allclose(offsets, START_OFFSETS, atol=0.02)
    assert all(s.time_limit == 16 + (100 - s.step) // 3 for s in first)
    assert all(s.at_frontier == (s.step == 40) for s in first)
    last = [s for s in starts if s.demo == 2]
    assert {s.step for s in last} == {9} and all(s.at_frontier for s in last)  # clipped to T-1
    assert abs(len(last) / len(starts) - w[2]) < 0.02
    with pytest.raises(ValueError, match="expected one or more"):
        ReverseCurriculum([])


def test_stage_one_ends_when_more_than_ninety_percent_are_solved():
    c = ReverseCurriculum([5] * 10)
    c.frontier[:] = 0
    c.solved[:9] = True
    assert not c.done  # 90% exactly
    c.solved[9] = True
    assert c.done
    state = c.state_dict()
    again = ReverseCurriculum([5] * 10)
    again.load_state_dict(state)
    assert again.frontier.tolist() == c.frontier.tolist() and again.solved.all()
    del state["solved"]  # a checkpoint from before the streak at state 0
    state["frontier"][9] = 4
    again.load_state_dict(state)
    assert again.solved.tolist() == [True] * 9 + [False]


def test_forward_seeds_are_weighted_by_learnability_and_staleness():
    f = ForwardCurriculum(seeds=4, history=5)
    np.testing.assert_allclose(f.weights(), 0.25)  # nothing played: all alike
    for outcome in (True, False, False):
        f.record(0, outcome)  # some success, under 75%: score 3
    for _ in range(3):
        f.record(1, True)  # 3 of a 5-episode window: unplayed slots count as failures
    assert f.scores()[1] == 3.0
    f.record(1, True)  # 4 of 5: 75% or more, score 1
    f.record(2, False)  # never: score 2 (as seed 3, never played)
    assert f.scores().tolist() == [3.0, 1.0, 2.0, 2.0]
    score_part = np.array([1.0, 4.0**-10, 2.0**-10, 2.0**-10])  # ranks 1, 4, 2, 2 (ties share)
    score_part /= score_part.sum()
    # staleness: seed 3 never played (8 episodes ago), seed 0 played 3rd, seed 1 7th, seed 2 8th
    stale = np.array([2.0**-10, 3.0**-10, 4.0**-10, 1.0])
    stale /= stale.sum()
    np.testing.assert_allclose(f.weights(), 0.9 * score_part + 0.1 * stale)
    rng = np.random.default_rng(1)
    draws = np.bincount([f.next_seed(rng) for _ in range(5000)], minlength=4) / 5000
    np.testing.assert_allclose(draws, f.weights(), atol=0.02)
    again = ForwardCurriculum(seeds=4, history=5)
    again.load_state_dict(f.state_dict())
    np.testing.assert_allclose(again.weights(), f.weights())
