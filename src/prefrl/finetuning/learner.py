"""Fine-tuning a trained policy from ratings of its clips with CPL (the RoboPianist workflow).

1. `collect.collect_rating_run`: segments collected from a run's checkpoints go into a rating
   run: a store of segments with their provenance and rendered clips, rated 1-100 by a person
   on the web app's rating page (`prefrl serve DIR`, then /rate) or by a scripted rater
   (`feedback.raters.rate_scripted`).
2. `finetune`: the ratings become every pair once (`feedback.ratings`), and CPL fine-tunes the
   SAC actor on them, held close to the original by the conservative term. The result is a SAC
   checkpoint (the original critic, the new actor), so `prefrl eval` reads it like any run.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import jax
import numpy as np

from prefrl.agents.cpl import CPL, CPLConfig, cpl_loss
from prefrl.data.segments import LABEL_TARGET, Label
from prefrl.feedback.ratings import per_rater, ratings_to_pairs
from prefrl.feedback.store import FeedbackStore, run_info
from prefrl.fielddocs import document_fields
from prefrl.rundir.checkpoints import begin_checkpoint, commit_checkpoint, write_json
from prefrl.rundir.config import check_fields, config_to_dict
from prefrl.rundir.metrics import MetricsLogger
from prefrl.rundir.progress import TrainingProgress
from prefrl.training.callbacks import Callbacks
from prefrl.training.evaluate import evaluate, make_eval_envs
from prefrl.training.loop import config_with, open_run_dir, python_arguments, run_name
from prefrl.training.policies import LoadedPolicy, load_policy
from prefrl.training.result import TrainResult, finished


@document_fields
@dataclass(frozen=True)
class CPLRun:
    """What every CPL run has: its steps, the pairs it uses and holds out, its evaluation and
    where it goes (`FinetuneConfig`, `offline_cpl.OfflineCPLConfig`)."""

    steps: int = 2000
    """CPL gradient steps."""
    max_pairs: int | None = None
    """Train on a random subset of this many pairs (None: every pair)."""
    val_fraction: float = 0.1
    """Share of the pairs held out to measure the implied preference's accuracy."""
    eval_episodes: int = 10
    """Evaluation episodes of the policy before and after fine-tuning (deterministic actions, the
    same seeds)."""
    log_interval: int = 100
    """Write the training metrics every this many CPL steps."""
    seed: int = 0
    """Random seed: the split of the pairs, the batches, the evaluation episodes."""
    name: str | None = None
    """The run directory's name under --runs-dir (default: env, cpl, seed and time)."""
    runs_dir: Path = Path("runs")
    """The folder run directories are made in."""
    progress: bool = True
    """Show a progress bar; --no-progress: a plain line every 30 s instead (as where the
    output is not a terminal)."""

    def __post_init__(self) -> None:
        check_fields(self, self.checks(), "--")

    def checks(self) -> dict[str, tuple[bool, str]]:
        """Field -> (valid, what is accepted); subclasses add theirs."""
        return {
            "steps": (self.steps >= 1, "a positive integer"),
            "max_pairs": (self.max_pairs is None or self.max_pairs >= 1, ">= 1 or None"),
            "val_fraction": (0 <= self.val_fraction < 1, "a share in [0, 1)"),
            "eval_episodes": (self.eval_episodes >= 1, "a positive integer"),
            "log_interval": (self.log_interval >= 1, "a positive integer"),
        }


