"""Offline learning from preferences: dataset + labelled queries -> reward model -> relabelled
dataset -> IQL, reported as the D4RL-normalised score of evaluation episodes.

A run directory holds the fitted reward model (`reward_model/`), the relabelled rewards
(`rewards.npy`, before scaling), IQL checkpoints and metrics; a resumed run reuses the first two
and continues IQL from its latest checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from prefrl.agents.iql import IQL, IQLConfig
from prefrl.data.dataset import OfflineDataset
from prefrl.envs import make_env
from prefrl.feedback.dataset_queries import DatasetQueries
from prefrl.fielddocs import document_fields
from prefrl.reward.base import pearson
from prefrl.reward.fit_state import FitStopped
from prefrl.reward.segment_models import SegmentRewardConfig, SegmentRewardModel
from prefrl.rundir.checkpoints import begin_checkpoint, commit_checkpoint, write_json
from prefrl.rundir.config import check_fields
from prefrl.rundir.metrics import MetricsLogger, read_metrics
from prefrl.rundir.progress import TrainingProgress
from prefrl.training.callbacks import Callbacks
from prefrl.training.evaluate import EvalResult
from prefrl.training.loop import (
    PeriodicTasks,
    TrainingLoop,
    config_with,
    python_arguments,
    run_name,
    start_run,
    stoppable,
)
from prefrl.training.result import TrainResult, finished

REWARDS = ("true", "mr", "nmr", "pt")


@document_fields
@dataclass(frozen=True)
class OfflineConfig:
    """Fit a reward model to a dataset's labelled queries, relabel the dataset, train IQL."""

    dataset: Path = Path("datasets/hopper-medium-replay")
    """A Minari dataset directory (`prefrl dataset collect` / `import-d4rl`)."""
    labels: Path | None = None
    """A labelled query file of this dataset (`prefrl dataset queries`); not needed for
    --reward true."""
    reward: str = "pt"
    """true (the dataset's own rewards: the baseline), mr, nmr or pt."""
    reward_model: SegmentRewardConfig = dataclasses.field(default_factory=SegmentRewardConfig)
    """The reward model's settings (its kind is --reward's)."""
    center_reward: bool = True
    """Subtract the learned reward's mean over the dataset before the scaling. A preference
    loss fixes a reward only up to a constant; where episodes end early (Hopper, Walker2d) that
    constant's sign decides whether IQL learns to stay up or to fall at once. Off reproduces
    the reference's relabelling exactly."""
    true_like_learned: bool = False
    """With --reward true: give the true reward what a learned one gets (centred when
    --center-reward, scaled, plus 0.5) instead of the scaling alone. A control: it tells how
    much of a learned reward's score comes from that treatment rather than from its shape."""
    iql: IQLConfig = dataclasses.field(default_factory=IQLConfig)
    """IQL's settings (its steps are --steps)."""
    steps: int = 1_000_000
    """IQL gradient steps (sets the actor's cosine schedule)."""
    steps_per_call: int = 1000
    """Gradient steps per jitted call; every interval below must be a multiple of it."""
    eval_interval: int = 50_000
    """Evaluate the policy (deterministic actions) every this many IQL steps, and at the end."""
    eval_episodes: int = 10
    """Episodes per evaluation."""
    checkpoint_interval: int = 50_000
    """Checkpoint (agent and loop state) every this many IQL steps, and at the end."""
    video: bool = False
    """Write a video of the final evaluation (and every video-interval steps)."""
    video_interval: int = 1_000_000
    """With --video: record an evaluation episode every this many IQL steps."""
    render_size: int = 256
    """Evaluation videos' size in pixels (square)."""
    seed: int = 0
    """Random seed: the reward model's and IQL's initialisation and batches, the evaluation
    episodes."""
    name: str | None = None
    """The run directory's name under --runs-dir (default: dataset, iql-REWARD, seed and time)."""
    runs_dir: Path = Path("runs")
    """The folder run directories are made in."""
    resume: Path | None = None
    """Continue the run in this directory from its latest checkpoint (a reward model already fitted
    is reused)."""
    progress: bool = True
    """Show a progress bar; --no-progress: a plain line every --steps-per-call steps instead (as
    where the output is not a terminal)."""

    def __post_init__(self) -> None:
        check_fields(self, {"reward": (self.reward in REWARDS, f"one of {REWARDS}")}, "--")
        if self.true_like_learned and self.reward != "true":
            raise ValueError(
                f"--true-like-learned treats the true reward as a learned one; with "
                f"--reward={self.reward!r} the reward is already learned: drop it or use "
                "--reward true"
            )
        positive = ("steps", "steps_per_call", "eval_interval", "checkpoint_interval")
        check_fields(
            self, {n: (getattr(self, n) > 0, "a positive integer") for n in positive}, "--"
        )
        # IQL takes `steps` steps (its actor's schedule too): the config written to the run says
        # so, whatever `iql.steps` held (`prefrl offline --iql.steps` is refused by the CLI).
        object.__setattr__(self, "iql", dataclasses.replace(self.iql, steps=self.steps))
        for name in ("steps", "eval_interval", "checkpoint_interval", "video_interval"):
            if getattr(self, name) % self.steps_per_call:
                raise ValueError(
                    f"--{name.replace('_', '-')}={getattr(self, name)} is not a multiple of "
                    f"--steps-per-call={self.steps_per_call}"
                )

    @property
    def log_interval(self) -> int:
        return self.steps_per_call


