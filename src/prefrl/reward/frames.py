"""A reward model on frames (Christiano et al. 2017, Atari): an ensemble of `FrameRewardNet`s
(or, on MovingDot, of the seed's `DotRewardNet`), Bradley-Terry on the summed rewards of two
clips, outputs scaled to a fixed std.

Clips are stored as frames, each once: a segment of H steps holds H + 3 grey 84x84 frames (the
3 before its first step, then the newest of each step), and the stacks of 4 the network sees
are cut from them here (`frame_stacks`), never stored.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax

from prefrl.data.segments import LABEL_TARGET, Label, PreferenceData
from prefrl.envs.frames import STACK
from prefrl.envs.movingdot import MOVES
from prefrl.fielddocs import document_fields
from prefrl.nn.conv import FrameRewardNet
from prefrl.nn.dot import DotRewardNet
from prefrl.reward.base import RewardModel
from prefrl.rundir.config import check_fields
from prefrl.xla import SummedGrads, jit_step

NETWORKS = ("cnn", "dot")
READ_CHUNK = 64
"""Stacks per compiled call when rewards are read (`FrameRewardModel._raw`)."""


@document_fields
@dataclasses.dataclass(frozen=True)
class FrameRewardConfig:
    """Defaults: the seed's Atari settings (one network; dropout 0.5 is its Pong setting)."""

    members: int = 1
    """Reward networks in the ensemble (the seed's Atari setting: 1)."""
    network: str = "cnn"
    """cnn: the paper's Atari network, on the frames alone; dot: the seed's MovingDot network,
    the dot's position in the newest frame and the action (MovingDot only)."""
    dropout: float = 0.0
    """Dropout rate after each convolution (the seed's Pong setting: 0.5)."""
    batch_norm: bool = False
    """Batch norm after each convolution (the paper's regulariser beside dropout; the seed's
    option): each training batch's statistics, their running averages when rewards are read."""
    lr: float = 2e-4
    """Adam learning rate."""
    batch_size: int = 32
    """Pairs per gradient step."""
    steps_per_fit: int = 50
    """Gradient steps each time the model is fit (it trains on, warm-started, as labels come)."""
    max_labels: int = 3000
    """Only the newest labels are trained on (and kept)."""
    val_fraction: float = 0.2
    """Share of the labelled pairs held out for validation (a pair's side is fixed by its clips'
    ids)."""
    target_std: float = 0.05
    """The output's std on the labelled clips' frames (its mean there is 0)."""

    def __post_init__(self) -> None:
        check_fields(self, {
            **{k: (getattr(self, k) > 0, "> 0") for k in
               ("members", "lr", "batch_size", "steps_per_fit", "max_labels", "target_std")},
            "network": (self.network in NETWORKS, " or ".join(NETWORKS)),
            "dropout": (0 <= self.dropout < 1, "a value in [0, 1)"),
            "val_fraction": (0 <= self.val_fraction < 1, "a value in [0, 1)"),
        }, "FrameRewardConfig.")  # fmt: skip


def frame_stacks(frames: jax.Array) -> jax.Array:
    """(..., H + 3, 84, 84) frames -> (..., H, 84, 84, 4) stacks, oldest frame first."""
    h = frames.shape[-3] - (STACK - 1)
    return jnp.stack([frames[..., i : i + h, :, :] for i in range(STACK)], -1)


