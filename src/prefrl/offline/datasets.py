"""D4RL-style datasets made from a prefrl SAC run (`collect_dataset`, `prefrl dataset
collect`), imported (`import_d4rl_dataset`), and their preference queries (`make_queries`).

- `random`: uniform-random actions.
- `medium`: rollouts of the "medium" policy, the checkpoint whose evaluation return is nearest a
  normalised score of 50 (halfway from the random policy's return to the run's final one; D4RL:
  a policy stopped part-way through training).
- `medium-replay`: the run's replay buffer up to the medium checkpoint's step.
- `expert`: rollouts of the run's final policy.
- `medium-expert`: medium and expert rollouts, half each.

Rollouts sample from the stochastic policy, as D4RL's did, and keep the simulator state of every
step, so a person can label the dataset's queries from rendered clips (medium-replay comes from a
replay buffer, which keeps no states). The reference returns of the
normalised score are the mean return of the random policy (`ref_min_score`, measured here) and
the run's final deterministic evaluation (`ref_max_score`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
from rich.progress import Progress

from prefrl.data import ReplayBuffer
from prefrl.data.dataset import OfflineDataset
from prefrl.data.minari_io import check_free
from prefrl.envs import make_env
from prefrl.feedback.dataset_queries import (
    DatasetQueries,
    label_queries,
    labels_from_store,
    sample_queries,
    send_to_store,
)
from prefrl.rundir.checkpoints import checkpoints, latest_checkpoint
from prefrl.rundir.config import python_arguments
from prefrl.rundir.metrics import read_metrics
from prefrl.training.policies import load_policy

KINDS = ("random", "medium", "medium-replay", "expert", "medium-expert")


@dataclass
class MediumChoice:
    checkpoint: Path
    step: int
    eval_return: float
    final_return: float


def eval_returns(run_dir: Path) -> dict[int, float]:
    return {
        int(r["step"]): float(r["eval/return_mean"])
        for r in read_metrics(run_dir)
        if "eval/return_mean" in r
    }


def evaluate_checkpoint(ckpt: Path, episodes: int = 5, seed: int = 0) -> float:
    """The mean deterministic return of a checkpoint's policy (for checkpoints the run kept but
    did not evaluate)."""
    from prefrl.training.evaluate import evaluate, make_eval_envs

    loaded = load_policy(ckpt)
    envs = make_eval_envs(loaded.config.env, episodes, None)
    sac, params = loaded.sac, loaded.state.actor_params
    try:
        result = evaluate(lambda obs: sac.act(params, obs, None, 0, deterministic=True), envs,
                          seed=seed + 1_000_000, record=False)  # fmt: skip
    finally:
        for env in envs:
            env.close()
    return float(result.returns.mean())


def choose_medium(run_dir: Path, random_return: float, step: int | None = None) -> MediumChoice:
    """The checkpoint whose evaluation return is nearest halfway from `random_return` to the
    final one (or the one at `step`). Every checkpoint the run kept counts: those its run did
    not evaluate are evaluated here."""
    run_dir = Path(run_dir)
    evals = eval_returns(run_dir)
    if not evals:
        raise ValueError(f"{run_dir} has no evaluations in metrics.jsonl; is it a SAC run?")
    final = evals[max(evals)]
    usable = {int(p.name.removeprefix("step_")): p for p in checkpoints(run_dir)}
    missing = [s for s in sorted(usable) if s not in evals]
    if missing:
        print(f"evaluating {len(missing)} checkpoint(s) the run did not evaluate: steps "
              f"{missing}", flush=True)  # fmt: skip
        evals = {**evals, **{s: evaluate_checkpoint(usable[s]) for s in missing}}
    if step is not None:
        if step not in usable:
            raise ValueError(
                f"--medium-step={step}: {run_dir} has no checkpoint there; it has {sorted(usable)}"
            )
        chosen = step
    else:
        if not usable:
            raise ValueError(f"{run_dir} has no checkpoints")
        target = 0.5 * (random_return + final)
        chosen = min(usable, key=lambda s: abs(evals[s] - target))
        if abs(evals[chosen] - target) > 0.15 * abs(final - random_return):
            raise ValueError(
                f"{run_dir} has checkpoints at steps {sorted(usable)} (returns "
                f"{[round(evals[s], 1) for s in sorted(usable)]}), none near {target:.1f}, "
                f"halfway from the random policy's {random_return:.1f} to the final "
                f"{final:.1f}; {_more_checkpoints(run_dir)}, or pass --medium-step (one of "
                "those steps)"
            )
    return MediumChoice(usable[chosen], chosen, evals[chosen], final)


def _more_checkpoints(run_dir: Path) -> str:
    """How a SAC run like this one would keep a checkpoint nearer the middle."""
    try:
        config = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        config = {}
    if config.get("keep_checkpoints") == 0:
        interval = config.get("checkpoint_interval")
        every = f" (every {interval:,} steps)" if isinstance(interval, int) else ""
        return (f"the run kept every checkpoint{every}: train it again with a smaller "
                "--checkpoint-interval")  # fmt: skip
    return "keep more checkpoints in the SAC run (--keep-checkpoints 0 keeps every one)"


def rollouts(env_id: str, policy, steps: int, seed: int, label: str) -> OfflineDataset:
    """`steps` transitions of `policy(obs, step) -> action` (None: uniform random), whole
    episodes except the last, which is cut at `steps`."""
    env = make_env(env_id, seed=seed)
    rng = np.random.default_rng(seed)
    obs_dim, act_dim = env.obs_dim, env.action_dim
    cols = {
        "observations": np.zeros((steps, obs_dim), np.float32),
        "actions": np.zeros((steps, act_dim), np.float32),
        "rewards": np.zeros(steps, np.float32),
        "next_observations": np.zeros((steps, obs_dim), np.float32),
        "terminals": np.zeros(steps, bool),
        "timeouts": np.zeros(steps, bool),
    }
    states = None
    episode = 0
    obs, _ = env.reset(seed=seed)
    try:
        with Progress(transient=True) as bar:
            task = bar.add_task(f"rollouts: {label}", total=steps)
            for t in range(steps):
                if policy is None:
                    action = rng.uniform(-1, 1, act_dim).astype(np.float32)
                else:
                    action = np.asarray(policy(obs, t), np.float32)
                state = env.get_state()
                if states is None:
                    states = np.zeros((steps, len(state)), np.float64)
                states[t] = state
                nxt, reward, terminated, truncated, _ = env.step(action)
                cols["observations"][t], cols["actions"][t] = obs, action
                cols["rewards"][t], cols["next_observations"][t] = reward, nxt
                cols["terminals"][t], cols["timeouts"][t] = terminated, truncated
                if terminated or truncated:
                    episode += 1
                    obs, _ = env.reset(seed=seed + episode)
                else:
                    obs = nxt
                if t % 1000 == 0:
                    bar.update(task, completed=t)
    finally:
        env.close()
    return OfflineDataset(**cols, env_id=env_id, name=label, states=states)


def random_reference(env_id: str, episodes: int = 10, seed: int = 0) -> float:
    """Mean return of uniform-random actions (D4RL's 0 point)."""
    env = make_env(env_id, seed=seed)
    rng = np.random.default_rng([seed, 3])
    returns = []
    try:
        for i in range(episodes):
            env.reset(seed=seed + 10_000 + i)
            done, total = False, 0.0
            while not done:
                _, r, terminated, truncated, _ = env.step(
                    rng.uniform(-1, 1, env.action_dim).astype(np.float32)
                )
                total += r
                done = terminated or truncated
            returns.append(total)
    finally:
        env.close()
    return float(np.mean(returns))


def _sac_policy(checkpoint: Path, seed: int):
    loaded = load_policy(checkpoint)
    key = jax.random.key(seed)
    params = loaded.state.actor_params
    return loaded, lambda obs, t: loaded.sac.act(params, obs, key, t)


def replay_dataset(buffer: ReplayBuffer, steps: int, env_id: str) -> OfflineDataset:
    """The first `steps` transitions of a run's replay buffer (which must not have wrapped),
    with episode ends found where the next stored observation is not the last next one."""
    if buffer.size < buffer.capacity and steps > buffer.size:
        raise ValueError(f"the buffer holds {buffer.size} transitions, fewer than {steps}")
    if buffer.size == buffer.capacity and buffer.ptr != 0:
        raise ValueError(
            "the run's replay buffer wrapped around, so its early transitions are gone; "
            "train with a --buffer-size of at least --steps to make medium-replay"
        )
    n = steps
    obs, nxt = buffer.obs[:n], buffer.next_obs[:n]
    terminals = buffer.terminated[:n] > 0
    ends = np.zeros(n, bool)
    ends[:-1] = np.any(nxt[:-1] != obs[1:], axis=1)
    return OfflineDataset(
        observations=obs,
        actions=buffer.action[:n],
        rewards=buffer.reward[:n],
        next_observations=nxt,
        terminals=terminals,
        timeouts=ends & ~terminals,
        env_id=env_id,
    )


@python_arguments()
def collect_dataset(
    run: str | Path,
    kind: str = "medium-replay",
    *,
    out: str | Path | None = None,
    steps: int = 200_000,
    medium_step: int | None = None,
    seed: int = 0,
    reference_episodes: int = 10,
) -> OfflineDataset:
    """A D4RL-style dataset of `kind` (random, medium, medium-replay, expert, medium-expert:
    the module's docstring says what each holds) made from a `prefrl rl` SAC run, with the
    normalised score's reference returns; written to `out` (a Minari dataset directory, named
    after it) where given, as `prefrl dataset collect` does.

    Args:
        run: the SAC run directory (trained with `keep_checkpoints=0` for the medium kinds).
        steps: transitions of rollouts (medium-replay takes the buffer up to the medium step).
        medium_step: the checkpoint step of the medium policy (default: the one whose
            evaluation return is nearest halfway from random to the final one).
        reference_episodes: episodes of random actions measuring the random reference return.
    """
    if kind not in KINDS:
        raise ValueError(f"dataset kind {kind!r} is invalid: expected one of {', '.join(KINDS)}")
    if steps < 1:
        raise ValueError(f"--steps={steps} is invalid: expected a positive integer")
    if out is not None:
        check_free(out)  # (before minutes of rollouts)
    data = _collect(Path(run), kind, steps, medium_step, seed, reference_episodes)
    if out is not None:
        data.name = Path(out).name
        data.save(out)
    return data


def _collect(run_dir: Path, kind: str, steps: int, medium_step: int | None, seed: int,
             reference_episodes: int) -> OfflineDataset:  # fmt: skip
    final_ckpt = latest_checkpoint(run_dir)
    if final_ckpt is None:
        raise FileNotFoundError(f"{run_dir} has no checkpoint: is it a `prefrl rl` run?")
    loaded, expert_policy = _sac_policy(final_ckpt, seed)
    env_id = loaded.config.env
    evals = eval_returns(run_dir)
    if not evals:
        raise ValueError(f"{run_dir} has no evaluations to take the expert reference from")
    random_return = random_reference(env_id, reference_episodes, seed)
    info = {"source_run": str(run_dir), "kind": kind, "seed": seed}
    if kind == "random":
        data = rollouts(env_id, None, steps, seed, kind)
    elif kind == "expert":
        data = rollouts(env_id, expert_policy, steps, seed, kind)
        info["policy_step"] = int(max(evals))
    else:
        medium = choose_medium(run_dir, random_return, medium_step)
        info.update(
            medium_step=medium.step,
            medium_eval_return=medium.eval_return,
            final_eval_return=medium.final_return,
        )
        if kind == "medium":
            data = rollouts(env_id, _sac_policy(medium.checkpoint, seed)[1], steps, seed, kind)
        elif kind == "medium-expert":
            half = steps // 2
            parts = [
                rollouts(env_id, _sac_policy(medium.checkpoint, seed)[1], half, seed, "medium"),
                rollouts(env_id, expert_policy, steps - half, seed + 1, "expert"),
            ]
            data = OfflineDataset.concatenate(parts, name=kind)
        else:  # medium-replay
            buffer = ReplayBuffer.load(final_ckpt / "buffer.npz")
            data = replay_dataset(buffer, medium.step, env_id)
    data.ref_max_score = evals[max(evals)]
    data.ref_min_score = random_return
    data.info = {**info, "algorithm": "prefrl SAC", "description": f"{kind} data of {env_id}"}
    return data


@python_arguments()
def import_d4rl_dataset(
    file: str | Path,
    env: str,
    out: str | Path,
    ref_min_score: float | None = None,
    ref_max_score: float | None = None,
) -> OfflineDataset:
    """A D4RL-layout HDF5 file as a Minari dataset at `out` (`prefrl dataset import-d4rl`),
    checked against the observation and action sizes of `env`, the prefrl env id the data comes
    from. `ref_min_score`, `ref_max_score`: the random and expert returns of the normalised
    score (D4RL's REF_MIN_SCORE, REF_MAX_SCORE)."""
    from prefrl.data.dataset import import_d4rl_hdf5

    made = make_env(env, seed=0)
    dims = (made.obs_dim, made.action_dim)
    made.close()
    out = Path(out)
    data = import_d4rl_hdf5(file, env, out.name, ref_min_score, ref_max_score, dims)
    data.save(out)
    return data


@dataclass
class QueriesMade:
    """What `make_queries` did: the queries (labelled or not) and how, or where a person labels
    them (`label_dir`) and the command that takes their labels back (`next_step`)."""

    queries: DatasetQueries
    """The queries as written to the query file."""
    how: str
    """How they were labelled, e.g. "labelled by the oracle teacher"."""
    label_dir: Path | None = None
    """The labelling run a person labels them in (teacher "web" or "terminal")."""
    next_step: str | None = None
    """The command that takes that person's labels back."""


@python_arguments()
def make_queries(
    dataset: str | Path,
    out: str | Path,
    num: int = 500,
    length: int = 100,
    teacher: str = "oracle",
    seed: int = 0,
    queries: str | Path | None = None,
    label_dir: str | Path | None = None,
    from_run: str | Path | None = None,
) -> QueriesMade:
    """Preference queries on a dataset (`prefrl dataset queries`): `num` pairs of `length`-step
    segments of the Minari dataset `dataset` (or the query file `queries` made on it), labelled
    by the scripted `teacher` (oracle, stoc, mistake, skip, equal, myopic; "none": unlabelled),
    or put up for a person (`teacher` "web" or "terminal": a labelling run at `label_dir`), or
    given the labels a person gave in the labelling run `from_run`; written to the query file
    `out` (never over a person's labels), which `OfflineLearner` and `prefrl offline` take."""
    from prefrl.feedback.teachers import TeacherConfig

    out = Path(out)
    label_dir = None if label_dir is None else Path(label_dir)
    data = OfflineDataset.load(dataset)
    _keep_human_labels(out)
    if queries is not None:
        made = DatasetQueries.load(queries)
        made.check(data)
    else:
        made = sample_queries(data, num, length, seed)
    if from_run is not None:
        if queries is None:
            raise ValueError("--from-run needs --queries: the file the labelling run was made from")
        made = labels_from_store(made, from_run)
        how = f"answered in {from_run} (of {made.info['asked']} asked)"
    elif teacher in ("web", "terminal"):
        label_dir = label_dir or out.with_name(out.stem + "-labelling")
        then = (f"prefrl dataset queries {dataset} --queries {out} --from-run {label_dir} "
                "--out LABELLED.json")  # fmt: skip
        send_to_store(made, data, label_dir, next_step=then)
        made.save(out)
        return QueriesMade(made, "put up for labelling", label_dir, then)
    elif teacher != "none":
        made = label_queries(made, data, TeacherConfig(teacher), seed)
        how = f"labelled by the {teacher} teacher"
    else:
        how = "unlabelled"
    made.save(out)
    return QueriesMade(made, how)


def _keep_human_labels(out: Path) -> None:
    """Refuse to write over a queries file that holds a person's labels."""
    if not out.is_file():
        return
    try:
        old = DatasetQueries.load(out)
    except (ValueError, KeyError, OSError):
        return  # not a queries file we could lose labels from
    if old.labels is not None and old.source in ("human", "pt-human"):
        raise FileExistsError(
            f"--out {out} holds {len(old)} labels given by people; choose another --out (or "
            "move that file away first): they are not written over"
        )
