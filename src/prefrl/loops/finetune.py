"""Fine-tuning a trained policy from ratings of its clips with CPL (the RoboPianist workflow).

1. `make_rating_run`: segments collected from a run's checkpoints (`collect.policy_segments`)
   go into a rating run: a store of segments with their provenance and rendered clips, rated
   1-100 by a person on the web app's rating page (`prefrl serve DIR`, then /rate) or by a
   scripted rater (`rate_scripted`).
2. `finetune`: the ratings become every pair once (`feedback.ratings`), and CPL fine-tunes the
   SAC actor on them, held close to the original by the conservative term. The result is a SAC
   checkpoint (the original critic, the new actor), so `prefrl eval` reads it like any run.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from prefrl.agents.cpl import CPL, CPLConfig
from prefrl.data.segments import LABEL_TARGET, Label, Segments
from prefrl.feedback.ratings import ratings_to_pairs, scripted_ratings
from prefrl.feedback.store import FeedbackStore, run_info
from prefrl.loops.common import open_run_dir, run_name
from prefrl.loops.evaluate import evaluate, make_eval_envs
from prefrl.loops.rl import load_policy
from prefrl.rundir.atomic import atomic_write
from prefrl.rundir.checkpoints import begin_checkpoint, commit_checkpoint, write_json
from prefrl.rundir.config import config_to_dict
from prefrl.rundir.metrics import MetricsLogger

RATERS = ("return", "low-action", "obs:I", "low-obs:I")


def make_rating_run(
    out: Path, env_id: str, segments: Segments, infos: list[dict], render_size: int | None = 128
) -> Path:
    """A rating run at `out`: the segments (with where each came from) in a store, and their
    clips rendered when `render_size` is given."""
    out = Path(out)
    if (out / "config.json").exists():
        raise FileExistsError(f"{out} already holds a run; choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / "config.json", "w") as f:
        json.dump({"env": env_id, "kind": "ratings", "segments": len(segments)}, f, indent=2)
    with FeedbackStore(out) as store:
        run_id = store.run_id(out.name, env=env_id)
        ids = store.add_segments(run_id, out, segments, infos)
        if render_size:
            from prefrl.render.clips import CLIP_DIR, ClipRenderer

            renderer = ClipRenderer(env_id, size=render_size)
            for seg_id, states in zip(ids, segments.state, strict=True):
                rel = f"{CLIP_DIR}/seg{seg_id:09d}.mp4"
                frames = renderer.write(out / rel, states)
                store.add_clip(seg_id, rel, render_size, render_size, frames, renderer.fps)
    return out


def segment_scores(segments: Segments, rater: str) -> np.ndarray:
    """A per-segment score for a scripted rater (higher is better)."""
    if rater == "return":
        return segments.reward.sum(-1)
    if rater == "low-action":
        return -(segments.action**2).sum(-1).mean(-1)
    if rater.startswith(("obs:", "low-obs:")):
        try:
            index = int(rater.split(":", 1)[1])
        except ValueError:
            index = -1
        dim = segments.obs.shape[-1]
        if not 0 <= index < dim:
            raise ValueError(f"rater {rater!r}: expected an observation index in [0, {dim})")
        mean = segments.obs[..., index].mean(-1)
        return -mean if rater.startswith("low-") else mean
    raise ValueError(f"rater {rater!r} is invalid: expected return, low-action, obs:I or low-obs:I")


def rate_scripted(run_dir: Path, rater: str, noise: float = 0.0, seed: int = 0) -> int:
    """Rate every segment of a rating run with a scripted rater; returns how many."""
    run = run_info(run_dir)
    with FeedbackStore(run.store, create=False) as store:
        run_id = store.run_id(run.name, create=False)
        ids = store.segment_ids(run_id)
        segments = store.segments(run.run_dir, ids)
        ratings = scripted_ratings(segment_scores(segments, rater), noise, seed)
        for seg_id, value in zip(ids, ratings, strict=True):
            store.add_rating(seg_id, int(value), source=f"scripted:{rater}")
    return len(ids)


@dataclass(frozen=True)
class FinetuneConfig:
    """Fine-tune a SAC policy with CPL from the ratings of a rating run."""

    policy: Path = Path("runs/policy")
    """The SAC run directory (its latest checkpoint) or a checkpoint to start from."""
    ratings: Path = Path("runs/ratings")
    """A rating run (`prefrl collect`), rated by a person or `prefrl rate`."""
    cpl: CPLConfig = dataclasses.field(default_factory=CPLConfig)
    steps: int = 2000
    """CPL gradient steps."""
    max_pairs: int | None = None
    """Train on a random subset of this many pairs (None: every pair the ratings give)."""
    val_fraction: float = 0.1
    """Share of the pairs held out to measure the implied preference's accuracy."""
    eval_episodes: int = 10
    log_interval: int = 100
    seed: int = 0
    name: str | None = None
    runs_dir: Path = Path("runs")

    def __post_init__(self) -> None:
        for field in ("steps", "eval_episodes", "log_interval"):
            if getattr(self, field) <= 0:
                raise ValueError(
                    f"--{field.replace('_', '-')}={getattr(self, field)} is invalid: expected a "
                    "positive integer"
                )
        if self.max_pairs is not None and self.max_pairs < 1:
            raise ValueError(f"--max-pairs={self.max_pairs} is invalid: expected >= 1 or None")
        if not 0 <= self.val_fraction < 1:
            raise ValueError(f"--val-fraction={self.val_fraction} is invalid: expected [0, 1)")


