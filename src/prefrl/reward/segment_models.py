"""Reward models for offline preference learning (Kim et al. 2023): MR, NMR and the Preference
Transformer, trained the same way.

- `mr`: an MLP r̂(s, a), a segment's score is the sum over its steps (Markovian).
- `nmr`: an LSTM over the segment, score = sum of its per-step outputs (non-Markovian).
- `pt`: the Preference Transformer, score = mean of the preference-attention output z.

Training: AdamW on the pairs' cross-entropy (equal labels as (0.5, 0.5), skips ignored), a
warm-up cosine schedule (lr -> 10 lr -> lr, PT's) or a constant rate; a held-out validation
share; the parameters of the epoch with the lowest validation loss are kept.

Per-step rewards for relabelling (`relabel`): for the sequence models, r̂ at the last position
of a window of `seq_len` steps ending at t, zero-padded (and masked) at the episode's start.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax

from prefrl.data.dataset import OfflineDataset
from prefrl.data.segments import LABEL_TARGET, Label, PreferenceData
from prefrl.fielddocs import document_fields
from prefrl.nn.sequence import LSTMReward, MarkovReward, PreferenceTransformer
from prefrl.reward.base import RewardModel
from prefrl.reward.fit_state import FIT_STATE, FitStopped, load_fit_state, save_fit_state
from prefrl.rundir.atomic import atomic_write
from prefrl.rundir.config import check_fields

KINDS = ("mr", "nmr", "pt")
_DEFAULT_LR = {"mr": 3e-4, "nmr": 1e-3, "pt": 1e-4}


@document_fields
@dataclass(frozen=True)
class SegmentRewardConfig:
    """An offline reward model (defaults: Kim et al. 2023's settings for each kind)."""

    kind: str = "pt"
    """mr (MLP 256-256), nmr (LSTM) or pt (Preference Transformer)."""
    embed_dim: int = 256
    """Transformer width / LSTM size / MLP width."""
    layers: int = 1
    """Transformer layers (pt only)."""
    heads: int = 4
    """Attention heads of the transformer (pt); must divide embed_dim."""
    dropout: float = 0.1
    """Transformer dropout (attention, residual, embedding)."""
    lr: float | None = None
    """None: 3e-4 (mr), 1e-3 (nmr), 1e-4 (pt; the schedule peaks at 10x)."""
    schedule: str | None = None
    """cosine (warm-up to 10 lr, cosine back to lr) or constant; None: cosine for pt only."""
    warmup_fraction: float = 0.05
    """Share of the fit's steps spent warming the cosine schedule up."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    batch_size: int = 256
    """Labelled pairs per gradient step."""
    epochs: int = 200
    """Passes over the training pairs; with validation pairs the best epoch's parameters are kept."""
    val_fraction: float = 0.1
    """Share of the labelled pairs held out for validation (none with fewer than 10 pairs)."""
    max_timestep: int = 1000
    """Size of the timestep embedding table: segments and windows up to this long."""

    def __post_init__(self) -> None:
        checks = {
            "kind": (self.kind in KINDS, f"one of {', '.join(KINDS)}"),
            "embed_dim": (self.embed_dim > 0, "a positive integer"),
            "layers": (self.layers >= 1, "a positive integer"),
            "heads": (
                self.heads >= 1 and self.embed_dim % self.heads == 0,
                f"a positive divisor of embed_dim ({self.embed_dim})",
            ),
            "dropout": (0 <= self.dropout < 1, "a rate in [0, 1)"),
            "lr": (self.lr is None or self.lr > 0, "a positive number"),
            "schedule": (self.schedule in (None, "cosine", "constant"), "cosine or constant"),
            "warmup_fraction": (0 <= self.warmup_fraction < 1, "a value in [0, 1)"),
            "weight_decay": (self.weight_decay >= 0, ">= 0"),
            "batch_size": (self.batch_size >= 1, "a positive integer"),
            "epochs": (self.epochs >= 1, "a positive integer"),
            "val_fraction": (0 <= self.val_fraction < 1, "a value in [0, 1)"),
            "max_timestep": (self.max_timestep >= 1, "a positive integer"),
        }
        check_fields(self, checks, "reward ")

    @property
    def resolved_lr(self) -> float:
        return self.lr if self.lr is not None else _DEFAULT_LR[self.kind]

    @property
    def resolved_schedule(self) -> str:
        return self.schedule or ("cosine" if self.kind == "pt" else "constant")


def _pad_rows(x: np.ndarray, size: int) -> np.ndarray:
    return np.pad(x, [(0, size - len(x))] + [(0, 0)] * (x.ndim - 1))


class SegmentRewardModel(RewardModel):
    num_members = 1

    def __init__(
        self, config: SegmentRewardConfig, obs_dim: int, action_dim: int, seq_len: int, seed=0
    ):
        if seq_len > config.max_timestep:
            raise ValueError(
                f"segments of {seq_len} steps are longer than the timestep table "
                f"(max_timestep={config.max_timestep})"
            )
        self.config = config
        self.kind = config.kind
        self.obs_dim, self.action_dim, self.seq_len, self.seed = obs_dim, action_dim, seq_len, seed
        if config.kind == "mr":
            self.net = MarkovReward((config.embed_dim, config.embed_dim))
        elif config.kind == "nmr":
            self.net = LSTMReward(config.embed_dim, config.embed_dim)
        else:
            self.net = PreferenceTransformer(
                config.embed_dim, config.layers, config.heads, config.dropout, config.max_timestep
            )
        t = seq_len
        self.params = self.net.init(
            jax.random.key(seed),
            jnp.zeros((1, t, obs_dim)),
            jnp.zeros((1, t, action_dim)),
            jnp.ones((1, t), jnp.int32),
            jnp.ones((1, t)),
        )
        self.best_epoch = 0
        self._scores = jax.jit(self._scores_impl, static_argnames="train")
        self._rewards = jax.jit(self._rewards_impl)
        self._last_rewards = jax.jit(self._last_rewards_impl)
        self._pair_logits = jax.jit(self._logits, static_argnames="train")

    # ------------------------------------------------------------------------------- forward
    def _apply(self, params, obs, action, timestep, mask, train, key):
        rngs = {"dropout": key} if train else None
        return self.net.apply(params, obs, action, timestep, mask, train, rngs=rngs)

    def _rewards_impl(self, params, obs, action, timestep, mask):
        out = self._apply(params, obs, action, timestep, mask, False, None)
        return out[0] if isinstance(out, tuple) else out

    def _last_rewards_impl(self, params, obs, action, timestep, mask):
        """r̂ of each window's last step (PT computes its last layer for that step alone)."""
        if self.kind == "pt":
            return self.net.apply(params, obs, action, timestep, mask, False, True)
        return self._rewards_impl(params, obs, action, timestep, mask)[:, -1]

    def _scores_impl(self, params, obs, action, key, train: bool = False):
        """A segment's score (the logit of preferring it, up to the other's)."""
        b, t = obs.shape[:2]
        timestep = jnp.broadcast_to(jnp.arange(1, t + 1), (b, t))
        mask = jnp.ones((b, t))
        out = self._apply(params, obs, action, timestep, mask, train, key)
        if self.kind == "pt":
            return out[1].mean(-1)  # mean of z
        return out.sum(-1)

    def _logits(self, params, batch, key, train: bool):
        k1, k2 = jax.random.split(key)
        left = self._scores_impl(params, batch["obs_left"], batch["action_left"], k1, train)
        right = self._scores_impl(params, batch["obs_right"], batch["action_right"], k2, train)
        return right - left

    # ------------------------------------------------------------------------------- training
    def fit(
        self,
        data: PreferenceData,
        progress=None,
        should_stop=None,
        state_dir: Path | None = None,
    ) -> dict[str, float]:
        """Train from scratch on the labelled pairs; keep the epoch with the lowest validation
        loss (the last epoch when nothing is held out). `progress(epoch, metrics)` is called
        after each epoch.

        Stoppable: when `should_stop()` turns true, the fit ends at the next epoch boundary,
        saves where it stands to `state_dir` and raises `FitStopped`; called again with the
        same `state_dir` (and data), it goes on from that epoch, as if never stopped."""
        t0 = time.perf_counter()
        arrays = data.arrays()
        length = arrays["obs_left"].shape[1]
        if length != self.seq_len:
            raise ValueError(
                f"the pairs' segments are {length} steps; this model was made for {self.seq_len}"
            )
        labels = arrays["label"].astype(np.int64)
        usable = np.flatnonzero(labels != Label.SKIP)
        if len(usable) == 0:
            raise ValueError(f"no labels to train on: all {len(labels)} are skipped")
        cfg = self.config
        rng = np.random.default_rng([self.seed, 5])
        perm = rng.permutation(usable)
        n_val = round(cfg.val_fraction * len(perm)) if len(perm) >= 10 else 0
        val_idx, train_idx = np.sort(perm[:n_val]), _apart(arrays, perm[n_val:], perm[:n_val])
        if len(train_idx) == 0:
            raise ValueError(
                f"every training pair shares a segment with one of the {n_val} held-out pairs: "
                "the queries come from too few distinct segments (sample them from more data, "
                "or hold none out: --reward-model.val-fraction 0)"
            )
        target = np.nan_to_num(LABEL_TARGET[labels], nan=0.5).astype(np.float32)
        keys = ("obs_left", "action_left", "obs_right", "action_right")
        device = {k: jnp.asarray(arrays[k], jnp.float32) for k in keys}

        b = min(cfg.batch_size, len(train_idx))
        steps_per_epoch = -(-len(train_idx) // b)
        total = steps_per_epoch * cfg.epochs
        lr = cfg.resolved_lr
        if cfg.resolved_schedule == "cosine":
            schedule = optax.warmup_cosine_decay_schedule(
                lr, 10 * lr, max(1, int(cfg.warmup_fraction * total)), total, lr
            )
        else:
            schedule = lr
        tx = optax.adamw(schedule, weight_decay=cfg.weight_decay)
        params = self.params
        opt_state = tx.init(params)

        def loss_fn(p, idx, w, key):
            batch = {k: v[idx] for k, v in device.items()}
            logits = self._logits(p, batch, key, True)
            y = jnp.asarray(target)[idx]
            ce = optax.sigmoid_binary_cross_entropy(logits, y)
            return (w * ce).sum() / jnp.maximum(w.sum(), 1.0)

        @jax.jit
        def train_step(p, o, idx, w, key):
            loss, grads = jax.value_and_grad(loss_fn)(p, idx, w, key)
            updates, o = tx.update(grads, o, p)
            return optax.apply_updates(p, updates), o, loss

        best = (np.inf, params, 0)
        history = []
        key = jax.random.key(self.seed + 1)
        first = 1
        if state_dir is not None and (Path(state_dir) / FIT_STATE).is_file():
            params, opt_state, best, history, key, first = load_fit_state(
                Path(state_dir), params, opt_state, rng
            )
        for epoch in range(first, cfg.epochs + 1):
            if should_stop is not None and should_stop() and state_dir is not None:
                save_fit_state(Path(state_dir), params, opt_state, best, history, key, rng, epoch)
                raise FitStopped(epoch - 1, cfg.epochs)
            order = rng.permutation(train_idx)
            losses = []
            for start in range(0, len(order), b):
                idx = order[start : start + b]
                w = np.ones(b, np.float32)
                if len(idx) < b:
                    w[len(idx) :] = 0.0
                    idx = np.concatenate([idx, np.full(b - len(idx), idx[0])])
                key, sub = jax.random.split(key)
                params, opt_state, loss = train_step(params, opt_state, idx, w, sub)
                losses.append(loss)
            metrics = {"epoch": epoch, "train_loss": float(jnp.mean(jnp.stack(losses)))}
            if n_val:
                metrics.update(self._evaluate(params, device, val_idx, target))
                if metrics["val_loss"] < best[0]:
                    best = (metrics["val_loss"], params, epoch)
            history.append(metrics)
            if progress is not None:
                progress(epoch, metrics)
        self.params, self.best_epoch = (best[1], best[2]) if n_val else (params, cfg.epochs)
        out = {
            "reward/train_loss": history[-1]["train_loss"],
            "reward/best_epoch": float(self.best_epoch),
            "reward/labels_train": float(len(train_idx)),
            "reward/labels_val": float(n_val),
            "reward/train_accuracy": self._evaluate(self.params, device, train_idx, target).get(
                "val_accuracy", float("nan")
            ),
        }
        if n_val:
            final = self._evaluate(self.params, device, val_idx, target)
            out["reward/val_loss"] = final["val_loss"]
            if "val_accuracy" in final:
                out["reward/val_accuracy"] = final["val_accuracy"]
        out["reward/fit_seconds"] = time.perf_counter() - t0
        out["reward/pairs_per_s"] = len(train_idx) * cfg.epochs / out["reward/fit_seconds"]
        self.history = history
        return out

    def _evaluate(self, params, device, idx, target) -> dict[str, float]:
        logits = []
        b = self.config.batch_size
        key = jax.random.key(0)
        for start in range(0, len(idx), b):
            part = idx[start : start + b]
            batch = {k: v[_pad_rows(part, b)] for k, v in device.items()}
            logits.append(np.asarray(self._pair_logits(params, batch, key, False))[: len(part)])
        z = np.concatenate(logits).astype(np.float64)
        y = target[idx].astype(np.float64)
        loss = float(np.mean(np.logaddexp(0, z) - y * z))
        out = {"val_loss": loss}
        decided = y != 0.5
        if decided.any():
            out["val_accuracy"] = float(((z > 0) == (y > 0.5))[decided].mean())
        return out

    # ------------------------------------------------------------------------------- inference
    def member_rewards(self, obs: np.ndarray, action: np.ndarray) -> np.ndarray:
        """Per-step r̂ of segments (N, T, dim) -> (1, N, T); each step sees its segment's prefix
        (for mr, just itself). Markovian mr also takes any leading shape."""
        obs, action = np.asarray(obs, np.float32), np.asarray(action, np.float32)
        if obs.shape[-1] != self.obs_dim or action.shape[-1] != self.action_dim:
            raise ValueError(
                f"reward model expects obs of size {self.obs_dim} and actions of size "
                f"{self.action_dim}; got {obs.shape[-1]} and {action.shape[-1]}"
            )
        if self.kind == "mr":
            lead = obs.shape[:-1]
            o, a = obs.reshape(-1, 1, self.obs_dim), action.reshape(-1, 1, self.action_dim)
            r = self._batched_rewards(o, a, np.ones((len(o), 1), np.int32), np.ones((len(o), 1)))
            return r.reshape(1, *lead)
        if obs.ndim != 3:
            raise ValueError(f"{self.kind} scores whole segments: obs (N, T, dim), got {obs.shape}")
        n, t = obs.shape[:2]
        timestep = np.broadcast_to(np.arange(1, t + 1), (n, t)).astype(np.int32)
        return self._batched_rewards(obs, action, timestep, np.ones((n, t)))[None]

    def _batched_rewards(self, obs, action, timestep, mask, chunk=1024, last=False) -> np.ndarray:
        fn = self._last_rewards if last else self._rewards
        out = []
        for s in range(0, len(obs), chunk):
            m = min(chunk, len(obs) - s)
            size = chunk if len(obs) > chunk else m
            args = [
                _pad_rows(np.asarray(x[s : s + m]), size) for x in (obs, action, timestep, mask)
            ]
            out.append(np.asarray(fn(self.params, *args))[:m])
        return np.concatenate(out)

    def pair_probs(self, obs_left, action_left, obs_right, action_right) -> np.ndarray:
        """P(right ≻ left) from the models' own segment scores: (1, N)."""
        key = jax.random.key(0)
        left = np.asarray(self._scores(self.params, obs_left, action_left, key))
        right = np.asarray(self._scores(self.params, obs_right, action_right, key))
        return (1.0 / (1.0 + np.exp(np.clip(left - right, -50, 50))))[None]

    def relabel(self, dataset: OfflineDataset, chunk: int = 1024, progress=None) -> np.ndarray:
        """A learned reward for every transition of the dataset (see the module docstring)."""
        if dataset.obs_dim != self.obs_dim or dataset.action_dim != self.action_dim:
            raise ValueError(
                f"the dataset has obs of size {dataset.obs_dim} and actions of size "
                f"{dataset.action_dim}; the model expects {self.obs_dim} and {self.action_dim}"
            )
        if self.kind == "mr":
            return self.member_rewards(dataset.observations, dataset.actions)[0]
        L, n = self.seq_len, len(dataset)
        pos = dataset.episode_index()
        offsets = np.arange(-L + 1, 1)
        out = np.empty(n, np.float32)
        for s in range(0, n, chunk):
            t = np.arange(s, min(s + chunk, n))
            idx = t[:, None] + offsets[None, :]  # window ending at t
            valid = offsets[None, :] >= -pos[t][:, None]  # inside t's episode
            idx = np.where(valid, idx, 0)
            obs = np.where(valid[..., None], dataset.observations[idx], 0.0)
            action = np.where(valid[..., None], dataset.actions[idx], 0.0)
            # Timesteps 1..k over the k real steps, 0 at the padding in front.
            timestep = np.where(valid, np.cumsum(valid, axis=1), 0).astype(np.int32)
            mask = valid.astype(np.float32)
            out[t] = self._batched_rewards(obs, action, timestep, mask, chunk, last=True)
            if progress is not None:
                progress(int(t[-1]) + 1, n)
        return out

    # ------------------------------------------------------------------------------- persistence
    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        with atomic_write(path / "weights.msgpack", "wb") as f:
            f.write(flax.serialization.to_bytes(jax.device_get(self.params)))
        meta = {
            "kind": self.kind,
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "seq_len": self.seq_len,
            "seed": self.seed,
            "best_epoch": self.best_epoch,
            "config": dataclasses.asdict(self.config),
        }
        with atomic_write(path / "config.json", "w") as f:
            f.write(json.dumps(meta, indent=2))

    @classmethod
    def load(cls, path: str | Path) -> SegmentRewardModel:
        path = Path(path)
        meta = json.loads((path / "config.json").read_text())
        model = cls(
            SegmentRewardConfig(**meta["config"]),
            meta["obs_dim"],
            meta["action_dim"],
            meta["seq_len"],
            meta["seed"],
        )
        model.params = flax.serialization.from_bytes(
            model.params, (path / "weights.msgpack").read_bytes()
        )
        model.best_epoch = meta["best_epoch"]
        return model


def _apart(arrays: dict, train: np.ndarray, val: np.ndarray) -> np.ndarray:
    """The training pairs that share no segment with a held-out pair: a segment seen in
    training would flatter the validation accuracy (pairs drawn from a small pool repeat
    segments). Segments are told apart by their observations and actions."""
    if len(val) == 0:
        return train

    def key(side: str, i: int) -> bytes:
        return arrays[f"obs_{side}"][i].tobytes() + arrays[f"action_{side}"][i].tobytes()

    held = {key(side, i) for i in val for side in ("left", "right")}
    keep = [i for i in train if key("left", i) not in held and key("right", i) not in held]
    return np.asarray(keep, train.dtype)
