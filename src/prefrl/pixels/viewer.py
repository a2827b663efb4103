"""The checkpoint viewer of pixel runs (the seed's run_checkpoint with its reward graph): one
episode of the policy, every emulator frame in colour at the game's frame rate, with the
learned reward of the agent's steps so far drawn as a graph under the frames, as a video."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from prefrl.agents.a2c import A2C
from prefrl.agents.frame_ppo import FramePPO
from prefrl.envs import make_pixel_env
from prefrl.render import write_video
from prefrl.render.video import Enlarged, block_scale
from prefrl.rundir.checkpoints import latest_checkpoint

FONT_SIZE = 15
MARGIN = FONT_SIZE + 5
"""Rows above and below the trace that its labels take."""
GRAPH_HEIGHT = 2 * MARGIN + 60
TRACE, ZERO, BACKGROUND, LABEL = (255, 200, 60), (90, 90, 90), (20, 20, 20), (170, 170, 170)


@dataclass
class Viewed:
    video: Path
    steps: int
    true_return: float
    learned_return: float | None


def view_frames_checkpoint(target: Path, video: Path, seed: int = 0, size: int = 420,
                           max_steps: int = 2000) -> Viewed:  # fmt: skip
    """Play the policy of a pixel run (its latest checkpoint, or a checkpoint) for one episode
    (at most `max_steps` agent steps), its actions sampled as in training, each pixel a block
    at least `size` pixels high in all; with a learned reward in the checkpoint (`prefrl
    frames`), the reward of each step drawn under the frames."""
    target = Path(target)
    ckpt = target if (target / "agent.msgpack").exists() else latest_checkpoint(target)
    if ckpt is None:
        raise FileNotFoundError(f"{target} is neither a checkpoint nor a run directory with one")
    config = json.loads((ckpt / "config.json").read_text())
    env = make_pixel_env(config["env"], seed=seed)
    ppo = config.get("algo") == "ppo"
    agent_config = _agent_config(config, ppo)
    agent = (FramePPO if ppo else A2C)(agent_config, env.obs_shape, env.n_actions)
    params = agent.state_from_bytes((ckpt / "agent.msgpack").read_bytes()).params
    reward_model = None
    if (ckpt / "reward_model").is_dir():
        from prefrl.reward.frames import FrameRewardModel

        reward_model = FrameRewardModel.load(ckpt / "reward_model")
    obs, key = env.reset(), jax.random.key(seed)
    frames: list[np.ndarray] = []
    per_frame: list[int] = []  # (how many agent steps each colour frame comes after)
    learned: list[float] = []
    true_return, steps = 0.0, 0
    while steps < max_steps:
        action = int(np.asarray(agent.act(params, obs[None], key, steps)[0])[0])
        if reward_model is not None:
            learned.append(float(reward_model.predict(obs[None], np.array([action]))[0]))
        before = len(frames)
        obs, reward, terminated, truncated = env.step(action, colour=frames)
        steps += 1
        per_frame += [steps] * (len(frames) - before)
        true_return += reward
        if terminated or truncated:
            break
    env.close()
    big = Enlarged(frames, block_scale(frames[0].shape[0], size))
    if learned:
        trace = np.asarray(learned)
        big = (np.concatenate([f, reward_graph(trace, n, f.shape[1])])
               for f, n in zip(big, per_frame, strict=True))  # fmt: skip
    write_video(video, big, fps=env.game.fps)
    return Viewed(Path(video), steps, true_return, float(np.sum(learned)) if learned else None)


def _agent_config(config: dict, ppo: bool):
    from prefrl.agents.a2c import A2CConfig
    from prefrl.agents.frame_ppo import FramePPOConfig
    from prefrl.rundir.config import config_from_dict

    if ppo:
        return config_from_dict(FramePPOConfig, config.get("ppo_frames", {}))
    return config_from_dict(A2CConfig, config.get("a2c", {}))


def reward_graph(trace: np.ndarray, upto: int, width: int) -> np.ndarray:
    """The learned reward of the episode's first `upto` steps as a strip of `width` pixels: the
    whole episode's range on the vertical axis and its steps across (so the graph grows without
    rescaling), zero as a grey line; the axis's ends and the step written in its corners."""
    graph = np.empty((GRAPH_HEIGHT, width, 3), np.uint8)
    graph[:] = BACKGROUND
    total = len(trace)
    lo, hi = min(float(trace.min()), 0.0), max(float(trace.max()), 0.0)
    span = hi - lo or 1.0

    def row(v):
        # (rows MARGIN to GRAPH_HEIGHT - MARGIN - 1: the labels above and below stay clear)
        return ((hi - v) / span * (GRAPH_HEIGHT - 2 * MARGIN - 1)).astype(int) + MARGIN

    graph[row(np.array(0.0)), :] = ZERO
    x = (np.arange(upto) * (width - 1) / max(total - 1, 1)).astype(int)
    ys = row(trace[:upto])
    for i in range(upto):  # (a vertical run from the previous point: a joined line)
        y0 = ys[i - 1] if i else ys[i]
        top, bottom = sorted((y0, ys[i]))
        graph[top : bottom + 1, x[i]] = TRACE
    return _label(graph, f"learned reward  max {hi:.3g}", f"min {lo:.3g}", f"step {upto}/{total}")


def _label(graph: np.ndarray, top_left: str, bottom_left: str, bottom_right: str) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFont

    image = Image.fromarray(graph)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(FONT_SIZE)
    bottom = graph.shape[0] - MARGIN + 2
    draw.text((4, 2), top_left, fill=LABEL, font=font)
    draw.text((4, bottom), bottom_left, fill=LABEL, font=font)
    width = draw.textlength(bottom_right, font=font)
    draw.text((graph.shape[1] - width - 4, bottom), bottom_right, fill=LABEL, font=font)
    return np.asarray(image)
