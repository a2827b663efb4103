"""Trained policies back from their run directories: `load_policy(run)` gives a callable
policy of any SAC or PPO run (prefrl rl, train, rfcl, finetune) for evaluation, demos, datasets
and fine-tuning.

Each workflow registers the kind of run it makes (`register_policy_kind`: how to recognise its
stored config, how to load its policy) in the module that defines its config; `load_policy`
imports the modules `prefrl.POLICY_KIND_MODULES` lists, so this module names no workflow."""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from prefrl.agents import PPO, SAC
from prefrl.envs import is_pixel_env, make_env
from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.training.best import BEST


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

    config: object
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

    def __repr__(self) -> str:
        kind = type(self.agent).__name__
        return f"LoadedPolicy({kind} on {getattr(self.config, 'env', '?')}, {self.checkpoint})"

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
        if path.name == BEST and latest_checkpoint(path.parent) is not None:
            raise FileNotFoundError(
                f"{path.parent} keeps no best-evaluated policy ({BEST}/): it ran before prefrl "
                f"kept one, or has not evaluated yet; {path.parent} loads its latest checkpoint"
            )
        raise FileNotFoundError(f"{path} does not exist: expected a run directory or a checkpoint")
    ckpt = path if (path / "agent.msgpack").exists() else latest_checkpoint(path)
    if ckpt is None:
        raise FileNotFoundError(f"{path} is neither a checkpoint nor a run directory with one")
    if not (ckpt / "config.json").is_file():
        run_config = ckpt.parent.parent / "config.json"
        offline = run_config.is_file() and "dataset" in json.loads(run_config.read_text())
        kind = "an offline (IQL) run's" if offline else "not a policy's"
        raise ValueError(
            f"{ckpt} is {kind} checkpoint: load_policy (and prefrl eval) load the policies of "
            "prefrl rl, train, rfcl and finetune runs; an offline run's evaluations are in its "
            "metrics.jsonl and videos/"
        )
    stored = json.loads((ckpt / "config.json").read_text())
    if is_pixel_env(stored.get("env", "")):
        raise ValueError(
            f"{ckpt} is of a run on frames ({stored['env']}, {stored.get('algo', 'a2c')}): "
            "load_policy loads the SAC and PPO policies of state envs; `prefrl eval` on the run "
            "plays an episode of it"
        )
    return policy_kind(stored, ckpt).load(ckpt, stored)


def agent_policy(ckpt: Path, config) -> LoadedPolicy:
    """The SAC or PPO policy of a checkpoint whose run's `config` names its env, `algo` and the
    agent's settings (`sac`, `ppo`): what RL and preference runs load."""
    env = make_env(config.env, seed=None)
    dims = (env.obs_dim, env.action_dim)
    env.close()
    agent = SAC(config.sac, *dims) if config.algo == "sac" else PPO(config.ppo, *dims)
    return LoadedPolicy(
        config, agent, agent.state_from_bytes((ckpt / "agent.msgpack").read_bytes()), ckpt
    )


@dataclass(frozen=True)
class PolicyKind:
    """A kind of run whose checkpoints `load_policy` loads."""

    name: str
    recognises: Callable[[dict], bool]
    """Whether a checkpoint's stored config (its config.json) is of this kind."""
    load: Callable[[Path, dict], LoadedPolicy]
    """(checkpoint directory, stored config) -> its policy."""
    fallback: bool = False
    """The kind of a config no other kind recognises (plain SAC or PPO runs)."""


_KINDS: dict[str, PolicyKind] = {}


def register_policy_kind(name: str, recognises: Callable[[dict], bool],
                         load: Callable[[Path, dict], LoadedPolicy], fallback: bool = False) -> None:  # fmt: skip
    """Teach `load_policy` a kind of run (a workflow does this where it defines its config)."""
    _KINDS[name] = PolicyKind(name, recognises, load, fallback)


def policy_kind(stored: dict, ckpt: Path) -> PolicyKind:
    """The registered kind of a checkpoint's stored config."""
    import prefrl

    for module in prefrl.POLICY_KIND_MODULES:
        importlib.import_module(module)
    kinds = [k for k in _KINDS.values() if not k.fallback and k.recognises(stored)]
    kinds = kinds or [k for k in _KINDS.values() if k.fallback and k.recognises(stored)]
    if len(kinds) != 1:
        found = ", ".join(k.name for k in kinds) or "none"
        raise ValueError(f"{ckpt}: its config.json matches {found} of the kinds of run whose "
                         f"policies load ({', '.join(sorted(_KINDS))})")  # fmt: skip
    return kinds[0]