def load_inputs(config: OfflineConfig) -> tuple[OfflineDataset, DatasetQueries | None]:
    """The dataset and its labelled queries, checked against each other before any training."""
    dataset = load_scored_dataset(config.dataset)
    if config.reward == "true":
        return dataset, None
    if config.labels is None:
        raise ValueError(
            f"--reward {config.reward} learns from labels: give --labels QUERY_FILE (make "
            "one with `prefrl dataset queries`), or use --reward true"
        )
    queries = load_labelled_queries(config.labels, dataset)
    if queries.length > config.reward_model.max_timestep:
        raise ValueError(
            f"the queries' segments are {queries.length} steps, longer than the reward "
            f"model's timestep table (--reward-model.max-timestep "
            f"{config.reward_model.max_timestep})"
        )
    return dataset, queries


def load_scored_dataset(path: Path) -> OfflineDataset:
    """A dataset with reference returns (for the normalised score) that fits its env."""
    dataset = OfflineDataset.load(path)
    if dataset.ref_min_score is None or dataset.ref_max_score is None:
        raise ValueError(
            f"{path} has no reference returns, so no normalised score: re-import it "
            "with --ref-min-score and --ref-max-score"
        )
    env = make_env(dataset.env_id, seed=0)
    sizes = (env.obs_dim, env.action_dim)
    env.close()
    if sizes != (dataset.obs_dim, dataset.action_dim):
        raise ValueError(
            f"dataset {dataset.name!r} has obs/action sizes {dataset.obs_dim}/"
            f"{dataset.action_dim}; its env {dataset.env_id!r} has {sizes[0]}/{sizes[1]}"
        )
    return dataset


def load_labelled_queries(path: Path, dataset: OfflineDataset) -> DatasetQueries:
    """A labelled query file that fits `dataset`."""
    queries = DatasetQueries.load(path)
    queries.check(dataset)
    if queries.labels is None:
        raise ValueError(
            f"{path} holds queries without labels; label them first "
            "(`prefrl dataset queries ... --teacher oracle`)"
        )
    return queries


FIT_DIR = "reward_fit"


class Stopped(Exception):
    """Ctrl-C or `kill` while the reward model was fitted or the dataset relabelled."""


