"""Online learning from preferences: PEBBLE (SAC) and PrefPPO, one loop.

collect -> cut segments -> select pairs -> teacher -> labels -> fit reward model -> relabel the
replay buffer -> agent updates on the learned reward -> collect ...

With SAC (PEBBLE, Lee et al. 2021): uniform-random warm-start steps, then optional unsupervised
pre-training on a k-NN state-entropy reward, then the first queries; after each fit every stored
transition is relabelled. With PPO (PrefPPO): each rollout is labelled by the current reward
model just before its update. Teachers answer asynchronously (`Teacher.poll`); the agent keeps
training on the last fitted reward while answers are outstanding.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from prefrl.agents import PPO, SAC, PPOConfig, Rollout, SACConfig
from prefrl.data import PreferenceData, ReplayBuffer, SegmentPool, SegmentRecorder
from prefrl.envs import PrefrlEnv, can_disable_early_termination, make_env
from prefrl.envs.registry import resolve
from prefrl.feedback import Query, ScheduleConfig, ScriptedTeacher, TeacherConfig, select_pairs
from prefrl.feedback.channel import FeedbackChannel
from prefrl.feedback.exchange import check_same_env, import_labels, read_labels
from prefrl.feedback.selection import check_method
from prefrl.feedback.store import FeedbackStore, run_uid
from prefrl.feedback.waiting import first_labels_status
from prefrl.loops.common import Cadence, check_finite, run_name, start_run
from prefrl.loops.evaluate import EvalResult, evaluate, make_eval_envs
from prefrl.loops.serve import LabellingServer
from prefrl.reward import MLPRewardEnsemble, RewardConfig, RewardModel, pearson
from prefrl.reward.background import BackgroundFitter
from prefrl.reward.knn_entropy import KnnEntropyReward
from prefrl.rundir.checkpoints import (
    IncompatibleCheckpoint,
    begin_checkpoint,
    checkpoints,
    commit_checkpoint,
    write_json,
)
from prefrl.rundir.config import config_to_dict
from prefrl.rundir.metrics import MetricsLogger
from prefrl.rundir.progress import TrainingProgress
from prefrl.rundir.stop import graceful_stop

ALGOS = ("sac", "ppo")
TERMINATIONS = ("end", "absorbing", "continue")


@dataclass(frozen=True)
class OnlineConfig:
    """Learn a behaviour from preferences between pairs of segments (PEBBLE / PrefPPO)."""

    env: str = "dmc:walker-walk"
    """Environment id: a Gymnasium id, dmc:domain-task, or toy:point-reach."""
    steps: int = 500_000
    """Environment steps in total."""
    seed: int = 0
    algo: str = "sac"
    """sac (PEBBLE) or ppo (PrefPPO)."""
    teacher: TeacherConfig = dataclasses.field(default_factory=TeacherConfig)
    store: str | None = None
    """Feedback store: a SQLite file in the run directory by default, or postgresql://..."""
    refit_labels: int = 10
    """With a person answering: refit after this many new labels (or when all are answered)."""
    refit_growth: float = 0.0
    """Fit only once the labels not yet fitted are at least this share of those fitted (0: fit
    on every new label). Late sessions of a front-loaded schedule add a few labels each; a full
    fit for each costs as much as one on all labels. The budget's last labels always get a fit."""
    poll_seconds: float = 1.0
    """How often the trainer looks for a person's first labels while it waits for them."""
    web_port: int = 8000
    """With --teacher web: the port of the labelling app the trainer starts (on 127.0.0.1)."""
    load_labels: Path | None = None
    """Start with the labels of another run (its directory) or of a labels .json file
    (`prefrl labels export`); they are trained on at the first feedback step, on top of the
    schedule's budget."""
    schedule: ScheduleConfig = dataclasses.field(default_factory=ScheduleConfig)
    selection: str = "disagreement"
    """Query selection: uniform, disagreement or entropy."""
    oversample: int = 10
    """Candidate pairs drawn per query kept (the best 1 in `oversample` is asked)."""
    segment_length: int = 50
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
    reward: RewardConfig = dataclasses.field(default_factory=RewardConfig)
    fit_lag: int = 0
    """0: fit the reward model between two steps (the agent waits). N > 0: fit in a process of
    its own while the agent trains on, and use the result N steps after the fit began (waiting
    for it only if it is not done by then): the same run whatever the machine's speed, and on
    a multi-core CPU or a GPU the fit's time mostly off the wall clock. The first fit is waited
    for unless unsupervised pre-training gives the agent a reward to train on meanwhile."""
    warmstart_steps: int = 1_000
    """Uniform-random actions (SAC) or the initial policy (PPO), no updates, for this many steps."""
    unsupervised_steps: int = 0
    """PEBBLE's pre-training on a k-NN state-entropy reward after the warm start (0: off)."""
    knn_k: int = 5
    agent: SACConfig = dataclasses.field(default_factory=SACConfig)
    ppo: PPOConfig = dataclasses.field(default_factory=PPOConfig)
    eval_interval: int = 10_000
    eval_episodes: int = 10
    video: bool = True
    video_interval: int = 100_000
    render_size: int = 256
    checkpoint_interval: int = 50_000
    log_interval: int = 1_000
    buffer_size: int = 1_000_000
    name: str | None = None
    runs_dir: Path = Path("runs")
    resume: Path | None = None
    """Continue the run in this directory from its latest checkpoint."""
    progress: bool = True

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
        for name in (
            "steps", "oversample", "segment_length", "segment_pool", "knn_k", "eval_interval",
            "refit_labels",
            "eval_episodes", "checkpoint_interval", "log_interval", "buffer_size", "render_size",
        ):  # fmt: skip
            if getattr(self, name) <= 0:
                raise ValueError(
                    f"--{name.replace('_', '-')}={getattr(self, name)} is invalid: "
                    "expected a positive integer"
                )
        if not self.refit_growth >= 0:  # (NaN too)
            raise ValueError(
                f"--refit-growth={self.refit_growth} is invalid: expected a number >= 0"
            )
        for name in ("warmstart_steps", "unsupervised_steps", "fit_lag"):
            if getattr(self, name) < 0:
                raise ValueError(
                    f"--{name.replace('_', '-')}={getattr(self, name)} is invalid: expected >= 0"
                )
        if self.first_query_step >= self.steps:
            raise ValueError(
                f"queries would start at step {self.first_query_step:,} (warm start + "
                f"unsupervised steps), after the run's last step ({self.steps:,})"
            )

    @property
    def first_query_step(self) -> int:
        return self.warmstart_steps + self.unsupervised_steps