@document_fields
@dataclass(frozen=True)
class FinetuneConfig(CPLRun):
    """Fine-tune a SAC policy with CPL from the ratings of a rating run."""

    policy: Path = Path("runs/policy")
    """The SAC run directory (its latest checkpoint) or a checkpoint to start from."""
    ratings: Path = Path("runs/ratings")
    """A rating run (`prefrl collect`), rated by a person or `prefrl rate`."""
    pairs: Literal["all", "siblings"] = "all"
    """Which rated segments are compared: every pair, or only siblings (segments collected
    with `--siblings` from one start state, which differ by their actions alone)."""
    raters: tuple[str, ...] = ()
    """Train on these raters' ratings alone (named as `prefrl rate` lists them: a person's
    name, e.g. local, or scripted:NAME); empty: every rater's, a segment rated by several
    counting with their mean rating."""
    cpl: CPLConfig = dataclasses.field(default_factory=CPLConfig)
    """CPL's settings: learning rate, α, λ (bias), the conservative term."""

    def __post_init__(self) -> None:
        if isinstance(self.raters, str):  # (one rater, named in Python)
            object.__setattr__(self, "raters", (self.raters,))
        super().__post_init__()

    def checks(self) -> dict[str, tuple[bool, str]]:
        return {**super().checks(), "pairs": (self.pairs in ("all", "siblings"), "all or siblings")}


def load_rated_pairs(
    ratings_dir: Path, env_id: str, obs_dim: int, action_dim: int, pairs: str = "all",
    raters: tuple[str, ...] = (),
):  # fmt: skip
    """(left segments, right segments, labels, provenance) from a rating run's ratings (those
    of `raters` alone, where given): every pair (`pairs="all"`) or pairs of siblings alone
    (`"siblings"`)."""
    run = run_info(ratings_dir)
    if run.env != env_id:
        raise ValueError(
            f"the ratings in {ratings_dir} are of {run.env!r} segments; the policy is for "
            f"{env_id!r}"
        )
    with FeedbackStore(run.store, create=False) as store:
        run_id = store.run_id(run.uid, create=False)
        rows = store.ratings(run_id)
        if not rows:
            raise ValueError(f"{ratings_dir} holds no ratings yet (rate its clips first)")
        held = Counter(str(who) for _, _, who in rows)
        if unknown := [r for r in raters if r not in held]:
            raise ValueError(
                f"{ratings_dir} holds no ratings by {', '.join(map(repr, unknown))}; its "
                f"ratings per rater: {per_rater(held)}"
            )
        if raters:
            rows = [row for row in rows if str(row[2]) in raters]
        seg_ids, values, who = zip(*rows, strict=True)
        families = None
        if pairs == "siblings":
            infos = store.segment_infos(seg_ids)
            families = [infos[i].get("family") for i in seg_ids]
        rated = ratings_to_pairs(seg_ids, values, families)
        left = store.segments(run.run_dir, rated.left.tolist())
        right = store.segments(run.run_dir, rated.right.tolist())
    if left.obs.shape[-1] != obs_dim or left.action.shape[-1] != action_dim:
        raise ValueError(
            f"the rated segments have obs/action sizes {left.obs.shape[-1]}/"
            f"{left.action.shape[-1]}; the policy takes {obs_dim}/{action_dim}"
        )
    used = Counter(str(w) for w in who)
    return left, right, rated.labels, {
        "raters": sorted(used), "ratings_by_rater": dict(used), "ratings": len(rows),
        "raters_left_out": dict(held - used), "paired": pairs,
    }  # fmt: skip


def say_raters(provenance: dict, ratings_dir: Path, chosen: bool) -> str:
    """Whose ratings a CPL run trains on, and those it leaves out: said before it starts."""
    used, left_out = provenance["ratings_by_rater"], provenance["raters_left_out"]
    line = f"ratings of {ratings_dir}: {per_rater(used)}"
    if left_out:
        return f"{line}; left out (not among the raters chosen): {per_rater(left_out)}"
    if len(used) > 1 and not chosen:
        return (f"{line}: every rater's, a segment rated by several counting with their mean "
                "rating (raters, --raters on the command line, chooses)")  # fmt: skip
    return line


