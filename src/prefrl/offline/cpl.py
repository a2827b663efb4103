"""Offline CPL: a policy straight from a dataset's labelled queries, with no reward model and no
critic, so it can be set beside reward model + IQL on the same data (`prefrl offline`).

Behaviour cloning on every transition of the dataset gives the starting policy (the CPL paper's
offline recipe); CPL then trains on the labelled pairs, its conservative term pulling towards
that BC policy. The result is a SAC-format checkpoint (`prefrl eval` plays it), scored with the
dataset's D4RL normalisation before (BC) and after CPL.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from prefrl.agents.bc import BehaviourCloning
from prefrl.agents.cpl import CPL, CPLConfig
from prefrl.agents.sac import SAC, SACConfig
from prefrl.finetuning.learner import (
    CPLRun,
    pair_arrays,
    pair_summary,
    save_actor,
    split_pairs,
    train_cpl,
)
from prefrl.offline.learner import load_labelled_queries, load_scored_dataset
from prefrl.rl.config import RLConfig
from prefrl.rundir.checkpoints import write_json
from prefrl.rundir.config import config_to_dict
from prefrl.rundir.metrics import MetricsLogger
from prefrl.rundir.progress import TrainingProgress
from prefrl.training.callbacks import Callbacks
from prefrl.training.evaluate import EvalResult, evaluate, make_eval_envs
from prefrl.training.loop import open_run_dir, run_name
from prefrl.training.policies import LoadedPolicy
from prefrl.training.result import TrainResult, finished


@dataclass(frozen=True)
class OfflineCPLConfig(CPLRun):
    """Learn a policy from a dataset's labelled queries with CPL (BC on the dataset first)."""

    dataset: Path = Path("datasets/hopper-medium-replay")
    """A Minari dataset directory (`prefrl dataset collect` / `import-d4rl`)."""
    labels: Path = Path("datasets/hopper-medium-replay_queries.json")
    """A labelled query file of this dataset (`prefrl dataset queries`)."""
    cpl: CPLConfig = dataclasses.field(default_factory=lambda: CPLConfig(conservative_weight=0.1))
    """CPL's settings; the conservative term's reference is the BC policy. Its weight is 0.1
    here, not fine-tuning's 0.01: on Hopper medium-replay (500 Oracle pairs) BC scored 10.6,
    1000 CPL steps gave 12.9 at weight 0.1 and 8.9 at 0.01, and 5000 steps collapsed (-0.3) at
    either weight."""
    steps: int = 1000
    """CPL gradient steps (more over-fit the pairs: see --cpl)."""
    hidden_dims: tuple[int, ...] = (256, 256)
    """The policy's hidden widths."""
    bc_steps: int = 20_000
    """Behaviour-cloning steps on the whole dataset before CPL (0: start from a random policy)."""
    bc_lr: float = 3e-4
    bc_batch_size: int = 256

    def checks(self) -> dict[str, tuple[bool, str]]:
        return {
            **super().checks(),
            "hidden_dims": (
                bool(self.hidden_dims) and all(h > 0 for h in self.hidden_dims),
                "one or more positive widths",
            ),
            "bc_steps": (self.bc_steps >= 0, ">= 0"),
            "bc_lr": (self.bc_lr > 0, "a positive number"),
            "bc_batch_size": (self.bc_batch_size >= 1, "a positive integer"),
        }


BC_CHUNK = 1000


def train_offline_cpl(config: OfflineCPLConfig, callback=None) -> TrainResult:
    """Behaviour cloning, then CPL (`prefrl offline-cpl`); returns the CPL policy's evaluation
    (`details["start_eval"]`: the BC policy's) with the normalised scores. `callback`: a
    function (or a list) called with a `TrainEvent` at both evaluations, each CPL metrics row
    and the checkpoint; returning False stops the run."""
    return finished(_offline_cpl(config, Callbacks(callback)))


