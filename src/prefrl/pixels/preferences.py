"""Learning from preferences on frames (Christiano et al. 2017, Atari; the seed's workflow):

1. clips of the random policy, `initial_labels` pairs of them labelled, the reward CNN
   pre-trained on them for `pretrain_steps` gradient steps;
2. A2C on the learned reward, while new clips keep being labelled (a share of the budget at
   every reward fit) and the reward model keeps training, warm-started, every `fit_every`
   updates.

The scripted teacher compares the sums of the sign-clipped true rewards of two clips (the
seed's synthetic preferences). Agent steps count from the start of A2C (the random-policy
clips are not part of them).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prefrl.agents.a2c import A2CConfig
from prefrl.agents.frame_ppo import FramePPOConfig
from prefrl.data.frame_clips import FrameClipRecorder
from prefrl.data.segments import PreferenceData, SegmentPool, Segments
from prefrl.envs import is_pixel_env
from prefrl.envs.frames import FRAME_SIZE
from prefrl.feedback.channel import StoreChannel, mostly_ties, unanswered_at_end
from prefrl.feedback.exchange import check_same_env, import_labels, read_labels
from prefrl.feedback.selection import select_pairs
from prefrl.feedback.store import FeedbackStore, run_uid
from prefrl.feedback.teachers import Query, ScriptedTeacher, TeacherConfig
from prefrl.feedback.waiting import first_labels_status
from prefrl.fielddocs import document_fields
from prefrl.pixels.frame_loop import FrameRun, train_frames
from prefrl.reward.base import pearson
from prefrl.reward.frames import FrameRewardConfig, FrameRewardModel
from prefrl.rundir.checkpoints import checkpoints, write_json
from prefrl.rundir.config import check_fields
from prefrl.rundir.metrics import MetricsLogger, write_fit_scatter
from prefrl.rundir.progress import TrainingProgress
from prefrl.training.callbacks import Callbacks
from prefrl.training.loop import check_finite, run_name
from prefrl.web.serve import LabellingServer

PIXEL_ENVS = "an env of frames: movingdot or atari:Game (state envs: prefrl train)"


@document_fields
@dataclass(frozen=True)
class FramePreferenceConfig:
    """A2C on a pixel env, from a scripted teacher's preferences between clips."""

    env: str = "movingdot"
    """An env of frames: movingdot, or atari:GAME (prefrl[atari]), e.g. atari:Pong."""
    steps: int = 150_000
    """Agent steps (summed over the envs) of A2C."""
    seed: int = 0
    """Random seed: the networks, the env's resets, the actions sampled, the scripted teacher."""
    algo: str = "a2c"
    """The agent: a2c (the seed's) or ppo (`--ppo-frames.*` its settings)."""
    segment_length: int = 25
    """Agent steps per clip shown to the teacher."""
    initial_labels: int = 500
    """Labels of random-policy clips before the agent starts."""
    pretrain_steps: int = 300
    """Reward-model gradient steps on the initial labels."""
    labels: int = 1500
    """Label budget in all (the initial ones included)."""
    fit_every: int = 8
    """Agent updates between reward-model fits (each `reward.steps_per_fit` gradient steps). A
    PPO update is 12.8 A2C updates' agent steps at the defaults (8 x 128 against 16 x 5): the
    pong preset fits every 80 A2C updates, pong-ppo every 6 PPO updates."""
    pool_size: int = 300
    """Newest clips that queries are drawn from."""
    selection: str = "uniform"
    """Query selection: uniform, disagreement or entropy."""
    stop_after: str | None = None
    """gather: stop once the random-policy clips are asked about (people label them while no
    run waits); pretrain: stop once the reward model is pre-trained. `--resume RUN --stop-after
    None` goes on from there."""
    load_labels: Path | None = None
    """Labelled clips of an earlier run of the same game (its run directory, or a file from
    `prefrl labels export`), trained on from the pre-training on, on top of this run's budget."""
    teacher: TeacherConfig = dataclasses.field(default_factory=TeacherConfig)
    """Who answers: a scripted B-Pref preset (oracle, ...) or --teacher.preset web for a person."""
    a2c: A2CConfig = dataclasses.field(default_factory=A2CConfig)
    """A2C's settings (--algo a2c)."""
    ppo_frames: FramePPOConfig = dataclasses.field(default_factory=FramePPOConfig)
    """PPO's settings (--algo ppo)."""
    env_workers: int = 0
    """Processes the agent's envs are stepped in (0: this process). Worth it where stepping the
    envs is a large share of the time: Atari on a machine with cores to spare."""
    reward: FrameRewardConfig = dataclasses.field(
        default_factory=lambda: FrameRewardConfig(steps_per_fit=10)
    )
    """The reward CNN's settings (10 gradient steps per fit here)."""
    store: str | None = None
    """The feedback store: a SQLite file in the run directory by default, or a PostgreSQL URL
    (several annotators on several machines)."""
    web_port: int = 8000
    """With --teacher.preset web: the port of the labelling page the run starts."""
    poll_seconds: float = 1.0
    """How often a run waiting for a person's first labels looks for them."""
    eval_interval: int = 25_000
    """Evaluate the policy on the game's own score every this many agent steps, and at the end."""
    eval_episodes: int = 8
    """Episodes per evaluation."""
    video: bool = True
    """Write evaluation videos (H.264 mp4) to the run's videos/ folder."""
    video_interval: int = 150_000
    """Record an evaluation episode every this many agent steps (and at the end)."""
    render_size: int = 256
    """The least height of evaluation videos in pixels: each pixel of the game a block, by a
    whole factor (256 gives Atari's 210x160 screen at 420x320)."""
    checkpoint_interval: int = 50_000
    """Checkpoint (agent, reward model, labels, clips) every this many agent steps, and at the end."""
    checkpoint_minutes: float = 5.0
    """With a person labelling (web, terminal): also checkpoint after this many minutes without
    one, so that a run killed early loses little of their work."""
    keep_checkpoints: int = 3
    """Checkpoints kept (the newest); 0 keeps all."""
    log_interval: int = 5_000
    """Write training metrics (metrics.jsonl, TensorBoard) every this many agent steps."""
    name: str | None = None
    """The run directory's name under --runs-dir (default: env, ALGO-prefs, seed and time)."""
    runs_dir: Path = Path("runs")
    """The folder run directories are made in."""
    resume: Path | None = None
    """Continue the run in this directory from its latest checkpoint."""
    progress: bool = True
    """Show a progress bar; --no-progress: a plain line every --log-interval agent steps
    instead (as where the output is not a terminal)."""

    @property
    def agent(self) -> A2CConfig | FramePPOConfig:
        """The settings of the agent `algo` names."""
        return self.ppo_frames if self.algo == "ppo" else self.a2c

    def __post_init__(self) -> None:
        positive = ("steps", "segment_length", "pretrain_steps", "labels", "fit_every",
                    "pool_size", "eval_interval", "eval_episodes", "log_interval",
                    "checkpoint_interval", "video_interval")  # fmt: skip
        check_fields(self, {
            "env": (is_pixel_env(self.env), PIXEL_ENVS),
            "algo": (self.algo in ("a2c", "ppo"), "a2c or ppo"),
            "stop_after": (self.stop_after in (None, "gather", "pretrain"),
                           "gather, pretrain or None"),
            **{k: (getattr(self, k) > 0, "a positive integer") for k in positive},
            "poll_seconds": (self.poll_seconds > 0, "> 0"),
            "checkpoint_minutes": (self.checkpoint_minutes > 0, "> 0"),
            "env_workers": (self.env_workers >= 0, ">= 0 (0: step the envs in this process)"),
            "render_size": (self.render_size > 0, "a positive integer (pixels)"),
            "keep_checkpoints": (self.keep_checkpoints >= 0, "0 (keep all) or a positive integer"),
            "web_port": (0 < self.web_port < 65536, "a port number (1-65535)"),
            "initial_labels": (0 < self.initial_labels <= self.labels,
                               f"between 1 and --labels ({self.labels})"),
        }, "--")  # fmt: skip
        if self.reward.network == "dot" and self.env != "movingdot":
            raise ValueError(f"--reward.network dot is for movingdot, not {self.env}: it reads "
                             "MovingDot's dot; use --reward.network cnn")  # fmt: skip