@dataclass
class OnlineResult:
    run_dir: Path
    step: int
    final_eval: EvalResult | None = dataclasses.field(repr=False)
    video: Path | None
    labels: int
    reward_metrics: dict[str, float]
    interrupted: bool = False


def make_training_env(config: OnlineConfig, seed: int | None) -> PrefrlEnv:
    """The env the agent trains in (and its segments come from): see `termination`."""
    return make_env(config.env, seed=seed, early_termination=config.termination != "continue")


def absorbing_value(
    model: RewardModel, obs: np.ndarray, action_dim: int, discount: float, horizon: int
) -> np.ndarray:
    """The learned reward of each final state held still (zero action) from the next step to the
    time limit: sum over k = 1..horizon of discount^k * r(obs, 0)."""
    weight = float(np.sum(discount ** np.arange(1, horizon + 1, dtype=np.float64)))
    return weight * model.predict(obs, np.zeros((len(obs), action_dim), np.float32))


def check_env(config: OnlineConfig, env: PrefrlEnv) -> None:
    """Errors that must stop a run before any training."""
    limit = env.max_episode_steps
    if limit is not None and config.segment_length > limit:
        raise ValueError(
            f"--segment-length={config.segment_length} is longer than {config.env}'s episodes "
            f"({limit} steps); use at most {limit}"
        )
    if not env.has_true_reward and not config.teacher.is_human:
        raise ValueError(
            f"{config.env} has no true reward, so the scripted teacher "
            f"{config.teacher.preset!r} cannot label it; label it yourself (human teacher)"
        )


