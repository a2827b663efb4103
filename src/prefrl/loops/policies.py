"""Trained policies back from their run directories: `load_policy(run)` gives a callable
policy of any SAC or PPO run (prefrl rl, train, rfcl, finetune) for evaluation, demos, datasets
and fine-tuning."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import jax
import numpy as np

from prefrl.agents import PPO, SAC
from prefrl.envs import make_env
from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.rundir.config import config_from_dict

if TYPE_CHECKING:
    from prefrl.loops.rl import RLConfig


def policy_action(agent: SAC | PPO, state, obs, key, step: int = 0, deterministic: bool = False):
    """The policy's action: sampled as in training (noise from `key` folded with `step`), or
    without exploration noise (SAC's tanh of the mean, PPO's clipped mean)."""
    if isinstance(agent, SAC):
        return agent.act(state.actor_params, obs, key, step, deterministic=deterministic)
    return agent.act(state.params, obs, key, step, deterministic=deterministic)[0]


@functools.cache
def _eval_key() -> jax.Array:
    """The key deterministic actions are given (and ignore): made once, not per action (45 us)."""
    return jax.random.key(0, impl="rbg")


@dataclass
class LoadedPolicy:
    """A trained policy (SAC or PPO); call it on observations for its deterministic actions in
    [-1, 1]: `policy = load_policy("runs/my-run"); action = policy(obs)`."""

    config: RLConfig
    """The run's config: an `RLConfig`, the `OnlineConfig` of a preference run, the
    `RFCLConfig` of an RFCL one."""
    agent: SAC | PPO
    """The agent whose networks `state` holds."""
    state: object
    """The agent's parameters (a `SACState` or a `PPOState`)."""
    checkpoint: Path
    """The checkpoint it was loaded from."""
    action_scale: np.ndarray | None = None
    """The env's action = the agent's x this (an RFCL run with --demo-action-scale)."""

    @property
    def sac(self) -> SAC:
        """The SAC agent, for what needs its critics or its tanh-Gaussian actor (CPL, datasets,
        regret ratings)."""
        if not isinstance(self.agent, SAC):
            raise TypeError(f"{self.checkpoint} is a PPO policy; this needs a SAC one (prefrl "
                            "rl or prefrl train with --algo sac)")  # fmt: skip
        if self.action_scale is not None:
            raise TypeError(f"{self.checkpoint} acts in actions scaled by --demo-action-scale; "
                            "this needs a policy over the env's own actions")  # fmt: skip
        return self.agent

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Actions for one observation (obs_dim,) or a batch (n, obs_dim)."""
        return self._act(obs, _eval_key(), 0, deterministic=True)

    def sample(self, obs: np.ndarray, key: jax.Array, step: int) -> np.ndarray:
        """Actions with the exploration noise of training (what moved an RFCL run's
        curriculum), drawn with `key` folded with `step`."""
        return self._act(obs, key, step, deterministic=False)

    def _act(self, obs, key: jax.Array, step: int, deterministic: bool) -> np.ndarray:
        obs = np.asarray(obs, np.float32)
        if obs.shape[-1:] != (self.agent.obs_dim,):
            raise ValueError(f"observations of shape {obs.shape}: this policy ({self.config.env}) "
                             f"takes {self.agent.obs_dim} numbers per observation")  # fmt: skip
        action = np.asarray(policy_action(self.agent, self.state, obs, key, step, deterministic))
        return action if self.action_scale is None else action * self.action_scale


def load_policy(path: Path) -> LoadedPolicy:
    """The policy of a run directory (its latest checkpoint) or of a checkpoint directory: of
    `prefrl rl` (SAC, PPO), `prefrl train` (PEBBLE, PrefPPO), `prefrl rfcl` or `prefrl
    finetune`."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: expected a run directory or a checkpoint")
    ckpt = path if (path / "agent.msgpack").exists() else latest_checkpoint(path)
    if ckpt is None:
        raise FileNotFoundError(f"{path} is neither a checkpoint nor a run directory with one")
    if not (ckpt / "config.json").is_file():
        run_config = ckpt.parent.parent / "config.json"
        offline = run_config.is_file() and "dataset" in json.loads(run_config.read_text())
        kind = "an offline (IQL) run's" if offline else "not a policy's"
        raise ValueError(
            f"{ckpt} is {kind} checkpoint: prefrl eval evaluates the policies of prefrl rl, train "
            "and finetune runs; an offline run's evaluations are in its metrics.jsonl and videos/"
        )
    stored = json.loads((ckpt / "config.json").read_text())
    if "reverse_curriculum" in stored:  # an RFCL run: SAC
        from prefrl.loops.rfcl import load_rfcl_policy

        return load_rfcl_policy(ckpt, stored)
    if "teacher" in stored:  # a preference run (prefrl train): its agent is the policy
        from prefrl.loops.online_config import OnlineConfig

        config = config_from_dict(OnlineConfig, stored)
    else:
        from prefrl.loops.rl import RLConfig

        config = config_from_dict(RLConfig, stored)
    env = make_env(config.env, seed=None)
    dims = (env.obs_dim, env.action_dim)
    env.close()
    agent = SAC(config.sac, *dims) if config.algo == "sac" else PPO(config.ppo, *dims)
    return LoadedPolicy(
        config, agent, agent.state_from_bytes((ckpt / "agent.msgpack").read_bytes()), ckpt
    )