class ClippedRewardTeacher:
    """A scripted teacher that judges clips by their sign-clipped true rewards (the seed's
    synthetic preferences on Atari, where raw scores differ by orders of magnitude)."""

    def __init__(self, teacher: ScriptedTeacher):
        self.teacher = teacher

    def submit(self, query: Query) -> None:
        self.teacher.submit(Query(query.ids, _clipped(query.left), _clipped(query.right)))

    def __getattr__(self, name: str):  # (the rest, as the teacher has it: poll, its state, ...)
        if name == "teacher":  # (not set yet: as while a copy is made)
            raise AttributeError(name)
        return getattr(self.teacher, name)


class FramePreferenceRun(FrameRun):
    """Queries and labels go through the feedback store (the record: a resumed run never asks
    twice, and labels given while it was stopped count), so people can label in the browser
    (`--teacher.preset web`, or `prefrl serve RUN`) or the terminal (`prefrl label RUN`)."""

    def __init__(self, config: FramePreferenceConfig, run_dir: Path):
        super().__init__(config, run_dir)
        self.reward_model = FrameRewardModel(config.reward, seed=config.seed)
        existing = bool(checkpoints(run_dir))  # (its store must then exist: never a new one)
        self.store = FeedbackStore(config.store or run_dir, create=not existing)
        scripted = None if config.teacher.is_human else ClippedRewardTeacher(
            ScriptedTeacher(config.teacher, config.seed, None, config.env))  # fmt: skip
        self.feedback = StoreChannel(self.store, run_uid(run_dir), run_dir, config.env, scripted,
                                     create=not existing)  # fmt: skip
        if self.feedback.is_human:
            self.checkpoint_seconds = 60 * config.checkpoint_minutes
        self.server: LabellingServer | None = None
        self.labels = PreferenceData()
        self.pool = SegmentPool(config.pool_size)
        self.recorder = FrameClipRecorder(config.agent.n_envs, config.segment_length,
                                          next_id=self.feedback.next_segment_id())  # fmt: skip
        self.rng = np.random.default_rng([config.seed, 11])
        self.next_query = self.feedback.next_query_id()
        self.phase = "start"  # then gathered (random-policy clips asked about), pretrained
        self.reward_metrics: dict[str, float] = {}  # (the last fit's, this session)

    def save_more(self, ckpt: Path) -> None:
        self.reward_model.save(ckpt / "reward_model")
        self.labels.save(ckpt / "labels.npz")
        self.pool.save(ckpt / "pool.npz")
        write_json(ckpt / "prefs.json", {"next_query": self.next_query,
                                         "next_clip": self.recorder.next_id,
                                         "rng": self.rng.bit_generator.state,
                                         "phase": self.phase,
                                         "feedback": self.feedback.state_dict()})  # fmt: skip

    def restore(self, ckpt: Path) -> None:
        super().restore(ckpt)
        self.reward_model = FrameRewardModel.load(ckpt / "reward_model")
        self.labels = PreferenceData.load(ckpt / "labels.npz")
        self.pool = SegmentPool.load(ckpt / "pool.npz")
        state = json.loads((ckpt / "prefs.json").read_text())
        # The store is the record: what was asked after this checkpoint stays asked.
        self.next_query = max(state["next_query"], self.feedback.next_query_id())
        self.recorder.next_id = max(state["next_clip"], self.feedback.next_segment_id())
        self.rng.bit_generator.state = state["rng"]
        self.feedback.load_state_dict(state["feedback"])
        self.phase = state.get("phase", "pretrained")

    def ask(self, n: int) -> None:
        """`n` new pairs of clips from the pool, to the teacher (through the store): each pair
        never asked before in this run, in either order (fewer when the pool has too few; the
        budget, counted in the store, asks for the rest later)."""
        self.serve()
        model = self.reward_model if self.reward_model.steps else None
        left, right = select_pairs(self.config.selection, self.pool, n, self.rng, model,
                                   asked=self.feedback.asked_pairs())  # fmt: skip
        ids = np.arange(self.next_query, self.next_query + len(left))
        self.next_query += len(left)
        self.feedback.submit(Query(ids, left, right))

    def take_labels(self) -> dict[str, float]:
        """The labels that arrived since the last call (the callbacks hear of new ones)."""
        new = self.feedback.poll()
        if new is not None:
            self.labels.add(new.left, new.right, new.labels)
            self.labels.keep_newest(self.config.reward.max_labels)  # (older ones stay in the store)
        row = {"labels/total": float(len(self.labels)),
               "labels/unanswered": float(self.feedback.unanswered())}  # fmt: skip
        if new is not None:
            self.callbacks("labels", self.step, {"labels/new": float(len(new.labels)), **row})
        return row

    def serve(self) -> None:
        """With `--teacher.preset web`, the labelling server of this session, from the first
        pairs it asks (a resumed run past its first labels asks later ones too)."""
        if self.server is None and self.config.teacher.preset == "web":
            self.server = LabellingServer(self.run_dir, self.config.web_port, self.config.store)

    def wait_for_labels(self) -> None:
        """The one wait for a person: the initial labels, before the reward model exists."""
        if not self.feedback.is_human:
            return
        self.serve()
        where = f"at {self.server.url}/compare" if self.server else f"(prefrl serve {self.run_dir})"
        print(f"Waiting for your first {self.feedback.unanswered()} labels: label in the browser "
              f"{where} or the terminal (prefrl label {self.run_dir})", flush=True)  # fmt: skip
        said, serving = None, self.server is not None
        while (left := self.feedback.unanswered()) > 0 and not self.stop.requested:
            news = (self.server.check() if serving else None) or first_labels_status(
                self.store, self.feedback.run_id, self.run_dir, left, serving)  # fmt: skip
            if news != said:  # (what it waits for, as it changes: as prefrl train says it)
                print(f"waiting: {news}", flush=True)
                said = news
            time.sleep(self.config.poll_seconds)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
        self.feedback.close()
        super().close()

    # ------------------------------------------------------------------ the A2C loop's hooks
    @property
    def title(self) -> str:
        return f"{self.config.algo.upper()} from preferences"

    def begin(self, metrics: MetricsLogger) -> bool:
        """Random-policy clips and the initial queries about them; their labels and the reward
        model's pre-training. Returns False when it stopped after the clips (--stop-after
        gather); resumed, it goes on from there."""
        cfg = self.config
        row: dict[str, float] = {}
        if self.phase == "start":
            if cfg.load_labels is not None:  # (imported once: a second import adds nothing)
                n = import_labels(self.store, run_uid(self.run_dir), self.run_dir,
                                  read_labels(cfg.load_labels), None, None, FRAME_SIZE)  # fmt: skip
                print(f"loaded {n} labels from {cfg.load_labels}", flush=True)
            obs, random_steps = self.envs.reset(), 0
            rng = np.random.default_rng([cfg.seed, 12])
            while len(self.pool) < min(cfg.pool_size, 2 * cfg.initial_labels):
                if self.stop.requested:
                    return False
                action = rng.integers(0, self.agent.n_actions, len(self.envs))
                obs = self.env_step(obs, action, random_steps)[0]
                random_steps += len(self.envs)
            self.ask(cfg.initial_labels)
            self.phase = "gathered"
            row["pretrain/random_steps"] = float(random_steps)
            if cfg.stop_after == "gather":
                metrics.log(0, row)
                print(f"{cfg.initial_labels} pairs of random-policy clips asked: label them with "
                      f"prefrl serve {self.run_dir} (or prefrl label)", flush=True)  # fmt: skip
                return False
        self.wait_for_labels()
        if self.stop.requested:
            return False
        self.take_labels()
        t0 = time.perf_counter()  # (the pre-training's own time: not the wait for people)
        if not self.pretrain(row):
            metrics.log(0, row)
            return False
        row.update(self.clip_return_fit())
        row["pretrain/seconds"] = time.perf_counter() - t0
        self.phase = "pretrained"
        metrics.log(0, row)
        self.fitted(row)
        val = row.get("reward/val_accuracy")
        val = "no decided held-out pair yet" if val is None else f"validation accuracy {val:.2f}"
        print(f"reward model pre-trained on {len(self.labels)} labels of random-policy clips: "
              f"{val} ({row['pretrain/seconds']:.0f} s of training)", flush=True)  # fmt: skip
        return True

    def pretrain(self, row: dict[str, float]) -> bool:
        """The reward model's pre-training (fits of `steps_per_fit` steps, as the seed's), with
        its progress; a stop ends it at its next gradient step, and a resumed run goes on from
        there. Returns whether it is done."""
        cfg, model = self.config, self.reward_model
        per_fit = cfg.reward.steps_per_fit
        total = -(-cfg.pretrain_steps // per_fit) * per_fit
        print(f"pre-training the reward model on {len(self.labels)} labels ({total:,} gradient "
              f"steps{f', {model.steps:,} done' if model.steps else ''})", flush=True)  # fmt: skip
        self.stop.doing = ("the pre-training ends after its current gradient step, then a "
                           "checkpoint to resume it from")  # fmt: skip
        progress = TrainingProgress(total, model.steps, enabled=cfg.progress, eval_label=None,
                                    unit="gradient steps", title="pre-training the reward model",
                                    phase_of=self.run_dir)  # fmt: skip
        with progress:
            while model.steps < total and not self.stop.requested:
                row.update(model.fit(self.labels, min(per_fit, total - model.steps),
                                     lambda: self.stop.requested,
                                     lambda *_: progress.update(model.steps)))  # fmt: skip
        return model.steps >= total

    def env_step(self, obs, action, step: int):
        """Steps the envs, cutting their steps into clips for the pool."""
        starting = self.recorder.starting()
        states = self.envs.get_states(np.flatnonzero(starting))
        out = self.envs.step(action)
        ended = out[2] | out[3]
        for clip in self.recorder.record(step, obs, action, out[1], ended, states):
            self.pool.add(clip)
        return out

    def rollout_rewards(self, obs: np.ndarray, action: np.ndarray, true_reward: np.ndarray):
        return self.reward_model.predict(obs, action).astype(np.float32)

    def after_update(self, metrics: MetricsLogger) -> None:
        """Every `fit_every` updates: new labels (the budget left, spread evenly over the fits
        left), then a fit."""
        cfg = self.config
        per_update = cfg.agent.n_steps * cfg.agent.n_envs
        update = self.step // per_update + 1  # (called before the step count moves on)
        if update % cfg.fit_every:
            return
        fits_left = max(1, math.ceil(cfg.steps / per_update) // cfg.fit_every
                        - update // cfg.fit_every + 1)  # fmt: skip
        if (left := cfg.labels - self.feedback.asked()) > 0:
            self.ask(math.ceil(left / fits_left))
        row = self.take_labels()
        row.update(self.fit())
        if not self.stop.requested:
            row.update(self.clip_return_fit())
        metrics.log(self.step, row)
        check_finite({k: v for k, v in row.items() if k != "reward/clip_return_corr"}, self.step)
        self.fitted(row)

    def fitted(self, row: dict[str, float]) -> None:
        """A fit's metrics: kept for the result, told to the callbacks."""
        self.reward_metrics = {k: v for k, v in row.items() if k.startswith("reward/")}
        self.callbacks("fit", self.step, row)

    def add_to_result(self, result) -> None:
        result.labels = len(self.labels)
        result.agreement = self.reward_metrics.get("reward/clip_return_corr")
        result.details["reward_metrics"] = self.reward_metrics
        result.details["unanswered"] = self.feedback.unanswered()
        notes = [] if result.interrupted else [unanswered_at_end(self.feedback),
                                               mostly_ties(self.labels)]  # fmt: skip
        result.details["notes"] = [n for n in notes if n]  # (train_frames prints them)

    def fit(self) -> dict[str, float]:
        """A fit of the reward model, shown on the progress bar; a stop ends it at its next
        gradient step."""
        progress, doing = self.progress, self.stop.doing
        self.stop.doing = f"the reward model's fit ends after its gradient step, then {doing}"

        def shown(done: int, steps: int) -> None:
            if progress is not None:
                progress.update(self.step, info=f"reward fit {done}/{steps}")

        try:
            return self.reward_model.fit(self.labels, None, lambda: self.stop.requested, shown)
        finally:
            self.stop.doing = doing
            if progress is not None:
                progress.update(self.step, info="")

    def clip_return_fit(self) -> dict[str, float]:
        """Correlation of learned and true (clipped) clip returns over the newest clips (also
        the run page's scatter)."""
        clips = self.pool.newest(64)
        learned = self.reward_model.predict(clips.obs, clips.action).sum(-1)
        true = np.sign(clips.reward).sum(-1)
        write_fit_scatter(self.run_dir, self.step, true, learned)
        return {"reward/clip_return_corr": pearson(learned, true)}


def _clipped(clips: Segments) -> Segments:
    return dataclasses.replace(clips, reward=np.sign(clips.reward))


def train_frames_from_preferences(config: FramePreferenceConfig, callback=None):
    """Run (or resume) the workflow; returns a `TrainResult` (its final evaluation on the true
    reward). `callback`: a function (or a list) called with a `TrainEvent` at each metrics
    row, evaluation, checkpoint, reward fit and labels that came; returning False stops the
    run."""
    callbacks = Callbacks(callback)
    if config.name is None:
        config = dataclasses.replace(
            config, name=run_name(config.env, f"{config.algo}-prefs", config.seed)
        )
    if config.load_labels is not None and config.resume is None:  # (before the run starts)
        shared = read_labels(config.load_labels)
        check_same_env(shared, config.env, "this run", f"--load-labels {config.load_labels}")
    return train_frames(config, FramePreferenceRun, callbacks)
