"""Online learning from preferences: PEBBLE (Lee et al. 2021) with SAC, PrefPPO with PPO.

`pebble_loop` is the whole algorithm, one env step at a time:

1. collect: the agent acts and learns (`online_agents.SacSteps` / `PpoSteps`): random actions
   for the warm start, optional pre-training on a k-NN state-entropy reward
   (`reward.knn_entropy`), then updates on the learned reward;
2. cut segments: finished episodes are cut into segments, the query candidates
   (`data.segments.SegmentRecorder`, `SegmentPool`);
3. ask: on the label schedule (`feedback.schedules`), pairs are selected (`feedback.selection`)
   and handed to the teacher through a feedback channel (`feedback.channel`);
4. fit: labels that arrived are added; when enough are new, the reward model is fitted
   (`online.fitting`: in place, or in a background process `fit_lag` steps ahead);
5. relabel: the replay buffer gets the new model's rewards (`OnlineRun.take_fit`), and the
   agent goes on learning from them;
6. every so often: log, evaluate, checkpoint (`training.loop.PeriodicTasks`).

Teachers answer asynchronously: the agent trains on the last fitted reward while answers are
outstanding, and waits only for the first labels (a person's, or a teacher object's that answers
late).
"""

from __future__ import annotations

import json
from pathlib import Path

from prefrl.agents import PPO, SAC
from prefrl.envs import PrefrlEnv, make_env
from prefrl.envs.check import check_people_can_label
from prefrl.feedback import ScheduleConfig, ScriptedTeacher, Teacher, TeacherConfig
from prefrl.feedback.channel import mostly_ties
from prefrl.feedback.exchange import check_same_env, import_labels, read_labels
from prefrl.feedback.store import run_uid
from prefrl.feedback.teachers import check_teacher
from prefrl.online.agents import PpoSteps, SacSteps
from prefrl.online.config import OnlineConfig
from prefrl.online.state import OnlineRun, Parts
from prefrl.reward import MLPRewardEnsemble, RewardModel
from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.rundir.metrics import MetricsLogger
from prefrl.rundir.progress import TrainingProgress
from prefrl.rundir.stop import StopRequest, graceful_stop
from prefrl.training.callbacks import Callbacks
from prefrl.training.loop import (
    PeriodicTasks,
    check_finite,
    check_resumed_identity,
    check_sizes,
    config_with,
    env_argument,
    from_config,
    python_arguments,
    run_name,
    start_run,
    stoppable,
)
from prefrl.training.result import TrainResult, finished
from prefrl.web.serve import LabellingServer

__all__ = ["OnlineConfig", "PreferenceLearner", "train_online"]


def make_training_env(config: OnlineConfig, seed: int | None) -> PrefrlEnv:
    """The env the agent trains in (and its segments come from): see `termination`."""
    return make_env(config.env, seed=seed, early_termination=config.termination != "continue")


def check_env(config: OnlineConfig, env: PrefrlEnv, human: bool, teacher=None) -> None:
    """Errors that must stop a run before any training (`teacher`: a teacher object given)."""
    limit = env.max_episode_steps
    if limit is not None and config.segment_length > limit:
        raise ValueError(
            f"--segment-length={config.segment_length} is longer than {config.env}'s episodes "
            f"({limit} steps); use at most {limit}"
        )
    if human:
        check_people_can_label(env)
    needs = not human if teacher is None else getattr(teacher, "needs_true_reward", False)
    if not env.has_true_reward and needs:
        who = (f"the scripted teacher {config.teacher.preset!r}" if teacher is None
               else f"teacher={teacher!r} (needs_true_reward)")  # fmt: skip
        raise ValueError(f"{config.env} has no true reward, so {who} cannot label it; label it "
                         "yourself (human teacher) or give a teacher of your own")  # fmt: skip
    if teacher is not None and callable(getattr(teacher, "check_env", None)):
        teacher.check_env(env)


