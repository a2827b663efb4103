"""QPA's parts (Hu et al., ICLR 2024): queries between what the policy does now (pairs from the
newest segments only) and hybrid replay (a share of every SAC minibatch from the newest
transitions)."""

from __future__ import annotations

import numpy as np
import pytest

from prefrl.data import ReplayBuffer, SegmentPool, Segments
from prefrl.data.segments import pair_keys


def _segments(first_id: int, n: int, h: int = 5) -> Segments:
    z = np.zeros(n, np.int64)
    return Segments(np.zeros((n, h, 2), np.float32), np.zeros((n, h, 1), np.float32),
                    np.zeros((n, h)), np.zeros((n, h, 1)), np.arange(first_id, first_id + n),
                    z, z, z)  # fmt: skip


@pytest.mark.parametrize("added", [60, 250])  # (the ring not yet full, and wrapped round)
def test_policy_aligned_pairs_come_from_the_newest_segments_only(added):
    pool = SegmentPool(100)
    for first in range(0, added, 7):
        pool.add(_segments(first, min(7, added - first)))
    rng = np.random.default_rng(0)
    left, right = pool.sample_pairs(rng, 200, newest=10)
    newest = set(range(added - 10, added))
    assert set(left.id) | set(right.id) <= newest and (left.id != right.id).all()
    assert len(set(left.id) | set(right.id)) == 10  # (all of them drawn)
    asked: set[tuple[int, int]] = set()
    left, right = pool.sample_pairs(rng, 60, asked, newest=10)
    assert len(left) == 45 == len(set(pair_keys(left.id, right.id)))  # every new pair, once
    assert set(left.id) | set(right.id) <= newest
    with pytest.raises(ValueError, match="among its newest 1"):
        pool.sample_pairs(rng, 1, newest=1)


def test_hybrid_batches_hold_their_share_of_recent_rows_in_every_minibatch():
    buffer = ReplayBuffer(300, 1, 1)
    for i in range(700):  # (wrapped round: the newest 50 are rewards 650..699)
        buffer.add(np.zeros(1), np.zeros(1), float(i), np.zeros(1), False)
    batch = buffer.sample(np.random.default_rng(0), 256, recent=50, recent_share=0.5)
    recent = batch.reward >= 650
    assert batch.reward.min() >= 400  # (only what the buffer holds)
    for block in recent.reshape(4, 64):  # every minibatch of 64 holds its 32 at least
        assert block.sum() >= 32
    assert recent.mean() < 0.75  # (the rest drawn from the whole buffer)
    same = ReplayBuffer.sample(buffer, np.random.default_rng(0), 256)
    again = buffer.sample(np.random.default_rng(0), 256, recent=50, recent_share=0.0)
    np.testing.assert_array_equal(same.reward, again.reward)  # (share 0: plain sampling)


@pytest.mark.parametrize("until_budget", [False, True])
def test_hybrid_replay_stops_once_the_budget_is_asked_only_where_asked(until_budget):
    """QPA's code draws half of each batch from the newest episodes only while it still asks for
    labels (`hybrid_replay_until_budget`, its presets); otherwise for the whole run."""
    from types import SimpleNamespace

    from prefrl.feedback.schedules import ScheduleConfig
    from prefrl.online.agents import SacSteps

    config = SimpleNamespace(hybrid_replay=0.5, hybrid_replay_until_budget=until_budget,
                             schedule=ScheduleConfig(kind="sessions", budget=100,
                                                     session_size=10, interval=1000),
                             sac=SimpleNamespace(batch_size=64, utd_ratio=1))  # fmt: skip
    run = SimpleNamespace(config=config, requested=90)
    steps = SacSteps(run)
    assert steps.hybrid_share() == 0.5  # (labels still to ask)
    run.requested = 100
    assert steps.hybrid_share() == (0.0 if until_budget else 0.5)


def _config(tmp_path, name: str, **kw):
    from test_online import _config as online_config

    return online_config(tmp_path, name=name, **kw)


