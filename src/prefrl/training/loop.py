"""Pieces every training loop shares: the run directory, NaN checks, evaluation outputs."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import errno
import json
import math
import time
from pathlib import Path

import gymnasium as gym
import jax
import numpy as np

from prefrl.envs import PrefrlEnv, wrap_env
from prefrl.envs.given import PREFIX as GIVEN_PREFIX
from prefrl.render import write_video
from prefrl.rundir.checkpoints import (
    IncompatibleCheckpoint,
    checkpoint_at,
    latest_checkpoint,
    set_aside,
    usable_checkpoints,
    write_json,
)
from prefrl.rundir.config import (  # (from_config, python_arguments: the learners take them here)
    IDENTITY,
    check_same_identity,
    check_types,
    config_to_dict,
    from_config,  # noqa: F401
    python_arguments,  # noqa: F401
)
from prefrl.rundir.metrics import MetricsLogger, truncate_metrics
from prefrl.rundir.plots import Curve, plot_learning_curve
from prefrl.rundir.provenance import record_session
from prefrl.rundir.status import setting_up
from prefrl.rundir.stop import graceful_stop
from prefrl.rundir.uid import claim_run_uid
from prefrl.rundir.workers import hold_trainer
from prefrl.training.best import BestPolicy
from prefrl.training.callbacks import Callbacks
from prefrl.training.evaluate import EvalResult, evaluate, make_eval_envs


class TrainingLoop:
    """What every training loop holds and does alike: its config, run directory and env, the
    step count, evaluation on a cached set of envs, the check before saving, closing.

    Subclasses give `policy(obs)` (deterministic actions), `save()`, `restore(ckpt)`, and
    `learned_reward()` where the run learns one (evaluations then report it beside the true)."""

    eval_curve: Curve = Curve()
    """What `learning_curve.png` draws of the evaluations, and says of them."""
    keeps_best = False
    """Whether evaluations keep the best policy in `RUN/best` (`prefrl.training.best`): loops
    whose policies `load_policy` loads, through `write_policy`."""

    def __init__(self, config, run_dir: Path, env, owns_env: bool = True):
        """`owns_env`: close the env with the loop (not one a Python user passed in)."""
        self.config, self.run_dir, self.env, self.owns_env = config, run_dir, env, owns_env
        self.step = 0
        self.last_eval: float | None = None
        self._eval_envs = None
        self._trainer = hold_trainer(run_dir)  # (people labelling are told when it is gone)
        self.callbacks = Callbacks(run_dir=run_dir)
        """A Python user's callbacks (`train(callback=...)`), set by `start_run`."""

    def policy(self, obs: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def learned_reward(self):
        return None

    def evaluate(self, record: bool) -> EvalResult:
        cfg = self.config
        if self._eval_envs is None:
            no_frames = cfg.video and getattr(self.env.given, "no_frames", None)
            if no_frames:
                print(f"warning: {no_frames}; its evaluations record no video", flush=True)
            self._video = cfg.video and not no_frames
            render_size = cfg.render_size if self._video else None
            self._eval_envs = make_eval_envs(self.env, cfg.eval_episodes, render_size)
        return evaluate(self.policy, self._eval_envs, seed=cfg.seed + 1_000_000,
                        record=record and self._video, learned_reward=self.learned_reward())  # fmt: skip

    def write_policy(self, folder: Path) -> None:
        """The files `load_policy` reads of the current policy (the agent and the config)."""
        (folder / "agent.msgpack").write_bytes(self.agent.state_to_bytes(self.state))
        write_json(folder / "config.json", config_to_dict(self.config))

    def check_savable(self, state) -> None:
        """Never checkpoint NaN or inf: the latest checkpoint must be one to resume from."""
        leaves = jax.tree.leaves(jax.device_get(state))
        if not all(np.isfinite(x).all() for x in leaves if np.issubdtype(x.dtype, np.floating)):
            raise FloatingPointError(
                f"the agent's parameters hold NaN or inf at step {self.step}; not checkpointing "
                "them: the latest checkpoint keeps the last good state"
            )

    def close(self) -> None:
        if self.owns_env:
            self.env.close()
        for env in self._eval_envs or []:
            env.close()
        if self._trainer is not None:
            self._trainer.close()


@contextlib.contextmanager
def stoppable(loop: TrainingLoop, progress):
    """The progress display and Ctrl-C / SIGTERM handling around a step loop: the body checks
    `stop.requested` between steps; a requested stop saves a checkpoint to resume from (no
    signal cuts that short), and a second Ctrl-C before it (KeyboardInterrupt) leaves the latest
    checkpoint as the one to resume. Each is acknowledged at once, above the bar. A stop that
    comes at the last step is no stop: the run has finished (and says how to go further)."""
    with progress, graceful_stop(say=progress.say) as stop:
        loop.callbacks.request = stop  # (a callback's stop is this one)
        try:
            yield stop
            if stop.requested:
                progress.update(loop.step)
                stop.saving = True
                finished = loop.step >= getattr(loop.config, "steps", math.inf)
                written = checkpoint_at(loop.run_dir, loop.step) if finished else None
                ckpt = written or loop.save()  # (the last step's is written by the loop)
                if finished:  # (nothing to resume)
                    stop.requested = False
                    progress.say(f"stopped at step {loop.step:,}, the run's last: it has "
                                 "finished. To train it further, resume it with a larger "
                                 "--steps (the total to reach)")  # fmt: skip
                else:
                    progress.say(f"stopped at step {loop.step:,}: its checkpoint is written")
                if not written:
                    loop.callbacks("checkpoint", loop.step, checkpoint=ckpt)
        except KeyboardInterrupt:
            stop.requested = True
            progress.say(f"stopped at step {loop.step:,} without a new checkpoint")
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
            raise _disk_full(e, loop.step, loop.run_dir) from e


def _disk_full(e: OSError, step: int, run_dir: Path) -> RuntimeError:
    """What to do when the disk fills (a checkpoint, metrics, a video): the checkpoint being
    written is not committed, so the last whole one stays the one to resume from."""
    latest = latest_checkpoint(run_dir)
    since = (
        f"its last whole checkpoint, {latest.name}" if latest else "its start (no checkpoint yet)"
    )
    return RuntimeError(
        f"no space left on the device (writing {e.filename or 'to the run'}) at step {step:,}: "
        f"free some, then resume the run from {since}: --resume {run_dir}"
    )


def config_with(cls, who: str, config, settings: dict, given: dict):
    """The config a learner class trains with: `config` (or `cls`'s defaults), its fields in
    `settings` (the keyword arguments) over it, and `given` (what the objects passed say: their
    env id, their agent's settings, ...; the paths of its inputs) over both. Unknown settings,
    values of the wrong type and inputs that are not there fail, naming them as the arguments
    they were given as."""
    known = {f.name for f in dataclasses.fields(cls)}
    if unknown := sorted(set(settings) - known):
        raise TypeError(f"{who} got unknown settings {unknown}; accepted: the fields of "
                        f"{cls.__name__} ({', '.join(sorted(known))})")  # fmt: skip
    if config is not None and not isinstance(config, cls):
        raise TypeError(f"{who}: config={config!r} is not {cls.__name__}")
    fields = check_types(cls, {**settings, **given}, who)
    for name in given:  # (the inputs, named before any setting is checked against another)
        if isinstance(fields[name], Path) and not fields[name].exists():
            raise FileNotFoundError(f"{who}: {name}={str(fields[name])!r} does not exist")
    return dataclasses.replace(config, **fields) if config else cls(**fields)


def env_argument(env) -> tuple[PrefrlEnv | None, str | None]:
    """(the env object to train in, or None to make one from the id; the env id) from what a
    Python user passed: an id, an env of `prefrl.make_env`, or any Gymnasium env object (one of
    `gymnasium.make`, or an instance of their own class: `wrap_env`)."""
    if isinstance(env, PrefrlEnv):
        return env, env.env_id
    if isinstance(env, gym.Env):
        wrapped = wrap_env(env, seed=None)
        return wrapped, wrapped.env_id
    if isinstance(env, str) or env is None:
        return None, env
    raise TypeError(f"env={env!r} is not an env id, an env made by prefrl.make_env or a "
                    "gymnasium.Env object")  # fmt: skip


def check_sizes(parts: dict, env: PrefrlEnv) -> None:
    """Each part given (an agent, a reward model) takes the env's observation and action
    sizes; the first that does not is named."""
    for name, part in parts.items():
        sizes = (getattr(part, "obs_dim", None), getattr(part, "action_dim", None))
        if part is not None and sizes != (env.obs_dim, env.action_dim):
            raise ValueError(
                f"{name} takes observations of size {sizes[0]} and actions of size {sizes[1]}; "
                f"{env.env_id} has {env.obs_dim} and {env.action_dim}"
            )


def run_name(env: str, algo: str, seed: int) -> str:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{env.replace(':', '-').replace('/', '-')}_{algo}_s{seed}_{stamp}"


def open_run_dir(resume: Path | None, runs_dir: Path, name: str, record: bool = True) -> Path:
    """The run directory: the one to resume, or a new (empty) one under `runs_dir`, with its
    store key (`claim_run_uid`). With `record`, this session's machine and versions are appended
    to its sessions.jsonl now; `start_run` records only once the run could be resumed."""
    if resume is not None:
        run_dir = Path(resume)
        if not (run_dir / "config.json").is_file():
            raise FileNotFoundError(
                f"--resume {run_dir}: not a run directory (no config.json there)"
                if run_dir.is_dir()
                else f"--resume {run_dir}: no such run directory"
            )
    else:
        run_dir = Path(runs_dir) / name
        if run_dir.exists() and any(run_dir.iterdir()):
            raise FileExistsError(
                f"run directory {run_dir} already exists; pick another --name or continue it "
                f"with --resume {run_dir}"
            )
    run_dir.mkdir(parents=True, exist_ok=True)
    claim_run_uid(run_dir, new=resume is None)
    if record:
        record_session(run_dir)
    return run_dir


def restore_newest(loop_factory, config, run_dir: Path):
    """Build the loop and restore the newest checkpoint that is whole and loads, setting damaged
    ones aside (`checkpoints/step_N.damaged`) and saying what was wrong with each. Returns (loop,
    the checkpoint restored or None). A run stopped before its first checkpoint starts again
    from step 0; when every checkpoint is damaged, nothing is changed and the error names them."""
    loop = loop_factory(config, run_dir)
    bad: list[tuple[Path, str]] = []
    for ckpt, problems in usable_checkpoints(run_dir):
        if not problems:
            print(f"loading {ckpt.name}", flush=True)
            try:
                loop.restore(ckpt)
            except IncompatibleCheckpoint:
                loop.close()
                raise
            except Exception as e:  # noqa: BLE001 (any unreadable file: named, then skipped)
                problems = [f"it does not load ({type(e).__name__}: {e})"]
                loop.close()  # (a half-restored loop is not trusted: a fresh one for the next)
                loop = loop_factory(config, run_dir)
        if not problems:
            for old, why in bad:
                moved = set_aside(old)
                print(f"warning: checkpoint {old.name} is damaged ({why}); set aside as "
                      f"{moved.name}", flush=True)  # fmt: skip
            if bad:
                print(f"resumed from {ckpt.name} instead", flush=True)
            return loop, ckpt
        bad.append((ckpt, "; ".join(problems)))
    if bad:
        loop.close()
        listed = "\n".join(f"  {c}: {why}" for c, why in bad)
        raise FileNotFoundError(
            f"{run_dir} cannot be resumed: every checkpoint is damaged\n{listed}\nStart a new "
            f"run (--load-labels {run_dir} keeps its labels)"
        )
    return loop, None


def check_finite(row: dict[str, float], step: int) -> None:
    bad = [k for k, v in row.items() if not np.isfinite(v)]
    if bad:
        raise FloatingPointError(
            f"{', '.join(bad)} became NaN or inf by step {step}; stopped. The latest checkpoint "
            "holds the last good state"
        )


def write_eval(
    run_dir: Path,
    metrics: MetricsLogger,
    step: int,
    result: EvalResult,
    record: bool,
    fps: float,
    title: str,
    curve: Curve = TrainingLoop.eval_curve,
) -> Path | None:
    """Log an evaluation, write its video (when recorded) and redraw the learning curve."""
    metrics.log(step, result.summary)
    video = None
    if record and result.frames:
        video = write_video(
            run_dir / "videos" / f"eval_{step:09d}.mp4", result.frames, fps=fps, audio=result.audio
        )
    plot_learning_curve(run_dir, title, curve)
    metrics.flush()
    return video


def warn_if_no_updates(progress, step: int, warmstart_steps: int, steps: int) -> None:
    """Say so when a run at `step` ends (`steps`) within its warm start of random actions: it
    would make no updates."""
    if step < warmstart_steps >= steps:
        progress.say(f"warning: --steps {steps:,} ends within the --warmstart-steps "
                     f"{warmstart_steps:,} of random actions: no updates will be made")  # fmt: skip


def check_resumed_identity(config) -> None:
    """A resumed run keeps its env and algorithm: say so before anything is built for others."""
    stored = Path(config.resume or "") / "config.json"
    if config.resume is None or not stored.is_file():
        return  # (a new run, or no run there: `open_run_dir` says which)
    given = {field: getattr(config, field, None) for field in IDENTITY}
    run = json.loads(stored.read_text())
    if str(run.get("env")).startswith(GIVEN_PREFIX) and given["env"] != run["env"]:
        name = run["env"][len(GIVEN_PREFIX) :]
        raise ValueError(f"{config.resume} was trained on an env object of yours, a {name} "
                         "(never registered with Gymnasium), which prefrl cannot make by itself: "
                         f"give it again to resume the run, e.g. RLLearner({name}(...), "
                         f"resume={str(config.resume)!r})")  # fmt: skip
    check_same_identity(config.resume, run, given)


def start_run(loop_factory, config, name: str, callbacks: Callbacks | None = None):
    """Open (or resume) the run directory, build the loop, restore its newest whole checkpoint
    when resuming; returns (loop, metrics logger). Nothing in the run directory changes when the
    resume fails. `callbacks`: a Python user's, called by the loop's periodic work."""
    check_resumed_identity(config)
    run_dir = open_run_dir(config.resume, config.runs_dir, name, record=False)
    # Said before anything slow: the directory to look in, then what the wait is for.
    print(f"run directory: {run_dir}", flush=True)
    print("setting up the envs and the networks (compiling them can take a minute)", flush=True)
    with setting_up(run_dir, resuming=config.resume is not None):
        if config.resume is None:
            loop, ckpt = loop_factory(config, run_dir), None
        else:
            loop, ckpt = restore_newest(loop_factory, config, run_dir)
    if config.resume is not None:
        if ckpt is None:
            kept = " (the labels in its store are kept and trained on)" * hasattr(loop, "feedback")
            print(f"{run_dir} has no checkpoint yet (it stopped before its first): starting it "
                  f"again from step 0{kept}", flush=True)  # fmt: skip
        else:
            print(f"resuming from {ckpt.name} (step {loop.step:,} of {config.steps:,})",
                  flush=True)  # fmt: skip
            if loop.step >= config.steps:
                print(f"--steps {config.steps:,} leaves nothing to train: give a larger --steps "
                      "(the total to reach) to go on", flush=True)  # fmt: skip
        truncate_metrics(run_dir, loop.step)
    write_json(run_dir / "config.json", config_to_dict(config))
    record_session(run_dir)
    if callbacks is not None:
        callbacks.run_dir, loop.callbacks = run_dir, callbacks
    return loop, MetricsLogger(run_dir, purge_step=loop.step if config.resume else None)


class PeriodicTasks:
    """What every loop does on a step-count cadence after each env step: the progress bar, rows of
    training metrics (with steps/s and a NaN check), evaluations with videos and the learning
    curve, checkpoints; the loop's callbacks hear of each.

    `loop` needs: config (steps, log_interval, eval_interval, video, video_interval,
    checkpoint_interval), run_dir, env (for fps), last_eval, evaluate(record), save().
    """

    def __init__(self, loop, metrics: MetricsLogger, progress, title: str,
                 checkpoint_seconds: float | None = None):  # fmt: skip
        """`checkpoint_seconds`: also checkpoint after this long without one (a run that a
        person labels: a killed trainer loses minutes of their work at most)."""
        self.loop, self.metrics, self.progress, self.title = loop, metrics, progress, title
        self.final: EvalResult | None = None
        self.video: Path | None = None
        self.checkpoint_seconds, self.saved_at = checkpoint_seconds, time.monotonic()
        self.best = BestPolicy(loop) if loop.keeps_best else None
        self.restart_clock(loop.step)
        if "log_interval" in {f.name for f in dataclasses.fields(loop.config)}:
            progress.print_at_logs()  # (a --log-interval given is where plain lines are wanted)

    def restart_clock(self, step: int) -> None:
        """Time spent outside training (evaluations, reward fits) does not count in steps/s."""
        self.t_last, self.step_last = time.perf_counter(), max(step, self.loop.step)

    def after_step(self, step: int, update_metrics, info: str | None = None) -> None:
        """`step`: the step whose work is due; loops that count a batch of steps at once (envs
        stepped side by side) call it for each, with `loop.step` already at the batch's end."""
        loop, cfg = self.loop, self.loop.config
        if step % 100 == 0:
            self.progress.update(step, info=info)
        logging = step % cfg.log_interval == 0
        if logging:
            # Read the metrics first: that waits for the update's asynchronous dispatch to finish,
            # so the clock below counts the work, not just its dispatch.
            row = {} if update_metrics is None else {
                f"train/{k}": float(v) for k, v in jax.device_get(update_metrics).items()}  # fmt: skip
            now, done = time.perf_counter(), max(step, loop.step)
            # The rate over the steps done since the clock last started (the clock restarts
            # after evaluations and fits; a batch's second log has no new steps to time).
            rate = None
            if done > self.step_last:
                rate = row["train/steps_per_s"] = (done - self.step_last) / (now - self.t_last)
                self.restart_clock(done)
            if update_metrics is not None:
                self.metrics.log(step, row)
                check_finite(row, step)
                loop.callbacks("log", step, row)
        last = step == cfg.steps
        if step % cfg.eval_interval == 0 or last:
            record = cfg.video and (step % cfg.video_interval == 0 or last)
            self.final = loop.evaluate(record)
            loop.last_eval = float(self.final.returns.mean())
            fps = self.final.fps or loop.env.fps
            self.video = (
                write_eval(
                    loop.run_dir,
                    self.metrics,
                    step,
                    self.final,
                    record,
                    fps,
                    self.title,
                    loop.eval_curve,
                )
                or self.video
            )
            if self.best is not None:
                self.best.consider(step, self.final)
            self.progress.update(step, last_eval=loop.last_eval)
            loop.callbacks("eval", step, self.final.summary, eval=self.final)
            self.restart_clock(step)
        if logging:  # (after an evaluation of the same step: its line shows it)
            self.progress.logged(step, rate)
        overdue = self.checkpoint_seconds is not None and (
            time.monotonic() - self.saved_at >= self.checkpoint_seconds
        )
        if step % cfg.checkpoint_interval == 0 or last or overdue:
            ckpt = loop.save()
            self.saved_at = time.monotonic()
            loop.callbacks("checkpoint", loop.step, checkpoint=ckpt)