class PreferenceLearner:
    """Learns a behaviour from preferences between pairs of segments.

        learner = PreferenceLearner("toy:point-reach", teacher="oracle", steps=20_000)
        result = learner.train()

    Args:
        env: an env id (`prefrl envs`; your registered Gymnasium env: its id, or
            `module:EnvId` to have each process import the module that registers it), an env
            made by `prefrl.make_env`, or any Gymnasium env object: one of `gymnasium.make`,
            or an instance of your own class, never registered (evaluated on copies:
            `wrap_env`); yours to close.
        teacher: a scripted preset ("oracle", "stoc", "mistake", ...), a `TeacherConfig`, a
            teacher object (`submit(query)` and `poll() -> [Answer]`, see
            `prefrl.feedback.Teacher`), or "web" / "terminal" for a person labelling with
            `prefrl serve` / `prefrl label`.
        agent: `SAC` (PEBBLE) or `PPO` (PrefPPO); default: SAC with `config.sac`.
        reward_model: a `RewardModel` that rewards single steps; default: an MLP ensemble.
        schedule: when and how many labels are asked (`ScheduleConfig`).
        config: every other setting (`OnlineConfig`); keyword arguments override its fields,
            e.g. `steps=20_000, segment_length=25, runs_dir="runs"`.
        in_memory: keep queries and labels in memory instead of the run's feedback store.
            Default: in memory unless a person labels (the CLI always uses the store).
    """

    @python_arguments(OnlineConfig)
    def __init__(
        self,
        env: str | PrefrlEnv | None = None,
        teacher: str | TeacherConfig | Teacher | None = None,
        *,
        agent: SAC | PPO | None = None,
        reward_model: RewardModel | None = None,
        schedule: ScheduleConfig | None = None,
        config: OnlineConfig | None = None,
        in_memory: bool | None = None,
        **settings,
    ):
        self.env, env_id = env_argument(env)
        fields = {} if env_id is None else {"env": env_id}
        self.teacher: Teacher | None = None
        if isinstance(teacher, str):
            fields["teacher"] = TeacherConfig(teacher)
        elif isinstance(teacher, TeacherConfig):
            fields["teacher"] = teacher
        elif teacher is not None:
            check_teacher(teacher)
            self.teacher = teacher
            if isinstance(teacher, ScriptedTeacher):
                fields["teacher"] = teacher.config
        if agent is not None:
            if not isinstance(agent, SAC | PPO):
                raise TypeError(f"agent={agent!r} is not a prefrl SAC or PPO")
            algo = "sac" if isinstance(agent, SAC) else "ppo"
            fields.update({"algo": algo, algo: agent.config})  # (the fields sac and ppo)
        if reward_model is not None and not isinstance(reward_model, RewardModel):
            raise TypeError(f"reward_model={reward_model!r} is not a prefrl.reward.RewardModel")
        if isinstance(reward_model, MLPRewardEnsemble):
            fields["reward"] = reward_model.config
        if schedule is not None:
            fields["schedule"] = schedule
        self.config = config_with(OnlineConfig, "PreferenceLearner", config, settings, fields)
        check_resumed_identity(self.config)  # (before an env is made for the checks below)
        self.agent, self.reward_model = agent, reward_model
        human = self.teacher is None and self.config.teacher.is_human
        self.in_memory = (not human) if in_memory is None else in_memory
        if self.in_memory and human:
            raise ValueError(f"teacher={self.config.teacher.preset!r} is a person: their labels "
                             "go through the feedback store (in_memory=False)")  # fmt: skip
        if self.in_memory and self.config.load_labels is not None:
            raise ValueError("load_labels imports into the feedback store: use in_memory=False")
        env = self.env or make_training_env(self.config, seed=None)
        try:
            check_env(self.config, env, human, self.teacher)  # before anything is written
            check_sizes({"agent": self.agent, "reward_model": self.reward_model}, env)
        finally:
            if self.env is None:
                env.close()

    def _parts(self) -> Parts:
        cfg = self.config
        env = self.env or make_training_env(cfg, seed=cfg.seed)
        obs_dim, action_dim = env.obs_dim, env.action_dim
        if self.agent is not None:
            agent = self.agent
        elif cfg.algo == "sac":
            agent = SAC(cfg.sac, obs_dim, action_dim)
        else:
            agent = PPO(cfg.ppo, obs_dim, action_dim)
        model = self.reward_model or MLPRewardEnsemble(cfg.reward, obs_dim, action_dim, cfg.seed)
        teacher = self.teacher
        if teacher is None and not cfg.teacher.is_human:
            teacher = ScriptedTeacher(cfg.teacher, cfg.seed, env.max_episode_steps, cfg.env)
        return Parts(env, agent, model, teacher, self.in_memory, owns_env=self.env is None)

    @python_arguments(OnlineConfig)
    def train(self, callback=None) -> TrainResult:
        """Run (or, with `resume`, continue) the run; returns where it went and how it ended.
        Ctrl-C stops it from the first moment: one during the set-up ends the run once it is
        set up, before any training (a second, at once). `callback`: a function (or a list)
        called with a `TrainEvent` at each metrics row, evaluation, checkpoint, reward fit and
        labels that came; returning False stops the run."""
        cfg = self.config
        callbacks = Callbacks(callback)
        name = cfg.name or run_name(cfg.env, f"pref-{cfg.algo}", cfg.seed)
        with graceful_stop(say=print) as stop:
            kept = ("its latest checkpoint stays the one to resume from" if cfg.resume
                    else "nothing is trained yet, so nothing to save")  # fmt: skip
            stop.doing = f"the run ends once set up (loading, compiling), before training: {kept}"
            try:
                result = self._train(stop, name, callbacks)
            except KeyboardInterrupt:  # (a second Ctrl-C in the set-up: nothing new to save)
                run_dir = Path(cfg.resume or Path(cfg.runs_dir) / name)
                ckpt = latest_checkpoint(run_dir)
                step = json.loads((ckpt / "loop.json").read_text())["step"] if ckpt else 0
                print(f"stopped during the set-up, at step {step:,}", flush=True)
                result = TrainResult(run_dir, step, interrupted=True, labels=0,
                                     title=method_title(cfg))  # fmt: skip
        return finished(result)

    def _train(self, stop: StopRequest, name: str, callbacks: Callbacks) -> TrainResult:
        cfg = self.config
        shared = None
        if cfg.load_labels is not None and cfg.resume is None:  # (a resumed run has them)
            shared = read_labels(cfg.load_labels)
            check_same_env(shared, cfg.env, "this run", f"--load-labels {cfg.load_labels}")
        run, metrics = start_run(lambda c, d: OnlineRun(c, d, self._parts()), cfg, name,
                                 callbacks)  # fmt: skip
        if shared is not None:
            n = import_labels(run.store, run_uid(run.run_dir), run.run_dir, shared,
                              run.env.obs_dim, run.env.action_dim)  # fmt: skip
            print(f"loaded {n} labels from {cfg.load_labels}", flush=True)
        server = None
        try:
            if stop.requested:
                print(f"stopped before training, at step {run.step:,}", flush=True)
                return online_result(run, interrupted=True)
            if run.step >= cfg.steps:  # (`start_run` said so: no labelling server, no loop)
                return online_result(run)
            if cfg.teacher.preset == "web" and self.teacher is None:
                server = LabellingServer(run.run_dir, cfg.web_port, cfg.store)  # (says where)
            return pebble_loop(run, metrics, server)
        finally:
            if server is not None:
                server.stop()
            metrics.close()
            run.close()


