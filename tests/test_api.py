"""The public Python API: `from prefrl import ...`, the preference learner built from objects,
teachers in memory, callable policies, and the runnable examples."""

import argparse
import dataclasses
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import prefrl
from prefrl import (
    SAC,
    Answer,
    Label,
    MLPRewardEnsemble,
    OnlineConfig,
    PreferenceLearner,
    RewardConfig,
    SACConfig,
    ScheduleConfig,
    ScriptedTeacher,
    TeacherConfig,
    load_policy,
    make_env,
    train_online,
)
from prefrl.rundir.checkpoints import latest_checkpoint

EXAMPLES = Path(__file__).parent.parent / "examples"
SMALL = {
    "steps": 900, "warmstart_steps": 300, "segment_length": 10, "eval_interval": 900,
    "eval_episodes": 2, "video": False, "checkpoint_interval": 900, "log_interval": 300,
    "buffer_size": 2_000, "progress": False,
    "schedule": ScheduleConfig(budget=40, session_size=20, interval=300),
    "reward": RewardConfig(hidden_dims=(16,), max_epochs=3, min_steps=5),
    "sac": SACConfig(hidden_dims=(16, 16), batch_size=32),
}  # fmt: skip


def test_every_public_name_imports_from_prefrl():
    assert sorted(prefrl.__all__) == sorted(["__version__", *prefrl._PUBLIC])
    for name in prefrl._PUBLIC:
        module = importlib.import_module(prefrl._PUBLIC[name])
        assert getattr(prefrl, name) is getattr(module, name), name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        prefrl.nope  # noqa: B018


def test_a_teacher_in_memory_trains_exactly_as_one_through_the_store(tmp_path):
    """The same seeded run through the CLI's path (the SQLite store) and in memory: the same
    labels, the same agent."""
    config = OnlineConfig(env="toy:point-reach", runs_dir=tmp_path, **SMALL)
    stored = train_online(dataclasses.replace(config, name="stored"))
    in_memory = PreferenceLearner(config=config, name="in-memory").train()
    assert not (in_memory.run_dir / "feedback.db").exists()
    assert (stored.run_dir / "feedback.db").exists()
    assert stored.labels == in_memory.labels == 40
    a, b = latest_checkpoint(stored.run_dir), latest_checkpoint(in_memory.run_dir)
    assert (a / "labels.npz").read_bytes() == (b / "labels.npz").read_bytes()
    assert (a / "agent.msgpack").read_bytes() == (b / "agent.msgpack").read_bytes()


class SlowTeacher:
    """A user's own teacher: prefers the segment that ends nearer the goal, and answers each
    batch one poll late (as an outside labeller would)."""

    def __init__(self):
        self.asked, self.ready = [], []  # answers not yet ready, ready at the next poll

    def submit(self, query):
        distance = lambda s: np.linalg.norm(s.obs[:, -1, :2] - s.obs[:, -1, 4:6], axis=-1)
        nearer_right = distance(query.right) < distance(query.left)
        self.asked += [Answer(int(i), Label.RIGHT if r else Label.LEFT)
                       for i, r in zip(query.ids, nearer_right, strict=True)]  # fmt: skip

    def poll(self):
        out, self.ready, self.asked = self.ready, self.asked, []
        return out


def test_objects_in_a_learner_own_teacher_agent_reward_model_env(tmp_path):
    env = make_env("toy:point-reach", seed=0)
    teacher = SlowTeacher()
    fast = RewardConfig(hidden_dims=(16,), max_epochs=3, lr=3e-3)  # (learns 40 labels at once)
    learner = PreferenceLearner(
        env, teacher, agent=SAC(SACConfig(hidden_dims=(16, 16), batch_size=32), 6, 2),
        reward_model=MLPRewardEnsemble(fast, 6, 2), runs_dir=tmp_path, name="own",
        **{k: v for k, v in SMALL.items() if k not in ("sac", "reward")},
    )  # fmt: skip
    assert learner.config.sac.hidden_dims == (16, 16)  # the objects' settings are recorded
    assert learner.config.reward.max_epochs == 3
    result = learner.train()
    assert result.labels == 40 and result.details["unanswered"] == 0
    assert not result.details["notes"]
    assert result.details["reward_metrics"]["reward/val_accuracy"] > 0.5
    env.step(np.zeros(2, np.float32))  # the learner did not close the env it was given
    env.close()
    policy = load_policy(result.run_dir)
    obs = make_env("toy:point-reach").reset(seed=0)[0]
    action = policy(obs)
    assert action.shape == (2,) and np.all(np.abs(action) <= 1)
    assert policy(np.stack([obs, obs])).shape == (2, 2)
    with pytest.raises(ValueError, match="takes 6 numbers per observation"):
        policy(np.zeros(4))


class LateTeacher(SlowTeacher):
    """Answers each batch only once it has been polled `late` times after it was asked (an
    outside labeller holding each answer); never, with `late` None."""

    def __init__(self, late: int | None):
        super().__init__()
        self.late, self.polls = late, 0

    def poll(self):
        self.polls += 1
        if self.late is None or self.polls < self.late or not self.asked:
            return []
        self.polls, out, self.asked = 0, self.asked, []
        return out


