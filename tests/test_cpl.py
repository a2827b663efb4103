"""CPL: the loss, the update with its regularisers, ratings -> pairs, the scripted rater."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from prefrl.agents.cpl import CPL, CPLConfig, cpl_loss
from prefrl.agents.sac import SAC, SACConfig
from prefrl.data.segments import Label
from prefrl.feedback.ratings import ratings_to_pairs, scripted_ratings


def test_cpl_loss_matches_its_definition():
    a_left, a_right = jnp.array([1.0, -2.0, 0.3]), jnp.array([0.5, 1.0, 0.3])
    target, weight = jnp.array([1.0, 0.0, 0.5]), jnp.ones(3)
    lam = 0.5

    # -log(exp A+ / (exp A+ + exp(λ A-))) for the preferred A+; equal: half each order.
    def nll(plus, minus):
        return -np.log(np.exp(plus) / (np.exp(plus) + np.exp(lam * minus)))

    expected = [nll(0.5, 1.0), nll(-2.0, 1.0), 0.5 * (nll(0.3, 0.3) + nll(0.3, 0.3))]
    got = float(cpl_loss(a_left, a_right, target, weight, lam))
    np.testing.assert_allclose(got, np.mean(expected), rtol=1e-6)
    # Padding rows (weight 0) do not count.
    padded = cpl_loss(jnp.append(a_left, 9.0), jnp.append(a_right, -9.0),
                      jnp.append(target, 1.0), jnp.append(weight, 0.0), lam)  # fmt: skip
    np.testing.assert_allclose(float(padded), got, rtol=1e-6)


def test_only_a_bias_below_one_rewards_raising_every_likelihood():
    """λ < 1: adding the same c to both advantages lowers the loss without changing which
    segment is more likely, and once advantages are positive a wrongly ordered pair costs
    almost nothing (on HalfCheetah the training loss fell to 0.0002 at 76% training accuracy).
    λ = 1: the loss depends on the difference only."""
    a_left, a_right = jnp.array([-60.0, -90.0]), jnp.array([-80.0, -70.0])
    target, weight = jnp.array([1.0, 0.0]), jnp.ones(2)
    for lam, falls in ((0.5, True), (1.0, False)):
        losses = [
            float(cpl_loss(a_left + c, a_right + c, target, weight, lam)) for c in (0, 50, 100)
        ]
        if falls:
            assert losses[0] > losses[1] > losses[2], losses
        else:
            np.testing.assert_allclose(losses, losses[0], rtol=1e-6)
    # Right preferred but less likely (30 < 40): with λ = 0.5 that costs softplus(20 - 30).
    one = jnp.ones(1)
    assert float(cpl_loss(jnp.array([40.0]), jnp.array([30.0]), one, one, 0.5)) < 1e-4
    assert float(cpl_loss(jnp.array([40.0]), jnp.array([30.0]), one, one, 1.0)) > 9.9


def _pairs(rng, n=64, t=10, obs_dim=3):
    """Segments whose actions are +0.5 (preferred) or -0.5 (not), with a little noise."""
    obs = rng.normal(size=(2, n, t, obs_dim)).astype(np.float32)
    good = 0.5 + 0.05 * rng.normal(size=(n, t, 1))
    bad = -0.5 + 0.05 * rng.normal(size=(n, t, 1))
    right_good = rng.random(n) < 0.5
    action_right = np.where(right_good[:, None, None], good, bad).astype(np.float32)
    action_left = np.where(right_good[:, None, None], bad, good).astype(np.float32)
    return {
        "obs_left": obs[0], "action_left": action_left, "obs_right": obs[1],
        "action_right": action_right, "target": right_good.astype(np.float32),
        "weight": np.ones(n, np.float32),
    }  # fmt: skip


@pytest.mark.parametrize("conservative", ["none", "mse", "kl", "bc"])
def test_cpl_moves_the_policy_towards_the_preferred_actions(conservative):
    rng = np.random.default_rng(0)
    sac = SAC(SACConfig(hidden_dims=(32, 32)), 3, 1)
    original = sac.init(jax.random.key(0)).actor_params
    weight = 0.0 if conservative == "none" else 0.01
    cpl = CPL(
        CPLConfig(lr=1e-3, conservative=conservative, conservative_weight=weight), 1, (32, 32)
    )
    state = cpl.init(original)
    batch = _pairs(rng)
    before = float(np.asarray(sac.act(original, batch["obs_left"][:, 0], None, 0, True)).mean())
    for _ in range(150):
        state, metrics = cpl.update(state, original, batch)
    after = float(np.asarray(sac.act(state.params, batch["obs_left"][:, 0], None, 0, True)).mean())
    assert after > before + 0.2, (before, after)
    assert float(metrics["accuracy"]) > 0.9
    assert all(np.isfinite(float(v)) for v in metrics.values())
    assert "advantage_mean" in metrics
    if conservative in ("mse", "kl"):
        assert float(metrics["conservative_loss"]) > 0  # it has moved away, and is pulled back
    # The original parameters are untouched (own copies).
    leaves = jax.tree.leaves(jax.tree.map(lambda a, b: jnp.abs(a - b).max(), original,
                                          sac.init(jax.random.key(0)).actor_params))  # fmt: skip
    assert max(float(x) for x in leaves) == 0.0


def test_a_strong_conservative_term_keeps_the_policy_close():
    rng = np.random.default_rng(1)
    sac = SAC(SACConfig(hidden_dims=(32, 32)), 3, 1)
    original = sac.init(jax.random.key(0)).actor_params
    batch = _pairs(rng)
    moved = {}
    for weight in (0.0, 100.0):
        cpl = CPL(CPLConfig(lr=1e-3, conservative="mse", conservative_weight=weight), 1, (32, 32))
        state = cpl.init(original)
        for _ in range(100):
            state, _ = cpl.update(state, original, batch)
        a0 = np.asarray(sac.act(original, batch["obs_left"][:, 0], None, 0, True))
        a1 = np.asarray(sac.act(state.params, batch["obs_left"][:, 0], None, 0, True))
        moved[weight] = float(np.abs(a1 - a0).mean())
    assert moved[100.0] < 0.3 * moved[0.0], moved


def test_mean_only_leaves_the_spread_to_the_regulariser():
    """With `mean_only` the preference loss has no gradient on the log-std head, yet still moves
    the mean towards the preferred actions; without it, the same pairs change that head."""
    rng = np.random.default_rng(2)
    sac = SAC(SACConfig(hidden_dims=(32, 32)), 3, 1)
    original = sac.init(jax.random.key(0)).actor_params
    batch = _pairs(rng)
    a0 = float(np.asarray(sac.act(original, batch["obs_left"][:, 0], None, 0, True)).mean())
    head_change = {}
    for mean_only in (True, False):
        config = CPLConfig(lr=1e-3, conservative="none", conservative_weight=0.0, bias=1.0,
                           mean_only=mean_only)  # fmt: skip
        cpl = CPL(config, 1, (32, 32))
        state = cpl.init(original)
        for _ in range(100):
            state, metrics = cpl.update(state, original, batch)
        head = state.params["params"]["Dense_1"]["kernel"] - original["params"]["Dense_1"]["kernel"]
        head_change[mean_only] = float(jnp.abs(head).max())
        a1 = float(np.asarray(sac.act(state.params, batch["obs_left"][:, 0], None, 0, True)).mean())
        assert a1 > a0 + 0.2, (mean_only, a0, a1)
        assert float(metrics["accuracy"]) > 0.9
    assert head_change[True] == 0.0
    assert head_change[False] > 1e-3, head_change


def test_bad_cpl_settings_are_refused():
    with pytest.raises(ValueError, match="CPL bias=1.5 is invalid"):
        CPLConfig(bias=1.5)
    with pytest.raises(ValueError, match="CPL conservative='l2' is invalid"):
        CPLConfig(conservative="l2")
    # Run settings are named as their command-line flags.
    from prefrl.finetuning.learner import FinetuneConfig
    from prefrl.offline.cpl import OfflineCPLConfig

    with pytest.raises(ValueError, match=r"--max-pairs=0 is invalid: expected >= 1 or None"):
        FinetuneConfig(max_pairs=0)
    with pytest.raises(ValueError, match=r"--bc-steps=-1 is invalid"):
        OfflineCPLConfig(bc_steps=-1)
    with pytest.raises(ValueError, match=r"--val-fraction=1.0 is invalid"):
        OfflineCPLConfig(val_fraction=1.0)


def test_ratings_become_every_pair_once():
    pairs = ratings_to_pairs([10, 11, 12, 13], [80, 20, 80, 50])
    assert len(pairs.labels) == 6  # 4 * 3 / 2
    as_dict = {(int(a), int(b)): Label(int(x)) for a, b, x in zip(*pairs, strict=True)}
    assert as_dict[(10, 11)] == Label.LEFT
    assert as_dict[(10, 12)] == Label.EQUAL
    assert as_dict[(11, 13)] == Label.RIGHT
    # A segment rated twice counts once, with its mean rating.
    twice = ratings_to_pairs([1, 1, 2], [90, 10, 60])
    assert len(twice.labels) == 1 and twice.labels[0] == Label.RIGHT  # mean 50 < 60
    with pytest.raises(ValueError, match="rating 0 is invalid"):
        ratings_to_pairs([1, 2], [0, 50])
    with pytest.raises(ValueError, match="rating 101 is invalid"):
        ratings_to_pairs([1, 2], [101, 50])
    with pytest.raises(ValueError, match="all have the same rating"):
        ratings_to_pairs([1, 2, 3], [40, 40, 40])


def test_pairs_within_families_only():
    # Segments 1-3 start from one state, 4-5 from another, 6 has no family.
    ids, ratings = [1, 2, 3, 4, 5, 6], [10, 50, 90, 30, 20, 70]
    pairs = ratings_to_pairs(ids, ratings, families=[0, 0, 0, 1, 1, None])
    got = {(int(a), int(b)): Label(int(x)) for a, b, x in zip(*pairs, strict=True)}
    assert got == {
        (1, 2): Label.RIGHT, (1, 3): Label.RIGHT, (2, 3): Label.RIGHT, (4, 5): Label.LEFT
    }  # fmt: skip
    assert len(ratings_to_pairs(ids, ratings).labels) == 15  # without families: every pair
    with pytest.raises(ValueError, match="no two rated segments are of the same family"):
        ratings_to_pairs([1, 2, 3], [10, 50, 90], families=[0, 1, None])
    with pytest.raises(ValueError, match="3 ratings and 2 families"):
        ratings_to_pairs([1, 2, 3], [10, 50, 90], families=[0, 0])


def test_scripted_ratings_follow_the_score():
    scores = np.array([3.0, -1.0, 10.0, 4.0])
    exact = scripted_ratings(scores)
    assert exact.tolist() == [37, 1, 100, 46]  # 1 + 99 * (s - min) / (max - min)
    noisy = scripted_ratings(np.linspace(0, 1, 200), noise=0.1, seed=0)
    assert noisy.min() >= 1 and noisy.max() <= 100
    assert 0.9 < np.corrcoef(noisy, np.linspace(0, 1, 200))[0, 1] < 1.0


def test_rater_prefers_a_property_at_equal_progress():
    from prefrl.data.segments import Segments
    from prefrl.feedback.raters import segment_scores

    # Returns 0, 1, 9, 10 (two bands of 5), actions large/small inside each band.
    n, t = 4, 5
    reward = np.repeat(np.array([0.0, 1.0, 9.0, 10.0])[:, None] / t, t, axis=1)
    action = np.array([0.1, 0.9, 0.2, 0.8])[:, None, None] * np.ones((n, t, 2))
    segs = Segments(
        obs=np.zeros((n, t, 3), np.float32), action=action.astype(np.float32),
        reward=reward.astype(np.float32), state=np.zeros((n, t, 1)), id=np.arange(n),
        step=np.zeros(n, np.int64), episode=np.zeros(n, np.int64), start=np.zeros(n, np.int64),
    )  # fmt: skip
    scores = segment_scores(segs, "low-action@return/2")
    # The higher band always wins; inside a band the smaller actions do.
    assert np.argsort(scores).tolist() == [1, 0, 3, 2]
    # One band: only the property counts; many bands: only progress does.
    assert np.argsort(segment_scores(segs, "low-action@return/1")).tolist() == [1, 3, 2, 0]
    assert np.argsort(segment_scores(segs, "high-action@return/1")).tolist() == [0, 2, 3, 1]
    assert np.argsort(segment_scores(segs, "low-action@return/100")).tolist() == [0, 1, 2, 3]
    assert np.argsort(segment_scores(segs, "low-obs:1@return")).tolist() == [0, 1, 2, 3]
    for bad in ("low-action@return/0", "low-action@return/x"):
        with pytest.raises(ValueError, match="band count"):
            segment_scores(segs, bad)
    with pytest.raises(ValueError, match="'fast@return' is invalid|rater 'fast'"):
        segment_scores(segs, "fast@return")
    # Weighted standardised scores: a small weight on the property keeps progress first, a
    # large one lets it decide.
    assert np.argsort(segment_scores(segs, "return+0.05*low-action")).tolist() == [0, 1, 2, 3]
    assert np.argsort(segment_scores(segs, "return+100*low-action")).tolist() == [1, 3, 2, 0]
    with pytest.raises(ValueError, match="weight in 'x\\*low-action' is not a number"):
        segment_scores(segs, "return+x*low-action")


def test_siblings_share_their_start_and_pair_with_each_other(tmp_path):
    """`--siblings`: families of segments from one simulator state that differ by their action
    noise; fine-tuning with pairs="siblings" compares only segments of one family."""
    from conftest import short_sac_run

    from prefrl.feedback.raters import rate_scripted
    from prefrl.finetuning.learner import FinetuneConfig, finetune
    from prefrl.finetuning.rating_runs import make_rating_run, policy_segments

    run = short_sac_run(tmp_path, "sac", steps=600)
    segments, infos = policy_segments([run], [0.5], count=12, length=10, siblings=3)
    family = np.array([i["family"] for i in infos])
    assert len(segments) >= 12 and len(set(family.tolist())) >= 4
    for f in set(family.tolist()):
        members = segments[np.flatnonzero(family == f)]
        assert len(members) >= 2
        np.testing.assert_array_equal(
            members.state[:, 0], members.state[:1, 0].repeat(len(members), 0)
        )
        np.testing.assert_array_equal(members.start, members.start[0])
        assert not np.allclose(members.action[0], members.action[1])  # their own noise
    # With several checkpoints, a family holds siblings of each, from the first one's states.
    ckpts = sorted((run / "checkpoints").glob("step_*"))
    assert len(ckpts) == 2  # at 500 and 600 steps
    mixed, mixed_infos = policy_segments(ckpts, [0.5], count=8, length=10, siblings=2)
    by_family: dict[int, list[int]] = {}
    for i, info in enumerate(mixed_infos):
        by_family.setdefault(info["family"], []).append(i)
    assert len(by_family) == 2
    for members in by_family.values():
        assert len(members) == 2 * len(ckpts)
        assert {mixed_infos[i]["checkpoint"] for i in members} == {str(c) for c in ckpts}
        first = mixed.state[members[0], 0]
        assert all(np.array_equal(mixed.state[i, 0], first) for i in members)
    with pytest.raises(ValueError, match=r"--siblings 3 needs every --noise above 0"):
        policy_segments([run], [0.0, 0.5], count=4, length=10, siblings=3)
    with pytest.raises(ValueError, match=r"--siblings 0 is invalid"):
        policy_segments([run], [0.5], count=4, length=10, siblings=0)
    rating_run = make_rating_run(tmp_path / "rate", "toy:point-reach", segments, infos, None)
    rate_scripted(rating_run, "low-action")
    sizes = np.unique(family, return_counts=True)[1]
    config = FinetuneConfig(
        policy=run, ratings=rating_run, pairs="siblings", steps=5, eval_episodes=1,
        runs_dir=tmp_path, name="cpl", cpl=CPLConfig(batch_size=4),
    )  # fmt: skip
    result = finetune(config)
    assert result.details["pairs"] == int((sizes * (sizes - 1) // 2).sum())
    assert result.details["metrics"]["paired"] == "siblings"
    # Segments collected without siblings have no family to pair within.
    plain, plain_infos = policy_segments([run], [0.5], count=4, length=10)
    plain_run = make_rating_run(tmp_path / "plain", "toy:point-reach", plain, plain_infos, None)
    rate_scripted(plain_run, "low-action")
    with pytest.raises(ValueError, match="no two rated segments are of the same family"):
        finetune(dataclasses.replace(config, ratings=plain_run, name="plain"))
    with pytest.raises(ValueError, match=r"--pairs='pairs' is invalid: expected all or siblings"):
        FinetuneConfig(pairs="pairs")


def test_collect_makes_the_segments_asked_for_where_they_do_not_divide(tmp_path, capsys):
    """6 segments from 2 checkpoints x 2 noise levels are 6 (2, 2, 1, 1), not 4 x 2; none is
    refused."""
    from collections import Counter

    from conftest import short_sac_run

    from prefrl.cli import main
    from prefrl.finetuning.rating_runs import policy_segments

    run = short_sac_run(tmp_path, "sac", steps=600)
    ckpts = sorted((run / "checkpoints").glob("step_*"))
    segments, infos = policy_segments(ckpts, [0.0, 0.3], count=6, length=10)
    assert len(segments) == len(infos) == 6
    shares = Counter((i["checkpoint"], i["noise"]) for i in infos)
    assert len(ckpts) == 2 and sorted(shares.values()) == [1, 1, 2, 2]
    with pytest.raises(ValueError, match="--segments 0 is invalid: expected a positive integer"):
        policy_segments(ckpts, [0.0], count=0, length=10)
    # Siblings come in whole families: more than asked, and said why.
    assert main(["collect", "--checkpoints", str(ckpts[-1]), "--noise", "0.5", "--siblings",
                 "3", "--segments", "4", "--length", "10", "--clip-size", "0", "--out",
                 str(tmp_path / "r")]) == 0  # fmt: skip
    assert ("6 segments of 10 steps from 1 checkpoint(s) x noise [0.5], in families of 3 "
            "siblings (--segments 4 asked: families are whole, 3 segments each") in (
        capsys.readouterr().out)  # fmt: skip


def test_collect_rate_and_finetune_end_to_end(tmp_path, monkeypatch, capsys):
    """Checkpoints x noise levels -> a rating run with clips -> scripted ratings -> every pair ->
    CPL -> a SAC checkpoint that `prefrl eval` reads; bad input refused."""
    from conftest import short_sac_run

    from prefrl.cli import main
    from prefrl.feedback.raters import rate_scripted
    from prefrl.feedback.store import FeedbackStore, run_uid
    from prefrl.finetuning.learner import FinetuneConfig, finetune
    from prefrl.finetuning.rating_runs import make_rating_run, policy_segments
    from prefrl.training.policies import load_policy

    run = short_sac_run(tmp_path, "sac")
    ckpts = sorted((run / "checkpoints").glob("step_*"))
    segments, infos = policy_segments(ckpts, [0.0, 0.3], count=12, length=10)
    assert len(segments) == 12 and {i["noise"] for i in infos} == {0.0, 0.3}
    assert {i["checkpoint"] for i in infos} == {str(c) for c in ckpts}
    rating_run = make_rating_run(tmp_path / "rate", "toy:point-reach", segments, infos, 32)
    assert len(list((rating_run / "clips").glob("*.mp4"))) == 12
    assert rate_scripted(rating_run, "return") == 12
    with FeedbackStore(rating_run) as store:
        rated = store.ratings(store.run_id(run_uid(rating_run)))
        assert len(rated) == 12 and {who for _, _, who in rated} == {"scripted:return"}
    assert rate_scripted(rating_run, "low-action") == 12  # a second rater replaces the first
    with FeedbackStore(rating_run) as store:
        rated = store.ratings(store.run_id(run_uid(rating_run)))
        assert len(rated) == 12 and {who for _, _, who in rated} == {"scripted:low-action"}
    assert rate_scripted(rating_run, "return") == 12
    result = finetune(
        FinetuneConfig(
            policy=run,
            ratings=rating_run,
            steps=30,
            eval_episodes=2,
            log_interval=10,
            runs_dir=tmp_path,
            name="cpl",
            cpl=CPLConfig(batch_size=8),
        )
    )
    # 12 * 11 / 2 (minus equal-rating pairs, which stay as "equal")
    assert result.details["pairs"] == 66
    assert np.isfinite(result.final_eval.returns).all()
    assert main(["eval", str(result.run_dir), "--episodes", "2"]) == 0
    # The NaN guard: a step that makes the parameters NaN stops the run, names the step and
    # keeps the last good parameters as its checkpoint.
    import prefrl.finetuning.learner as finetune_module

    class Poisoned(finetune_module.CPL):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            real, self.calls = self.update, 0

            def update(state, ref, batch):
                self.calls += 1
                state, m = real(state, ref, batch)
                if self.calls == 3:
                    state = state.replace(params=jax.tree.map(lambda x: x * jnp.nan, state.params))
                    m = {**m, "params_finite": jnp.float32(0.0)}
                return state, m

            self.update = update

    monkeypatch.setattr(finetune_module, "CPL", Poisoned)
    with pytest.raises(FloatingPointError, match="CPL step 3 gave NaN"):
        finetune(
            FinetuneConfig(
                policy=run,
                ratings=rating_run,
                steps=10,
                eval_episodes=2,
                runs_dir=tmp_path,
                name="nan",
                cpl=CPLConfig(batch_size=8),
            )
        )
    kept = load_policy(tmp_path / "nan")
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(kept.state.actor_params))
    monkeypatch.undo()
    # Bad input: checkpoints of two envs in one collect; a policy of another env than the ratings.
    other = short_sac_run(tmp_path, "pendulum", env="Pendulum-v1", steps=300)
    with pytest.raises(ValueError, match="different environments"):
        policy_segments([ckpts[0], other], [0.0], count=2, length=5)
    # Episodes that never last a segment's length fail, rather than roll out for ever.
    with pytest.raises(ValueError, match=r"50 episodes in a row .* ended before --length 100000"):
        policy_segments([ckpts[0]], [0.0], count=2, length=100_000)
    # The regret rater: the judge's own noise-free actions have no regret, noisy ones do; the
    # judge must be of the segments' env.
    from prefrl.feedback.raters import segment_scores

    own, own_infos = policy_segments([ckpts[-1]], [0.0, 0.5], count=8, length=10)
    regret = segment_scores(own, f"regret:{ckpts[-1]}", "toy:point-reach")
    noisy = np.array([i["noise"] > 0 for i in own_infos])
    np.testing.assert_allclose(regret[~noisy], 0.0, atol=1e-4)
    assert np.abs(regret[noisy]).min() > 1e-3
    banded = segment_scores(own, f"low-action@regret:{ckpts[-1]}/2", "toy:point-reach")
    assert banded.shape == (8,) and np.isfinite(banded).all()
    with pytest.raises(ValueError, match="its critic is of Pendulum-v1"):
        segment_scores(own, f"regret:{other}", "toy:point-reach")
    with pytest.raises(ValueError, match="ratings in .* are of 'toy:point-reach' segments"):
        finetune(FinetuneConfig(policy=other, ratings=rating_run, runs_dir=tmp_path, name="x"))
    assert not (tmp_path / "x").exists()
    # The same through the CLI.
    out = tmp_path / "cli-rate"
    assert (
        main(
            [
                "collect",
                "--checkpoints",
                str(ckpts[-1]),
                "--noise",
                "0",
                "0.5",
                "--segments",
                "6",
                "--length",
                "10",
                "--out",
                str(out),
                "--clip-size",
                "0",
            ]
        )
        == 0
    )
    assert main(["rate", str(out), "--rater", "low-action"]) == 0
    assert (
        main(
            [
                "finetune",
                "--policy",
                str(run),
                "--ratings",
                str(out),
                "--steps",
                "10",
                "--eval-episodes",
                "2",
                "--runs-dir",
                str(tmp_path),
                "--name",
                "cli-cpl",
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "cli-cpl" / "summary.json").read_text())
    # every evaluation episode's return is kept, and the means are theirs
    assert len(summary["start_returns"]) == len(summary["finetuned_returns"]) == 2
    assert summary["start_return_mean"] == pytest.approx(np.mean(summary["start_returns"]))
    assert summary["eval/return_mean"] == pytest.approx(np.mean(summary["finetuned_returns"]))
    assert main(["rate", str(out), "--rater", "obs:99"]) == 2  # toy observations have 6 dims
    # A person's ratings beside a scripted rater's: `rate` says what the run holds, `finetune`
    # whose ratings it trains on, and takes a choice of raters.
    with FeedbackStore(out) as store:
        person = store.annotator(store.add_annotator("local"))[0]
        for seg, value in zip(store.segment_ids(store.run_id(run_uid(out)))[:3], (10, 50, 90)):
            store.add_rating(seg, value, source="web", annotator_id=person)
    capsys.readouterr()
    assert main(["rate", str(out), "--rater", "return"]) == 0
    said = capsys.readouterr().out
    assert "already holds ratings: local 3, scripted:low-action 6" in said
    assert "they replace those of scripted:low-action 6" in said
    assert "it now holds ratings: local 3, scripted:return 6" in said and "--raters" in said
    cli_cpl = ["finetune", "--policy", str(run), "--ratings", str(out), "--steps", "10",
               "--eval-episodes", "1", "--runs-dir", str(tmp_path), "--no-progress"]  # fmt: skip
    assert main([*cli_cpl, "--name", "mixed"]) == 0
    said = capsys.readouterr().out
    assert f"ratings of {out}: local 3, scripted:return 6: every rater's" in said
    assert main([*cli_cpl, "--name", "local-only", "--raters", "local"]) == 0
    said = capsys.readouterr().out
    assert f"ratings of {out}: local 3; left out (not among the raters chosen): " in said
    assert "scripted:return 6" in said and "CPL on 3 pairs" in said
    assert ", 3 ratings (3 pairs); " in said  # (not "3 labels": 3 ratings of single clips)
    summary = json.loads((tmp_path / "local-only" / "summary.json").read_text())
    assert summary["raters"] == ["local"] and summary["ratings_by_rater"] == {"local": 3}
    assert main([*cli_cpl, "--name", "nobody", "--raters", "local", "nope"]) == 2
    assert "holds no ratings by 'nope'; its ratings per rater: local 3, scripted:return 6" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "nobody").exists()
    assert FinetuneConfig(raters="local").raters == ("local",)  # one rater, named in Python
    siblings_cmd = ["collect", "--checkpoints", str(ckpts[-1]), "--out", str(tmp_path / "sib")]
    assert main([*siblings_cmd, "--noise", "0", "--siblings", "2"]) == 2  # siblings need noise
    assert not (tmp_path / "sib").exists()
