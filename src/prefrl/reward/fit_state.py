"""A reward fit that can stop at an epoch boundary and resume as the same fit: the epoch loop's
whole state (parameters, optimiser, best so far, history, random keys) saved atomically."""

from __future__ import annotations

import json
from pathlib import Path

import flax.serialization
import jax
import jax.numpy as jnp

from prefrl.rundir.atomic import atomic_write
from prefrl.rundir.pytree import state_from_bytes

FIT_STATE = "fit_state.json"


class FitStopped(Exception):
    """A fit stopped at an epoch boundary (its state saved), asked to by `should_stop`."""

    def __init__(self, epochs_done: int, epochs: int):
        super().__init__(f"the fit stopped after epoch {epochs_done} of {epochs}")
        self.epochs_done, self.epochs = epochs_done, epochs


def save_fit_state(folder: Path, params, opt_state, best, history, key, rng, epoch) -> None:
    """Everything the epoch loop carries, so that a resumed fit is the same fit."""
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"params": params, "opt_state": opt_state, "best_params": best[1],
              "key": jax.random.key_data(key)}  # fmt: skip
    with atomic_write(folder / "fit_state.msgpack", "wb") as f:
        f.write(flax.serialization.to_bytes(jax.device_get(arrays)))
    meta = {"next_epoch": epoch, "best_loss": float(best[0]), "best_epoch": best[2],
            "history": history, "rng": rng.bit_generator.state}  # fmt: skip
    with atomic_write(folder / FIT_STATE, "w") as f:  # (last: it marks the state complete)
        f.write(json.dumps(meta))


def load_fit_state(folder: Path, params, opt_state, rng):
    meta = json.loads((folder / FIT_STATE).read_text())
    template = {"params": params, "opt_state": opt_state, "best_params": params,
                "key": jax.random.key_data(jax.random.key(0))}  # fmt: skip
    arrays = state_from_bytes(template, (folder / "fit_state.msgpack").read_bytes())
    rng.bit_generator.state = meta["rng"]
    best = (meta["best_loss"], arrays["best_params"], meta["best_epoch"])
    key = jax.random.wrap_key_data(jnp.asarray(arrays["key"]))
    return arrays["params"], arrays["opt_state"], best, meta["history"], key, meta["next_epoch"]