class _Loop:
    """Everything an online run holds between steps; saved in and restored from checkpoints."""

    def __init__(self, config: OnlineConfig, run_dir: Path):
        self.config = config
        self.run_dir = run_dir
        self.env = make_training_env(config, seed=config.seed)
        obs_dim, action_dim = self.env.obs_dim, self.env.action_dim
        self.key = jax.random.key(config.seed, impl="rbg")
        self.rng = np.random.default_rng(config.seed)
        if config.algo == "sac":
            self.agent = SAC(config.agent, obs_dim, action_dim)
            self.buffer = ReplayBuffer(config.buffer_size, obs_dim, action_dim)
        else:
            self.agent = PPO(config.ppo, obs_dim, action_dim)
            self.buffer = ReplayBuffer(config.ppo.rollout_steps, obs_dim, action_dim)
        self.state = self.agent.init(jax.random.fold_in(self.key, 1))
        self.model = MLPRewardEnsemble(config.reward, obs_dim, action_dim, seed=config.seed)
        scripted = (
            None
            if config.teacher.is_human
            else ScriptedTeacher(
                config.teacher, config.seed, self.env.max_episode_steps, config.env
            )
        )
        # A run with checkpoints refers to its store's labels: a store gone missing is an error,
        # never silently replaced by an empty one.
        existing = bool(checkpoints(run_dir))
        self.store = FeedbackStore(config.store or run_dir, create=not existing)
        self.teacher = FeedbackChannel(
            self.store, run_uid(run_dir), run_dir, config.env, scripted, create=not existing
        )
        self.intrinsic = KnnEntropyReward(config.knn_k)
        self.recorder = SegmentRecorder(config.segment_length)
        self.pool = SegmentPool(config.segment_pool)
        self.labels = PreferenceData()
        self.unfitted_labels = 0
        self.step = 0
        self.episodes = 0
        # What the store already holds counts (a run stopped before its first checkpoint and
        # started again): questions are never asked twice, keys never reused.
        self.requested = self.teacher.asked()
        self.next_query_id = self.teacher.next_query_id()
        self.recorder.next_id = self.teacher.next_segment_id()
        self.fitted = False
        self.fitter = BackgroundFitter(run_dir / "fit_job") if config.fit_lag else None
        self.pending_fit: dict | None = None  # {"start": step, "labels": count} of a fit due
        self.ask_due = False
        self.last_eval: float | None = None
        self.reward_metrics: dict[str, float] = {}
        self.feedback_seconds = 0.0  # asking and collecting since the last fit (overhead)
        self._eval_envs: list[PrefrlEnv] | None = None

    # ------------------------------------------------------------------ feedback
    def ask(self) -> bool:
        """Request the labels the schedule wants by now; False when they could not be asked
        (fewer than 2 segments in the pool yet)."""
        cfg = self.config
        wanted = cfg.schedule.wanted(self.step, cfg.first_query_step, cfg.steps)
        n = wanted - self.requested
        if n <= 0:
            return True
        if len(self.pool) < 2:
            return False
        t0 = time.perf_counter()
        model = self.model if self.fitted else None
        left, right = select_pairs(cfg.selection, self.pool, n, self.rng, model, cfg.oversample)
        ids = self.next_query_id + np.arange(n)
        self.next_query_id += n
        self.requested += n
        self.teacher.submit(Query(ids, left, right))
        self.feedback_seconds += time.perf_counter() - t0
        return True

    def collect_answers(self) -> int:
        """Take the labels that arrived; returns how many."""
        t0 = time.perf_counter()
        new = self.teacher.poll()
        self.feedback_seconds += time.perf_counter() - t0
        if new is None:
            return 0
        self.labels.add(new.left, new.right, new.labels)
        self.unfitted_labels += len(new.labels)
        return len(new.labels)

    def fit_due(self) -> bool:
        """New labels are enough of a change (`refit_growth`), or the budget's last: then
        scripted answers (they come all at once) get a fit. A person's come one by one: fit
        every `refit_labels` of them, or when nothing asked is left unanswered."""
        if self.unfitted_labels == 0:
            return False
        fitted = len(self.labels) - self.unfitted_labels
        if self.unfitted_labels < self.config.refit_growth * fitted and not (
            self.requested >= self.config.schedule.budget and self.teacher.unanswered() == 0
        ):
            return False
        if not self.teacher.is_human or self.unfitted_labels >= self.config.refit_labels:
            return True
        return self.teacher.unanswered() == 0

    def start_fit(self) -> None:
        """A fit on every label so far is due: begun in the worker with `fit_lag`, otherwise
        done in place by `finish_fit` at this same step."""
        self.unfitted_labels = 0
        self.pending_fit = {"start": self.step, "labels": len(self.labels)}
        if self.fitter is not None:
            self.fitter.start(self.model, self.labels, len(self.labels))

    def add_end_values(self, reward: np.ndarray, next_obs: np.ndarray, terminated) -> None:
        """Termination "absorbing": add what ending an episode early is worth to the reward of
        each step that did (in place); nothing otherwise."""
        cfg = self.config
        ends = np.flatnonzero(terminated)
        if cfg.termination != "absorbing" or not len(ends):
            return
        discount = cfg.agent.discount if cfg.algo == "sac" else cfg.ppo.discount
        horizon = self.env.max_episode_steps or 1000
        action_dim = self.env.action_dim
        reward[ends] += absorbing_value(self.model, next_obs[ends], action_dim, discount, horizon)

    def fit_ready(self) -> bool:
        """A fit's result is due now: `fit_lag` steps after it began, or at once without a lag,
        and for the first fit unless the agent has the intrinsic reward to train on meanwhile
        (without a learned reward it has nothing to learn from: waiting costs no more)."""
        pending, cfg = self.pending_fit, self.config
        lag = cfg.fit_lag if self.fitted or cfg.unsupervised_steps else 0
        return pending is not None and self.step >= pending["start"] + lag

    def finish_fit(self) -> dict[str, float]:
        """Use the fitted model: relabel the buffer; returns the fit's metrics."""
        if self.fitter is None:
            t0 = time.perf_counter()
            metrics = self.model.fit(self.labels)
            metrics["reward/fit_wait_seconds"] = time.perf_counter() - t0
        else:
            self.model, metrics, waited = self.fitter.result()
            metrics["reward/fit_wait_seconds"] = waited
            metrics["reward/fit_started"] = float(self.pending_fit["start"])
        self.pending_fit = None
        self.fitted = True
        t0 = time.perf_counter()
        if self.config.algo == "sac":
            self.buffer.relabel(lambda obs, action, _next: self.model.predict(obs, action))
            b, n = self.buffer, len(self.buffer)
            self.add_end_values(b.reward[:n], b.next_obs[:n], b.terminated[:n])
        metrics["reward/relabel_seconds"] = time.perf_counter() - t0
        metrics["feedback/seconds"] = self.feedback_seconds
        self.feedback_seconds = 0.0
        pool = self.pool.all()
        sample = pool[self.rng.choice(len(pool), min(len(pool), 1000), replace=False)]
        predicted = self.model.predict(sample.obs, sample.action).sum(-1)
        metrics["reward/segment_return_corr"] = pearson(predicted, sample.true_returns())
        counts = self.labels.counts()
        metrics["feedback/labels"] = float(len(self.labels))
        metrics["feedback/skipped"] = float(counts["skip"])
        metrics["feedback/equal"] = float(counts["equal"])
        self.reward_metrics = metrics
        return metrics

    def wait_for_first_labels(self, progress, stop, server: LabellingServer | None) -> None:
        """The one place the trainer waits for a person: no reward model can be trusted before
        the first labels. Later labels are picked up while training goes on. What it waits for
        (pairs on someone's screen, clips being rendered, a helper that died) is said as it
        changes."""
        asked = self.teacher.unanswered()
        progress.say(
            f"[bold]Waiting for your first {asked} labels[/bold] before training on a learned "
            f"reward. Label in the browser (prefrl serve {self.run_dir}) or the terminal "
            f"(prefrl label {self.run_dir}); training goes on as soon as they are in."
        )
        said = None
        while self.teacher.unanswered() > 0 and not stop.requested:
            news = (server.check() if server else None) or first_labels_status(
                self.store, self.teacher.run_id, self.run_dir
            )
            if news != said:
                progress.say(f"waiting: {news}")
                said = news
            time.sleep(self.config.poll_seconds)
        if not stop.requested:
            progress.say("First labels in: training on the learned reward.")

    # ------------------------------------------------------------------ checkpoints
    def save(self) -> Path:
        leaves = jax.tree.leaves(jax.device_get(self.state))
        if not all(np.isfinite(x).all() for x in leaves if np.issubdtype(x.dtype, np.floating)):
            raise FloatingPointError(
                f"the agent's parameters hold NaN or inf at step {self.step}; not checkpointing "
                "them: the latest checkpoint keeps the last good state"
            )
        tmp = begin_checkpoint(self.run_dir, self.step)
        (tmp / "agent.msgpack").write_bytes(self.agent.state_to_bytes(self.state))
        self.buffer.save(tmp / "buffer.npz")
        self.pool.save(tmp / "segments.npz")
        self.labels.save(tmp / "labels.npz")
        self.model.save(tmp / "reward_model")
        write_json(tmp / "config.json", config_to_dict(self.config))
        write_json(
            tmp / "loop.json",
            {
                "step": self.step,
                "episodes": self.episodes,
                "requested": self.requested,
                "unfitted_labels": self.unfitted_labels,
                "next_query_id": self.next_query_id,
                "fitted": self.fitted,
                "pending_fit": self.pending_fit,
                "ask_due": self.ask_due,
                "last_eval": self.last_eval,
                "reward_metrics": self.reward_metrics,
                "next_segment_id": self.recorder.next_id,
                "rng": self.rng.bit_generator.state,
                "teacher": self.teacher.state_dict(),
                "intrinsic": self.intrinsic.state_dict(),
            },
        )
        return commit_checkpoint(tmp)

    def restore(self, ckpt: Path) -> None:
        self.state = self.agent.state_from_bytes((ckpt / "agent.msgpack").read_bytes())
        self.buffer = ReplayBuffer.load(ckpt / "buffer.npz")
        self.pool = SegmentPool.load(ckpt / "segments.npz")
        self.labels = PreferenceData.load(ckpt / "labels.npz")
        self.model = MLPRewardEnsemble.load(ckpt / "reward_model")
        loop = json.loads((ckpt / "loop.json").read_text())
        self.step, self.episodes = loop["step"], loop["episodes"]
        # The store is the record: queries asked after this checkpoint stay asked (never asked
        # twice) and their labels arrive through the channel like any others.
        self.teacher.load_state_dict(loop["teacher"])
        self.requested = max(loop["requested"], self.teacher.asked())
        self.next_query_id = max(loop["next_query_id"], self.teacher.next_query_id())
        self.unfitted_labels = loop.get("unfitted_labels", 0)
        self.fitted, self.last_eval = loop["fitted"], loop["last_eval"]
        self.ask_due = loop.get("ask_due", False)
        self.reward_metrics = loop["reward_metrics"]
        self.recorder.next_id = max(loop["next_segment_id"], self.teacher.next_segment_id())
        self.rng.bit_generator.state = loop["rng"]
        self.intrinsic.load_state_dict(loop["intrinsic"])
        pending = loop.get("pending_fit")
        if pending is not None:
            # The fit running at the checkpoint is begun again from the same model and labels
            # (the checkpoint's are those the fit started from): the same result, at the same step.
            if self.fitter is None:
                raise IncompatibleCheckpoint(
                    f"{ckpt} was taken while a reward-model fit ran in the background; resume "
                    f"it with --fit-lag {self.config.fit_lag or 'N'} (N > 0), as it was run"
                )
            self.pending_fit = pending
            self.fitter.start(self.model, self.labels, pending["labels"])

    # ------------------------------------------------------------------ evaluation
    def policy(self, obs: np.ndarray) -> np.ndarray:
        if self.config.algo == "sac":
            return self.agent.act(self.state.actor_params, obs, self.key, 0, deterministic=True)
        return self.agent.act(self.state.params, obs, self.key, 0, deterministic=True)[0]

    def evaluate(self, record: bool) -> EvalResult:
        cfg = self.config
        if self._eval_envs is None:
            render_size = cfg.render_size if cfg.video else None
            self._eval_envs = make_eval_envs(cfg.env, cfg.eval_episodes, render_size)
        learned = self.model.predict if self.fitted else None
        return evaluate(
            self.policy,
            self._eval_envs,
            seed=cfg.seed + 1_000_000,
            record=record,
            learned_reward=learned,
        )

    def close(self) -> None:
        if self.fitter is not None:
            self.fitter.close()
        self.store.close()
        self.env.close()
        for env in self._eval_envs or []:
            env.close()