@pytest.mark.parametrize("parts", ["qpa", "surf"])
def test_a_seeded_short_run_with_each_part_learns_the_reward(tmp_path, parts):
    from prefrl.online.learner import train_online
    from prefrl.reward import RewardConfig
    from prefrl.rundir.metrics import read_metrics

    reward = {"hidden_dims": (32, 32), "max_epochs": 5, "min_steps": 10}
    if parts == "qpa":  # (segments of 10 steps; the newest 300 steps: 30 segments)
        settings = {"selection": "policy-aligned", "recent_steps": 300, "hybrid_replay": 0.5,
                    "hybrid_replay_until_budget": True,
                    "reward": RewardConfig(**reward, crops=4, crop_shorter_by=(2, 4))}  # fmt: skip
    else:  # (fits long enough for confident guesses: at 5 epochs none is above 0.9)
        settings = {"reward": RewardConfig(**{**reward, "max_epochs": 30},
                                           pseudo_label_threshold=0.9)}  # fmt: skip
    result = train_online(_config(tmp_path, parts, **settings))
    assert result.labels == 80
    fits = [r for r in read_metrics(result.run_dir) if "reward/segment_return_corr" in r]
    assert len(fits) == 4 and fits[-1]["reward/segment_return_corr"] > 0.5, fits[-1]
    if parts == "surf":  # some pseudo-labels were confident enough to train on, not all
        assert 0 < fits[-1]["reward/pseudo_label_share"] < 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"hybrid_replay": 1.5}, r"--hybrid-replay=1.5 is invalid: expected a share in \[0, 1\]"),
        ({"selection": "policy-aligned", "recent_steps": 15},
         r"--recent-steps=15 is invalid: expected at least two segments' steps \(20"),
        ({"reward": "crops"}, r"--reward.crop-shorter-by 5 10 is invalid: crops of 10-step"),
        ({"reward": "pseudo", "teacher": "web"}, "add --pseudo-labels-with-people to mean it"),
        ({"reward": "pseudo", "fit_lag": 100}, r"needs fits between two steps \(--fit-lag 0\)"),
    ],
)  # fmt: skip
def test_bad_label_efficiency_settings_fail_before_any_run(tmp_path, overrides, message):
    from prefrl.feedback import TeacherConfig
    from prefrl.reward import RewardConfig

    rewards = {"crops": RewardConfig(crops=4, crop_shorter_by=(5, 10)),
               "pseudo": RewardConfig(pseudo_label_threshold=0.99)}  # fmt: skip
    if "reward" in overrides:
        overrides["reward"] = rewards[overrides["reward"]]
    if "teacher" in overrides:
        overrides["teacher"] = TeacherConfig(overrides["teacher"])
    with pytest.raises(ValueError, match=message):
        _config(tmp_path, "bad", **overrides)
    assert not (tmp_path / "bad").exists()


def test_the_label_efficiency_benchmarks_qpa_variants_change_only_what_they_name():
    """benchmarks/label_efficiency.py's methods beside "qpa": without crops, with QPA's
    dm_control fit rule, with three reward networks, with B-Pref's SAC rates, and with its
    sessions spread over the run, with its code's replay rule, with all its code's rules, and
    with those and B-Pref's whole agent; everything else is QPA's."""
    import dataclasses
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import label_efficiency as bench

    walker = bench.SETTINGS["dmc:walker-walk"]
    qpa = bench.METHODS["qpa"](walker)
    assert qpa.selection == "policy-aligned" and qpa.reward.crops == 20
    variants = {"qpa-no-crops": {"crops": 0}, "qpa-ensemble": {"members": 3},
                "qpa-fit-stop": {"stop_measured_over": "fit", "stop_accuracy": 0.98,
                                 "min_steps": 1}}  # fmt: skip
    for name, changes in variants.items():
        variant = bench.METHODS[name](walker)
        assert variant.reward == dataclasses.replace(qpa.reward, **changes), name
        assert dataclasses.replace(variant, reward=qpa.reward) == qpa, name
    # With B-Pref's SAC rates: only the agent's rates and starting temperature differ.
    bpref = bench.METHODS["qpa-bpref-sac"](walker)
    assert (bpref.sac.actor_lr, bpref.sac.critic_lr, bpref.sac.temperature_lr,
            bpref.sac.init_temperature) == (5e-4, 5e-4, 1e-4, 0.1)  # fmt: skip
    assert bpref.sac.hidden_dims == qpa.sac.hidden_dims and bpref.sac.batch_size == 256
    assert dataclasses.replace(bpref, sac=qpa.sac) == qpa
    # Spread: only the sessions' interval differs (the same 100 labels in 10 sessions).
    spread = bench.METHODS["qpa-spread"](bench._with_budget(walker, 100))
    budgeted = bench.METHODS["qpa"](bench._with_budget(walker, 100))
    assert spread.schedule.interval == 45_000 and spread.schedule.session_size == 10
    assert dataclasses.replace(spread, schedule=budgeted.schedule) == budgeted
    # QPA's replay rule: hybrid batches only while labels are asked; nothing else differs.
    replay = bench.METHODS["qpa-replay-budget"](walker)
    assert replay.hybrid_replay_until_budget and not qpa.hybrid_replay_until_budget
    assert dataclasses.replace(replay, hybrid_replay_until_budget=False) == qpa
    # Every rule of QPA's code (the presets'): that replay rule, and the raw tanh output fitted
    # by plain cross-entropy.
    code = bench.METHODS["qpa-code"](walker)
    assert code.reward == dataclasses.replace(qpa.reward, normalize=False, random_response=0.0)
    assert dataclasses.replace(code, reward=qpa.reward) == replay
    # QPA as its preset runs it (the GPU row): those rules with B-Pref's whole 2x1024 agent.
    preset = bench.METHODS["qpa-preset"](walker)
    assert preset.sac.hidden_dims == (1024, 1024) and preset.sac.batch_size == 1024
    assert dataclasses.replace(preset, sac=code.sac) == code


