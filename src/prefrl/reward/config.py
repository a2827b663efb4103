"""`RewardConfig`: the settings of the default reward model, an ensemble of MLPs, and of the
label augmentation its fits may use."""

from __future__ import annotations

import math
from dataclasses import dataclass

from prefrl.fielddocs import document_fields
from prefrl.rundir.config import check_fields, check_own_types


@document_fields
@dataclass(frozen=True)
class RewardConfig:
    """The reward model: an ensemble of MLPs (defaults: PEBBLE's 3 x (3x256), tanh output)."""

    members: int = 3
    """Reward networks in the ensemble; query selection by disagreement uses their spread."""
    hidden_dims: tuple[int, ...] = (256, 256, 256)
    """Hidden layer widths of each member's MLP (Christiano: 64, 64)."""
    output: str = "tanh"
    """"tanh" (PEBBLE; suits bounded rewards) or "linear" (Christiano; for rewards that grow
    without bound, e.g. with speed, where tanh saturates once the agent is fast)."""
    lr: float = 3e-4
    """AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay (L2); Christiano tunes it so validation loss is 1.1-1.5x training loss."""
    dropout: float = 0.0
    """Dropout rate in each member's hidden layers (0: none)."""
    batch_size: int = 128
    """Pairs per gradient step."""
    max_epochs: int = 20
    """Passes over the labels per fit at most (the model is warm-started from the last fit;
    a fit also stops at `stop_accuracy`)."""
    refit_epochs: int | None = None
    """Passes at most in every fit after the first (None: `max_epochs`). The model is warm-started,
    so a refit only has to take in the labels that arrived since the last one; imitation's
    preference comparisons uses 3 epochs per round. Caps the cost of fits as labels accumulate."""
    min_steps: int = 50
    """Gradient steps per fit at least, refits included (more epochs while labels are few)."""
    stop_accuracy: float = 0.97
    """A fit stops once the ensemble's training accuracy reaches this (PEBBLE); above 1: never."""
    stop_measured_over: str = "epoch"
    """What `stop_accuracy` is measured on: "epoch", the last pass over the labels, checked at
    its end (PEBBLE); "fit", every step of the fit so far, checked after each step (QPA's
    dm_control fits: a warm model that already fits the labels stops at once, one that misses
    the new ones at first trains on until its running mean catches up)."""
    val_fraction: float = 1.0 / math.e
    """Share of the labels held out for validation (Christiano: 1/e). 0: every label is trained
    on (PEBBLE), and validation accuracy is the out-of-bag estimate: each label judged by the
    members whose bootstrap left it out (about 1/e of them)."""
    bootstrap: bool = True
    """Each member trains on its own bootstrap resample of the training labels."""
    random_response: float = 0.1
    """P' = (1 - ε) P + ε / 2: the teacher is assumed to answer at random with probability ε."""
    normalize: bool = True
    """Each member's output shifted and scaled to mean 0, std `target_std` on the labelled steps."""
    target_std: float = 1.0
    """1 on MuJoCo, 0.05 on Atari (Christiano)."""
    crops: int = 0
    """Label augmentation (QPA: 20): each labelled pair of a batch is trained on as this many
    random crops of its segments, the label kept (0: the whole segments, once)."""
    crop_shorter_by: tuple[int, int] = (5, 15)
    """A crop is shorter than its segment by a number of steps drawn uniformly from this range
    (QPA: 5 to 15); both segments of a pair are cut to one length, at independent starts."""
    pseudo_label_threshold: float | None = None
    """SURF's pseudo-labels: unlabelled pairs whose preference a member predicts above this
    probability (SURF: 0.99) are trained on with that member's own label. None: off. The
    online loop draws the pairs from its pool of segments; never with a person's labels
    unless asked for explicitly."""
    pseudo_label_ratio: int = 4
    """Unlabelled pairs per labelled pair in each batch (SURF's mu: 4)."""
    pseudo_label_weight: float = 1.0
    """The pseudo-labels' loss, relative to the labels' (SURF's lambda_u: 1)."""

    def __post_init__(self) -> None:
        check_own_types(self)
        checks = {
            "members": (self.members >= 1, "at least 1"),
            "hidden_dims": (
                bool(self.hidden_dims) and all(h > 0 for h in self.hidden_dims),
                "one or more positive widths",
            ),
            "output": (self.output in ("tanh", "linear"), "'tanh' or 'linear'"),
            "lr": (self.lr > 0, "a positive number"),
            "weight_decay": (self.weight_decay >= 0, ">= 0"),
            "dropout": (0 <= self.dropout < 1, "a rate in [0, 1)"),
            "batch_size": (self.batch_size >= 1, "a positive integer"),
            "max_epochs": (self.max_epochs >= 1, "a positive integer"),
            "refit_epochs": (
                self.refit_epochs is None or self.refit_epochs >= 1,
                "a positive integer or None",
            ),
            "min_steps": (self.min_steps >= 0, ">= 0"),
            "stop_accuracy": (self.stop_accuracy > 0, "a positive value (above 1: never stop)"),
            "stop_measured_over": (self.stop_measured_over in ("epoch", "fit"), '"epoch" or "fit"'),
            "val_fraction": (0 <= self.val_fraction < 1, "a value in [0, 1)"),
            "random_response": (0 <= self.random_response < 1, "a value in [0, 1)"),
            "target_std": (self.target_std > 0, "a positive number"),
            "crops": (self.crops >= 0, ">= 0 (0: no crops)"),
            "crop_shorter_by": (
                len(self.crop_shorter_by) == 2
                and 0 <= min(self.crop_shorter_by)
                and self.crop_shorter_by[0] <= self.crop_shorter_by[1],
                "two step counts (fewest, most) with 0 <= fewest <= most",
            ),
            "pseudo_label_threshold": (
                self.pseudo_label_threshold is None or 0.5 <= self.pseudo_label_threshold < 1,
                "a probability in [0.5, 1), or None (off)",
            ),
            "pseudo_label_ratio": (self.pseudo_label_ratio >= 1, "a positive integer"),
            "pseudo_label_weight": (self.pseudo_label_weight >= 0, ">= 0"),
        }
        check_fields(self, checks, "RewardConfig.")