def train_online(config: OnlineConfig, callback=None) -> TrainResult:
    """Run (or resume) a preference-learning run from its config, with the feedback store (as
    `prefrl train` does; errors name settings as its flags). `callback`: see
    `PreferenceLearner.train`."""
    with from_config():
        return PreferenceLearner(config=config, in_memory=False).train(callback)


def method_title(config: OnlineConfig) -> str:
    return f"{'PEBBLE' if config.algo == 'sac' else 'PrefPPO'} on {config.env}"


def online_result(run: OnlineRun, periodic: PeriodicTasks | None = None, interrupted=False,
                  notes: list[str] | None = None) -> TrainResult:  # fmt: skip
    """What a preference run returns: its labels, its learned reward's agreement with the true
    one (segment returns), what became of the pairs asked."""
    fit = run.reward_metrics
    return TrainResult(
        run.run_dir, run.step, periodic and periodic.final, interrupted, labels=len(run.labels),
        agreement=fit.get("reward/segment_return_corr"), video=periodic and periodic.video,
        best_eval=periodic and periodic.best.best,
        title=method_title(run.config), details={"reward_metrics": fit, "notes": notes or [],
                                                 "unanswered": run.feedback.unanswered()},
    )  # fmt: skip


def pebble_loop(run: OnlineRun, metrics: MetricsLogger, server: LabellingServer | None):
    """Steps 1-6 of the module docstring until the run's last step or a stop."""
    cfg, env = run.config, run.env
    agent = SacSteps(run) if cfg.algo == "sac" else PpoSteps(run)
    progress = TrainingProgress(cfg.steps, run.step, enabled=cfg.progress, last_eval=run.last_eval)
    title = method_title(cfg)
    minutes = cfg.checkpoint_minutes if run.feedback.is_human else None
    periodic = PeriodicTasks(run, metrics, progress, title, minutes and 60 * minutes)
    told_ties = False  # (said once a session, after the fit that first finds them)

    def use_fit_if_ready() -> None:  # 5. relabel (a fit due now lands before queries use it)
        nonlocal told_ties
        if run.fitting.ready(run.step):
            first = not run.fitted
            fitting = (f"the reward model's fit on {len(run.labels):,} labels ends first (it "
                       "cannot stop midway), then a checkpoint, then the end")  # fmt: skip
            with stop.meanwhile(fitting):
                fit_metrics = run.take_fit()
            agent.after_fit(first)
            if not told_ties and (ties := mostly_ties(run.labels)):
                progress.say(f"note: {ties}")
                told_ties = True
            metrics.log(run.step, fit_metrics)
            check_finite({k: v for k, v in fit_metrics.items() if "corr" not in k}, run.step)
            run.callbacks("fit", run.step, fit_metrics)
            periodic.restart_clock(run.step)

    def doing() -> str:  # (what a stop does, said when one comes)
        first_update = agent.metrics is None and (run.fitted or run.step >= cfg.warmstart_steps)
        compiling = " (this session's first update compiles the agent: up to a minute)"
        return f"a checkpoint once the step under way ends{compiling * first_update}, then the end"

    obs, _ = env.reset(seed=cfg.seed + run.step)
    episode = Episode()
    with stoppable(run, progress) as stop:
        stop.doing = doing
        while run.step < cfg.steps and not stop.requested:
            # 1. collect (the agent updates inside act_and_update), 2. cut segments
            state_before = env.get_state()
            action = agent.act_and_update(obs)
            next_obs, reward, terminated, truncated, _ = env.step(action)
            agent.add_transition(obs, action, next_obs, terminated, truncated)
            run.recorder.record(run.step, obs, action, reward, state_before)
            episode.add(reward)
            run.step = step = run.step + 1
            if terminated or truncated:
                end_episode(run, metrics, episode, next_obs, terminated)
                obs, _ = env.reset()
            else:
                obs = next_obs
            use_fit_if_ready()
            # 3. ask, on the schedule's cadence (retried while the pool is too small)
            since_first = step - cfg.first_query_step
            if since_first >= 0 and since_first % cfg.schedule.interval == 0:
                run.ask_due = True
            if run.ask_due and step % 100 == 0:
                run.ask_due = not run.ask()
                if (
                    not run.ask_due
                    and not run.fitted
                    and run.first_session_unanswered() > 0
                    and not run.feedback.has_loaded_labels()  # (a model is fitted on those)
                ):
                    with stop.meanwhile("the wait for the first labels ends, then a checkpoint"):
                        run.wait_for_first_labels(progress, stop, server)
            # 4. fit on the answers that arrived (looked for every 100 steps)
            if since_first >= 0 and step % 100 == 0 and (new := run.collect_answers()):
                run.callbacks("labels", step, {"labels/new": float(new),
                                               "labels/total": float(len(run.labels))})  # fmt: skip
            if run.fitting.pending is None and step % 100 == 0 and run.fit_due():
                run.fitting.start(step, run.labels)
                use_fit_if_ready()
            # 6. log, evaluate, checkpoint
            if server is not None and step % 1000 == 0 and (news := server.check()):
                progress.say(news)
            periodic.after_step(step, agent.metrics, info=f"labels {len(run.labels):,}")
    notes = [] if stop.requested else run.end_notes()
    for note in notes:
        print(f"note: {note}", flush=True)
    return online_result(run, periodic, stop.requested, notes)


class Episode:
    """The return and length of the episode under way."""

    def __init__(self):
        self.ret, self.length = 0.0, 0

    def add(self, reward: float) -> None:
        self.ret += reward
        self.length += 1


def end_episode(run: OnlineRun, metrics, episode: Episode, final_obs, terminated: bool) -> None:
    """Cut the finished episode into segments for the pool and log its return. With termination
    "absorbing", an episode that ended early gets its final state held still as padding."""
    run.episodes += 1
    run.feedback.observe_episode(episode.ret, episode.length)
    absorbing = terminated and run.config.termination == "absorbing"
    final = (final_obs, run.env.get_state()) if absorbing else None
    segments = run.recorder.end_episode(run.rng, run.episodes, final)
    if segments is not None:
        run.pool.add(run.as_stored(segments))
    metrics.log(run.step, {"train/episode_return": episode.ret,
                           "train/episode_length": episode.length})  # fmt: skip
    episode.ret, episode.length = 0.0, 0
