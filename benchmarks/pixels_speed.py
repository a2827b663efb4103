"""The CNN parts of learning from pixels against PyTorch on the CPU, same shapes, one run:

- `reward_step`: one training step of the reward CNN (the paper's 4x16 convolutions, FC 64) on
  32 pairs of 25-step clips (each clip 28 stored frames, cut into 25 stacks of 4), Adam;
- `a2c_update`: one A2C update (Nature CNN, policy and value heads) on a rollout of 5 steps of
  16 envs, RMSProp;
- `ppo_update`: one PPO update on a rollout of 128 steps of 8 envs: GAE, 4 epochs of 4 shuffled
  minibatches of 256, Adam (as Stable-Baselines3 computes it, in the PyTorch peer).

    .venv-bench/bin/python benchmarks/pixels_speed.py --rounds 5

Rounds alternate prefrl and PyTorch (so load on the machine falls on both alike); the figure is
the median step time, reported as steps/s and the ratio prefrl / PyTorch (above 1: prefrl is
faster). PyTorch runs channels-last (its fastest layout on the CPU, oneDNN) with all cores.
Rows go to benchmarks/results/pixels.json ("speed").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np

RESULTS = Path(__file__).parent / "results" / "pixels.json"
PAIRS, H, N_ENVS, N_STEPS, N_ACTIONS = 32, 25, 16, 5, 6


def prefrl_reward_step(rng):
    from random_clips import random_clips

    from prefrl.data.segments import Label, PreferenceData
    from prefrl.reward.frames import FrameRewardConfig, FrameRewardModel

    model = FrameRewardModel(FrameRewardConfig(batch_size=PAIRS, steps_per_fit=1,
                                               val_fraction=0.0))  # fmt: skip

    data = PreferenceData()
    data.add(
        random_clips(rng, PAIRS, H),
        random_clips(rng, PAIRS, H),
        rng.choice([Label.LEFT, Label.RIGHT], PAIRS),
    )
    arrays = data.arrays()
    target = rng.random(PAIRS).astype(np.float32)
    actions = np.zeros((PAIRS, H), np.int32)  # (the CNN does not read them)
    key = jax.random.key(0)

    def step():
        loss, _ = model.train_step(arrays["obs_left"], arrays["obs_right"], actions, actions,
                                   target, key)  # fmt: skip
        jax.block_until_ready(loss)

    return step


def torch_reward_step(rng):
    import torch
    from torch import nn

    class RewardNet(nn.Module):
        def __init__(self):
            super().__init__()
            specs = ((4, 7, 3), (16, 5, 2), (16, 3, 1), (16, 3, 1))
            self.convs = nn.ModuleList(nn.Conv2d(c, 16, k, s) for c, k, s in specs)
            self.fc, self.out = nn.Linear(16 * 7 * 7, 64), nn.Linear(64, 1)

        def forward(self, x):
            x = x.float() / 255.0
            for conv in self.convs:
                x = nn.functional.leaky_relu(conv(x), 0.01)
            return self.out(nn.functional.leaky_relu(self.fc(x.flatten(1)), 0.01))[:, 0]

    net = RewardNet().to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(net.parameters(), 2e-4)
    frames = [torch.from_numpy(rng.integers(0, 255, (PAIRS, H + 3, 84, 84), np.uint8))
              for _ in range(2)]  # fmt: skip
    target = torch.from_numpy(rng.random(PAIRS).astype(np.float32))

    def stacks(f):  # (P, H+3, 84, 84) -> (P*H, 4, 84, 84), channels last
        s = torch.stack([f[:, i : i + H] for i in range(4)], 2).reshape(-1, 4, 84, 84)
        return s.contiguous(memory_format=torch.channels_last)

    def step():
        left, right = (net(stacks(f)).reshape(PAIRS, H).sum(1) for f in frames)
        loss = nn.functional.binary_cross_entropy_with_logits(right - left, target)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def prefrl_a2c_update(rng):
    from prefrl.agents.a2c import A2C, A2CConfig, FrameRollout

    agent = A2C(A2CConfig(), (84, 84, 4), N_ACTIONS)
    state = [agent.init(jax.random.key(0))]
    obs = rng.integers(0, 255, (N_STEPS, N_ENVS, 84, 84, 4), np.uint8)
    action = rng.integers(0, N_ACTIONS, (N_STEPS, N_ENVS)).astype(np.int32)
    reward = rng.standard_normal((N_STEPS, N_ENVS)).astype(np.float32)
    done = np.zeros((N_STEPS, N_ENVS), np.float32)
    last = rng.integers(0, 255, (N_ENVS, 84, 84, 4), np.uint8)
    unused = np.zeros((N_STEPS, N_ENVS), np.float32)  # (log-probs and values: PPO's)
    rollout = FrameRollout(obs, action, unused, unused, reward, done, last)
    key = jax.random.key(0)

    def step():
        state[0], metrics = agent.update(state[0], rollout, key)
        jax.block_until_ready(metrics)

    return step


def _torch_actor_critic():
    """The Nature CNN with policy and value heads, channels-last (oneDNN's fastest layout)."""
    import torch
    from torch import nn

    class ActorCritic(nn.Module):
        def __init__(self):
            super().__init__()
            self.torso = nn.Sequential(
                nn.Conv2d(4, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
                nn.Conv2d(64, 64, 3, 1), nn.ReLU(), nn.Flatten(), nn.Linear(3136, 512), nn.ReLU(),
            )  # fmt: skip
            self.pi, self.v = nn.Linear(512, N_ACTIONS), nn.Linear(512, 1)

        def forward(self, x):
            h = self.torso(x.float() / 255.0)
            return self.pi(h), self.v(h)[:, 0]

    return ActorCritic().to(memory_format=torch.channels_last)


def _to_nchw(frames: np.ndarray):
    import torch

    return (
        torch.from_numpy(frames).permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
    )


def torch_a2c_update(rng):
    import torch
    from torch import nn

    net = _torch_actor_critic()
    opt = torch.optim.RMSprop(net.parameters(), 7e-4, alpha=0.99, eps=1e-5)
    obs = _to_nchw(rng.integers(0, 255, (N_STEPS * N_ENVS, 84, 84, 4), np.uint8))
    last = _to_nchw(rng.integers(0, 255, (N_ENVS, 84, 84, 4), np.uint8))
    action = torch.from_numpy(rng.integers(0, N_ACTIONS, N_STEPS * N_ENVS))
    reward = torch.from_numpy(rng.standard_normal((N_STEPS, N_ENVS)).astype(np.float32))

    def step():
        with torch.no_grad():
            ret = net(last)[1]
        returns = []
        for t in reversed(range(N_STEPS)):
            ret = reward[t] + 0.99 * ret
            returns.append(ret)
        returns = torch.stack(returns[::-1]).reshape(-1)
        logits, value = net(obs)
        log_probs = torch.log_softmax(logits, -1)
        taken = log_probs.gather(1, action[:, None])[:, 0]
        adv = (returns - value).detach()
        entropy = -(log_probs.exp() * log_probs).sum(-1).mean()
        loss = -(taken * adv).mean() + 0.5 * ((returns - value) ** 2).mean() - 0.01 * entropy
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 0.5)
        opt.step()

    return step


def prefrl_ppo_update(rng):
    from prefrl.agents.a2c import FrameRollout
    from prefrl.agents.frame_ppo import FramePPO, FramePPOConfig

    cfg = FramePPOConfig()
    agent = FramePPO(cfg, (84, 84, 4), N_ACTIONS)
    state = [agent.init(jax.random.key(0))]
    t, n = cfg.n_steps, cfg.n_envs
    obs = rng.integers(0, 255, (t, n, 84, 84, 4), np.uint8)
    action = rng.integers(0, N_ACTIONS, (t, n)).astype(np.int32)
    log_prob = np.full((t, n), -np.log(N_ACTIONS), np.float32)
    value, reward = (rng.standard_normal((t, n)).astype(np.float32) for _ in range(2))
    rollout = FrameRollout(obs, action, log_prob, value, reward, np.zeros((t, n), np.float32),
                           rng.integers(0, 255, (n, 84, 84, 4), np.uint8))  # fmt: skip
    key = jax.random.key(0)

    def step():
        state[0], metrics = agent.update(state[0], rollout, key)
        jax.block_until_ready(metrics)

    return step


def torch_ppo_update(rng):
    """PPO's update as Stable-Baselines3 computes it: GAE, then 4 epochs of 4 shuffled
    minibatches of the 8 x 128 rollout, advantages normalised per minibatch, clip 0.1, Adam."""
    import torch
    from torch import nn

    t, n, minibatch = 128, 8, 256
    net = _torch_actor_critic()
    opt = torch.optim.Adam(net.parameters(), 2.5e-4, eps=1e-5)
    obs = _to_nchw(rng.integers(0, 255, (t * n, 84, 84, 4), np.uint8))
    last = _to_nchw(rng.integers(0, 255, (n, 84, 84, 4), np.uint8))
    action = torch.from_numpy(rng.integers(0, N_ACTIONS, t * n))
    old_log_prob = torch.full((t * n,), -float(np.log(N_ACTIONS)))
    value, reward = (torch.from_numpy(rng.standard_normal((t, n)).astype(np.float32))
                     for _ in range(2))  # fmt: skip

    def step():
        with torch.no_grad():
            next_value, adv, last_adv = net(last)[1], torch.zeros(t, n), 0.0
            for i in reversed(range(t)):
                delta = reward[i] + 0.99 * next_value - value[i]
                adv[i] = last_adv = delta + 0.99 * 0.95 * last_adv
                next_value = value[i]
            adv, ret = adv.reshape(-1), (adv + value).reshape(-1)
        for _ in range(4):
            for idx in torch.randperm(t * n).reshape(-1, minibatch):
                logits, v = net(obs[idx])
                log_probs = torch.log_softmax(logits, -1)
                ratio = (log_probs.gather(1, action[idx, None])[:, 0] - old_log_prob[idx]).exp()
                a = (adv[idx] - adv[idx].mean()) / (adv[idx].std() + 1e-8)
                policy = -torch.min(ratio * a, ratio.clamp(0.9, 1.1) * a).mean()
                entropy = -(log_probs.exp() * log_probs).sum(-1).mean()
                loss = policy + 0.5 * ((v - ret[idx]) ** 2).mean() - 0.01 * entropy
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(net.parameters(), 0.5)
                opt.step()

    return step


PAIRS_OF_STEPS = {
    "reward_step": (prefrl_reward_step, torch_reward_step),
    "a2c_update": (prefrl_a2c_update, torch_a2c_update),
    "ppo_update": (prefrl_ppo_update, torch_ppo_update),
}


def step_times(step, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=3)
    parser.add_argument("--what", nargs="+", default=list(PAIRS_OF_STEPS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    rows = []
    for what in args.what:
        rng = np.random.default_rng(0)
        ours, theirs = (make(rng) for make in PAIRS_OF_STEPS[what])
        ours(), theirs()  # (compilation, first-call allocations)
        t_ours, t_theirs = [], []
        for _ in range(args.rounds):
            t_ours += step_times(ours, args.per_round)
            t_theirs += step_times(theirs, args.per_round)
        prefrl_s, torch_s = float(np.median(t_ours)), float(np.median(t_theirs))
        rows.append({"what": what, "prefrl": 1.0 / prefrl_s, "peer": "torch",
                     "peer_value": 1.0 / torch_s, "ratio": torch_s / prefrl_s,
                     "unit": "steps/s", "prefrl_seconds": prefrl_s, "peer_seconds": torch_s,
                     "device": "cpu"})  # fmt: skip
        print(f"{what}: prefrl {prefrl_s:.3f} s, torch {torch_s:.3f} s, "
              f"ratio {torch_s / prefrl_s:.2f}", flush=True)  # fmt: skip
    old = json.loads(args.out.read_text()) if args.out.exists() else {}
    kept = [r for r in old.get("speed", []) if r["what"] not in args.what]
    old.update({"speed": kept + rows,
                "speed_command": "python benchmarks/pixels_speed.py " + " ".join(sys.argv[1:]),
                "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"})  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(old, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