class FrameRewardModel(RewardModel):
    kind = "frames-cnn"

    def __init__(self, config: FrameRewardConfig | None = None, seed: int = 0):
        self.config = config or FrameRewardConfig()
        self.num_members = self.config.members
        self.seed = seed
        self.uses_actions = self.config.network == "dot"
        if self.uses_actions:
            self.net = DotRewardNet(len(MOVES))
        else:
            self.net = FrameRewardNet(self.config.dropout, self.config.batch_norm)
        self.tx = optax.adam(self.config.lr)
        keys = jax.random.split(jax.random.key(seed), self.num_members)
        dummy = jnp.zeros((1, 84, 84, STACK), jnp.uint8), jnp.zeros((1,), jnp.int32)
        self.params = jax.vmap(lambda k: self._apply(k, *dummy, init=True))(keys)
        self.opt_state = self.tx.init(self.params)
        self.shift = np.zeros(self.num_members, np.float32)
        self.scale = np.ones(self.num_members, np.float32)
        self.steps = 0
        # One pair per compiled call on a CPU (2.8x faster, `prefrl.xla.SummedGrads`); batch norm
        # needs the whole batch in one, for its statistics.
        self._grads = SummedGrads(self._loss, None if self.config.batch_norm else 1)
        self._apply_step = jit_step(self._apply_grads, donate_argnums=(0, 1))
        self._raw_jit = jax.jit(self._raw_rewards)

    # ------------------------------------------------------------------ the math
    def _apply(self, params, stacks, actions, init: bool = False, **kwargs):
        """One member's network on stacks (B, 84, 84, 4) and, for the dot network, the actions
        taken on them (B,) (`init`: params is a key; returns the new parameters)."""
        inputs = (stacks, actions) if self.uses_actions else (stacks,)
        if init:
            return self.net.init(params, *inputs)
        return self.net.apply(params, *inputs, **kwargs)

    def _raw_rewards(self, params, obs, actions):
        """Each member's unscaled reward per stack: (M, ...). `obs`: stacks (..., 84, 84, 4), or
        clips' frames (N, H + 3, 84, 84), cut into stacks here (so a quarter of the bytes reach
        the device)."""
        stacks = obs if obs.shape[-1] == STACK else frame_stacks(obs)
        flat = stacks.reshape(-1, *stacks.shape[-3:])
        out = jax.vmap(lambda p: self._apply(p, flat, actions.reshape(-1)))(params)
        return out.reshape(self.num_members, *stacks.shape[:-3])

    def _raw(self, params, obs: np.ndarray, actions) -> np.ndarray:
        """`_raw_rewards` of stacks (..., 84, 84, 4) or clips (N, H + 3, 84, 84) in a few
        compiled shapes whatever their count: on a CPU in calls of about 64 stacks (twice as fast
        as 2048 in one, `prefrl.xla.SummedGrads`), elsewhere in one call padded to a power of
        two."""
        obs = np.asarray(obs)
        clips = obs.shape[-1] != STACK
        flat = obs if clips else obs.reshape(-1, *obs.shape[-3:])
        steps = flat.shape[1] - (STACK - 1) if clips else 1  # (stacks per row of `flat`)
        n = len(flat)
        if jax.default_backend() == "cpu":
            chunk = max(1, READ_CHUNK // steps)
            size = max(chunk, -(-n // chunk) * chunk)
        else:
            size = chunk = 1 << (max(n, READ_CHUNK // steps) - 1).bit_length()
        padded = np.concatenate([flat, np.zeros((size - n, *flat.shape[1:]), flat.dtype)])
        acts = np.zeros((size, steps), np.int32)
        if actions is not None:
            acts[:n] = np.asarray(actions).reshape(n, steps)
        acts = acts if clips else acts[:, 0]
        parts = [self._raw_jit(params, padded[i : i + chunk], acts[i : i + chunk])
                 for i in range(0, size, chunk)]  # fmt: skip
        raw = np.concatenate([np.asarray(p) for p in parts], axis=1)[:, :n]
        return raw.reshape(self.num_members, *((n, steps) if clips else obs.shape[:-3]))

    def _step_actions(self, action, leading: tuple[int, ...]) -> np.ndarray | None:
        """The actions of `leading` steps as ints (a clip's are stored (N, H, 1)); the dot
        network cannot do without them."""
        if action is None:
            if self.uses_actions:
                raise ValueError("the dot reward network needs the action of every step")
            return None
        return np.asarray(action).reshape(leading).astype(np.int32)

    def _loss(self, params, data, rows, key):
        """Bradley-Terry on the pairs `rows` of `data` (left clips, right clips, their actions,
        targets): P(right > left) = sigmoid(sum r(right) - sum r(left)) per member. Both sides
        go through the network as one batch (one set of batch-norm statistics). The loss, the
        share of pairs predicted right and of decided pairs (means over the pairs), the new
        batch-norm statistics."""
        left, right, act_left, act_right, target = (x[rows] for x in data)
        both = frame_stacks(jnp.concatenate([left, right]))
        actions = jnp.concatenate([act_left, act_right])
        kwargs = {} if self.uses_actions else {"train": True}
        decided = target != 0.5

        def member(p, k):
            flat = both.reshape(-1, *both.shape[-3:])
            r, new_stats = self._apply(p, flat, actions.reshape(-1), rngs={"dropout": k},
                                       mutable=["batch_stats"], **kwargs)  # fmt: skip
            r_left, r_right = jnp.split(r.reshape(both.shape[:2]), 2)
            logit = r_right.sum(-1) - r_left.sum(-1)
            loss = optax.sigmoid_binary_cross_entropy(logit, target).mean()
            correct = (((logit > 0) == (target > 0.5)) & decided).mean()
            return loss, (correct, new_stats)

        keys = jax.random.split(jax.random.fold_in(key, rows[0]), self.num_members)
        losses, (correct, new_stats) = jax.vmap(member)(params, keys)
        return losses.sum(), {"loss": losses, "correct": correct, "decided": decided.mean(),
                              "batch_stats": new_stats}  # fmt: skip

    def _apply_grads(self, params, opt_state, grads, new_stats):
        updates, opt_state = self.tx.update(grads, opt_state, params)
        return {
            **optax.apply_updates(params, updates),
            **new_stats,
        }, opt_state  # (running averages)

    def train_step(self, left, right, act_left, act_right, target, key) -> tuple[float, float]:
        """One gradient step on a batch of labelled pairs: clips (N, H + 3, 84, 84) and their
        actions (N, H), targets P(right > left) (N,). Returns the loss and the share of decided
        pairs predicted right (arrays, read when needed)."""
        data = jax.device_put((left, right, act_left, act_right, target))
        grads, parts = self._grads(self.params, data, np.arange(len(target)), key)
        self.params, self.opt_state = self._apply_step(
            self.params, self.opt_state, grads, parts["batch_stats"]
        )
        accuracy = parts["correct"].mean() / jnp.maximum(parts["decided"], 1e-8)
        return parts["loss"].mean(), accuracy

    # ------------------------------------------------------------------ the interface
    def fit(self, data: PreferenceData, steps: int | None = None, should_stop=None,
            on_step=None) -> dict[str, float]:  # fmt: skip
        """`steps` (default `steps_per_fit`) gradient steps on the newest `max_labels` labels
        (skips left out). Stoppable: when `should_stop()` turns true, the fit ends before its
        next step (the validation left out); `on_step(done, steps)` follows it."""
        cfg = self.config
        steps = cfg.steps_per_fit if steps is None else steps
        t0 = time.perf_counter()
        arrays = data.arrays()
        labels = arrays["label"][-cfg.max_labels :]
        offset = len(arrays["label"]) - len(labels)
        usable = np.flatnonzero(labels != Label.SKIP) + offset
        if len(usable) == 0:
            raise ValueError(f"no labels to train on: all {len(labels)} are skips")
        held = self._held_out(arrays["id_left"][usable], arrays["id_right"][usable])
        train, val = usable[~held], usable[held]
        if len(train) == 0:
            train = usable
        rng = np.random.default_rng([self.seed, self.steps])
        target = LABEL_TARGET[arrays["label"].astype(np.int64)]
        h = arrays["obs_left"].shape[1] - (STACK - 1)
        act_left = arrays["action_left"].reshape(-1, h).astype(np.int32)
        act_right = arrays["action_right"].reshape(-1, h).astype(np.int32)
        losses, accs = [], []
        for done in range(1, steps + 1):
            if should_stop is not None and should_stop():
                break
            # (fewer labels than a batch: drawn with replacement, one compiled batch shape)
            idx = np.sort(rng.choice(train, cfg.batch_size, replace=len(train) < cfg.batch_size))
            key = jax.random.fold_in(jax.random.key(self.seed), self.steps)
            loss, acc = self.train_step(arrays["obs_left"][idx], arrays["obs_right"][idx],
                                        act_left[idx], act_right[idx], target[idx], key)  # fmt: skip
            losses.append(loss.block_until_ready())  # (a stop waits for one step, no more)
            accs.append(acc)
            self.steps += 1
            if on_step is not None:
                on_step(done, steps)
        metrics = {"reward/labels": float(len(usable)), "reward/fit_steps": float(len(losses))}
        if losses:
            self._normalise(arrays, usable, rng)
            metrics["reward/train_loss"] = float(np.mean(jax.device_get(losses)))
            metrics["reward/train_accuracy"] = float(np.mean(jax.device_get(accs)))
        metrics["reward/fit_seconds"] = time.perf_counter() - t0
        if len(losses) == steps and (accuracy := self._accuracy(arrays, val)) is not None:
            metrics["reward/val_accuracy"] = accuracy
        return metrics

    def _held_out(self, id_left: np.ndarray, id_right: np.ndarray) -> np.ndarray:
        """A fixed share of pairs held out for validation, chosen by the pair's segment ids (so a
        pair stays on its side as labels come and go)."""
        mixed = id_left.astype(np.uint64) * np.uint64(2654435761) + id_right.astype(np.uint64)
        return (mixed % np.uint64(1000)).astype(np.float64) < 1000 * self.config.val_fraction

    def _accuracy(self, arrays, idx: np.ndarray) -> float | None:
        """On the newest 64 decided held-out pairs (a bounded cost per fit); None while none is
        decided (early on, most random-policy clips of a game tie)."""
        decided = idx[np.isin(arrays["label"][idx], (Label.LEFT, Label.RIGHT))][-64:]
        if len(decided) == 0:
            return None
        probs = np.concatenate([
            self.pair_probs(arrays["obs_left"][c], arrays["action_left"][c],
                            arrays["obs_right"][c], arrays["action_right"][c]).mean(0)
            for c in np.array_split(decided, -(-len(decided) // 64))
        ])  # fmt: skip
        return float(((probs > 0.5) == (arrays["label"][decided] == Label.RIGHT)).mean())

    def _normalise(self, arrays, usable: np.ndarray, rng: np.random.Generator) -> None:
        """Shift and scale each member so its rewards on (a sample of) the labelled clips have
        mean 0 and std `target_std`."""
        pick = rng.choice(usable, min(64, len(usable)), replace=False)
        clips = arrays["obs_left"][pick]
        actions = self._step_actions(arrays["action_left"][pick], clips.shape[:1] + (-1,))
        raw = self._raw(self.params, clips, actions)
        raw = raw.reshape(self.num_members, -1)
        self.shift = raw.mean(1)
        self.scale = self.config.target_std / np.maximum(raw.std(1), 1e-8)

    def member_rewards(self, obs: np.ndarray, action=None) -> np.ndarray:
        """Rewards of stacks (..., 84, 84, 4), or of clips' frames (N, H + 3, 84, 84) (then
        (M, N, H)); `action`: the action taken on each stack (the cnn network ignores it)."""
        obs = np.asarray(obs)
        if obs.shape[-3:] != (84, 84, STACK) and (obs.ndim != 4 or obs.shape[-2:] != (84, 84)):
            raise ValueError(
                f"observations of shape {obs.shape} are not frames: the frame reward model takes "
                "stacks (..., 84, 84, 4) or clips (N, H + 3, 84, 84) of a pixel env; for state "
                "vectors use the MLP ensemble (prefrl.reward.RewardConfig)"
            )
        leading = obs.shape[:-3] if obs.shape[-1] == STACK else (len(obs), -1)
        actions = self._step_actions(action, leading) if self.uses_actions else None
        raw = self._raw(self.params, obs, actions)
        shape = (-1,) + (1,) * (raw.ndim - 1)
        return (raw - self.shift.reshape(shape)) * self.scale.reshape(shape)

    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        meta = {"kind": self.kind, "seed": self.seed, "config": dataclasses.asdict(self.config),
                "shift": self.shift.tolist(), "scale": self.scale.tolist(), "steps": self.steps}  # fmt: skip
        (path / "params.msgpack").write_bytes(flax.serialization.to_bytes(
            jax.device_get((self.params, self.opt_state))))  # fmt: skip
        (path / "config.json").write_text(json.dumps(meta, indent=1))

    @classmethod
    def load(cls, path: str | Path) -> FrameRewardModel:
        path = Path(path)
        meta = json.loads((path / "config.json").read_text())
        model = cls(FrameRewardConfig(**meta["config"]), meta["seed"])
        model.params, model.opt_state = flax.serialization.from_bytes(
            (model.params, model.opt_state), (path / "params.msgpack").read_bytes()
        )
        model.shift = np.asarray(meta["shift"], np.float32)
        model.scale = np.asarray(meta["scale"], np.float32)
        model.steps = meta["steps"]
        return model