class CPLFinetuner:
    """CPL fine-tuning of a trained SAC policy from ratings of its clips:

        result = CPLFinetuner("runs/hopper-sac", "runs/ratings", steps=2000).train()

    Args:
        policy: the run directory (its latest checkpoint) or checkpoint to start from, or a
            policy of `load_policy`.
        ratings: a rating run (`prefrl collect`, then rated on the web app or `prefrl rate`).
        cpl: CPL's settings (`CPLConfig`).
        config: every other setting (`FinetuneConfig`); keyword arguments override its fields.
    """

    @python_arguments(FinetuneConfig)
    def __init__(self, policy: str | Path | LoadedPolicy | None = None,
                 ratings: str | Path | None = None, *,
                 cpl: CPLConfig | None = None, config: FinetuneConfig | None = None,
                 **settings):  # fmt: skip
        if isinstance(policy, LoadedPolicy):
            policy = policy.checkpoint
        given = {name: value for name, value in (
            ("policy", policy), ("ratings", ratings), ("cpl", cpl),
        ) if value is not None}  # fmt: skip
        self.config = config_with(FinetuneConfig, "CPLFinetuner", config, settings, given)
        self.inputs = finetune_inputs(self.config)  # bad input fails here, before any run exists

    @python_arguments(FinetuneConfig)
    def train(self, callback=None) -> TrainResult:
        """Fine-tune; returns the fine-tuned policy's evaluation (`details["start_eval"]`: the
        original's). `callback`: a function (or a list) called with a `TrainEvent` at both
        evaluations, each metrics row and the checkpoint; returning False stops the run."""
        return finetune(self.config, self.inputs, callback)


def finetune_inputs(config: FinetuneConfig) -> tuple[LoadedPolicy, tuple]:
    """The policy and the rated pairs of its clips (left, right, labels, provenance), checked
    against each other."""
    loaded = load_policy(config.policy)
    sac = loaded.sac
    return loaded, load_rated_pairs(config.ratings, loaded.config.env, sac.obs_dim,
                                    sac.action_dim, config.pairs, config.raters)  # fmt: skip


def finetune(config: FinetuneConfig, inputs=None, callback=None) -> TrainResult:
    """Run `prefrl finetune`: CPL on the policy from the rating run's pairs; returns the run
    directory and the policy's evaluations before and after (`CPLFinetuner` is the same from
    objects; `inputs`: its `finetune_inputs`; `callback`: see `CPLFinetuner.train`)."""
    callbacks = Callbacks(callback)
    loaded, (left, right, labels, provenance) = inputs or finetune_inputs(config)
    env_id = loaded.config.env
    print(say_raters(provenance, config.ratings, bool(config.raters)), flush=True)
    name = config.name or run_name(env_id, "cpl", config.seed)
    run_dir = open_run_dir(None, config.runs_dir, name)
    write_json(run_dir / "config.json", config_to_dict(config))
    metrics = MetricsLogger(run_dir)
    progress = TrainingProgress(config.steps, 0, enabled=config.progress)
    callbacks.run_dir = run_dir
    try:
        with progress:
            result = _finetune(config, loaded, run_dir, metrics, left, right, labels,
                               provenance, progress, callbacks)  # fmt: skip
    finally:
        metrics.close()
    return finished(result)


