"""An ensemble of MLP reward models trained jointly (one vmapped, jitted step for all members).

Christiano et al. (2017) / PEBBLE: each member fits its own bootstrap of the labels with the
Bradley-Terry cross-entropy on segment sums; P is mixed with 10% random responses; equal labels
are the target (0.5, 0.5); skipped labels are not trained on. A fixed share of the labels (1/e)
is held out for validation, or (`val_fraction` 0, as PEBBLE trains on every label) each label is
validated by the members whose bootstrap left it out. Outputs are normalised to zero mean and a
fixed std.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax

from prefrl.data.segments import LABEL_TARGET, Label, PreferenceData
from prefrl.nn import RewardNetEnsemble
from prefrl.reward.augment import crop_masks, cropped_logits, pseudo_labels
from prefrl.reward.base import RewardModel
from prefrl.reward.config import RewardConfig
from prefrl.rundir.atomic import atomic_write
from prefrl.xla import jit_step

_MIN_LABELS_FOR_VALIDATION = 8
_PREDICT_CHUNK = 8192


def _poisson1_counts(u: np.ndarray) -> np.ndarray:
    """Poisson(1) draws from uniforms by inverse CDF (an online-stable bootstrap weight)."""
    cdf = np.cumsum([math.exp(-1) / math.factorial(k) for k in range(12)])
    return np.searchsorted(cdf, u).astype(np.float32)


def _bucket(n: int) -> int:
    """Next power of two >= n: padded shapes, so jitted functions compile a few times only."""
    return 1 << max(0, int(n - 1).bit_length())


def log_answer_prob(logits, eps: float):
    """log P(right ≻ left) = log((1 - eps) sigmoid(logit) + eps / 2), computed in log space: the
    probability itself rounds to 1 in float32 once a logit passes about 17, which a sum of 50
    tanh rewards reaches, and with eps = 0 (QPA's and B-Pref's plain cross-entropy) the loss of a
    wrong answer there would be log(0)."""
    if eps == 0:
        return jax.nn.log_sigmoid(logits)
    return jnp.logaddexp(np.log1p(-eps) + jax.nn.log_sigmoid(logits), np.log(0.5 * eps))


class MLPRewardEnsemble(RewardModel):
    """The default reward model (PEBBLE's, Christiano's with `RewardConfig(hidden_dims=(64, 64),
    output="linear")`): an ensemble of MLPs of one step's observation and action, each fitted
    to its own bootstrap of the labels with the Bradley-Terry loss on segment sums."""

    kind = "mlp-ensemble"

    def __init__(self, config: RewardConfig, obs_dim: int, action_dim: int, seed: int = 0):
        self.config = config
        self.obs_dim, self.action_dim, self.seed = obs_dim, action_dim, seed
        self.num_members = config.members
        self.net = RewardNetEnsemble(
            config.hidden_dims, config.members, config.output, config.dropout
        )
        self.tx = optax.adamw(config.lr, weight_decay=config.weight_decay)
        key = jax.random.key(seed)
        self.params = self.net.init(
            key, jnp.zeros((1, obs_dim), jnp.float32), jnp.zeros((1, action_dim), jnp.float32)
        )
        self.opt_state = self.tx.init(self.params)
        self.shift = np.zeros(config.members, np.float32)
        self.scale = np.ones(config.members, np.float32)
        self.steps = 0  # gradient steps so far (folded into the dropout key)
        self.fits = 0
        self._train_step = jit_step(self._train_step_impl, donate_argnums=(0, 1))
        self._pair_logits = jax.jit(self._pair_logits_impl)
        self._raw_rewards = jax.jit(lambda p, o, a: self.net.apply(p, o, a))
        self._raw_step_rewards = jax.jit(lambda p, o, a: self.net.apply(p, o[None], a[None]))

    # ------------------------------------------------------------------------------- training
    def _segment_sums(self, params, obs, action, key, train: bool):
        r = self.net.apply(params, obs, action, train, rngs={"dropout": key} if train else None)
        return r.sum(-1)  # (M, B)

    def _pair_logits_impl(self, params, data, idx, key, train: bool = False):
        k1, k2 = jax.random.split(key)
        s_left = self._segment_sums(params, data[0][idx], data[1][idx], k1, train)
        s_right = self._segment_sums(params, data[2][idx], data[3][idx], k2, train)
        return s_right - s_left  # logit of P(right ≻ left), (M, B)

    def _loss(self, logits, target, weight):
        eps = self.config.random_response
        log_right, log_left = log_answer_prob(logits, eps), log_answer_prob(-logits, eps)
        ce = -(target * log_right + (1.0 - target) * log_left)  # (M, B)
        per_member = (weight * ce).sum(-1) / jnp.maximum(weight.sum(-1), 1.0)
        return per_member

    def _crop_logits(self, params, data, idx, key, train: bool):
        """Logits of `crops` random crops of each pair (`augment.cropped_logits`' order)."""
        k_left, k_right, k_crop = jax.random.split(key, 3)
        rngs = lambda k: {"dropout": k} if train else None
        left = self.net.apply(params, data[0][idx], data[1][idx], train, rngs=rngs(k_left))
        right = self.net.apply(params, data[2][idx], data[3][idx], train, rngs=rngs(k_right))
        cfg = self.config
        masks = crop_masks(k_crop, cfg.crops, len(idx), data[0].shape[1], cfg.crop_shorter_by)
        return cropped_logits(left, right, masks)

    def _logits(self, params, data, idx, key, train: bool):
        if self.config.crops:
            return self._crop_logits(params, data, idx, key, train)
        return self._pair_logits_impl(params, data, idx, key, train)

    def _train_step_impl(self, params, opt_state, data, idx, target, weight, key, unlabelled=None):
        """`unlabelled`: (their arrays, this batch's rows of them) for pseudo-labels, or None."""
        copies, train = max(1, self.config.crops), self.config.dropout > 0
        target, weight = jnp.tile(target, copies), jnp.tile(weight, (1, copies))

        def loss_fn(p):
            logits = self._logits(p, data, idx, key, train)
            per_member, pseudo = self._loss(logits, target, weight), jnp.zeros(())
            if unlabelled is not None:
                u_logits = self._logits(p, *unlabelled, jax.random.fold_in(key, 1), train)
                u_target, confident = pseudo_labels(u_logits, self.config.pseudo_label_threshold)
                u_loss = self._loss(u_logits, u_target, confident.astype(u_logits.dtype))
                per_member = per_member + self.config.pseudo_label_weight * u_loss
                pseudo = confident.mean()
            return per_member.sum(), (per_member, logits, pseudo)

        (_, (per_member, logits, pseudo)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = self.tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        decided = (target != 0.5) & (weight.sum(0) > 0)  # (B,)
        correct = ((logits > 0) == (target > 0.5)[None]) & decided[None]
        accuracy = (correct.sum() / self.num_members, decided.sum())
        return params, opt_state, per_member, *accuracy, pseudo

    def _split(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Validation flags and bootstrap weights for labels 0..n-1; each label keeps its own
        draws as more labels arrive (one seeded stream per purpose, read as a prefix)."""
        u_val = np.random.default_rng([self.seed, 1]).random(n)
        val = u_val < self.config.val_fraction
        if n < _MIN_LABELS_FOR_VALIDATION:
            val[:] = False
        if self.config.bootstrap:
            u = np.random.default_rng([self.seed, 2]).random((n, self.num_members))
            weight = _poisson1_counts(u)
        else:
            weight = np.ones((n, self.num_members), np.float32)
        return val, weight

    def fit(self, data: PreferenceData, unlabelled: dict | None = None) -> dict[str, float]:
        """`unlabelled`: pairs without labels for pseudo-labels (`pseudo_label_threshold`), as
        arrays `obs_left`, `action_left`, `obs_right`, `action_right` like `data.arrays()`."""
        t0 = time.perf_counter()
        arrays = data.arrays()
        labels = arrays["label"]
        n = len(labels)
        val, weight = self._split(n)
        usable = labels != Label.SKIP
        train_idx = np.flatnonzero(usable & ~val)
        val_idx = np.flatnonzero(usable & val)
        horizon = arrays["obs_left"].shape[1]
        if self.config.crops and horizon <= self.config.crop_shorter_by[1]:
            raise ValueError(
                f"RewardConfig.crop_shorter_by={self.config.crop_shorter_by} leaves nothing of "
                f"{horizon}-step segments: expected crops shorter by fewer than {horizon} steps"
            )
        if len(train_idx) == 0:
            raise ValueError(
                f"no labels to train on: {n} labels, {int((~usable).sum())} of them skipped"
            )
        # Skips have no target (NaN); they are never in a batch, but padding rows may point at
        # one, and 0 weight x NaN is NaN: give them a harmless value.
        target = np.nan_to_num(LABEL_TARGET[labels.astype(np.int64)], nan=0.5)
        cap = _bucket(n)
        pad = ((0, cap - n), (0, 0), (0, 0))
        device_data = tuple(
            jnp.asarray(np.pad(arrays[k], pad))
            for k in ("obs_left", "action_left", "obs_right", "action_right")
        )
        cfg = self.config
        rng = np.random.default_rng([self.seed, 3, self.fits])
        pseudo, n_unlabelled = None, 0
        if cfg.pseudo_label_threshold is not None and unlabelled is not None:
            # Padded to a power of two like the labels: one compile, not one per fit.
            n_unlabelled = len(unlabelled["obs_left"])
            rows_pad = ((0, _bucket(n_unlabelled) - n_unlabelled), (0, 0), (0, 0))
            pseudo = tuple(jnp.asarray(np.pad(unlabelled[k], rows_pad)) for k in
                           ("obs_left", "action_left", "obs_right", "action_right"))  # fmt: skip
        base_key = jax.random.key(self.seed)
        # Fewer labels than a batch: a smaller padded batch (one compile per power of two).
        b = min(cfg.batch_size, _bucket(len(train_idx)))
        batches_per_epoch = -(-len(train_idx) // b)
        first = self.fits == 0 or cfg.refit_epochs is None
        epochs_cap = cfg.max_epochs if first else cfg.refit_epochs
        max_epochs = max(epochs_cap, -(-cfg.min_steps // batches_per_epoch))
        epochs, acc, loss = 0, 0.0, float("nan")
        over_fit = cfg.stop_measured_over == "fit"
        correct_sum, decided_sum, fit_steps, stop = 0.0, 0.0, 0, False
        for epochs in range(1, max_epochs + 1):
            order = rng.permutation(train_idx)
            losses, pseudo_used = [], []
            if not over_fit:  # (the accuracy of this epoch alone)
                correct_sum, decided_sum = 0.0, 0.0
            for start in range(0, len(order), b):
                idx = order[start : start + b]
                m = len(idx)
                w = weight[idx].T  # (M, m)
                if m < b:  # pad with zero-weight rows: one compiled shape
                    idx = np.concatenate([idx, np.zeros(b - m, np.int64)])
                    w = np.pad(w, ((0, 0), (0, b - m)))
                key = jax.random.fold_in(base_key, self.steps)
                extra = {}
                if pseudo is not None:  # (a fresh draw of unlabelled pairs for every batch)
                    rows = rng.integers(0, n_unlabelled, b * cfg.pseudo_label_ratio)
                    extra = {"unlabelled": (pseudo, rows)}
                self.params, self.opt_state, per_member, correct, decided, confident = (
                    self._train_step(self.params, self.opt_state, device_data, idx,
                                     target[idx], w, key, **extra)
                )  # fmt: skip
                pseudo_used.append(confident)
                self.steps += 1
                losses.append(per_member)
                correct_sum += correct
                decided_sum += decided
                fit_steps += 1
                # (over the fit: checked each step, so each step waits for its accuracy)
                if over_fit and fit_steps >= cfg.min_steps:
                    stop = float(correct_sum / max(float(decided_sum), 1.0)) >= cfg.stop_accuracy
                    if stop:
                        break
            loss = float(jnp.mean(jnp.stack(losses)))
            acc = float(correct_sum / max(float(decided_sum), 1.0))
            stop = stop or (not over_fit and acc >= cfg.stop_accuracy
                            and fit_steps >= cfg.min_steps)  # fmt: skip
            if stop:
                break
        self.fits += 1
        self._update_normalisation(arrays, train_idx, rng)
        metrics = {
            "reward/train_loss": loss,
            "reward/train_accuracy": acc,
            "reward/epochs": float(epochs),
            "reward/labels_train": float(len(train_idx)),
            "reward/labels_val": float(len(val_idx)),
        }
        if pseudo is not None:  # (the last epoch's share of unlabelled pairs trained on)
            metrics["reward/pseudo_label_share"] = float(jnp.mean(jnp.stack(pseudo_used)))
        if cfg.val_fraction == 0 and cfg.bootstrap:
            metrics.update(self._validate_out_of_bag(device_data, train_idx, target, weight))
        else:
            metrics.update(self._validate(device_data, val_idx, target))
        metrics["reward/fit_seconds"] = time.perf_counter() - t0
        return metrics

    def _member_probs(self, device_data, idx_all) -> np.ndarray:
        """P(right ≻ left) by each member for the labels `idx_all`: (M, len(idx_all))."""
        key = jax.random.key(0)
        logits = []
        b = min(self.config.batch_size, _bucket(len(idx_all)))
        for start in range(0, len(idx_all), b):
            idx = idx_all[start : start + b]
            m = len(idx)
            idx = np.concatenate([idx, np.zeros(b - m, np.int64)])
            logits.append(np.asarray(self._pair_logits(self.params, device_data, idx, key))[:, :m])
        logits = np.concatenate(logits, axis=1)
        return 1.0 / (1.0 + np.exp(-np.clip(logits, -50, 50)))

    def _validate(self, device_data, val_idx, target) -> dict[str, float]:
        if len(val_idx) == 0:
            return {}
        return self._scores(self._member_probs(device_data, val_idx).mean(0), target[val_idx])

    def _validate_out_of_bag(self, device_data, train_idx, target, weight) -> dict[str, float]:
        """Each label judged by the mean P of the members that never trained on it."""
        out = weight[train_idx] == 0  # (N, M)
        judged = train_idx[out.any(1)]
        if len(judged) < _MIN_LABELS_FOR_VALIDATION:
            return {}
        p = self._member_probs(device_data, judged)  # (M, V)
        mask = out[out.any(1)].T
        p_mean = (p * mask).sum(0) / mask.sum(0)
        return {**self._scores(p_mean, target[judged]), "reward/labels_val": float(len(judged))}

    def _scores(self, p_mean: np.ndarray, y: np.ndarray) -> dict[str, float]:
        eps = self.config.random_response
        # (members' mean P can round to 0 or 1 where no random answers are mixed in: clipped to
        # float32's resolution, so a sure model's loss is large rather than infinite)
        pc = np.clip((1 - eps) * p_mean + 0.5 * eps, 1e-7, 1 - 1e-7)
        loss = float(-(y * np.log(pc) + (1 - y) * np.log1p(-pc)).mean())
        decided = y != 0.5
        out = {"reward/val_loss": loss}
        if decided.any():
            out["reward/val_accuracy"] = float(((p_mean > 0.5) == (y > 0.5))[decided].mean())
        return out

    def _update_normalisation(self, arrays, train_idx, rng) -> None:
        if not self.config.normalize:
            return
        obs = np.concatenate([arrays["obs_left"][train_idx], arrays["obs_right"][train_idx]])
        action = np.concatenate(
            [arrays["action_left"][train_idx], arrays["action_right"][train_idx]]
        )
        obs, action = obs.reshape(-1, self.obs_dim), action.reshape(-1, self.action_dim)
        if len(obs) > 50_000:
            rows = rng.choice(len(obs), 50_000, replace=False)
            obs, action = obs[rows], action[rows]
        raw = self._raw(obs, action)  # (M, rows)
        self.shift = raw.mean(1).astype(np.float32)
        self.scale = np.maximum(raw.std(1), 1e-6).astype(np.float32)

    # ------------------------------------------------------------------------------- inference
    def _raw(self, obs: np.ndarray, action: np.ndarray) -> np.ndarray:
        """Un-normalised rewards of 2-D rows, in padded chunks: (M, rows)."""
        n = obs.shape[0]
        out = np.empty((self.num_members, n), np.float32)
        for start in range(0, n, _PREDICT_CHUNK):
            o = obs[start : start + _PREDICT_CHUNK]
            a = action[start : start + _PREDICT_CHUNK]
            m = len(o)
            size = min(_bucket(m), _PREDICT_CHUNK)
            if m < size:
                o, a = np.pad(o, ((0, size - m), (0, 0))), np.pad(a, ((0, size - m), (0, 0)))
            out[:, start : start + m] = np.asarray(self._raw_rewards(self.params, o, a))[:, :m]
        return out

    def member_rewards(self, obs: np.ndarray, action: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, np.float32)
        action = np.asarray(action, np.float32)
        lead = obs.shape[:-1]
        self._check_sizes(obs, action)
        raw = self._raw(obs.reshape(-1, self.obs_dim), action.reshape(-1, self.action_dim))
        return self._normalise(raw, self.shift, self.scale).reshape(self.num_members, *lead)

    def _check_sizes(self, obs, action) -> None:
        if obs.shape[-1] != self.obs_dim or action.shape[-1] != self.action_dim:
            raise ValueError(
                f"reward model expects obs of size {self.obs_dim} and actions of size "
                f"{self.action_dim}; got {obs.shape[-1]} and {action.shape[-1]}"
            )

    def _normalise(self, raw: np.ndarray, shift: np.ndarray, scale: np.ndarray) -> np.ndarray:
        return (raw - shift[:, None]) / scale[:, None] * self.config.target_std

    def dispatch_step_reward(self, obs: np.ndarray, action: jax.Array) -> Callable[[], np.ndarray]:
        """The learned reward of one step, computed asynchronously: returns a function that
        gives `predict(obs[None], action[None])` (up to float rounding: one step is computed
        apart from a batch).

        A training loop calls it with the action its agent has just dispatched and before it
        dispatches the agent's update: JAX runs CPU computations in dispatch order, so a reward
        asked for after the update would wait for the whole update."""
        obs = np.asarray(obs, np.float32)
        if obs.ndim != 1 or action.ndim != 1:
            raise ValueError(
                f"dispatch_step_reward takes one step: obs and action of shape (size,); got "
                f"{obs.shape} and {action.shape}"
            )
        self._check_sizes(obs, action)
        raw = self._raw_step_rewards(self.params, obs, action)
        shift, scale = self.shift, self.scale  # (a refit replaces them: keep this model's)
        return lambda: self._normalise(np.asarray(raw, np.float32), shift, scale).mean(0)

    # ------------------------------------------------------------------------------- persistence
    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        state = {
            "params": self.params,
            "opt_state": self.opt_state,
            "shift": self.shift,
            "scale": self.scale,
        }
        with atomic_write(path / "weights.msgpack", "wb") as f:
            f.write(flax.serialization.to_bytes(jax.device_get(state)))
        meta = {
            "kind": self.kind,
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "seed": self.seed,
            "steps": self.steps,
            "fits": self.fits,
            "config": dataclasses.asdict(self.config),
        }
        with atomic_write(path / "config.json", "w") as f:
            f.write(json.dumps(meta, indent=2))

    @classmethod
    def load(cls, path: str | Path) -> MLPRewardEnsemble:
        path = Path(path)
        meta = json.loads((path / "config.json").read_text())
        cfg = meta["config"]
        cfg["hidden_dims"] = tuple(cfg["hidden_dims"])
        model = cls(RewardConfig(**cfg), meta["obs_dim"], meta["action_dim"], meta["seed"])
        template = {
            "params": model.params,
            "opt_state": model.opt_state,
            "shift": model.shift,
            "scale": model.scale,
        }
        state = flax.serialization.from_bytes(template, (path / "weights.msgpack").read_bytes())
        model.params, model.opt_state = state["params"], state["opt_state"]
        model.shift, model.scale = np.asarray(state["shift"]), np.asarray(state["scale"])
        model.steps, model.fits = meta["steps"], meta["fits"]
        return model