def train_online(config: OnlineConfig) -> OnlineResult:
    """Run (or resume) a preference-learning run; returns where it went and how it ended."""
    env = make_training_env(config, seed=None)
    try:
        check_env(config, env)  # before anything is written
    finally:
        env.close()
    shared = None
    if config.load_labels is not None and config.resume is None:  # (a resumed run has them)
        shared = read_labels(config.load_labels)
        check_same_env(shared, config.env, "this run", f"--load-labels {config.load_labels}")
    name = config.name or run_name(config.env, f"pref-{config.algo}", config.seed)
    loop, metrics = start_run(_Loop, config, name)
    if shared is not None:
        n = import_labels(loop.store, run_uid(loop.run_dir), loop.run_dir, shared,
                          loop.env.obs_dim, loop.env.action_dim)  # fmt: skip
        print(f"loaded {n} labels from {config.load_labels}", flush=True)
    server = None
    if config.teacher.preset == "web":
        server = LabellingServer(loop.run_dir, config.web_port, config.store)
        print(f"label at http://127.0.0.1:{config.web_port}/compare (the run page: /run)",
              flush=True)  # fmt: skip
    try:
        return _run(loop, metrics, server)
    finally:
        if server is not None:
            server.stop()
        metrics.close()
        loop.close()


def _run(loop: _Loop, metrics: MetricsLogger, server: LabellingServer | None) -> OnlineResult:
    cfg, env = loop.config, loop.env
    run = _SacSteps(loop) if cfg.algo == "sac" else _PpoSteps(loop)
    title = f"{'PEBBLE' if cfg.algo == 'sac' else 'PrefPPO'} on {cfg.env}"

    obs, _ = env.reset(seed=cfg.seed + loop.step)
    ep_return, ep_len = 0.0, 0
    progress = TrainingProgress(
        cfg.steps, loop.step, enabled=cfg.progress, last_eval=loop.last_eval
    )
    cadence = Cadence(loop, metrics, progress, title)

    def land_fit_if_ready() -> None:
        if not loop.fit_ready():
            return
        was_fitted = loop.fitted
        fit_metrics = loop.finish_fit()
        run.after_fit(first=not was_fitted)
        metrics.log(loop.step, fit_metrics)
        check_finite({k: v for k, v in fit_metrics.items() if "corr" not in k}, loop.step)
        cadence.restart_clock(loop.step)

    with progress, graceful_stop() as stop:
        try:
            while loop.step < cfg.steps and not stop.requested:
                step = loop.step
                state_before = env.get_state()
                action = run.act_and_update(obs)
                next_obs, reward, terminated, truncated, _ = env.step(action)
                run.store(obs, action, next_obs, terminated, truncated)
                loop.recorder.record(step, obs, action, reward, state_before)
                ep_return += reward
                ep_len += 1
                if terminated or truncated:
                    loop.episodes += 1
                    loop.teacher.observe_episode(ep_return, ep_len)
                    absorbing = terminated and cfg.termination == "absorbing"
                    final = (next_obs, env.get_state()) if absorbing else None
                    segments = loop.recorder.end_episode(loop.rng, loop.episodes, final)
                    if segments is not None:
                        loop.pool.add(segments)
                    metrics.log(
                        step + 1,
                        {"train/episode_return": ep_return, "train/episode_length": ep_len},
                    )
                    obs, _ = env.reset()
                    ep_return, ep_len = 0.0, 0
                else:
                    obs = next_obs
                loop.step = step = step + 1

                # Feedback: a fit due now lands first (a lag of one label interval hands over
                # at the step the next begins, and the queries are chosen with it); then ask on
                # the schedule's cadence, take whatever answers arrived (polled every 100
                # steps), and fit on new labels (without a lag the fit lands at once).
                land_fit_if_ready()
                since_first = step - cfg.first_query_step
                if since_first >= 0 and since_first % cfg.schedule.interval == 0:
                    loop.ask_due = True
                if loop.ask_due and step % 100 == 0:
                    loop.ask_due = not loop.ask()  # retried while the pool is too small
                    if (
                        not loop.ask_due
                        and not loop.fitted
                        and loop.teacher.is_human
                        and not loop.teacher.has_unseen_labels()  # (e.g. loaded ones)
                    ):
                        loop.wait_for_first_labels(progress, stop, server)
                if since_first >= 0 and step % 100 == 0:
                    loop.collect_answers()
                if loop.pending_fit is None and step % 100 == 0 and loop.fit_due():
                    loop.start_fit()  # (fit_due may ask the store: not every step)
                    land_fit_if_ready()
                if server is not None and step % 1000 == 0 and (news := server.check()):
                    progress.say(news)
                cadence.after_step(step, run.metrics, info=f"labels {len(loop.labels):,}")
            if stop.requested:
                progress.update(loop.step)
                loop.save()
        except KeyboardInterrupt:
            stop.requested = True
    return OnlineResult(
        loop.run_dir,
        loop.step,
        cadence.final,
        cadence.video,
        len(loop.labels),
        loop.reward_metrics,
        interrupted=stop.requested,
    )


