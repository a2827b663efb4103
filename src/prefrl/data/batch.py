from typing import NamedTuple

import numpy as np


class Batch(NamedTuple):
    """A minibatch of transitions (numpy outside jitted code, jax arrays inside)."""

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
