"""An RFCL run's policy back from its checkpoint (the policy kind `load_policy` hands RFCL runs
to): SAC, with the action bound of its demos where the run scaled its actions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from prefrl.agents import SAC
from prefrl.demos.rfcl_config import RFCLConfig
from prefrl.demos.rfcl_demos import action_bound, load_demos
from prefrl.envs import make_env
from prefrl.rundir.config import config_from_dict
from prefrl.training.policies import LoadedPolicy, register_policy_kind


def load_rfcl_policy(ckpt: Path, stored: dict) -> LoadedPolicy:
    """An RFCL checkpoint's policy (`load_policy` hands RFCL runs here), with its action bound:
    the one the checkpoint saved, or (older ones) the bound of its demos, read again."""
    config = config_from_dict(RFCLConfig, stored)
    env = make_env(config.env, seed=0)
    try:
        agent = SAC(config.sac, env.obs_dim, env.action_dim)
        loop = json.loads((ckpt / "loop.json").read_text())
        saved = loop.get("action_bound")
        if saved is not None:
            bound = np.asarray(saved, np.float32)
        elif "action_bound" not in loop and config.demo_action_scale is not None:
            bound = action_bound(load_demos(config, env), config.demo_action_scale)
        else:
            bound = None
    finally:
        env.close()
    state = agent.state_from_bytes((ckpt / "agent.msgpack").read_bytes())
    return LoadedPolicy(config, agent, state, ckpt, bound)


register_policy_kind("rfcl", lambda stored: "reverse_curriculum" in stored, load_rfcl_policy)
