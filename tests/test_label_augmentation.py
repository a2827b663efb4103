"""Label augmentation (QPA, SURF): crops of a labelled pair keep its label and stay inside its
segments; pseudo-labels are taken only above their threshold; fits with either learn."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_reward import ACT, OBS, SMALL, H, _labelled, _segments

from prefrl.reward import MLPRewardEnsemble, RewardConfig, pearson
from prefrl.reward.augment import crop_masks, cropped_logits, pseudo_labels


def test_crops_have_one_length_per_pair_in_range_and_stay_inside_their_segments():
    left, right = (np.asarray(m) for m in crop_masks(jax.random.key(0), 20, 64, 50, (5, 15)))
    assert left.shape == right.shape == (20, 64, 50)
    lengths = left.sum(-1)
    assert (lengths == right.sum(-1)).all() and lengths.min() >= 35 and lengths.max() <= 45
    assert len(np.unique(lengths)) > 5  # (drawn, not fixed)
    for mask in (left, right):  # one contiguous run of steps each
        assert (np.abs(np.diff(mask.astype(int), axis=-1)).sum(-1) <= 2).all()
    starts_left, starts_right = left.argmax(-1), right.argmax(-1)
    assert (starts_left != starts_right).mean() > 0.5  # independent starts


def test_every_crop_of_a_pair_keeps_the_pairs_label():
    """Right segment better at every step: every crop of it beats every crop of the left."""
    step_left = jnp.zeros((3, 8, 50))
    step_right = jnp.ones((3, 8, 50))
    masks = crop_masks(jax.random.key(1), 20, 8, 50, (5, 15))
    logits = cropped_logits(step_left, step_right, masks)
    assert logits.shape == (3, 160) and (np.asarray(logits) >= 35).all()


def test_pseudo_labels_only_above_their_threshold():
    logits = jnp.array([[-5.0, -1.0, 0.2, 3.0, 6.0]])
    label, confident = pseudo_labels(logits, 0.99)
    assert np.asarray(label).tolist() == [[0, 0, 1, 1, 1]]
    assert np.asarray(confident).tolist() == [[True, False, False, False, True]]


def _fit(config: RewardConfig, unlabelled=None) -> tuple[MLPRewardEnsemble, dict]:
    model = MLPRewardEnsemble(config, OBS, ACT, seed=0)
    return model, model.fit(_labelled(60), unlabelled)


def test_a_fit_on_crops_or_with_pseudo_labels_learns_from_few_labels():
    test = _segments(np.random.default_rng(9), 200)
    rng = np.random.default_rng(5)
    left, right = _segments(rng, 500), _segments(rng, 500)
    unlabelled = {"obs_left": left.obs, "action_left": left.action, "obs_right": right.obs,
                  "action_right": right.action}  # fmt: skip
    for config, extra in [
        (SMALL.__class__(**{**SMALL.__dict__, "crops": 8, "crop_shorter_by": (2, 4)}), None),
        (SMALL.__class__(**{**SMALL.__dict__, "pseudo_label_threshold": 0.9}), unlabelled),
    ]:
        model, metrics = _fit(config, extra)
        assert np.isfinite(metrics["reward/train_loss"]), metrics
        predicted = model.predict(test.obs, test.action).sum(-1)
        assert pearson(predicted, test.true_returns()) > 0.7, config


def test_crops_longer_than_the_segments_are_refused_naming_the_field():
    config = SMALL.__class__(**{**SMALL.__dict__, "crops": 4, "crop_shorter_by": (5, H)})
    with pytest.raises(ValueError, match=r"crop_shorter_by=\(5, 10\) leaves nothing of 10-step"):
        _fit(config)
    for bad, message in [({"crops": -1}, "crops"), ({"crop_shorter_by": (6, 2)}, "crop_shorter_by"),
                         ({"pseudo_label_threshold": 0.3}, "pseudo_label_threshold")]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            RewardConfig(**bad)


def test_a_fit_judged_over_the_whole_fit_stops_at_once_when_warm_and_trains_on_when_not():
    """QPA's dm_control rule (`stop_measured_over="fit"`): the accuracy summed over every step of
    the fit so far, checked after each step. A model that already fits the labels stops after
    its first step; a fresh one trains for steps while its early misses weigh on the mean."""
    config = RewardConfig(hidden_dims=(32, 32), max_epochs=300, batch_size=64, min_steps=1,
                          stop_accuracy=0.9, stop_measured_over="fit", members=1,
                          bootstrap=False, val_fraction=0.0)  # fmt: skip
    model = MLPRewardEnsemble(config, OBS, ACT, seed=0)
    data = _labelled(64)  # (one batch an epoch)
    first = model.fit(data)
    assert 5 < first["reward/epochs"] < 300 and first["reward/train_accuracy"] >= 0.9, first
    again = model.fit(data)  # warm: its first step already fits the labels
    assert again["reward/epochs"] == 1 and again["reward/train_accuracy"] >= 0.9, again
    epoch_rule = RewardConfig(**{**config.__dict__, "stop_measured_over": "epoch"})
    fresh = MLPRewardEnsemble(epoch_rule, OBS, ACT, seed=0).fit(data)
    assert fresh["reward/epochs"] < first["reward/epochs"]  # (no early misses to outweigh)
    with pytest.raises(ValueError, match=r"stop_measured_over='step' is invalid: expected "):
        RewardConfig(stop_measured_over="step")
