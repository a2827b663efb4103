"""The settings of an online preference-learning run (`prefrl train`), checked on construction."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from prefrl.agents import PPOConfig, SACConfig
from prefrl.envs import can_disable_early_termination
from prefrl.envs.registry import resolve
from prefrl.feedback import ScheduleConfig, TeacherConfig
from prefrl.feedback.selection import check_method
from prefrl.fielddocs import document_fields
from prefrl.reward import RewardConfig
from prefrl.rundir.config import check_fields, config_from_dict
from prefrl.training.policies import agent_policy, register_policy_kind

ALGOS = ("sac", "ppo")
TERMINATIONS = ("end", "absorbing", "continue")


@document_fields
@dataclass(frozen=True)
class OnlineConfig:
    """Learn a behaviour from preferences between pairs of segments (PEBBLE / PrefPPO)."""

    env: str = "dmc:walker-walk"
    """Environment id: a Gymnasium id, dmc:domain-task, toy:point-reach, or your registered
    Gymnasium env as module:EnvId (`prefrl envs` lists the ids)."""
    steps: int = 500_000
    """Environment steps in total."""
    seed: int = 0
    """Random seed: the networks, the env's resets, the actions sampled, the scripted teacher."""
    algo: str = "sac"
    """sac (PEBBLE) or ppo (PrefPPO)."""
    teacher: TeacherConfig = dataclasses.field(default_factory=TeacherConfig)
    """Who labels: a scripted B-Pref teacher (--teacher.preset oracle, mistake, ...) or a person
    (web, terminal)."""
    store: str | None = None
    """Feedback store: a SQLite file in the run directory by default, or postgresql://..."""
    refit_labels: int = 10
    """With a person answering: refit after this many new labels (or when all are answered)."""
    refit_growth: float = 0.0
    """Fit only once the labels not yet fitted are at least this share of those fitted (0: fit
    on every new label). Late sessions of a front-loaded schedule add a few labels each; a full
    fit for each costs as much as one on all labels. The budget's last labels always get a fit."""
    poll_seconds: float = 1.0
    """How often the trainer looks for its first labels while it waits for them."""
    first_labels_timeout: float | None = None
    """Seconds to wait for the first labels (a person's, or a teacher object's that answers
    late) before training goes on without them; None: as long as they take."""
    web_port: int = 8000
    """With --teacher web: the port of the labelling app the trainer starts (on 127.0.0.1)."""
    load_labels: Path | None = None
    """Start with the labels of another run (its directory) or of a labels .json file
    (`prefrl labels export`); they are trained on at the first feedback step, on top of the
    schedule's budget."""
    schedule: ScheduleConfig = dataclasses.field(default_factory=ScheduleConfig)
    """When labels are asked for, and how many in all (the label budget)."""
    selection: str = "disagreement"
    """Query selection: uniform, disagreement (PEBBLE), entropy, or policy-aligned (QPA: pairs
    drawn uniformly among the segments of the newest `recent_steps` steps)."""
    oversample: int = 10
    """Candidate pairs drawn per query kept (the best 1 in `oversample` is asked)."""
    segment_length: int = 50
    """Env steps per segment: a label compares two segments of this length."""
    termination: str = "end"
    """What an episode that ends early (the robot fell) means to the labels and the agent.
    end: the episode ends, its unfinished last segment is dropped (no label shows the fall),
    and the end is worth 0 to the agent. absorbing (experimental): the last segment is padded
    with the final state held still (zero action, true reward 0), so labelled clips show the
    fall, and the step that ended the episode gets that held state's learned reward to the time
    limit; measured worse on Hopper, as the model cannot tell the held state from a live one
    (README). continue: a fallen robot goes on to the time limit, task reward unchanged
    (Gymnasium Hopper, Walker2d, Ant, Humanoid only: `terminate_when_unhealthy=False`), for
    behaviours that need a fall, e.g. a backflip. Evaluation episodes always end as the env
    defines. Envs that never end early (DMC, HalfCheetah) are the same under all three."""
    segment_pool: int = 2000
    """Most recent segments kept as query candidates."""
    recent_steps: int = 10_000
    """QPA's near-on-policy window: the newest env steps that policy-aligned queries
    (`selection` policy-aligned) and hybrid replay draw from (QPA: its last 10 episodes, here
    10 of 1000 steps)."""
    hybrid_replay: float = 0.0
    """QPA's hybrid replay: the share of every SAC batch drawn from the newest `recent_steps`
    transitions, the rest from the whole buffer (QPA: 0.5; 0: all from the whole buffer)."""
    hybrid_replay_until_budget: bool = False
    """Hybrid replay only while labels are still asked, then every batch from the whole buffer,
    as QPA's code does (its presets); off: for the whole run."""
    pseudo_labels_with_people: bool = False
    """Let the reward model's guessed labels (`reward.pseudo_label_threshold`) be trained on
    beside a person's answers: refused unless asked for here."""
    reward: RewardConfig = dataclasses.field(default_factory=RewardConfig)
    """The reward model's settings (an ensemble of MLPs)."""
    fit_lag: int = 0
    """0: fit the reward model between two steps (the agent waits). N > 0: fit in a process of
    its own while the agent trains on, and use the result N steps after the fit began (waiting
    for it only if it is not done by then): the same run whatever the machine's speed, and on
    a multi-core CPU or a GPU the fit's time mostly off the wall clock. The first fit is waited
    for unless unsupervised pre-training gives the agent a reward to train on meanwhile."""
    warmstart_steps: int = 1_000
    """Uniform-random actions (SAC) or the initial policy (PPO), no updates, for this many steps."""
    update_every: int = 1
    """SAC: an update (of --sac.utd-ratio critic steps) every this many env steps: 2 is an
    update-to-data ratio of 0.5, about half the wall time where updates dominate."""
    unsupervised_steps: int = 0
    """PEBBLE's pre-training on a k-NN state-entropy reward after the warm start (0: off)."""
    knn_k: int = 5
    """k of the k-nearest-neighbour state-entropy reward of unsupervised pre-training."""
    sac: SACConfig = dataclasses.field(default_factory=SACConfig)
    """SAC's settings (--algo sac: PEBBLE)."""
    RENAMED: ClassVar[dict[str, str]] = {"agent": "sac"}  # (config.json of older runs)
    ppo: PPOConfig = dataclasses.field(default_factory=PPOConfig)
    """PPO's settings (--algo ppo: PrefPPO)."""
    eval_interval: int = 10_000
    """Evaluate (deterministic actions, true and learned returns) every this many env steps, and at
    the end."""
    eval_episodes: int = 10
    """Episodes per evaluation."""
    video: bool = True
    """Write evaluation videos (H.264 mp4) to the run's videos/ folder."""
    video_interval: int = 100_000
    """Record the first evaluation episode every this many env steps (and at the end)."""
    render_size: int = 256
    """Evaluation videos' size in pixels (square)."""
    checkpoint_interval: int = 50_000
    """Checkpoint (agent, reward model, labels, replay buffer, loop state) every this many env
    steps, and at the end."""
    checkpoint_minutes: float = 5.0
    """With a person labelling (web, terminal): also checkpoint after this many minutes without
    one, so that a trainer killed early loses little of their work."""
    log_interval: int = 1_000
    """Write training metrics (metrics.jsonl, TensorBoard) every this many env steps."""
    buffer_size: int = 1_000_000
    """SAC: transitions the replay buffer keeps (PPO keeps one rollout)."""
    name: str | None = None
    """The run directory's name under --runs-dir (default: env, pref-ALGO, seed and time)."""
    runs_dir: Path = Path("runs")
    """The folder run directories are made in."""
    resume: Path | None = None
    """Continue the run in this directory from its latest checkpoint."""
    progress: bool = True
    """Show a progress bar; --no-progress: a plain line every --log-interval env steps
    instead (as where the output is not a terminal)."""

    def __post_init__(self) -> None:
        resolve(self.env)
        if self.algo not in ALGOS:
            raise ValueError(f"--algo={self.algo!r} is unknown; known: {', '.join(ALGOS)}")
        check_method(self.selection)
        if self.termination not in TERMINATIONS:
            raise ValueError(
                f"--termination={self.termination!r} is unknown; known: {', '.join(TERMINATIONS)}"
            )
        if self.termination == "continue" and not can_disable_early_termination(self.env):
            raise ValueError(
                f"--termination=continue needs an env whose early termination can be turned off "
                f"(Gymnasium Hopper, Walker2d, Ant, Humanoid); {self.env} has none"
            )
        positive = ("steps", "oversample", "segment_length", "segment_pool", "knn_k", "recent_steps",
                    "eval_interval", "refit_labels", "eval_episodes", "checkpoint_interval",
                    "log_interval", "buffer_size", "render_size", "update_every")  # fmt: skip
        check_fields(self, {
            **{name: (getattr(self, name) > 0, "a positive integer") for name in positive},
            "refit_growth": (self.refit_growth >= 0, "a number >= 0"),  # (NaN fails too)
            "checkpoint_minutes": (self.checkpoint_minutes > 0, "> 0"),
            "web_port": (0 < self.web_port < 65536, "a port number (1-65535)"),
            "first_labels_timeout": (
                self.first_labels_timeout is None or self.first_labels_timeout > 0, "> 0 or None"
            ),
            **{name: (getattr(self, name) >= 0, ">= 0")
               for name in ("warmstart_steps", "unsupervised_steps", "fit_lag")},
        }, "--")  # fmt: skip
        self._check_label_efficiency()
        if self.first_query_step >= self.steps:
            raise ValueError(
                f"queries would start at step {self.first_query_step:,} (warm start + "
                f"unsupervised steps), after the run's last step ({self.steps:,})"
            )

    def _check_label_efficiency(self) -> None:
        """QPA's and SURF's settings, against the segments and the teacher they meet."""
        crops, shorter = self.reward.crops, self.reward.crop_shorter_by
        near_policy = self.selection == "policy-aligned" or self.hybrid_replay > 0
        check_fields(self, {
            "hybrid_replay": (0 <= self.hybrid_replay <= 1, "a share in [0, 1]"),
            "recent_steps": (
                self.recent_steps >= 2 * self.segment_length or not near_policy,
                (f"at least two segments' steps ({2 * self.segment_length}: --segment-length "
                 f"{self.segment_length}) to draw pairs and batches from"),
            ),
        }, "--")  # fmt: skip
        if crops and shorter[1] >= self.segment_length:
            raise ValueError(
                f"--reward.crop-shorter-by {shorter[0]} {shorter[1]} is invalid: crops of "
                f"{self.segment_length}-step segments (--segment-length) must be shorter by "
                f"fewer than {self.segment_length} steps"
            )
        if self.reward.pseudo_label_threshold is None:
            return
        if self.teacher.is_human and not self.pseudo_labels_with_people:
            raise ValueError(
                "--reward.pseudo-label-threshold with a person labelling would train on guessed "
                "labels beside their answers: add --pseudo-labels-with-people to mean it"
            )
        if self.fit_lag:
            raise ValueError(
                f"--reward.pseudo-label-threshold needs fits between two steps (--fit-lag 0), "
                f"not in the background (--fit-lag {self.fit_lag})"
            )

    @property
    def first_query_step(self) -> int:
        return self.warmstart_steps + self.unsupervised_steps


register_policy_kind(
    "preferences",
    lambda stored: "teacher" in stored,
    lambda ckpt, stored: agent_policy(ckpt, config_from_dict(OnlineConfig, stored)),
)
