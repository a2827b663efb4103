"""prefrl: teach reinforcement-learning agents behaviours from what people prefer.

The main entry points, importable from `prefrl` itself:

- `PreferenceLearner` (and `train_online(OnlineConfig)`): online learning from preferences,
  PEBBLE with SAC or PrefPPO with PPO, with a scripted teacher or a person labelling;
- `RLLearner` (`train_rl(RLConfig)`): SAC or PPO on the environment's own reward;
  `load_policy(run)` gives a callable policy back from any run;
- `OfflineLearner` (`train_offline(OfflineConfig)`): a reward model from labelled dataset
  queries, then IQL;
- `CPLFinetuner` (`finetune(FinetuneConfig)`): CPL fine-tuning of a policy from ratings of its
  clips;
- `run_sweep(configs, seeds)` (configs from `grid(base, {field: values})`): any of them over a
  grid x seeds on Ray, resumable, summarised as mean ± std per config;
- the CLI's data steps as functions: `collect_dataset`, `make_queries`, `collect_rating_run`,
  `rate_scripted`, `export_run_labels`, `script_demos`, `import_d4rl_demos`, ...; and
  `evaluate(policy, env)` for a trained policy's returns;
- the parts they are built from: `make_env` (`wrap_env` for an env object of yours, `check_env`
  for what an env supports), `SAC`, `PPO`, `MLPRewardEnsemble`,
  `ScriptedTeacher`, `ScheduleConfig`, `FeedbackStore`, ...

Names are imported on first use, so `import prefrl` stays quick.
"""

import importlib
import os

# Offscreen rendering without a display. MuJoCo reads this when it is first imported, so it is
# set here, before any prefrl module imports mujoco; a value set by the user wins.
os.environ.setdefault("MUJOCO_GL", "egl")
# pygame (classic-control rendering) draws offscreen; without these SDL looks for a display.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

__version__ = "0.1.0"

POLICY_KIND_MODULES = ("prefrl.rl.config", "prefrl.online.config", "prefrl.demos.rfcl_policy")
"""The modules that register the kinds of run `load_policy` loads (`register_policy_kind`)."""

