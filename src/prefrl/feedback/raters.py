"""Scripted raters: a score per segment, turned into 1-100 ratings of a rating run's clips in
place of a person (`prefrl rate RUN --rater NAME`), as the scripted teachers label pairs.

A rater is a name (`return`, `low-action`, `obs:I`, `regret:RUN`, `piano-f1`, ...) or a
combination of names (`A+w*B`, `A@B/N`); `segment_scores` says what each means.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import jax
import numpy as np

from prefrl.data.segments import Segments
from prefrl.feedback.ratings import scripted_ratings
from prefrl.feedback.store import FeedbackStore, run_info


def segment_scores(segments: Segments, rater: str, env_id: str | None = None) -> np.ndarray:
    """A per-segment score for a scripted rater (higher is better).

    Piano raters (`env_id` a robopianist: id) replay each segment's stored states:
    `piano-f1` prefers a higher key-press F1, `piano-wrong-keys` fewer keys pressed that the
    song did not ask for.

    `A+w*B` weighs standardised scores: `return+0.5*low-action` is the return plus half as many
    standard deviations of action size (smaller is better).
    `A@B/N` prefers A at equal B: the segments are cut into N equal-width bands of B's score
    (default 5); a higher band always wins, and inside a band A decides. `low-action@return` is
    "smaller actions at equal progress": pairs across bands still teach progress, pairs inside a
    band teach the property.

    `regret:RUN` rates by the advantage of each step's action under the critic of a (better) SAC
    run or checkpoint, `Σ_t Q(s_t, a_t) - Q(s_t, π(s_t))`: the regret preference model CPL is
    derived from. A segment's return mostly says which states it passed through; its regret
    says how good its actions were where it was.
    """
    if "+" in rater:
        total = np.zeros(len(segments))
        for term in rater.split("+"):
            weight, _, name = term.rpartition("*")
            try:
                w = float(weight) if weight else 1.0
            except ValueError:
                w = float("nan")
            if not np.isfinite(w):
                raise ValueError(f"rater {rater!r}: the weight in {term!r} is not a number")
            score = segment_scores(segments, name, env_id)
            std = score.std()
            total += w * (score - score.mean()) / (std if std > 0 else 1.0)
        return total
    if "@" in rater:
        secondary, primary = rater.split("@", 1)
        head, _, bands_text = primary.rpartition("/")
        # `regret:runs/x` holds slashes of its own: a band count is the digits after the last.
        if head and (bands_text.isdigit() or not head.startswith("regret:")):
            primary = head
        else:
            bands_text = ""
        try:
            bands = int(bands_text or 5)
        except ValueError:
            bands = 0
        if bands < 1:
            raise ValueError(
                f"rater {rater!r}: the band count after '/' must be a positive integer"
            )
        base = segment_scores(segments, primary, env_id)
        span = base.max() - base.min()
        band = np.floor(bands * (base - base.min()) / span) if span > 0 else np.zeros_like(base)
        band = np.minimum(band, bands - 1)
        within = segment_scores(segments, secondary, env_id)
        span = within.max() - within.min()
        within = (within - within.min()) / span if span > 0 else np.zeros_like(within)
        return band + 0.999 * within
    if rater in ("piano-f1", "piano-wrong-keys"):
        return _piano_scores(segments, rater, env_id)
    if rater == "return":
        return segments.reward.sum(-1)
    if rater.startswith("regret:"):
        return _regret_scores(segments, Path(rater.removeprefix("regret:")), env_id)
    if rater in ("low-action", "high-action"):
        size = (segments.action**2).sum(-1).mean(-1)
        return -size if rater == "low-action" else size
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
    raise ValueError(
        f"rater {rater!r} is invalid: expected return, regret:RUN, low-action, high-action, obs:I, "
        "low-obs:I, piano-f1, piano-wrong-keys, A+w*B (weighted standardised scores) or A@B/N "
        "(A at equal B, in N bands of B)"
    )


def _regret_scores(segments: Segments, run: Path, env_id: str | None) -> np.ndarray:
    """Σ_t Q(s_t, a_t) - Q(s_t, π(s_t)) under `run`'s critics (their mean) and its deterministic
    action: 0 for a segment that does what that policy would, below 0 the worse its actions."""
    from prefrl.training.policies import load_policy  # (the one rater that needs a trained critic)

    judge = load_policy(run)
    if env_id is not None and judge.config.env != env_id:
        raise ValueError(
            f"rater regret:{run}: its critic is of {judge.config.env}, the segments of {env_id}"
        )
    obs = np.asarray(segments.obs, np.float32)
    if obs.shape[-1] != judge.sac.obs_dim:
        raise ValueError(
            f"rater regret:{run}: its critic takes {judge.sac.obs_dim} observation values, the "
            f"segments have {obs.shape[-1]}"
        )
    nets, state = judge.sac.nets, judge.state

    @jax.jit
    def regret(o, a):
        greedy = jax.numpy.tanh(nets.actor.apply(state.actor_params, o)[0])
        q_taken = nets.critic.apply(state.critic_params, o, a).mean(0)
        q_greedy = nets.critic.apply(state.critic_params, o, greedy).mean(0)
        return (q_taken - q_greedy).sum(-1)

    action = np.asarray(segments.action, np.float32)
    return np.concatenate(
        [np.asarray(regret(obs[i : i + 256], action[i : i + 256])) for i in range(0, len(obs), 256)]
    )


def _piano_scores(segments: Segments, rater: str, env_id: str | None) -> np.ndarray:
    from prefrl.envs.piano import step_scores

    if env_id is None:
        raise ValueError(f"rater {rater!r} rates piano segments; give their env")
    scores = step_scores(env_id, segments.state, rater)
    return scores.mean(1) if rater == "piano-f1" else scores.sum(1)


def ratings_held(run_dir: Path) -> dict[str, int]:
    """How many ratings a rating run holds per rater (a person's name, or scripted:NAME)."""
    run = run_info(run_dir)
    with FeedbackStore(run.store, create=False) as store:
        rows = store.ratings(store.run_id(run.uid, create=False))
    return dict(Counter(str(who) for _, _, who in rows))


def rate_scripted(run_dir: str | Path, rater: str = "return", noise: float = 0.0,
                  seed: int = 0) -> int:  # fmt: skip
    """Rate every segment of a rating run (`collect_rating_run`) 1-100 with a scripted `rater`
    (`prefrl rate`): a name or a combination of names (`segment_scores` lists them), with
    Gaussian noise of std `noise` (a share of the 1-100 scale). Its ratings go beside people's
    and replace another scripted rater's; returns how many segments it rated."""
    run = run_info(run_dir)
    with FeedbackStore(run.store, create=False) as store:
        run_id = store.run_id(run.uid, create=False)
        ids = store.segment_ids(run_id)
        segments = store.segments(run.run_dir, ids)
        ratings = scripted_ratings(segment_scores(segments, rater, run.env), noise, seed)
        for seg_id, value in zip(ids, ratings, strict=True):
            store.add_rating(seg_id, int(value), source=f"scripted:{rater}")
    return len(ids)