@pytest.mark.parametrize("in_memory", [True, False])
def test_a_teacher_that_answers_late_is_waited_for_and_the_end_says_what_was_not(
    tmp_path, capsys, in_memory
):
    """Sessions at steps 300 and 600 of a 900-step run, looked for every 100 steps: the first
    answers (20 polls late) come only because the run waits for them; the second session's
    never come, and the run's end says so."""
    small = {**SMALL, "poll_seconds": 0.01}
    result = PreferenceLearner("toy:point-reach", LateTeacher(20), in_memory=in_memory,
                               runs_dir=tmp_path, name="late", **small).train()  # fmt: skip
    assert result.labels == 20 and "reward/val_accuracy" in result.details["reward_metrics"]
    assert result.details["unanswered"] == 20
    note = "20 of the 40 pairs asked were unanswered at the run's last step: their labels were"
    assert result.details["notes"] == [f"{note} not trained on"]
    out = capsys.readouterr().out
    assert "Waiting for the teacher's first 20 answers" in out
    # (the notes, then the summary line every run ends with)
    assert out.rstrip().splitlines()[-2:] == [f"note: {note} not trained on", result.summary()]


def test_a_teacher_that_never_answers_ends_the_run_saying_so(tmp_path, capsys):
    result = PreferenceLearner("toy:point-reach", LateTeacher(None), runs_dir=tmp_path,
                               first_labels_timeout=0.2, **SMALL).train()  # fmt: skip
    assert result.labels == 0 and result.details["unanswered"] == 40 and result.steps == 900
    assert result.details["notes"][0].startswith("no labels came before the run's last step")
    assert "No first labels after 0.2 s (first_labels_timeout)" in capsys.readouterr().out