_PUBLIC = {  # name -> the module that defines it
    "PreferenceLearner": "prefrl.online.learner",
    "OnlineConfig": "prefrl.online.config",
    "train_online": "prefrl.online.learner",
    "RLConfig": "prefrl.rl.config",
    "TrainResult": "prefrl.training.result",
    "TrainEvent": "prefrl.training.callbacks",
    "train_rl": "prefrl.rl.learner",
    "load_policy": "prefrl.training.policies",
    "LoadedPolicy": "prefrl.training.policies",
    "OfflineConfig": "prefrl.offline.learner",
    "train_offline": "prefrl.offline.learner",
    "OfflineLearner": "prefrl.offline.learner",
    "RLLearner": "prefrl.rl.learner",
    "CPLFinetuner": "prefrl.finetuning.learner",
    "FinetuneConfig": "prefrl.finetuning.learner",
    "finetune": "prefrl.finetuning.learner",
    "RFCLConfig": "prefrl.demos.rfcl_config",
    "train_rfcl": "prefrl.demos.rfcl",
    "DemoSet": "prefrl.data.demos",
    "FramePreferenceConfig": "prefrl.pixels.preferences",
    "train_frames_from_preferences": "prefrl.pixels.preferences",
    "grid": "prefrl.sweep",
    "run_sweep": "prefrl.sweep",
    "SweepResult": "prefrl.sweep",
    "make_env": "prefrl.envs",
    "wrap_env": "prefrl.envs",
    "check_env": "prefrl.envs",
    "PrefrlEnv": "prefrl.envs",
    "SAC": "prefrl.agents",
    "SACConfig": "prefrl.agents",
    "PPO": "prefrl.agents",
    "PPOConfig": "prefrl.agents",
    "RewardModel": "prefrl.reward",
    "MLPRewardEnsemble": "prefrl.reward",
    "RewardConfig": "prefrl.reward",
    "load_reward_model": "prefrl.reward",
    "Teacher": "prefrl.feedback",
    "ScriptedTeacher": "prefrl.feedback",
    "TeacherConfig": "prefrl.feedback",
    "ScheduleConfig": "prefrl.feedback",
    "Query": "prefrl.feedback",
    "Answer": "prefrl.feedback",
    "Label": "prefrl.data.segments",
    "FeedbackStore": "prefrl.feedback.store",
    "evaluate": "prefrl.rl.compare",
    # the data steps of the CLI (`prefrl dataset|collect|rate|labels|demos ...`)
    "collect_dataset": "prefrl.offline.datasets",
    "import_d4rl_dataset": "prefrl.offline.datasets",
    "make_queries": "prefrl.offline.datasets",
    "import_pt_labels": "prefrl.feedback.dataset_queries",
    "collect_rating_run": "prefrl.finetuning.rating_runs",
    "rate_scripted": "prefrl.feedback.raters",
    "export_run_labels": "prefrl.feedback.run_labels",
    "import_run_labels": "prefrl.feedback.run_labels",
    "script_demos": "prefrl.demos.make",
    "record_demos": "prefrl.demos.make",
    "check_demos": "prefrl.demos.make",
    "plan_demos": "prefrl.demos.planner",
    "import_d4rl_demos": "prefrl.demos.imports",
    "import_dapg_demos": "prefrl.demos.imports",
    "import_maniskill2_demos": "prefrl.demos.imports",
    "EvalResult": "prefrl.training.evaluate",
    "EnvReport": "prefrl.envs.check",
    "RatingRun": "prefrl.finetuning.rating_runs",
    "SegmentRewardConfig": "prefrl.reward.segment_models",
    "FrameRewardConfig": "prefrl.reward.frames",
    "IQLConfig": "prefrl.agents.iql",
    "CPLConfig": "prefrl.agents.cpl",
    "A2CConfig": "prefrl.agents.a2c",
    "FramePPOConfig": "prefrl.agents.frame_ppo",
}

__all__ = [  # (checked against _PUBLIC by tests/test_api.py)
    "PPO",
    "SAC",
    "A2CConfig",
    "Answer",
    "CPLConfig",
    "CPLFinetuner",
    "DemoSet",
    "EnvReport",
    "EvalResult",
    "FeedbackStore",
    "FinetuneConfig",
    "FramePPOConfig",
    "FramePreferenceConfig",
    "FrameRewardConfig",
    "IQLConfig",
    "Label",
    "LoadedPolicy",
    "MLPRewardEnsemble",
    "OfflineConfig",
    "OfflineLearner",
    "OnlineConfig",
    "PPOConfig",
    "PreferenceLearner",
    "PrefrlEnv",
    "Query",
    "RFCLConfig",
    "RLConfig",
    "RLLearner",
    "RatingRun",
    "RewardConfig",
    "RewardModel",
    "SACConfig",
    "ScheduleConfig",
    "ScriptedTeacher",
    "SegmentRewardConfig",
    "SweepResult",
    "Teacher",
    "TeacherConfig",
    "TrainEvent",
    "TrainResult",
    "__version__",
    "check_demos",
    "check_env",
    "collect_dataset",
    "collect_rating_run",
    "evaluate",
    "export_run_labels",
    "finetune",
    "grid",
    "import_d4rl_dataset",
    "import_d4rl_demos",
    "import_dapg_demos",
    "import_maniskill2_demos",
    "import_pt_labels",
    "import_run_labels",
    "load_policy",
    "load_reward_model",
    "make_env",
    "make_queries",
    "plan_demos",
    "rate_scripted",
    "record_demos",
    "run_sweep",
    "script_demos",
    "train_frames_from_preferences",
    "train_offline",
    "train_online",
    "train_rfcl",
    "train_rl",
    "wrap_env",
]


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'prefrl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