def _finetune(config, loaded, run_dir, metrics, left, right, labels, provenance, progress,
              callbacks):  # fmt: skip
    sac = loaded.sac
    data = pair_arrays(left.obs, left.action, right.obs, right.action, labels)
    rng = np.random.default_rng([config.seed, 21])
    train, val = split_pairs(labels, config.max_pairs, config.val_fraction, rng)
    cpl = CPL(config.cpl, sac.action_dim, sac.config.hidden_dims)
    original = loaded.state.actor_params
    envs = make_eval_envs(loaded.config.env, config.eval_episodes, None)
    seed = config.seed + 2_000_000

    def evaluated(params):
        return evaluate(lambda o: sac.act(params, o, None, 0, deterministic=True), envs, seed)

    try:
        start_eval = evaluated(original)  # (with the env's own figures: the piano's F1)
        start = start_eval.returns
        metrics.log(0, {"eval/return_mean": float(start.mean()),
                        "eval/return_std": float(start.std())})  # fmt: skip
        progress.update(0, last_eval=float(start.mean()))
        callbacks("eval", 0, start_eval.summary, eval=start_eval)
        params, done = train_cpl(
            cpl, original, original, data, train, val, config.steps, config.log_interval,
            rng, metrics, on_nan=lambda p, step: save_actor(run_dir, loaded, p, step),
            progress=progress.update, callbacks=callbacks,
        )  # fmt: skip
        result = TrainResult(
            run_dir, done, interrupted=callbacks.stopped, labels=provenance["ratings"],
            title=f"CPL fine-tuning on {loaded.config.env}",
            details={"start_eval": start_eval, "pairs": len(train) + len(val),
                     "labels_are": "ratings"},
        )  # fmt: skip
        if callbacks.stopped:  # (the actor as it is, without its final evaluation)
            callbacks("checkpoint", done, checkpoint=save_actor(run_dir, loaded, params, done))
            return result
        result.final_eval = final_eval = evaluated(params)
    finally:
        for env in envs:
            env.close()
    final = final_eval.returns
    progress.update(config.steps, last_eval=float(final.mean()))
    callbacks("eval", config.steps, final_eval.summary, eval=final_eval)
    summary = {
        "eval/return_mean": float(final.mean()),
        "eval/return_std": float(final.std()),
        "start_return_mean": float(start.mean()),
        "start_returns": start.tolist(),
        "finetuned_returns": final.tolist(),
        "pairs": len(train) + len(val),
        **provenance,
        **final_eval.extra,
        **{f"start/{k.removeprefix('eval/')}": v for k, v in start_eval.extra.items()},
    }
    summary.update(pair_summary(cpl, original, params, data, train, val))
    metrics.log(config.steps, {k: v for k, v in summary.items() if isinstance(v, float)})
    ckpt = save_actor(run_dir, loaded, params, config.steps)
    write_json(run_dir / "summary.json", {**summary, "time": time.time()})
    callbacks("checkpoint", config.steps, checkpoint=ckpt)
    result.details["metrics"] = summary
    return result


def pair_arrays(obs_left, action_left, obs_right, action_right, labels) -> dict[str, np.ndarray]:
    """What a CPL batch is cut from: both segments' observations and actions, and P(right)."""
    return {
        "obs_left": obs_left, "action_left": action_left,
        "obs_right": obs_right, "action_right": action_right,
        "target": LABEL_TARGET[np.asarray(labels, np.int64)].astype(np.float32),
    }  # fmt: skip


def split_pairs(labels, max_pairs: int | None, val_fraction: float, rng: np.random.Generator):
    """(train, held-out) indices of the non-skipped pairs, shuffled; at most `max_pairs` in all;
    nothing held out below 10 pairs."""
    usable = np.flatnonzero(np.asarray(labels) != Label.SKIP)
    order = rng.permutation(usable)[:max_pairs]
    n_val = round(val_fraction * len(order)) if len(order) >= 10 else 0
    return order[n_val:], order[:n_val]


def batch_of(data: dict[str, np.ndarray], idx) -> dict[str, np.ndarray]:
    batch = {k: v[idx] for k, v in data.items()}
    batch["weight"] = np.ones(len(idx), np.float32)
    return batch