def test_the_qpa_presets_have_the_reference_codes_settings():
    """QPA's run_QPA.sh for walker_walk and cheetah_run: 100 labels in sessions of 10 every 20k
    steps, queries and half of each batch (while labels are asked) from the last 10 episodes,
    20 crops 5-15 steps shorter, one reward network; 500k and 1M steps."""
    from prefrl.presets import ONLINE_PRESETS

    walker = ONLINE_PRESETS["qpa-walker-100"].config
    cheetah = ONLINE_PRESETS["qpa-cheetah-100"].config
    for config, env, steps in ((walker, "dmc:walker-walk", 500_000),
                               (cheetah, "dmc:cheetah-run", 1_000_000)):  # fmt: skip
        assert (config.env, config.steps) == (env, steps)
        assert (config.schedule.kind, config.schedule.budget, config.schedule.session_size,
                config.schedule.interval) == ("sessions", 100, 10, 20_000)  # fmt: skip
        assert (config.selection, config.recent_steps) == ("policy-aligned", 10_000)
        assert config.hybrid_replay == 0.5 and config.hybrid_replay_until_budget
        reward = config.reward
        assert (reward.members, reward.crops, reward.crop_shorter_by) == (1, 20, (5, 15))
        # reward_model.py: the agent's reward is the net's raw tanh, fitted by plain CE.
        assert (reward.output, reward.normalize, reward.random_response) == ("tanh", False, 0.0)


def test_a_person_labels_qpas_policy_aligned_queries_as_they_come(tmp_path):
    """QPA with a person as the teacher (the terminal's store; `--teacher.preset web` shares
    it): each session's pairs are of the newest segments when it is asked, the whole budget is
    asked, each pair once, and the answers in by the last fit are trained on (cropped)."""
    import threading

    from test_human import a_person_labelling, known_run

    from prefrl.feedback import TeacherConfig
    from prefrl.feedback.store import FeedbackStore
    from prefrl.online.learner import train_online
    from prefrl.reward import RewardConfig
    from prefrl.rundir.metrics import read_metrics

    config = _config(tmp_path, "person", teacher=TeacherConfig("terminal"), poll_seconds=0.05,
                     first_labels_timeout=120,  # (a person's side that failed: no endless wait)
                     selection="policy-aligned", recent_steps=300, hybrid_replay=0.5,
                     reward=RewardConfig(hidden_dims=(32, 32), max_epochs=5, min_steps=10,
                                         crops=4, crop_shorter_by=(2, 4)))  # fmt: skip
    run_dir, done, answered = tmp_path / "person", threading.Event(), []
    t = a_person_labelling(run_dir, done, answered)
    try:
        result = train_online(config)
    finally:
        done.set()
        t.join()
    # The run does not wait for later sessions' answers: the last may come after its end.
    assert config.schedule.session_size <= result.labels <= sum(answered)
    with FeedbackStore(run_dir) as store:
        run_id = known_run(store, run_dir)
        asked = [(label.query_key, label.query_id) for label in store.labels(run_id)]
        asked += [(q.key, q.id) for q in store.open_queries(run_id)]
        keys, ids = np.array(sorted(asked)).T
        left, right = store.query_pairs(run_dir, ids)
    assert (keys == np.arange(80)).all()  # (the whole budget asked, each pair once)
    session = config.schedule.session_size
    asked_at = config.first_query_step + config.schedule.interval * (keys // session)
    for side in (left, right):  # (a segment's step is its first; it ends by the asking step)
        assert (side.step >= asked_at - config.recent_steps).all(), side.step - asked_at
        assert (side.step + config.segment_length <= asked_at).all()
    fits = [r for r in read_metrics(run_dir) if "reward/segment_return_corr" in r]
    assert fits and fits[-1]["feedback/labels"] == result.labels