class _SacSteps:
    """PEBBLE's per-step work: act, update (intrinsic reward before the first fit), store."""

    def __init__(self, loop: _Loop):
        self.loop = loop
        self.batch_size = loop.config.agent.batch_size * loop.config.agent.utd_ratio
        self.metrics = None
        self.pending_reward = None  # this step's learned reward, dispatched before the update

    def act_and_update(self, obs):
        loop, cfg = self.loop, self.loop.config
        step = loop.step
        if step < cfg.warmstart_steps:
            return loop.rng.uniform(-1.0, 1.0, loop.env.action_dim).astype(np.float32)
        # Read once the update is queued behind it (see `prefrl.loops.rl`): drawing the batch
        # overlaps with the previous update, and the update starts right after the action.
        action = loop.agent.act(loop.state.actor_params, obs, loop.key, step)
        if loop.fitted:  # (queued after the update, it would wait for all of it in `store`)
            self.pending_reward = loop.model.dispatch_step_reward(obs, action)
        if len(loop.buffer) >= cfg.agent.batch_size and (
            loop.fitted or (cfg.unsupervised_steps and step < cfg.first_query_step)
        ):
            batch = loop.buffer.sample(loop.rng, self.batch_size)
            if not loop.fitted:
                batch = batch._replace(reward=loop.intrinsic(batch.next_obs, loop.buffer, loop.rng))
            loop.state, self.metrics = loop.agent.update(loop.state, batch, loop.key)
        return np.asarray(action)

    def store(self, obs, action, next_obs, terminated, truncated) -> None:
        loop, pending, self.pending_reward = self.loop, self.pending_reward, None
        if pending is not None:
            reward = pending()
        else:  # (fitted while acting at random: the warm start)
            reward = loop.model.predict(obs[None], action[None]) if loop.fitted else np.zeros(1)
        if terminated and loop.fitted:
            loop.add_end_values(reward, next_obs[None], [terminated])
        loop.buffer.add(obs, action, float(reward[0]), next_obs, terminated)

    def after_fit(self, first: bool) -> None:
        """PEBBLE resets the critics once, when the agent switches from the intrinsic reward to
        the learned one (the buffer was relabelled by `finish_fit`)."""
        loop = self.loop
        if first and loop.config.unsupervised_steps:
            fresh = loop.agent.init(jax.random.fold_in(loop.key, 2))
            loop.state = loop.state.replace(
                critic_params=fresh.critic_params,
                target_critic_params=fresh.target_critic_params,
                critic_opt=fresh.critic_opt,
            )