@dataclass
class FinetuneResult:
    run_dir: Path
    start_returns: np.ndarray
    finetuned_returns: np.ndarray
    metrics: dict
    pairs: int


def load_rated_pairs(ratings_dir: Path, env_id: str, obs_dim: int, action_dim: int):
    """(left segments, right segments, labels, provenance) from a rating run's ratings."""
    run = run_info(ratings_dir)
    if run.env != env_id:
        raise ValueError(
            f"the ratings in {ratings_dir} are of {run.env!r} segments; the policy is for "
            f"{env_id!r}"
        )
    with FeedbackStore(run.store, create=False) as store:
        run_id = store.run_id(run.name, create=False)
        rows = store.ratings(run_id)
        if not rows:
            raise ValueError(f"{ratings_dir} holds no ratings yet (rate its clips first)")
        seg_ids, values, who = zip(*rows, strict=True)
        pairs = ratings_to_pairs(seg_ids, values)
        left = store.segments(run.run_dir, pairs.left.tolist())
        right = store.segments(run.run_dir, pairs.right.tolist())
    if left.obs.shape[-1] != obs_dim or left.action.shape[-1] != action_dim:
        raise ValueError(
            f"the rated segments have obs/action sizes {left.obs.shape[-1]}/"
            f"{left.action.shape[-1]}; the policy takes {obs_dim}/{action_dim}"
        )
    sources = sorted({str(w) for w in who})
    return left, right, pairs.labels, {"raters": sources, "ratings": len(rows)}


def finetune(config: FinetuneConfig) -> FinetuneResult:
    loaded = load_policy(config.policy)
    sac, env_id = loaded.sac, loaded.config.env
    left, right, labels, provenance = load_rated_pairs(
        config.ratings, env_id, sac.obs_dim, sac.action_dim
    )
    name = config.name or run_name(env_id, "cpl", config.seed)
    run_dir = open_run_dir(None, config.runs_dir, name)
    write_json(run_dir / "config.json", config_to_dict(config))
    metrics = MetricsLogger(run_dir)
    try:
        return _finetune(config, loaded, run_dir, metrics, left, right, labels, provenance)
    finally:
        metrics.close()