class OfflineRun(TrainingLoop):
    """The dataset, its rewards for IQL, and IQL's state; saved in and restored from
    checkpoints (the rewards: in the run directory, once)."""

    def __init__(self, config: OfflineConfig, run_dir: Path, inputs=None):
        dataset, queries = inputs or load_inputs(config)
        super().__init__(config, run_dir, make_env(dataset.env_id, seed=config.seed))
        self.dataset, self.queries = dataset, queries
        self.iql = IQL(
            dataclasses.replace(config.iql, steps=config.steps),
            self.dataset.obs_dim,
            self.dataset.action_dim,
        )
        self.key = jax.random.key(config.seed)
        self.state = self.iql.init(jax.random.fold_in(self.key, 1))
        self.reward_metrics: dict = {}

    # ------------------------------------------------------------------ rewards
    def rewards(
        self, progress: TrainingProgress, metrics: MetricsLogger, should_stop
    ) -> np.ndarray:
        """The dataset's rewards for IQL: fitted and relabelled once per run (kept in the run
        directory), then scaled. Ctrl-C or `kill` (`should_stop`) stops the fit at an epoch
        boundary (saved in reward_fit/) or the relabelling, raising `Stopped`; the resumed run
        goes on from there."""
        cfg, ds = self.config, self.dataset
        if cfg.reward == "true":
            if cfg.true_like_learned:
                scaled = self._scaled(ds.rewards)
            else:
                scaled = scale_rewards(ds, ds.rewards, shift=0.0)
            self.reward_metrics = {"reward/scaled_mean": float(scaled.mean())}
            metrics.log(0, self.reward_metrics)
            return scaled
        path = self.run_dir / "rewards.npy"
        info_path = self.run_dir / "reward_metrics.json"
        if path.exists() and info_path.exists():
            self.reward_metrics = json.loads(info_path.read_text())
            return self._scaled(np.load(path))
        fit_path, model_path = self.run_dir / "reward_fit.json", self.run_dir / "reward_model"
        if fit_path.exists():  # fitted before a stop during the relabelling
            model, fit = SegmentRewardModel.load(model_path), json.loads(fit_path.read_text())
        else:
            model, fit = self._fit(progress, metrics, should_stop)
            model.save(model_path)
            write_json(fit_path, fit)
            shutil.rmtree(self.run_dir / FIT_DIR, ignore_errors=True)
        progress.say(f"relabelling {len(ds)} transitions")

        def on_chunk(done, total):
            if should_stop():
                raise Stopped(f"stopped while relabelling ({done:,} of {total:,} transitions)")

        learned = model.relabel(ds, progress=on_chunk)
        scaled = self._scaled(learned)
        self.reward_metrics = {
            **fit,
            # of the rewards IQL gets: with an offset, long episodes gain or lose by length
            "reward/episode_return_correlation": pearson(
                ds.episode_returns(), ds.episode_returns(scaled)
            ),
            "reward/step_correlation": pearson(ds.rewards, learned),
            "reward/scaled_mean": float(scaled.mean()),
        }
        metrics.log(0, self.reward_metrics)
        np.save(path, learned)
        write_json(info_path, self.reward_metrics)
        return scaled

    def _fit(self, progress, metrics, should_stop):
        cfg, ds = self.config, self.dataset
        model_cfg = dataclasses.replace(cfg.reward_model, kind=cfg.reward)
        model = SegmentRewardModel(
            model_cfg, ds.obs_dim, ds.action_dim, self.queries.length, cfg.seed
        )
        data = self.queries.preference_data(ds)
        progress.say(
            f"fitting the {cfg.reward} reward model on {len(self.queries)} labelled queries "
            f"({model_cfg.epochs} epochs)"
        )

        def on_epoch(epoch, row):
            if epoch % max(1, model_cfg.epochs // 20) == 0 or epoch == model_cfg.epochs:
                # (at IQL's step 0, before which the fit runs; its own axis is reward_fit/epoch)
                metrics.log(0, {f"reward_fit/{k}": v for k, v in row.items()})
                shown = ", ".join(f"{k} {v:.3f}" for k, v in row.items() if k != "epoch")
                progress.say(f"  epoch {epoch}: {shown}")

        try:
            fit = model.fit(data, on_epoch, should_stop, self.run_dir / FIT_DIR)
        except FitStopped as e:
            raise Stopped(str(e)) from None
        return model, fit

    def _scaled(self, learned: np.ndarray) -> np.ndarray:
        """A learned reward as IQL gets it: centred (by default), scaled, plus 0.5."""
        return scale_rewards(self.dataset, learned, shift=0.5, center=self.config.center_reward)

    # ------------------------------------------------------------------ checkpoints
    def save(self) -> Path:
        tmp = begin_checkpoint(self.run_dir, self.step)
        (tmp / "agent.msgpack").write_bytes(self.iql.state_to_bytes(self.state))
        write_json(tmp / "loop.json", {"step": self.step, "last_eval": self.last_eval})
        return commit_checkpoint(tmp)

    def restore(self, ckpt: Path) -> None:
        self.state = self.iql.state_from_bytes((ckpt / "agent.msgpack").read_bytes())
        loop = json.loads((ckpt / "loop.json").read_text())
        self.step, self.last_eval = loop["step"], loop["last_eval"]

    # ------------------------------------------------------------------ evaluation
    def policy(self, obs: np.ndarray) -> np.ndarray:
        return self.iql.act(self.state.actor_params, obs)

    def evaluate(self, record: bool) -> EvalResult:
        """The return and D4RL's normalised score."""
        result = super().evaluate(record)
        score = self.dataset.normalized_score(result.returns)
        result.extra = {
            "eval/score_mean": float(score.mean()),
            "eval/score_std": float(score.std()),
        }
        return result


class OfflineLearner:
    """A reward model fitted to a dataset's labelled queries, then IQL on the relabelled
    dataset:

        result = OfflineLearner("datasets/hopper-medium-replay", "queries.json", "mr").train()

    Args:
        dataset: a Minari dataset directory (`prefrl dataset collect` / `import-d4rl`).
        labels: a labelled query file of it (`prefrl dataset queries`); None with reward "true".
        reward: "mr", "nmr", "pt" (the reward model), or "true" (the dataset's own rewards).
        reward_model: the reward model's settings (`SegmentRewardConfig`).
        iql: IQL's settings (`IQLConfig`).
        config: every other setting (`OfflineConfig`); keyword arguments override its fields.
    """

    @python_arguments(OfflineConfig)
    def __init__(self, dataset: str | Path | None = None, labels: str | Path | None = None,
                 reward: str | None = None, *, reward_model: SegmentRewardConfig | None = None,
                 iql: IQLConfig | None = None, config: OfflineConfig | None = None,
                 **settings):  # fmt: skip
        given = {name: value for name, value in (
            ("dataset", dataset), ("labels", labels), ("reward", reward),
            ("reward_model", reward_model), ("iql", iql),
        ) if value is not None}  # fmt: skip
        self.config = config_with(OfflineConfig, "OfflineLearner", config, settings, given)
        self.inputs = load_inputs(self.config)  # bad input fails here, before any run exists

    @python_arguments(OfflineConfig)
    def train(self, callback=None) -> TrainResult:
        """Run (or, with `resume`, continue) the run; returns its final evaluation (with the
        normalised score). `callback`: a function (or a list) called with a `TrainEvent` at
        the reward fit and each metrics row, evaluation and checkpoint; returning False stops
        the run."""
        return train_offline(self.config, self.inputs, callback)


def train_offline(config: OfflineConfig, inputs=None, callback=None) -> TrainResult:
    """Run (or resume) an offline run; returns the final evaluation (with the normalised
    score). `callback`: see `OfflineLearner.train`."""
    callbacks = Callbacks(callback)
    name = config.name or run_name(Path(config.dataset).name, f"iql-{config.reward}", config.seed)
    inputs = inputs or load_inputs(config)  # bad input fails here, before a run directory is made
    loop, metrics = start_run(lambda c, d: OfflineRun(c, d, inputs), config, name, callbacks)
    try:
        result = _run(loop, metrics)
    finally:
        metrics.close()
        loop.close()
    return finished(result)


def _run(loop: OfflineRun, metrics: MetricsLogger) -> TrainResult:
    cfg = loop.config
    progress = TrainingProgress(
        cfg.steps, loop.step, enabled=cfg.progress, last_eval=loop.last_eval
    )
    periodic = PeriodicTasks(
        loop, metrics, progress, title=f"IQL ({cfg.reward} reward) on {cfg.dataset}"
    )
    with stoppable(loop, progress) as stop:  # (a stop saves a checkpoint to resume from)
        ds = loop.dataset
        try:
            rewards = loop.rewards(progress, metrics, lambda: stop.requested)
            if cfg.reward != "true":
                loop.callbacks("fit", loop.step, loop.reward_metrics)
        except Stopped as e:  # (the fit or relabelling goes on from there when resumed)
            progress.say(f"{e}; the run resumes from there")
            stop.requested = True
        if not stop.requested:
            data = IQL.to_device(
                ds.observations, ds.actions, rewards, ds.next_observations, ds.terminals
            )
            periodic.restart_clock(loop.step)
        while loop.step < cfg.steps and not stop.requested:
            loop.state, update_metrics = loop.iql.update(
                loop.state, data, loop.key, steps=cfg.steps_per_call
            )
            loop.step += cfg.steps_per_call
            periodic.after_step(loop.step, update_metrics)
    final = periodic.final
    if final is not None:
        summary = final.summary
    else:  # (resumed after its last step: nothing evaluated now; its last evaluation stands)
        evals = [r for r in read_metrics(loop.run_dir) if "eval/score_mean" in r]
        summary = evals[-1] if evals else {}
    learned = cfg.reward != "true"
    return TrainResult(
        loop.run_dir, loop.step, final, stop.requested,
        labels=len(loop.queries) if learned else None,
        agreement=loop.reward_metrics.get("reward/episode_return_correlation") if learned else None,
        video=periodic.video, title=periodic.title,
        details={"reward_metrics": loop.reward_metrics,
                 "score_mean": summary.get("eval/score_mean", float("nan")),
                 "score_std": summary.get("eval/score_std", float("nan"))},
    )  # fmt: skip


def scale_rewards(
    dataset: OfflineDataset, rewards: np.ndarray, shift: float, center: bool = False
) -> np.ndarray:
    """IQL's locomotion scaling: rewards x 1000 / (max - min episode return), plus `shift`
    (0.5 for learned rewards on locomotion, as Preference Transformer's runs; 0 for the true
    reward, as IQL's). `center` first subtracts the rewards' mean over the dataset, so a
    learned reward's arbitrary constant does not decide the sign of what IQL gets."""
    rewards = np.asarray(rewards, np.float64)
    if center:
        rewards = rewards - rewards.mean()
    returns = dataset.episode_returns(rewards)
    span = float(returns.max() - returns.min())
    if span <= 0:
        raise ValueError(
            "every episode of the dataset has the same return under this reward; it cannot be "
            "scaled by 1000 / (max - min return)"
        )
    return (np.asarray(rewards, np.float32) * (1000.0 / span) + shift).astype(np.float32)
