"""Network and optimiser state from a checkpoint's bytes, checked against what the settings make."""

from __future__ import annotations

import flax.serialization
import numpy as np
from flax.traverse_util import flatten_dict

from prefrl.rundir.checkpoints import IncompatibleCheckpoint


def state_from_bytes(template, data: bytes):
    """flax's `from_bytes` with the checks it leaves out: the checkpoint must hold the same arrays
    as `template` (what this run's settings make), of the same shapes. flax ignores arrays the
    template lacks and loads arrays of any shape, so a checkpoint of other network sizes would
    load and then fail at the first update (or train on quietly) far from its cause."""
    raw = flax.serialization.msgpack_restore(data)
    want = flatten_dict(flax.serialization.to_state_dict(template), sep="/")
    got = flatten_dict(raw, sep="/")
    for name in [*want, *got]:  # (in the state's order: networks before their optimisers)
        if name not in want or name not in got:
            where = "the checkpoint" if name in got else "these settings"
            raise IncompatibleCheckpoint(_advice(f"{name} is only in {where}"))
    for name, array in want.items():
        if np.shape(array) != np.shape(got[name]):
            raise IncompatibleCheckpoint(_advice(
                f"{name} has shape {np.shape(got[name])} there and {np.shape(array)} with these "
                "settings"
            ))  # fmt: skip
    return flax.serialization.from_state_dict(template, raw)


def _advice(what: str) -> str:
    return (
        f"the checkpoint does not fit this run's settings: {what}. A resumed run keeps its "
        "networks: leave out the flags that change their sizes (the run's own are in its "
        "config.json)"
    )