class HalfTeacher(SlowTeacher):
    """Answers the first half of the first batch, then nothing more."""

    def poll(self):
        out, self.asked = self.asked[: len(self.asked) // 2], [None]  # (never again)
        return [a for a in out if a is not None]


def test_a_timeout_with_some_first_labels_in_says_how_many(tmp_path, capsys):
    PreferenceLearner("toy:point-reach", HalfTeacher(), runs_dir=tmp_path,
                      first_labels_timeout=0.2, **SMALL).train()  # fmt: skip
    assert "Only 10 of the first 20 labels after 0.2 s" in capsys.readouterr().out


class NearerTheGoal(prefrl.Teacher):
    """A teacher subclass with a rule of its own: the segment that ends nearer the goal (equal
    within a centimetre), its answers each given two polls late."""

    def answer(self, left, right):
        gap = lambda s: np.linalg.norm(s.obs[:, -1, :2] - s.obs[:, -1, 4:6], axis=-1)
        diff = gap(left) - gap(right)
        return np.select([diff > 0.01, diff < -0.01], [Label.RIGHT, Label.LEFT], Label.EQUAL)

    def poll(self):
        self.held = [*getattr(self, "held", []), super().poll()]
        return self.held.pop(0) if len(self.held) > 2 else []


def test_a_teacher_subclass_with_a_rule_of_its_own_trains(tmp_path):
    result = PreferenceLearner("toy:point-reach", NearerTheGoal(), runs_dir=tmp_path,
                               poll_seconds=0.01, **SMALL).train()  # fmt: skip
    assert result.labels == 40 and result.details["unanswered"] == 0
    assert not result.details["notes"]
    assert result.details["reward_metrics"]["reward/val_accuracy"] > 0.5
    # It judges what it sees, so an env without a true reward is no obstacle (a scripted one's is).
    small = {k: v for k, v in SMALL.items() if k not in ("sac", "reward")}
    PreferenceLearner("toy:point-free", NearerTheGoal(), runs_dir=tmp_path, **small)
    with pytest.raises(ValueError, match="point-free has no true reward, so teacher=.*Scripted"):
        PreferenceLearner("toy:point-free", ScriptedTeacher(TeacherConfig(), 0, 50), **small)


class MostlyEqual(NearerTheGoal):
    """A rule that tells only one pair in four apart: "equal" for the others."""

    def answer(self, left, right):
        answers = super().answer(left, right)
        return np.where(np.arange(len(answers)) % 4 == 0, answers, Label.EQUAL)


def test_a_run_whose_answers_are_mostly_ties_says_so(tmp_path, capsys):
    result = PreferenceLearner("toy:point-reach", MostlyEqual(), runs_dir=tmp_path,
                               **SMALL).train()  # fmt: skip
    told = [n for n in result.details["notes"] if "answers were 'equal'" in n]
    assert len(told) == 1, result.details["notes"]
    equal = int(told[0].split(" of the ")[0])
    assert equal > 20 and f"of the {result.labels} answers" in told[0]
    out = capsys.readouterr().out  # (after the first fit that finds them, and at the end)
    assert out.count("answers were 'equal'") == 2


def test_help_on_teacher_states_the_contract():
    import pydoc

    text = pydoc.render_doc(prefrl.Teacher, renderer=pydoc.plaintext)
    assert "Protocol" not in text
    for part in ["answer(left, right)", "submit(query)", "`Query` of `ids`", "`obs` (N, H",
                 "`state` (N, H", "poll()", "never block", "Late answers", "first_labels_timeout",
                 "never asked, or already answered, is refused", "Label.EQUAL", "Label.SKIP",
                 "can't tell", "needs_true_reward` (default False)",
                 "observe_episode(episode_return, length)", "state_dict()"]:  # fmt: skip
        assert part in text, part


def test_bad_parts_are_named_with_what_is_accepted(tmp_path):
    small = {
        "runs_dir": tmp_path,
        **{k: v for k, v in SMALL.items() if k not in ("sac", "reward")},
    }
    with pytest.raises(TypeError, match="unknown settings \\['stepz'\\]"):
        PreferenceLearner("toy:point-reach", stepz=10)
    with pytest.raises(TypeError, match="env=42 is not an env id"):
        PreferenceLearner(42)

    with pytest.raises(ValueError, match="cannot restore a saved state: a person labelling"):
        PreferenceLearner("tests.user_envs:Slider-v0", teacher="web", **small)

    class SubmitOnly:
        def submit(self, query):
            pass

    with pytest.raises(TypeError, match="has no poll\\(\\) method"):
        PreferenceLearner("toy:point-reach", teacher=SubmitOnly(), **small)
    with pytest.raises(TypeError, match="is not a prefrl SAC or PPO"):
        PreferenceLearner("toy:point-reach", agent="sac", **small)
    with pytest.raises(ValueError, match="reward_model takes observations of size 4"):
        PreferenceLearner("toy:point-reach", reward_model=MLPRewardEnsemble(RewardConfig(), 4, 2),
                          **small)  # fmt: skip
    with pytest.raises(
        ValueError, match="agent takes observations of size 6 and actions of size 3"
    ):
        PreferenceLearner("toy:point-reach", agent=SAC(SACConfig(), 6, 3), **small)
    with pytest.raises(ValueError, match="is a person"):
        PreferenceLearner("toy:point-reach", teacher="web", in_memory=True, **small)
    with pytest.raises(ValueError, match="teacher 'orakel' does not exist; scripted: oracle"):
        PreferenceLearner("toy:point-reach", teacher="orakel", **small)
    teacher = ScriptedTeacher(TeacherConfig("stoc"), 0, 50)
    assert PreferenceLearner("toy:point-reach", teacher, **small).config.teacher.preset == "stoc"


def test_wrong_types_and_values_are_named_as_python_arguments_before_any_run(tmp_path):
    from prefrl import CPLFinetuner, OfflineLearner, RLLearner

    small = {"runs_dir": tmp_path, "name": "run"}
    for settings, error, message in [
        ({"schedule": {"budget": 10}}, TypeError, ("PreferenceLearner: schedule={'budget': 10} "
         "is a dict; expected a ScheduleConfig, e.g. ScheduleConfig(budget=10)")),
        ({"steps": "300"}, TypeError, "PreferenceLearner: steps='300' is a str; expected an int"),
        ({"steps": 300.5}, TypeError, "PreferenceLearner: steps=300.5 is a float; expected an int"),
        ({"video": 1}, TypeError, "PreferenceLearner: video=1 is an int; expected True or False"),
        ({"steps": -5}, ValueError, "steps=-5 is invalid: expected a positive integer"),
        ({"segment_length": 60}, ValueError, "segment_length=60 is longer than toy:point-reach's"),
    ]:  # fmt: skip
        with pytest.raises(error) as e:
            PreferenceLearner("toy:point-reach", **small, **settings)
        assert str(e.value).startswith(message), str(e.value)
    with pytest.raises(ValueError, match="^steps=0 is invalid"):
        RLLearner("Pendulum-v1", steps=0, **small)
    with pytest.raises(FileNotFoundError, match="^CPLFinetuner: ratings='nope' does not exist"):
        CPLFinetuner(tmp_path, "nope", **small)
    with pytest.raises(FileNotFoundError, match="is neither a checkpoint nor a run directory"):
        CPLFinetuner(tmp_path, tmp_path, **small)  # (the policy is loaded at construction)
    with pytest.raises(FileNotFoundError, match="^OfflineLearner: dataset='nope' does not exist"):
        OfflineLearner("nope", "queries.json", "mr", steps=250, **small)  # (not steps_per_call)
    with pytest.raises(TypeError, match="^PreferenceLearner: config=.* is not OnlineConfig"):
        PreferenceLearner("toy:point-reach", config=ScheduleConfig())
    assert not any(tmp_path.iterdir())  # no run directory was made


def test_the_configs_built_by_hand_name_a_wrong_type_as_their_argument():
    for cls, given, message in [
        (ScheduleConfig, {"budget": "10"}, "budget='10' is a str; expected an int"),
        (ScheduleConfig, {"budget": 10.5}, "budget=10.5 is a float; expected an int"),
        (TeacherConfig, {"beta": "1"}, "beta='1' is a str; expected a number or None"),
        (RewardConfig, {"members": 2.0}, "members=2.0 is a float; expected an int"),
    ]:
        with pytest.raises(TypeError) as e:
            cls(**given)
        assert str(e.value) == f"{cls.__name__}: {message}"
    assert ScheduleConfig(budget=np.int64(10), decay_constant=5).budget == 10  # (numbers all)


def test_a_teacher_refuses_an_env_it_cannot_judge_before_anything_is_written(tmp_path):
    """`Teacher.check_env`: the backflip example's rule reads a Hopper's torso; given Pendulum
    it says so when the learner is made, and no run directory exists."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import backflip
    finally:
        sys.path.remove(str(EXAMPLES))
    with pytest.raises(ValueError, match="Pendulum-v1 is not a Hopper"):
        PreferenceLearner("Pendulum-v1", backflip.BackflipTeacher(), runs_dir=tmp_path, **SMALL)
    assert list(tmp_path.iterdir()) == []
    PreferenceLearner(backflip.ENV_ID, backflip.BackflipTeacher(), runs_dir=tmp_path, **SMALL)
    # The example's learner: PEBBLE's tanh ensemble unless a reward model is given (the
    # benchmark's pref-linear method gives a linear-output one).
    assert backflip.learner(2_000, runs_dir=tmp_path).config.reward.output == "tanh"
    # (a short try evaluates one episode: each of its 1000 steps runs MuJoCo's collision check)
    assert backflip.learner(2_000, runs_dir=tmp_path).config.eval_episodes == 1
    assert backflip.learner(500_000, runs_dir=tmp_path).config.eval_episodes == 5
    linear = RewardConfig(output="linear", hidden_dims=(128, 128, 128))
    assert backflip.learner(2_000, runs_dir=tmp_path, reward=linear).config.reward == linear


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_the_examples_run(script, tmp_path):
    """Each script in examples/ runs as a user would run it (shortened by its argument), and
    its last run ends with the result's one line: how far it got and how it did, in a run
    directory the script made. (One test a script: the suite's workers share them out.)"""
    out = subprocess.run([sys.executable, str(EXAMPLES / script), "1500"], cwd=tmp_path,
                         check=False, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, f"{script}:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    summary = r"^.+ after [\d,]+ steps: .*return .*; (.+)$"  # (TrainResult.summary)
    summaries = re.findall(summary, out.stdout, re.MULTILINE)
    assert summaries, f"{script} printed no result:\n{out.stdout[-2000:]}"
    assert (tmp_path / summaries[-1]).is_dir(), summaries[-1]


def test_a_gymnasium_env_object_of_the_users_trains_like_an_id(tmp_path):
    """An env from `gymnasium.make` (here a user's own, registered MuJoCo task) goes straight
    into the learner; evaluation makes more of it by its id."""
    import gymnasium as gym

    env = gym.make("tests.user_envs:RollingBall-v0")
    result = PreferenceLearner(env, "oracle", runs_dir=tmp_path, name="ball",
                               **{k: v for k, v in SMALL.items() if k != "segment_length"},
                               segment_length=10).train()  # fmt: skip
    assert result.labels == 40 and result.final_eval.returns.shape == (2,)
    stored = json.loads((result.run_dir / "config.json").read_text())
    assert stored["env"] == "tests.user_envs:RollingBall-v0"  # (any process can make it)
    env.reset(seed=0)  # the learner did not close the env it was given
    env.close()


def test_rl_offline_and_cpl_take_the_same_shape_of_arguments(tmp_path):
    """RLLearner(env, agent=...), OfflineLearner(dataset, labels, reward), CPLFinetuner(policy,
    ratings): objects and paths in, settings as keywords (checked like the learner's), train()."""
    import gymnasium as gym
    from conftest import short_sac_run
    from test_offline import synthetic

    from prefrl import CPLFinetuner, OfflineLearner, RLLearner
    from prefrl.agents import PPO, PPOConfig
    from prefrl.feedback.dataset_queries import label_queries, sample_queries
    from prefrl.feedback.raters import rate_scripted
    from prefrl.finetuning.rating_runs import make_rating_run, policy_segments
    from prefrl.reward.segment_models import SegmentRewardConfig

    small_ppo = PPOConfig(hidden_dims=(16,), rollout_steps=256, minibatch_size=64, epochs=2)
    env = gym.make("tests.user_envs:Slider-v0")
    run = RLLearner(env, agent=PPO(small_ppo, 2, 1), steps=512, eval_interval=512,
                    eval_episodes=2, checkpoint_interval=512, video=False, progress=False,
                    runs_dir=tmp_path, name="rl").train()  # fmt: skip
    stored = json.loads((run.run_dir / "config.json").read_text())
    assert (stored["env"], stored["algo"], stored["ppo"]["rollout_steps"]) == (
        "tests.user_envs:Slider-v0", "ppo", 256)  # fmt: skip
    assert run.steps == 512 and run.final_eval.returns.shape == (2,)
    env.close()
    with pytest.raises(ValueError, match="agent takes observations of size 6 and actions of size"):
        RLLearner("tests.user_envs:Slider-v0", agent=PPO(small_ppo, 6, 2))
    with pytest.raises(TypeError, match="RLLearner got unknown settings \\['stepz'\\]"):
        RLLearner("toy:point-reach", stepz=1)

    data = synthetic(n_episodes=10, length=30, obs_dim=6, action_dim=2)
    data.save(tmp_path / "ds")
    label_queries(sample_queries(data, 32, length=10, seed=1), data, TeacherConfig()).save(
        tmp_path / "q.json"
    )
    events = []
    offline = OfflineLearner(tmp_path / "ds", tmp_path / "q.json", "mr", steps=200,
                             steps_per_call=100, eval_interval=200, checkpoint_interval=200,
                             eval_episodes=1, progress=False, runs_dir=tmp_path, name="off",
                             reward_model=SegmentRewardConfig(epochs=2)).train(
                                 callback=lambda e: events.append((e.kind, e.step)))  # fmt: skip
    assert offline.steps == 200 and np.isfinite(offline.details["score_mean"])
    assert "reward/val_accuracy" in offline.details["reward_metrics"]
    assert offline.labels == 32 and offline.agreement == offline.details["reward_metrics"][
        "reward/episode_return_correlation"]  # fmt: skip
    assert offline.final_eval.extra["eval/score_mean"] == offline.details["score_mean"]
    assert events[0] == ("fit", 0) and events[-2:] == [("eval", 200), ("checkpoint", 200)]
    with pytest.raises(ValueError, match="is an offline \\(IQL\\) run's checkpoint: load_policy"):
        offline.policy  # noqa: B018
    with pytest.raises(ValueError, match="holds queries without labels"):
        sample_queries(data, 8, length=10, seed=2).save(tmp_path / "unlabelled.json")
        OfflineLearner(tmp_path / "ds", tmp_path / "unlabelled.json", "mr")

    sac_run = short_sac_run(tmp_path, "sac", steps=500)
    segments, infos = policy_segments([sac_run], [0.0, 0.3], count=8, length=10)
    ratings = make_rating_run(tmp_path / "rate", "toy:point-reach", segments, infos, None)
    rate_scripted(ratings, "return")
    events.clear()
    tuned = CPLFinetuner(load_policy(sac_run), ratings, steps=10, eval_episodes=2,
                         log_interval=5, runs_dir=tmp_path, name="cpl").train(
                             lambda e: events.append((e.kind, e.step)))  # fmt: skip
    assert tuned.details["pairs"] > 0 and np.isfinite(tuned.final_eval.returns).all()
    assert tuned.labels == 8 and tuned.details["start_eval"].returns.shape == (2,)
    assert events == [("eval", 0), ("log", 5), ("log", 10), ("eval", 10), ("checkpoint", 10)]
    assert tuned.policy(np.zeros(6)).shape == (2,)
    # A stop from a callback: the actor as it is, saved at the step reached.
    stopped = CPLFinetuner(load_policy(sac_run), ratings, steps=10, eval_episodes=2,
                           log_interval=5, runs_dir=tmp_path, name="cpl-stopped").train(
                               lambda e: e.kind != "log")  # fmt: skip
    assert stopped.interrupted and stopped.steps == 5 and stopped.final_eval is None
    assert latest_checkpoint(stopped.run_dir).name == "step_000000005"


def test_the_backflip_env_practises_landings_from_its_own_leaps():
    """examples/backflip.py's env keeps states of its own leaps (past `PRACTICE_FROM` of a turn)
    and starts unseeded resets from them (the share `practice`), for one clip; a seeded reset (an
    evaluation's) starts standing. The rule judges a clip that starts mid-flip on the flip it
    shows (landing it counts), but not one that starts mid-hop tipped forward; the env's rewards
    still add up to the rule's score of what it saw. A share outside [0, 1] is refused."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import backflip
    finally:
        sys.path.remove(str(EXAMPLES))
    clip = np.zeros((60, 11))
    clip[:, 0], clip[:30, 6] = 2.0, 2.0  # (in the air, the second half of a turn back)
    clip[:30, 1] = -np.pi - np.linspace(0, np.pi, 30)
    clip[30:, 0], clip[30:, 1] = 1.2, -2 * np.pi  # (then on its feet, upright)
    assert int(backflip.rule_tally(clip)[1]) == 1  # (a flip under way, landed)
    hop = clip.copy()
    hop[:30, 1] = 0.3 - np.linspace(0, 0.3, 30)  # (tipped forward a twentieth of a turn)
    hop[30:, 1] = 0.0
    assert int(backflip.rule_tally(hop)[1]) == 0
    env = prefrl.make_env(backflip.ENV_ID, seed=0)
    hopper = env.unwrapped
    env.reset(seed=0)
    assert len(hopper.practice_starts) == 0 and backflip.PRACTICE_SHARE > 0
    hopper.practice = 1.0
    hopper.practice_starts.append(
        (np.array([0.0, 1.8, -np.pi, 0, 0, 0]), np.array([0.0, 0, -10, 0, 0, 0]))
    )  # (a half turn back, in the air, turning back)
    seen, rewards, truncated = [env.reset()[0]], [], False
    assert seen[0][0] == 1.8 and seen[0][1] == np.float32(-np.pi)
    while not truncated:
        o, r, _, truncated, _ = env.step(np.zeros(3))
        seen.append(o)
        rewards.append(r)
    assert len(rewards) == backflip.SEGMENT_LENGTH  # (one clip)
    assert len(hopper.practice_starts) > 1  # (its turning on, past 0.4 of a turn, kept)
    np.testing.assert_allclose(sum(rewards), float(backflip.rule_score(np.array(seen))), atol=1e-6)
    standing = env.reset(seed=1)[0]
    assert abs(standing[0] - 1.25) < 0.01 and abs(standing[1]) < 0.01
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(ValueError, match="must be within \\[0, 1\\]"):
            backflip.HopperBackflip(practice=bad)


def test_the_backflip_rule_can_price_time_on_the_floor():
    """`floor=True`: the rule's score costs `FLOOR_COST` for each step (after the first) with the
    torso or thigh down, so its teacher prefers, of two clips alike but for that, the one that
    lies less; the floor env's rewards add up to that score, while the score it reports for
    evaluations stays the rule's without the cost."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import backflip
    finally:
        sys.path.remove(str(EXAMPLES))
    obs = np.zeros((100, 11))
    obs[:, 0] = 1.2  # (standing)
    lying, longer = obs.copy(), obs.copy()
    lying[10:70, 0], longer[10:90, 0] = 0.07, 0.07  # (the torso on the floor: 60, 80 steps)
    cost = backflip.FLOOR_COST
    for clip, steps in ((lying, 60), (longer, 80)):
        assert float(backflip.rule_score(clip, floor=True)) == pytest.approx(
            float(backflip.rule_score(clip)) - steps * cost, abs=1e-9)  # fmt: skip
    assert float(backflip.rule_score(lying)) - float(backflip.rule_score(longer)) < backflip.TIE
    segments = [argparse.Namespace(obs=o[None]) for o in (lying, longer)]  # (what it reads)
    assert backflip.BackflipTeacher().answer(*segments)[0] == Label.EQUAL  # (a tie without)
    assert backflip.BackflipTeacher(floor=True).answer(*segments)[0] == Label.LEFT
    env = prefrl.make_env(backflip.FLOOR_ENV_ID, seed=0)
    seen, rewards, info = [env.reset(seed=0)[0]], [], {}
    for action in np.random.default_rng(0).uniform(-1, 1, (backflip.EPISODE_STEPS, 3)):
        o, r, _, _, info = env.step(action)
        seen.append(o)
        rewards.append(r)
    seen = np.array(seen)
    assert backflip.floor_contacts(seen)[0].sum() > 100  # (random actions fall and lie)
    np.testing.assert_allclose(
        sum(rewards), float(backflip.rule_score(seen, floor=True)), atol=1e-6
    )
    reported = info["episode_metrics"]["rule_score"]
    np.testing.assert_allclose(reported, float(backflip.rule_score(seen)), atol=1e-6)


def test_the_backflip_benchmark_runs_a_finished_run_on_to_more_steps(tmp_path, monkeypatch):
    """benchmarks/backflip.py reuses a run finished at its budget, resumes one finished short of
    a longer `--steps` from its last checkpoint, gives the held-temperature methods their SAC
    settings and the PPO methods PPO (the learner is a stand-in that records what it was
    given)."""
    spec = importlib.util.spec_from_file_location(
        "backflip_benchmark", EXAMPLES.parent / "benchmarks" / "backflip.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    given, envs = [], []

    def finish(settings):  # (a run's end: its folder, as a real run leaves it)
        (settings["runs_dir"] / settings["name"]).mkdir(exist_ok=True)
        return argparse.Namespace(interrupted=False)

    class Learner:
        def __init__(self, env, **settings):
            envs.append(env)
            given.append(settings)

        def train(self):
            return finish(given[-1])

    monkeypatch.setattr(bench, "RLLearner", Learner)
    monkeypatch.setattr(bench, "latest_checkpoint", lambda run: run / "checkpoints" / "last")
    run = tmp_path / "rule-reward-alpha0.02_s0"
    (run / "checkpoints").mkdir(parents=True)
    (run / bench.DONE).write_text(json.dumps({"steps": 500}))
    assert bench.train("rule-reward-alpha0.02", 0, tmp_path, 500) == run and given == []
    bench.train("rule-reward-alpha0.02", 0, tmp_path, 1000)
    assert given[0]["steps"] == 1000 and given[0]["resume"] == run
    assert given[0]["sac"].init_temperature == 0.02 and not given[0]["sac"].learn_temperature
    assert json.loads((run / bench.DONE).read_text())["steps"] == 1000
    bench.train("rule-reward-ppo", 0, tmp_path, 3000)  # (PPO on the unscaled rule)
    assert envs[-1] == bench.backflip.ENV_ID and given[-1]["algo"] == "ppo"
    assert given[-1]["eval_interval"] == bench.PPO_EVAL_INTERVAL and "resume" not in given[-1]
    taught = []
    monkeypatch.setattr(
        bench.backflip, "teach", lambda steps, **kw: taught.append((steps, kw)) or finish(kw)
    )
    bench.train("pref-ppo", 0, tmp_path, 3000)  # (PrefPPO, its sessions spread over the run)
    assert taught[0][0] == 3000 and taught[0][1]["spread"] and taught[0][1]["algo"] == "ppo"
    assert isinstance(taught[0][1]["ppo"], bench.PPOConfig)
    assert taught[0][1]["ppo"].lr_anneal_steps == 0
    bench.train("pref-ppo-norm-anneal", 0, tmp_path, 3000)  # (its rate falls to 0 over the run)
    assert taught[1][1]["ppo"].lr_anneal_steps == 3000 and taught[1][1]["ppo"].normalize_obs
    bench.train("pref-ppo-norm-floor", 0, tmp_path, 3000)  # (the teacher prices the floor)
    assert taught[2][1]["floor"] and taught[2][1]["ppo"].normalize_obs
    bench.train("rule-reward-ppo-floor", 0, tmp_path, 3000)  # (so does the rule's reward)
    assert envs[-1] == bench.backflip.FLOOR_ENV_ID


def test_the_landing_search_starts_from_the_policys_own_plan():
    """tools/backflip_landable.py: a clip played from a kept leap state scores the same each
    time, and the cross-entropy search from it finds a plan scoring at least the policy's own
    (the plan it starts around is one of its first round's)."""
    sys.path[:0] = [str(EXAMPLES), str(EXAMPLES.parent / "tools")]
    try:
        import backflip
        import backflip_landable
    finally:
        del sys.path[:2]
    env = backflip.HopperBackflip(practice=1.0)
    env.reset(seed=0)
    start = (np.array([0.0, 2.2, -np.pi, 0, 0, 0]), np.array([0.0, 0, -15, 0, 0, 0]))
    own = np.random.default_rng(1).uniform(-1, 1, (150, 3))  # (it comes down: the pose counts)
    held = np.repeat(own.reshape(-1, 5, 3).mean(1), 5, axis=0)
    first = backflip_landable.play(env, start, held)
    assert backflip_landable.play(env, start, held) == first
    alone = argparse.Namespace(hold=5, std=0.5, population=1, elites=1, iterations=1)
    assert backflip_landable.search(env, start, own, alone, np.random.default_rng(0)) == first
    settings = argparse.Namespace(hold=5, std=0.5, population=6, elites=2, iterations=2)
    best = backflip_landable.search(env, start, own, settings, np.random.default_rng(0))
    assert best[0] >= first[0] - 1e-9


def test_the_backflip_rule_pays_backward_turns_in_the_air(tmp_path):
    """examples/backflip.py's rule: a whole backward turn in one leap, from its feet to its feet,
    scores the turn past its first quarter, half a turn for coming down standing and a turn for
    the landing; a leap of 0.9 of a turn scores 0.65, and 0.5 x the cosine of its angle more
    coming down foot first at standing height, a tenth of that on its back at a tenth of that
    height; ten leaps of 0.3 score less than one unlanded flip, ten of 0.09 nothing; with the
    torso on the floor midway, the leap's turns before it are kept and no flip is landed; a turn
    and a half in the air without a landing scores three quarters of a turn; the same turn made
    on the floor scores nothing, and so do hops tipping back a twentieth of a turn; the env's
    rewards, step by step, add up to the rule's score. Its PEBBLE asks for 1000 labels by 190k
    steps, or spread over the run. tools/backflip_landings.py counts the flips landed in a run's
    buffer (its episodes where the run's metrics say they ended), and its leaps."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import backflip
    finally:
        sys.path.remove(str(EXAMPLES))
    standing = backflip.ON_FEET_BONUS
    obs = np.zeros((100, 11))
    obs[:, 0] = 1.2  # (standing: the foot on the floor)
    obs[10:70, 0] = 2.0  # (the whole body in the air)
    obs[10:70, 1] = -np.linspace(0, 2 * np.pi, 60)
    obs[70:, 1] = -2 * np.pi
    obs[10:69, 6] = 2.0  # (moving up or down in flight)
    on_feet = 9 + 30  # (steps 1-9 and 70-99)
    assert abs(float(backflip.rule_score(obs)) - (2.25 + on_feet * standing)) < 1e-6
    assert int(backflip.rule_tally(obs)[1]) == 1  # (one backflip landed)
    down = obs.copy()
    down[40, 0] = 0.07  # (the torso on the floor midway: 29 of the 59 steps' turns before it)
    assert abs(float(backflip.rule_score(down)) - (29 / 59 - 0.25 + on_feet * standing)) < 1e-6
    assert int(backflip.rule_tally(down)[1]) == 0
    near = np.zeros((100, 11))
    near[:, 0] = 1.2
    near[10:58, 0], near[10:58, 6] = 2.0, 2.0  # (in the air, turning 0.9 of a turn back)
    near[10:58, 1] = -np.linspace(0, 0.9 * 2 * np.pi, 48)
    near[58:, 1] = -0.9 * 2 * np.pi
    near[58, 0], near[58, 6] = 1.1, -2.0  # (down foot first, at 36 degrees: not standing)
    near[59:, 0] = 0.07  # (then on its back)
    back = near.copy()
    back[58, 0] = 0.07  # (down on its back at once)
    upright = np.cos(0.9 * 2 * np.pi)
    low = 0.07 / backflip.TOUCHDOWN_HEIGHT  # (the torso's height over standing height)
    assert (
        abs(float(backflip.rule_score(back)) - (0.65 + 0.5 * upright * low + 9 * standing)) < 1e-6
    )
    sit = near.copy()  # (tucked, coming down upright to sit: the torso near the floor a step
    sit[10:, 2:5] = [-2.7, -1.47, -0.79]  # before it touches, and paid as it comes near)
    sit[58, 0], sit[59:, 0], sit[58:, 6] = 0.3, 0.23, 0.0
    assert backflip.floor_contacts(sit[58])[0] and backflip.floor_contacts(sit[58])[1]
    assert (
        abs(float(backflip.rule_score(sit)) - (0.65 + 0.5 * upright * 0.3 / 0.7 + 9 * standing))
        < 1e-6
    )
    assert abs(float(backflip.rule_score(near)) - (0.65 + 0.5 * upright + 9 * standing)) < 1e-6

    def leaps(count: int, turns: float) -> float:  # (touching down foot first between them)
        standing_up = np.array(True), np.array(False), np.array(False)  # (feet, down, air)
        state, total = backflip.start_state(0.0, *standing_up), 0.0
        steps = [(0.0, False, True), *[(turns / 5, True, True)] * 5, (0.0, True, False)]
        for _ in range(count):
            for turn, before, after in steps:
                credit, state, _ = backflip.rule_step(state, turn, before, after, False, False, 0)
                total += float(credit)
        return total

    assert abs(leaps(1, 0.9) - 0.65) < 1e-9 and abs(leaps(10, 0.3) - 0.5) < 1e-9
    assert leaps(10, 0.09) == 0.0 and leaps(10, 0.3) < leaps(1, 1.0)
    assert abs(leaps(1, 1.0) - 0.75) < 1e-9
    # tools/backflip_landings.py: the same two, as the episodes of a run's buffer
    still = np.repeat(obs[-1:], backflip.EPISODE_STEPS - len(obs), 0)
    steps = np.concatenate([obs, still, down, still])
    where = tmp_path / "run/checkpoints/step_000002000"
    where.mkdir(parents=True)
    (where.parent / "latest").write_text(where.name)
    np.savez(where / "buffer.npz", obs=steps, next_obs=np.concatenate([steps[1:], steps[-1:]]))
    told = subprocess.run([sys.executable, "tools/backflip_landings.py", str(tmp_path / "run")],
                          cwd=EXAMPLES.parent, capture_output=True, text=True, check=True,
                          timeout=300)  # fmt: skip
    assert told.stdout.startswith("2 episodes, 1 with a landed backflip, 1 landed in all")
    assert "2 leaps, 1 of half a turn or more, 1 of those down foot first" in told.stdout
    # episodes of 100 steps (practice starts end after a clip): where the run's metrics say
    short = np.concatenate([obs, down])
    np.savez(where / "buffer.npz", obs=short, next_obs=np.concatenate([short[1:], short[-1:]]))
    ends = [{"step": 100, "train/episode_length": 100}, {"step": 200, "train/episode_length": 100}]
    (tmp_path / "run/metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ends))
    told = subprocess.run([sys.executable, "tools/backflip_landings.py", str(tmp_path / "run")],
                          cwd=EXAMPLES.parent, capture_output=True, text=True, check=True,
                          timeout=300)  # fmt: skip
    assert told.stdout.startswith("2 episodes, 1 with a landed backflip, 1 landed in all")
    over = obs.copy()
    over[10:, 0] = 2.0  # (a turn and a half, never down again)
    over[10:, 1] = -np.linspace(0, 3 * np.pi, 90)
    over[10:, 6] = 2.0
    assert abs(float(backflip.rule_score(over)) - (0.75 + 9 * standing)) < 1e-6
    rolled = obs.copy()
    rolled[10:70, 0] = 0.07  # (the same turn lying on the floor)
    assert abs(float(backflip.rule_score(rolled)) - on_feet * standing) < 1e-6
    hops = np.zeros((200, 11))
    hops[:, 0] = 1.2
    for start in range(0, 200, 20):  # (a twentieth of a turn back in the air, forward on the foot)
        hops[start + 5 : start + 10, 0] = 1.6
        hops[start + 5 : start + 10, 1] = -np.linspace(0, 0.1 * np.pi, 5)
        hops[start + 10 : start + 20, 1] = -np.linspace(0.1 * np.pi, 0, 10)
    assert 0.0 <= float(backflip.rule_score(hops)) < 200 * standing + 1e-6
    walker = backflip.learner(500_000).config.schedule  # (labels by 190k, or over the run)
    spread = backflip.learner(500_000, spread=True).config.schedule
    assert (walker.budget, walker.session_size, walker.interval) == (1000, 100, 20_000)
    assert (spread.budget, spread.session_size, spread.interval) == (1000, 100, 45_454)
    env = prefrl.make_env(backflip.ENV_ID, seed=0)  # (no end at a fall: to the time limit)
    seen, rewards = [env.reset(seed=0)[0]], []
    for action in np.random.default_rng(0).uniform(-1, 1, (backflip.EPISODE_STEPS, 3)):
        o, r, terminated, truncated, _ = env.step(action)
        seen.append(o)
        rewards.append(r)
        assert not terminated and truncated == (len(rewards) == backflip.EPISODE_STEPS)
    np.testing.assert_allclose(sum(rewards), float(backflip.rule_score(np.array(seen))), atol=1e-6)