def train_cpl(
    cpl: CPL,
    params,
    ref_params,
    data,
    train,
    val,
    steps,
    log_interval,
    rng,
    metrics,
    on_nan,
    progress=None,
    callbacks: Callbacks | None = None,
):
    """`steps` CPL steps on random batches of the `train` pairs from `params`, regularised
    towards `ref_params`; logs `cpl/*` (with held-out accuracy) every `log_interval` steps.
    Returns (the parameters, the steps taken: fewer where a callback stopped it).

    NaN guard: a step that gives a non-finite loss or parameter calls `on_nan(last good
    parameters, their step)` and raises, naming the batch. `progress(step)`, if given, is called
    every 10 steps; `callbacks`, with each row logged."""
    state = cpl.init(params)
    last_good = state.params
    b = min(cpl.config.batch_size, len(train))
    for step in range(1, steps + 1):
        if callbacks is not None and callbacks.stopped:
            return state.params, step - 1
        idx = rng.choice(train, b, replace=False)
        state, m = cpl.update(state, ref_params, batch_of(data, idx))
        m = {k: float(v) for k, v in jax.device_get(m).items()}
        if not (all(np.isfinite(list(m.values()))) and m["params_finite"] == 1.0):
            on_nan(last_good, step - 1)
            raise FloatingPointError(
                f"CPL step {step} gave NaN or inf (batch of pairs {sorted(idx.tolist())[:8]}...; "
                f"losses {m}); stopped, keeping the parameters of step {step - 1}"
            )
        last_good = state.params
        if progress is not None and step % 10 == 0:
            progress(step)
        if step % log_interval == 0 or step == steps:
            row = {f"cpl/{k}": v for k, v in m.items()}
            if len(val):
                row["cpl/val_accuracy"] = pair_stats(cpl, state.params, batch_of(data, val))[
                    "accuracy"
                ]
            metrics.log(step, row)
            if callbacks is not None:
                callbacks("log", step, row)
    return state.params, steps


def pair_stats(cpl: CPL, params, batch) -> dict[str, float]:
    """On labelled pairs: `accuracy`, the share of the decided pairs whose implied preference
    (higher α Σ log π) is the label's; the CPL `loss`; the `advantage_median` of their segments.
    A loss near 0 at a low accuracy with a high median means the loss was met by raising every
    likelihood, not by ordering the pairs (possible with a bias λ < 1)."""

    def advantages(side: str) -> np.ndarray:  # in chunks: all pairs of long segments are big
        obs, action = batch[f"obs_{side}"], batch[f"action_{side}"]
        return np.concatenate(
            [np.asarray(cpl.advantages(params, obs[i : i + 256], action[i : i + 256]))
             for i in range(0, len(obs), 256)]
        )  # fmt: skip

    a_left, a_right = advantages("left"), advantages("right")
    loss = cpl_loss(a_left, a_right, batch["target"], batch["weight"], cpl.config.bias)
    decided = batch["target"] != 0.5
    right = (a_right > a_left) == (batch["target"] > 0.5)
    return {
        "accuracy": float(right[decided].mean()) if decided.any() else float("nan"),
        "loss": float(loss),
        "advantage_median": float(np.median(np.concatenate([a_left, a_right]))),
    }


def pair_summary(cpl: CPL, start, final, data, train, val) -> dict[str, float]:
    """`cpl/{train,val}_{accuracy,loss,advantage_median}` of the final parameters, and of the
    start with `_start` appended (no val entries when nothing is held out)."""
    out = {}
    for part, idx in (("train", train), ("val", val)):
        if len(idx):
            for suffix, params in (("", final), ("_start", start)):
                stats = pair_stats(cpl, params, batch_of(data, idx))
                out.update({f"cpl/{part}_{k}{suffix}": v for k, v in stats.items()})
    return out


def save_actor(run_dir: Path, loaded, actor_params, step: int, source: str | None = None) -> Path:
    """A SAC checkpoint of `loaded` with `actor_params` for its actor (`prefrl eval` reads it;
    the critic is kept as it was, unused), noting where the actor came from; returns it."""
    state = loaded.state.replace(actor_params=actor_params)
    tmp = begin_checkpoint(run_dir, step)
    (tmp / "agent.msgpack").write_bytes(loaded.sac.state_to_bytes(state))
    write_json(tmp / "config.json", config_to_dict(loaded.config))
    source = str(loaded.checkpoint) if source is None else source
    write_json(tmp / "loop.json", {"step": step, "finetuned_from": source})
    return commit_checkpoint(tmp, keep=0)
