"""Everything an online preference run holds between steps, and the feedback steps it takes.

`OnlineRun` asks for labels on the schedule (`ask`), takes those that arrived (`collect_answers`),
uses a finished reward fit (`take_fit`: relabel the replay buffer), waits for a person's first
labels, evaluates, and saves itself in checkpoints / restores itself from them. The step loop
that calls these is `prefrl.online.learner`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from prefrl.agents import PPO, SAC
from prefrl.data import PreferenceData, ReplayBuffer, SegmentPool, SegmentRecorder
from prefrl.data.segments import Segments, pair_keys
from prefrl.envs import PrefrlEnv
from prefrl.feedback import Query, Teacher, select_pairs
from prefrl.feedback.channel import (
    FeedbackChannel,
    InMemoryChannel,
    StoreChannel,
    mostly_ties,
    unanswered_at_end,
)
from prefrl.feedback.store import FeedbackStore, run_uid
from prefrl.feedback.waiting import first_labels_status
from prefrl.online.agents import absorbing_value
from prefrl.online.config import OnlineConfig
from prefrl.online.fitting import RewardFitting
from prefrl.reward import RewardModel, load_reward_model, pearson
from prefrl.reward.knn_entropy import KnnEntropyReward
from prefrl.rundir.checkpoints import begin_checkpoint, checkpoints, commit_checkpoint, write_json
from prefrl.rundir.metrics import write_fit_scatter
from prefrl.training.loop import TrainingLoop
from prefrl.web.serve import LabellingServer


@dataclass
class Parts:
    """The objects a run is made of (built from the config by `prefrl.online.learner`, or given by
    a Python user). `teacher` None: a person answers, through the store."""

    env: PrefrlEnv
    agent: SAC | PPO
    model: RewardModel
    teacher: Teacher | None
    in_memory: bool
    owns_env: bool = True


class OnlineRun(TrainingLoop):
    keeps_best = True

    def __init__(self, config: OnlineConfig, run_dir: Path, parts: Parts):
        super().__init__(config, run_dir, parts.env, parts.owns_env)
        obs_dim, action_dim = self.env.obs_dim, self.env.action_dim
        self.key = jax.random.key(config.seed, impl="rbg")
        self.rng = np.random.default_rng(config.seed)
        self.agent = parts.agent
        capacity = config.buffer_size if config.algo == "sac" else config.ppo.rollout_steps
        self.buffer = ReplayBuffer(capacity, obs_dim, action_dim)
        self.state = self.agent.init(jax.random.fold_in(self.key, 1))
        self.store: FeedbackStore | None = None
        if parts.in_memory:
            self.feedback: FeedbackChannel = InMemoryChannel(parts.teacher)
        else:
            # A run with checkpoints refers to its store's labels: a store gone missing is an
            # error, never silently replaced by an empty one.
            existing = bool(checkpoints(run_dir))
            self.store = FeedbackStore(config.store or run_dir, create=not existing)
            self.feedback = StoreChannel(self.store, run_uid(run_dir), run_dir, config.env,
                                         parts.teacher, create=not existing)  # fmt: skip
        self.fitting = RewardFitting(
            parts.model, config.fit_lag, config.refit_labels, config.refit_growth,
            pretraining=config.unsupervised_steps > 0, job_dir=run_dir / "fit_job",
        )  # fmt: skip
        self.intrinsic = KnnEntropyReward(config.knn_k)
        self.recorder = SegmentRecorder(config.segment_length)
        self.pool = SegmentPool(config.segment_pool)
        self.labels = PreferenceData()
        self.episodes = 0
        # What the store already holds counts (a run stopped before its first checkpoint and
        # started again): questions are never asked twice, keys never reused.
        self.requested = self.feedback.asked()
        self.asked_pairs = self.feedback.asked_pairs()
        self.next_query_id = self.feedback.next_query_id()
        self.recorder.next_id = self.feedback.next_segment_id()
        self.first_uncheckpointed = 0  # the first segment key cut after the checkpoint
        self._stored_by_content: dict[bytes, int] | None = None
        self.ask_due = False
        self.reward_metrics: dict[str, float] = {}
        self.feedback_seconds = 0.0  # asking and collecting since the last fit (overhead)

    @property
    def model(self) -> RewardModel:
        return self.fitting.model

    @property
    def fitted(self) -> bool:
        return self.fitting.fitted

    # ------------------------------------------------------------------ feedback
    def unlabelled_pairs(self) -> dict[str, np.ndarray] | None:
        """SURF's unlabelled pairs for pseudo-labels: ten per label from the pool (at most
        5,000), drawn with a generator of their own; None when pseudo-labels are off."""
        if self.config.reward.pseudo_label_threshold is None or len(self.pool) < 2:
            return None
        rng = np.random.default_rng([self.config.seed, 7, self.fitting.model_fits])
        left, right = self.pool.sample_pairs(rng, min(5_000, 10 * len(self.labels)))
        return {"obs_left": left.obs, "action_left": left.action, "obs_right": right.obs,
                "action_right": right.action}  # fmt: skip

    def ask(self) -> bool:
        """Request the labels the schedule wants by now, each pair one never asked before;
        False when not all could be asked (fewer than 2 segments in the pool yet, or too few
        new pairs): the rest are asked when the pool has grown."""
        cfg = self.config
        wanted = cfg.schedule.wanted(self.step, cfg.first_query_step, cfg.steps)
        due = wanted - self.requested
        if due <= 0:
            return True
        if len(self.pool) < 2:
            return False
        t0 = time.perf_counter()
        model = self.model if self.fitted else None
        newest = max(2, cfg.recent_steps // cfg.segment_length)
        left, right = select_pairs(cfg.selection, self.pool, due, self.rng, model,
                                   cfg.oversample, self.asked_pairs, newest)  # fmt: skip
        n = len(left)
        if n:
            self.asked_pairs.update(pair_keys(left.id, right.id))
            ids = self.next_query_id + np.arange(n)
            self.next_query_id += n
            self.requested += n
            self.feedback.submit(Query(ids, left, right))
        self.feedback_seconds += time.perf_counter() - t0
        return n == due

    def as_stored(self, segments: Segments) -> Segments:
        """Segments just cut, each under the key of a stored segment it repeats step for step.
        A run started again from an earlier step (no checkpoint yet, or the last one lost)
        cuts again what the store got from it before, under new keys: the same clip must stay
        one segment, and a pair of them asked once."""
        if self.store is None:
            return segments
        if self._stored_by_content is None:  # (those the checkpoint has not seen, looked up once)
            run_id = self.feedback.run_id
            ids = self.store.segment_ids(run_id, min_key=self.first_uncheckpointed)
            stored = self.store.segments(self.run_dir, ids) if ids else None
            self._stored_by_content = (
                {} if stored is None
                else dict(zip(stored.fingerprints(), stored.id.tolist(), strict=True))
            )  # fmt: skip
        if self._stored_by_content:
            for i, fingerprint in enumerate(segments.fingerprints()):
                key = self._stored_by_content.pop(fingerprint, None)
                if key is not None:
                    segments.id[i] = key
        return segments

    def collect_answers(self) -> int:
        """Take the labels that arrived; returns how many."""
        t0 = time.perf_counter()
        new = self.feedback.poll()
        self.feedback_seconds += time.perf_counter() - t0
        if new is None:
            return 0
        self.labels.add(new.left, new.right, new.labels)
        self.fitting.unfitted_labels += len(new.labels)
        return len(new.labels)

    def fit_due(self) -> bool:
        all_asked = self.requested >= self.config.schedule.budget
        return self.fitting.due(len(self.labels), all_asked, self.feedback.unanswered,
                                self.feedback.is_human)  # fmt: skip

    def add_end_values(self, reward: np.ndarray, next_obs: np.ndarray, terminated) -> None:
        """Termination "absorbing": add what ending an episode early is worth to the reward of
        each step that did (in place); nothing otherwise."""
        cfg = self.config
        ends = np.flatnonzero(terminated)
        if cfg.termination != "absorbing" or not len(ends):
            return
        discount = cfg.sac.discount if cfg.algo == "sac" else cfg.ppo.discount
        horizon = self.env.max_episode_steps or 1000
        action_dim = self.env.action_dim
        reward[ends] += absorbing_value(self.model, next_obs[ends], action_dim, discount, horizon)

    def take_fit(self) -> dict[str, float]:
        """Use the fitted model: relabel the buffer; returns the fit's metrics."""
        metrics = self.fitting.take(self.labels, self.unlabelled_pairs())
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
        true = sample.true_returns()
        metrics["reward/segment_return_corr"] = pearson(predicted, true)
        write_fit_scatter(self.run_dir, self.step, true, predicted)
        counts = self.labels.counts()
        metrics["feedback/labels"] = float(len(self.labels))
        metrics["feedback/skipped"] = float(counts["skip"])
        metrics["feedback/equal"] = float(counts["equal"])
        self.reward_metrics = metrics
        return metrics

    def first_session_unanswered(self) -> int:
        """Pairs of the first session (the run's first `schedule.initial_labels` asked) still
        unanswered: the one wait is for all of them, also after a restart from step 0 that
        finds some answered in the store."""
        return self.feedback.unanswered(first=self.config.schedule.initial_labels)

    def wait_for_first_labels(self, progress, stop, server: LabellingServer | None) -> None:
        """The one place the trainer waits for its teacher (a person, or a teacher object that
        answers late): no reward model can be trusted before the first session's labels.
        Later labels are picked up while training goes on. What it waits for (pairs on
        someone's screen, clips being rendered, a helper that died) is said as it changes;
        with `first_labels_timeout`, training goes on without them after that long."""
        first, timeout = self.config.schedule.initial_labels, self.config.first_labels_timeout
        left, human = self.first_session_unanswered(), self.feedback.is_human
        some_in = f" ({first - left} in)" if left < first else ""
        browser = f"at {server.url}/compare" if server else f"(prefrl serve {self.run_dir})"
        progress.say(
            f"[bold]Waiting for your first {first} labels[/bold]{some_in} before training on a "
            f"learned reward. Label in the browser {browser} or the terminal (prefrl label "
            f"{self.run_dir}); training goes on as soon as they are in."
            if human
            else f"[bold]Waiting for the teacher's first {first} answers[/bold]{some_in} before "
            "training on a learned reward" + (f" (for {timeout:g} s at most)." if timeout else ".")
        )
        said, start = None, time.monotonic()
        while (left := self.first_session_unanswered()) > 0 and not stop.requested:
            if timeout is not None and time.monotonic() - start >= timeout:
                got = "No first labels"
                if left < first:
                    got = f"Only {first - left} of the first {first} labels"
                progress.say(f"{got} after {timeout:g} s (first_labels_timeout): training goes "
                             "on; labels are taken as they come.")  # fmt: skip
                return
            news = (server.check() if server else None) or (
                first_labels_status(
                    self.store, self.feedback.run_id, self.run_dir, left, server is not None
                )
                if human
                else f"{left} answer(s) to go"
            )
            if news != said:
                progress.say(f"waiting: {news}")
                said = news
            time.sleep(self.config.poll_seconds)
        if not stop.requested:
            progress.say("First labels in: training on the learned reward.")

    def end_notes(self) -> list[str]:
        """What a run that reached its last step must say of its labels: none came, or some
        asked are still unanswered (never trained on)."""
        notes = []
        if not len(self.labels):
            notes.append("no labels came before the run's last step: the agent never trained "
                         "on a learned reward")  # fmt: skip
        elif not self.fitted:
            notes.append(f"the reward model was never fitted to the {len(self.labels)} labels")
        if unanswered := unanswered_at_end(self.feedback):
            notes.append(unanswered)
        if ties := mostly_ties(self.labels):
            notes.append(ties)
        return notes

    # ------------------------------------------------------------------ checkpoints
    def save(self) -> Path:
        self.check_savable(self.state)
        tmp = begin_checkpoint(self.run_dir, self.step)
        self.write_policy(tmp)  # (the agent and the config)
        self.buffer.save(tmp / "buffer.npz")
        self.pool.save(tmp / "segments.npz")
        self.labels.save(tmp / "labels.npz")
        self.model.save(tmp / "reward_model")
        write_json(
            tmp / "loop.json",
            {
                "step": self.step,
                "episodes": self.episodes,
                "requested": self.requested,
                "next_query_id": self.next_query_id,
                **self.fitting.state_dict(),
                "ask_due": self.ask_due,
                "last_eval": self.last_eval,
                "reward_metrics": self.reward_metrics,
                "next_segment_id": self.recorder.next_id,
                "asked_pairs": sorted(self.asked_pairs),
                "rng": self.rng.bit_generator.state,
                "teacher": self.feedback.state_dict(),
                "intrinsic": self.intrinsic.state_dict(),
            },
        )
        return commit_checkpoint(tmp)

    def restore(self, ckpt: Path) -> None:
        self.state = self.agent.state_from_bytes((ckpt / "agent.msgpack").read_bytes())
        self.buffer = ReplayBuffer.load(ckpt / "buffer.npz")
        self.pool = SegmentPool.load(ckpt / "segments.npz")
        self.labels = PreferenceData.load(ckpt / "labels.npz")
        self.fitting.model = load_reward_model(ckpt / "reward_model")
        loop = json.loads((ckpt / "loop.json").read_text())
        self.step, self.episodes = loop["step"], loop["episodes"]
        # The store is the record: queries asked after this checkpoint stay asked (never asked
        # twice) and their labels arrive through the channel like any others.
        self.feedback.load_state_dict(loop["teacher"])
        self.requested = max(loop["requested"], self.feedback.asked())
        self.asked_pairs = {tuple(p) for p in loop.get("asked_pairs", [])}
        self.asked_pairs |= self.feedback.asked_pairs()
        self.next_query_id = max(loop["next_query_id"], self.feedback.next_query_id())
        self.last_eval = loop["last_eval"]
        self.ask_due = loop.get("ask_due", False)
        self.reward_metrics = loop["reward_metrics"]
        self.recorder.next_id = max(loop["next_segment_id"], self.feedback.next_segment_id())
        self.first_uncheckpointed = loop["next_segment_id"]
        self.rng.bit_generator.state = loop["rng"]
        self.intrinsic.load_state_dict(loop["intrinsic"])
        self.fitting.load_state_dict(loop, self.labels, ckpt)

    # ------------------------------------------------------------------ evaluation
    def policy(self, obs: np.ndarray) -> np.ndarray:
        if self.config.algo == "sac":
            return self.agent.act(self.state.actor_params, obs, self.key, 0, deterministic=True)
        return self.agent.act(self.state.params, obs, self.key, 0, deterministic=True)[0]

    def learned_reward(self):
        return self.model.predict if self.fitted else None

    def close(self) -> None:
        self.fitting.close()
        self.feedback.close()
        super().close()
