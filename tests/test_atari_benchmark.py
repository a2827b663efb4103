"""benchmarks/atari.py end to end on a tiny grid: Pong from a scripted teacher's preferences
beside A2C on the score, one row each from the same sweep."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ale_py", reason="the Atari games need ale-py (make test installs it)")


def test_the_benchmark_writes_a_row_per_method_from_one_grid(tmp_path):
    root = Path(__file__).parent.parent
    out = tmp_path / "atari.json"
    out.write_text(json.dumps({"results": [{"env": "atari:Enduro", "method": "score"}]}))
    command = [
        sys.executable, "benchmarks/atari.py", "--env", "atari:Pong", "--steps", "256",
        "--labels", "12", "--initial-labels", "6", "--pretrain-steps", "3",
        "--eval-episodes", "1", "--seeds", "0", "--runs", str(tmp_path / "bench"),
        "--video-steps", "30", "--out", str(out),
    ]  # fmt: skip
    subprocess.run(command, cwd=root, check=True, capture_output=True, timeout=900)
    results = json.loads(out.read_text())["results"]
    assert results[0] == {"env": "atari:Enduro", "method": "score"}  # (another game's row kept)
    rows = results[1:]
    assert [r["method"] for r in rows] == ["prefs", "score"]
    for row in rows:
        assert row["env"] == "atari:Pong" and row["agent_steps"] == 256 and row["frames"] == 1024
        assert row["eval_step"] == [256] and row["eval_episodes"] == 1
        assert -21 <= row["return_mean"] <= 21 and row["per_seed"] == [row["return_mean"]]
        assert row["hours_per_seed"][0] > 0 and row["command"].endswith(f"--out {out}")
    assert rows[0]["labels"] == 12 and "labels" not in rows[1]
    for row, run in zip(rows, ("pong_prefs", "pong_score"), strict=True):  # (a video each)
        video = tmp_path / f"atari_{run}.mp4"
        assert row["video"]["path"] == str(video) and video.read_bytes()[4:8] == b"ftyp"
        assert re.search(r"seed 0 at \d+ agent steps: the first 30 agent steps of an episode",
                         row["video"]["caption"])  # fmt: skip
    assert "learned reward" in rows[0]["video"]["caption"]
    assert "learned reward" not in rows[1]["video"]["caption"]
    # A grid of one method, its runs finished, rewrites that method's row only.
    score = rows[1]["return_mean"]
    out.write_text(json.dumps({"results": [*results[:2], {**rows[1], "return_mean": 99.0}]}))
    subprocess.run([*command, "--methods", "score"], cwd=root, check=True, capture_output=True,
                   timeout=300)  # fmt: skip
    again = json.loads(out.read_text())["results"]
    assert [(r["env"], r["method"]) for r in again] == [
        ("atari:Enduro", "score"),
        ("atari:Pong", "prefs"),
        ("atari:Pong", "score"),
    ]
    assert again[1] == rows[0] and again[2]["return_mean"] == score != 99.0
    assert again[2]["video"] == rows[1]["video"]  # (made once: the rewritten row keeps it)
    kept = sorted(p.name for p in (tmp_path / "atari-runs/bench").iterdir())
    assert kept == ["pong_prefs_s0", "pong_score_s0"]
    assert (tmp_path / "atari_pong.png").read_bytes()[:4] == b"\x89PNG"  # (the game's curves)
    bad = subprocess.run([*command[:3], "Hopper-v5"], check=False, cwd=root,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode != 0 and "--env 'Hopper-v5': an Atari game, atari:<Game>" in bad.stderr
    bad = subprocess.run([*command, "--video-steps", "-5"], check=False, cwd=root,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode != 0 and "--video-steps -5: 0 (no video) or a positive" in bad.stderr


def test_ppo_has_its_own_runs_and_fits_as_often_in_agent_steps_as_a2c():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import atari as bench

    a2c = bench.configs("atari:Pong", 5_000_000, 5500, 500, 3000)
    ppo = bench.configs("atari:Pong", 5_000_000, 5500, 500, 3000, algo="ppo")
    assert list(a2c) == ["pong_prefs", "pong_score"]  # (the run folders of before)
    assert list(ppo) == ["pong_ppo-prefs", "pong_ppo-score"]
    assert [bench.method_of(label) for label in ppo] == ["prefs", "score"]
    prefs, score = ppo.values()
    assert prefs.algo == score.algo == "ppo" and score.ppo_frames == prefs.ppo_frames

    def between_fits(c):
        agent = c.ppo_frames if c.algo == "ppo" else c.a2c
        return c.fit_every * agent.n_envs * agent.n_steps

    assert between_fits(a2c["pong_prefs"]) == 6400
    assert abs(between_fits(prefs) - 6400) / 6400 < 0.05  # (6 updates of 1024 steps)
    # The PPO rows run the pong-ppo preset, apart from the grid's budget and evaluations.
    from prefrl.presets import FRAME_PRESETS

    preset = FRAME_PRESETS["pong-ppo"].config
    assert (prefs.fit_every, prefs.reward, prefs.labels) == (preset.fit_every, preset.reward,
                                                             preset.labels)  # fmt: skip
    assert bench.row_key({"env": "atari:Pong", "method": "score"}) == (
        "atari:Pong", "score", "a2c")  # fmt: skip


def test_the_games_plot_draws_every_kept_run_of_it_from_all_its_grids(tmp_path):
    """Runs kept by two grids (A2C's score run, PPO's preference runs of two seeds) and another
    game's: one curve per agent and method, with its seeds counted; none for a game not run."""
    import gzip

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import atari as bench

    def kept(grid: str, run: str, returns: list[float]) -> None:
        (tmp_path / grid / run).mkdir(parents=True)
        rows = [{"step": 250_000 * (i + 1), "eval/return_mean": r} for i, r in enumerate(returns)]
        with gzip.open(tmp_path / grid / run / "metrics.jsonl.gz", "wt") as f:
            f.writelines(json.dumps(r) + "\n" for r in [{"step": 1, "train/loss": 0.5}, *rows])

    kept("atari-bench", "pong_score_s0", [-21.0, -20.0])
    kept("atari-bench-b", "pong_ppo-prefs_s0", [-20.0, 3.0])
    kept("atari-bench-b", "pong_ppo-prefs_s1", [-19.0, 5.0, 9.0])
    kept("atari-bench-enduro", "enduro_ppo-score_s0", [0.0, 40.0])
    legend = bench.plot_game("atari:Pong", tmp_path, tmp_path / "pong.png")
    assert legend == ["PPO from preferences (2 seeds)", "A2C on the score (1 seed)"]
    assert (tmp_path / "pong.png").read_bytes()[:4] == b"\x89PNG"
    assert bench.plot_game("atari:Breakout", tmp_path, tmp_path / "breakout.png") == []
    assert not (tmp_path / "breakout.png").exists()
