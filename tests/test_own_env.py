"""A user's own env class, never registered with Gymnasium: the learners train on an instance of
it (evaluating on copies), a run of it resumes when given it again, `check_env` says what an
env supports and why not, and what needs more (people labelling, RFCL) is refused naming the
env and the reason."""

import json
import threading
from pathlib import Path
from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest
from test_api import SMALL

from prefrl import (
    PPO,
    PreferenceLearner,
    RFCLConfig,
    RLLearner,
    check_env,
    load_policy,
    train_rfcl,
)
from prefrl.agents import PPOConfig
from prefrl.envs import UnknownEnvError, make_env, wrap_env
from prefrl.rundir.checkpoints import latest_checkpoint


class Reach(gym.Env):
    """A point on a plane moves towards a target it sees (never registered)."""

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, render_mode=None, speed=0.1):
        self.observation_space = gym.spaces.Box(-2.0, 2.0, (4,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.render_mode, self.speed, self.steps_taken = render_mode, speed, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.point, self.target = self.np_random.uniform(-1, 1, (2, 2))
        return self.observe(), {}

    def observe(self):
        return np.concatenate([self.point, self.target], dtype=np.float32)

    def step(self, action):
        self.steps_taken += 1
        self.point = np.clip(self.point + self.speed * np.asarray(action), -2, 2)
        distance = float(np.linalg.norm(self.point - self.target))
        return self.observe(), -distance, False, False, {"success": distance < 0.1}

    def render(self):
        frame = np.zeros((16, 16, 3), np.uint8)
        frame[tuple(np.clip(((self.point + 2) * 4).astype(int), 0, 15))] = 255
        return frame


class SavedReach(Reach):
    """Reach that saves and restores its own state (prefrl's contract for non-MuJoCo envs)."""

    def get_state(self):
        return np.concatenate([self.point, self.target])

    def set_state(self, state):
        self.point, self.target = np.array(state[:2]), np.array(state[2:])


class HalfSavedReach(SavedReach):
    """Its state leaves the point (which moves) out: restoring does not bring it back."""

    def get_state(self):
        return self.target.copy()

    def set_state(self, state):
        self.target = np.array(state)


class Choose(gym.Env):
    """Discrete actions: pick one of three."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), float(action == 1), False, True, {}


class Locked(Reach):
    """Holds something copy.deepcopy refuses."""

    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()


def limited(env: gym.Env, steps: int = 30) -> gym.Env:
    return gym.wrappers.TimeLimit(env, max_episode_steps=steps)


def test_an_instance_of_a_class_never_registered_trains_with_preferences(tmp_path):
    env = limited(Reach(render_mode="rgb_array"))
    settings = {**SMALL, "segment_length": 10, "video": True, "video_interval": 900}
    result = PreferenceLearner(env, "oracle", runs_dir=tmp_path, name="reach", **settings).train()
    assert result.labels == 40 and result.final_eval.returns.shape == (2,)
    assert result.final_eval.success is not None  # (its info["success"]: a success rate)
    stored = json.loads((result.run_dir / "config.json").read_text())
    assert stored["env"] == "instance:Reach"
    assert list((result.run_dir / "videos").glob("*.mp4"))  # rendered by a copy of it
    # Evaluations ran on copies: the object given is the training env, stepped 900 times only.
    assert env.unwrapped.steps_taken == 900
    env.reset(seed=0)  # the learner did not close the env it was given
    env.close()


def test_an_instance_trains_with_rl_and_resumes_when_given_again(tmp_path, capsys):
    small_ppo = PPOConfig(hidden_dims=(16,), rollout_steps=256, minibatch_size=64, epochs=2)
    settings = {"eval_interval": 256, "eval_episodes": 2, "checkpoint_interval": 256,
                "progress": False, "runs_dir": tmp_path, "name": "rl"}  # fmt: skip
    first = RLLearner(limited(Reach()), agent=PPO(small_ppo, 4, 2), steps=256,
                      **settings).train()  # fmt: skip
    assert first.final_eval.returns.shape == (2,)
    assert "Reach (an env object of yours, never registered with Gymnasium) renders no frames" in (
        capsys.readouterr().out)  # (video=True: said once, and no video)  # fmt: skip
    assert not list((first.run_dir / "videos").glob("*.mp4"))
    run_dir = first.run_dir
    with pytest.raises(ValueError, match="trained on an env object of yours, a Reach .* give it "
                       "again to resume the run"):  # fmt: skip
        RLLearner(agent=PPO(small_ppo, 4, 2), steps=512, resume=run_dir, **settings)
    resumed = RLLearner(limited(Reach()), agent=PPO(small_ppo, 4, 2), steps=512, resume=run_dir,
                        **settings).train()  # fmt: skip
    assert resumed.run_dir == run_dir and latest_checkpoint(run_dir).name == "step_000000512"
    policy = load_policy(run_dir)  # (in this process, which has the object's copies)
    assert np.isfinite(policy(np.zeros(4, np.float32))).all()


def test_an_id_of_an_env_object_that_this_process_was_not_given_says_what_to_do():
    with pytest.raises(UnknownEnvError, match="instance:Nowhere names an env object of a Nowhere "
                       "class .* Give the object again in Python"):  # fmt: skip
        make_env("instance:Nowhere")
    with pytest.raises(TypeError, match="Locked .* cannot be copied with copy.deepcopy"):
        PreferenceLearner(Locked())


def test_check_env_says_what_an_env_supports_and_why_not():
    hopper = check_env("Hopper-v5")  # (a registered MuJoCo env, by id)
    assert (hopper.continuous_actions, hopper.restorable_state, hopper.rendering,
            hopper.success_flag, hopper.copyable) == (True, True, True, False, True)  # fmt: skip
    assert "MuJoCo state" in hopper.why["restorable_state"]
    assert "people can label it" in str(hopper)

    reach = check_env(limited(Reach()))  # (never registered, no render mode)
    assert (reach.continuous_actions, reach.restorable_state, reach.rendering,
            reach.success_flag, reach.given) == (True, False, False, True, True)  # fmt: skip
    assert "give its class get_state()" in reach.why["restorable_state"]
    assert "render_mode=None: make it with render_mode='rgb_array'" in reach.why["rendering"]
    assert str(reach).startswith("Reach (an env object of yours, never registered")
    assert "a person labelling it needs restorable state and rendering and an id" in str(reach)

    saved = check_env(SavedReach(render_mode="rgb_array"))
    assert saved.restorable_state and saved.rendering
    assert "its own get_state(), set_state(state) and observe()" in saved.why["restorable_state"]
    half = check_env(HalfSavedReach())
    assert not half.restorable_state
    assert "does not bring back the observation" in half.why["restorable_state"]

    for discrete in (Choose(), "CartPole-v1"):  # (an object, and Gymnasium's own id)
        report = check_env(discrete)
        assert not report.continuous_actions
        assert "Discrete" in report.why["continuous_actions"]
        assert "need continuous actions" in report.learners
    slider = check_env("tests.user_envs:Slider-v0")  # (a registered user env, by id)
    assert slider.rendering and not slider.restorable_state and not slider.given
    assert check_env("toy:maze").success_flag
    locked = check_env(Locked())
    assert not locked.copyable and "cannot be copied" in locked.why["copyable"]


def test_what_needs_a_restorable_state_is_refused_naming_the_env_and_why(tmp_path):
    small = {"runs_dir": tmp_path, **{k: v for k, v in SMALL.items() if k not in ("sac", "reward")}}
    with pytest.raises(ValueError, match=r"^Reach \(an env object of yours, never registered with "
                       r"Gymnasium\) cannot restore a saved state: a person labelling compares "
                       r"clips replayed from saved states; .* give its class get_state\(\)"):  # fmt: skip
        PreferenceLearner(limited(Reach()), teacher="web", **small)
    with pytest.raises(ValueError, match="^SavedReach .*: the clips a person labels are rendered "
                       "by a process of their own, which makes the env by its id; register it"):  # fmt: skip
        PreferenceLearner(limited(SavedReach()), teacher="terminal", **small)
    rfcl = {"demos": Path("nowhere"), "runs_dir": tmp_path, "steps": 100}
    with pytest.raises(ValueError, match=r"^tests.user_envs:Slider-v0 cannot restore a saved state: "
                       r"RFCL starts episodes from demo states"):  # fmt: skip
        train_rfcl(RFCLConfig(env="tests.user_envs:Slider-v0", **rfcl))
    given = wrap_env(limited(Reach()))  # (RFCL takes an id: an env object's, in this process)
    with pytest.raises(ValueError, match=r"^Reach \(an env object of yours.*\) cannot restore a "
                       "saved state: RFCL starts episodes from demo states"):  # fmt: skip
        train_rfcl(RFCLConfig(env=given.env_id, **rfcl))
    assert not any(tmp_path.iterdir())  # refused before any run directory


def test_an_env_object_without_a_time_limit_is_refused_saying_how_to_add_one(tmp_path):
    """Its evaluation episodes would last until it ended them itself: maybe never."""
    endless = check_env(Reach())
    assert not endless.time_limit and endless.copyable
    assert "wrap it, gymnasium.wrappers.TimeLimit(env, max_episode_steps=N)" in endless.why[
        "time_limit"]  # fmt: skip
    assert str(endless).endswith("the learners refuse it until it has a time limit")
    assert check_env(limited(Reach())).why["time_limit"] == "30 steps an episode"
    with pytest.raises(ValueError, match=r"^env=Reach .*: it has no time limit, so an evaluation "
                       r"episode lasts until the env ends it itself"):  # fmt: skip
        RLLearner(Reach(), steps=100, runs_dir=tmp_path)
    assert not any(tmp_path.iterdir())