def _finetune(config, loaded, run_dir, metrics, left, right, labels, provenance):
    cfg, sac = config.cpl, loaded.sac
    usable = np.flatnonzero(labels != Label.SKIP)
    rng = np.random.default_rng([config.seed, 21])
    order = rng.permutation(usable)
    if config.max_pairs is not None:
        order = order[: config.max_pairs]
        usable = order
    n_val = round(config.val_fraction * len(order)) if len(order) >= 10 else 0
    val, train = order[:n_val], order[n_val:]
    data = {
        "obs_left": left.obs, "action_left": left.action,
        "obs_right": right.obs, "action_right": right.action,
        "target": LABEL_TARGET[labels.astype(np.int64)].astype(np.float32),
    }  # fmt: skip
    cpl = CPL(cfg, sac.action_dim, sac.config.hidden_dims)
    original = loaded.state.actor_params
    state = cpl.init(original)
    last_good = state.params

    def batch_of(idx):
        b = {k: v[idx] for k, v in data.items()}
        b["weight"] = np.ones(len(idx), np.float32)
        return b

    envs = make_eval_envs(loaded.config.env, config.eval_episodes, None)
    seed = config.seed + 2_000_000

    def returns(params):
        return evaluate(
            lambda o: sac.act(params, o, None, 0, deterministic=True), envs, seed
        ).returns

    start = returns(original)
    metrics.log(0, {"eval/return_mean": float(start.mean()), "eval/return_std": float(start.std())})
    b = min(cfg.batch_size, len(train))
    for step in range(1, config.steps + 1):
        idx = rng.choice(train, b, replace=False)
        state, m = cpl.update(state, original, batch_of(idx))
        m = {k: float(v) for k, v in jax.device_get(m).items()}
        if not (all(np.isfinite(list(m.values()))) and m["params_finite"] == 1.0):
            _save(run_dir, loaded, last_good, step - 1)
            raise FloatingPointError(
                f"CPL step {step} gave NaN or inf (batch of pairs {sorted(idx.tolist())[:8]}...; "
                f"losses {m}); stopped, keeping the parameters of step {step - 1} in {run_dir}"
            )
        last_good = state.params
        if step % config.log_interval == 0 or step == config.steps:
            row = {f"cpl/{k}": v for k, v in m.items()}
            if len(val):
                row["cpl/val_accuracy"] = _accuracy(cpl, state.params, batch_of(val))
            metrics.log(step, row)
    final = returns(state.params)
    for env in envs:
        env.close()
    summary = {
        "eval/return_mean": float(final.mean()),
        "eval/return_std": float(final.std()),
        "start_return_mean": float(start.mean()),
        "pairs": len(usable),
        **provenance,
    }
    if len(val):
        summary["cpl/val_accuracy"] = _accuracy(cpl, state.params, batch_of(val))
        summary["cpl/val_accuracy_start"] = _accuracy(cpl, original, batch_of(val))
    metrics.log(config.steps, {k: v for k, v in summary.items() if isinstance(v, float)})
    _save(run_dir, loaded, state.params, config.steps)
    write_json(run_dir / "summary.json", {**summary, "time": time.time()})
    return FinetuneResult(run_dir, start, final, summary, len(usable))


def _accuracy(cpl: CPL, params, batch) -> float:
    a_left = np.asarray(cpl.advantages(params, batch["obs_left"], batch["action_left"]))
    a_right = np.asarray(cpl.advantages(params, batch["obs_right"], batch["action_right"]))
    decided = batch["target"] != 0.5
    if not decided.any():
        return float("nan")
    return float(((a_right > a_left) == (batch["target"] > 0.5))[decided].mean())


def _save(run_dir: Path, loaded, actor_params, step: int) -> None:
    """A SAC checkpoint of the fine-tuned actor (the original critic is kept, unused)."""
    state = loaded.state.replace(actor_params=actor_params)
    tmp = begin_checkpoint(run_dir, step)
    (tmp / "agent.msgpack").write_bytes(loaded.sac.state_to_bytes(state))
    write_json(tmp / "config.json", config_to_dict(loaded.config))
    write_json(tmp / "loop.json", {"step": step, "finetuned_from": str(loaded.checkpoint)})
    commit_checkpoint(tmp, keep=0)