class _PpoSteps:
    """PrefPPO: roll out `rollout_steps`, label the rollout with the reward model, update.

    The replay buffer (capacity: one rollout) only serves as the reference set of recent states
    for the unsupervised k-NN reward; a partial rollout is not checkpointed (resume starts a new
    one)."""

    def __init__(self, loop: _Loop):
        self.loop = loop
        self.n = n = loop.config.ppo.rollout_steps
        obs_dim, action_dim = loop.env.obs_dim, loop.env.action_dim
        self.obs = np.zeros((n, obs_dim), np.float32)
        self.next_obs = np.zeros((n, obs_dim), np.float32)
        self.action = np.zeros((n, action_dim), np.float32)  # clipped: what the env and the
        self.raw_action = np.zeros((n, action_dim), np.float32)  # reward model saw; raw: PPO's
        self.log_prob = np.zeros(n, np.float32)
        self.terminated = np.zeros(n, np.float32)
        self.done = np.zeros(n, np.float32)
        self.t = 0
        self.metrics = None

    def act_and_update(self, obs):
        loop = self.loop
        action, raw, log_prob = loop.agent.act(loop.state.params, obs, loop.key, loop.step)
        self.raw_action[self.t] = np.asarray(raw)
        self.log_prob[self.t] = float(log_prob)
        return np.asarray(action)

    def store(self, obs, action, next_obs, terminated, truncated) -> None:
        loop, cfg, t = self.loop, self.loop.config, self.t
        loop.buffer.add(obs, action, 0.0, next_obs, terminated)
        self.obs[t], self.action[t], self.next_obs[t] = obs, action, next_obs
        self.terminated[t], self.done[t] = float(terminated), float(terminated or truncated)
        self.t = t + 1
        if self.t < self.n:
            return
        self.t = 0
        if loop.fitted:
            reward = loop.model.predict(self.obs, self.action)
            loop.add_end_values(reward, self.next_obs, self.terminated)
        elif cfg.unsupervised_steps and loop.step + 1 >= cfg.warmstart_steps:
            reward = loop.intrinsic(self.next_obs, loop.buffer, loop.rng)
        else:
            return  # warm start: collect with the initial policy only
        rollout = Rollout(
            self.obs, self.raw_action, self.log_prob, reward.astype(np.float32), self.next_obs,
            self.terminated, self.done,
        )  # fmt: skip
        loop.state, self.metrics = loop.agent.update(loop.state, rollout, loop.key)

    def after_fit(self, first: bool) -> None:
        """Nothing to do: each rollout is labelled with the latest model when it completes."""