def _offline_cpl(config: OfflineCPLConfig, callbacks: Callbacks) -> TrainResult:
    dataset = load_scored_dataset(config.dataset)  # bad input fails before a run directory
    queries = load_labelled_queries(config.labels, dataset)
    pairs = queries.preference_data(dataset).arrays()
    name = config.name or run_name(Path(config.dataset).name, "cpl", config.seed)
    run_dir = open_run_dir(None, config.runs_dir, name)
    callbacks.run_dir = run_dir
    write_json(run_dir / "config.json", config_to_dict(config))
    metrics = MetricsLogger(run_dir)
    envs = make_eval_envs(dataset.env_id, config.eval_episodes, None)
    progress = TrainingProgress(
        config.bc_steps + config.steps, 0, enabled=config.progress, eval_label="normalised score"
    )
    try:
        rl_config = RLConfig(env=dataset.env_id, sac=SACConfig(hidden_dims=config.hidden_dims))
        sac = SAC(rl_config.sac, dataset.obs_dim, dataset.action_dim)
        key = jax.random.key(config.seed)
        loaded = LoadedPolicy(rl_config, sac, sac.init(key), Path(config.dataset))
        cpl = CPL(config.cpl, dataset.action_dim, config.hidden_dims)

        def scored(params) -> EvalResult:
            # sac.act is jitted already; wrapping it again would bake the parameters into a
            # fresh compilation per call.
            act = lambda o: sac.act(params, o, None, 0, deterministic=True)
            result = evaluate(act, envs, config.seed + 3_000_000)
            score = dataset.normalized_score(result.returns)
            result.extra |= {"eval/score_mean": float(score.mean()),
                             "eval/score_std": float(score.std())}  # fmt: skip
            return result

        with progress:
            params = _behaviour_clone(config, cpl, loaded.state.actor_params, dataset, metrics,
                                      progress)  # fmt: skip
            bc_eval = scored(params)
            bc_scores = dataset.normalized_score(bc_eval.returns)
            metrics.log(config.bc_steps, {"eval/bc_score_mean": float(bc_scores.mean())})
            progress.update(config.bc_steps, last_eval=float(bc_scores.mean()), info="CPL")
            callbacks("eval", 0, bc_eval.summary, eval=bc_eval)
            data = pair_arrays(*(pairs[k] for k in ("obs_left", "action_left", "obs_right",
                                                     "action_right", "label")))  # fmt: skip
            rng = np.random.default_rng([config.seed, 21])
            train, val = split_pairs(pairs["label"], config.max_pairs, config.val_fraction, rng)
            start = params
            params, done = train_cpl(
                cpl, start, start, data, train, val, config.steps, config.log_interval, rng,
                metrics,
                on_nan=lambda p, step: save_actor(run_dir, loaded, p, step, str(config.dataset)),
                progress=lambda step: progress.update(config.bc_steps + step),
                callbacks=callbacks,
            )  # fmt: skip
            result = TrainResult(run_dir, done, interrupted=callbacks.stopped,
                                 labels=len(pairs["label"]), title=f"CPL on {config.dataset}",
                                 details={"start_eval": bc_eval,
                                          "pairs": int(len(train) + len(val))})  # fmt: skip
            if callbacks.stopped:  # (the actor as it is, without its final evaluation)
                ckpt = save_actor(run_dir, loaded, params, done, str(config.dataset))
                callbacks("checkpoint", done, checkpoint=ckpt)
                return result
            result.final_eval = final_eval = scored(params)
            final, returns = dataset.normalized_score(final_eval.returns), final_eval.returns
            progress.update(config.bc_steps + config.steps, last_eval=float(final.mean()))
            callbacks("eval", config.steps, final_eval.summary, eval=final_eval)
        summary = {
            "eval/score_mean": float(final.mean()),
            "eval/score_std": float(final.std()),
            "eval/return_mean": float(returns.mean()),
            "eval/bc_score_mean": float(bc_scores.mean()),
            "eval/bc_score_std": float(bc_scores.std()),
            "pairs": int(len(train) + len(val)),
        }
        summary.update(pair_summary(cpl, start, params, data, train, val))
        metrics.log(config.bc_steps + config.steps, {k: v for k, v in summary.items()
                                                      if isinstance(v, float)})  # fmt: skip
        ckpt = save_actor(run_dir, loaded, params, config.steps, str(config.dataset))
        write_json(run_dir / "summary.json", {**summary, "time": time.time()})
        callbacks("checkpoint", config.steps, checkpoint=ckpt)
        result.details["metrics"] = summary
        return result
    finally:
        for env in envs:
            env.close()
        metrics.close()


def _behaviour_clone(config, cpl: CPL, params, dataset, metrics, progress):
    if config.bc_steps == 0:
        return params
    bc = BehaviourCloning(cpl.actor, config.bc_lr, config.bc_batch_size)
    state = bc.init(params)
    obs = jax.device_put(dataset.observations.astype(np.float32))
    action = jax.device_put(dataset.actions.astype(np.float32))
    key = jax.random.key(config.seed + 1)
    done = 0
    while done < config.bc_steps:
        steps = min(BC_CHUNK, config.bc_steps - done)
        state, loss = bc.update(state, obs, action, key, steps=steps)
        done += steps
        metrics.log(done, {"bc/neg_log_prob": float(loss)})
        progress.update(done, info="behaviour cloning")
    return state.params
