"""The demonstrations as RFCL takes them: checked, trimmed, and warned about where their ends
give the reverse curriculum little to learn from."""

from __future__ import annotations

import dataclasses

import numpy as np

from prefrl.data.demos import DemoSet, load_demos_of
from prefrl.demos.curriculum import time_limit
from prefrl.demos.make import check_demos, ends_in, success_hold
from prefrl.demos.rfcl_config import RFCLConfig
from prefrl.envs import PrefrlEnv
from prefrl.envs.check import require_restorable


def load_demos(config: RFCLConfig, env: PrefrlEnv) -> DemoSet:
    """The demos RFCL uses: of this env and its sizes, the first `num_demos`, those that end in
    success both by their stored flags and, where they have actions, replayed in `env` (what
    `prefrl demos check` counts), each cut `trim_success` steps after its first success."""
    require_restorable(env, "RFCL starts episodes from demo states")
    demos = load_demos_of(config.demos, config.env, env)
    if config.demo_actions and not demos.has_actions:
        raise ValueError(f"{config.demos} has no actions: use --no-demo-actions (states alone)")
    if config.demo_action_scale is not None and not demos.has_actions:
        raise ValueError(f"--demo-action-scale {config.demo_action_scale} scales the demos' "
                         f"largest actions, and {config.demos} has none: drop it")  # fmt: skip
    if config.num_demos is not None and config.num_demos > len(demos):
        raise ValueError(f"--num-demos {config.num_demos}: {config.demos} holds {len(demos)} "
                         f"demos; ask for at most {len(demos)}, or leave it out to use them all")  # fmt: skip
    chosen = demos.demos[: config.num_demos]
    replayed = (check_demos(DemoSet(demos.env_id, chosen, demos.info), env=env)
                if demos.has_actions else None)  # fmt: skip
    kept, ends = [], []
    for i, demo in enumerate(chosen):
        check = replayed[i] if replayed is not None else None
        how = check.ends if check else ends_in(demo.ends_in_success, None)
        if check and not check.success_at_end:
            how += f" (states differ by up to {check.max_state_error:.2g})"
        ends.append(f"demo {i}: {how}")
        if not (check.usable if check else demo.ends_in_success):
            print(f"warning: demo {i} of {config.demos}: {how}; left out (RFCL takes demos "
                  "that end in success both ways)")  # fmt: skip
            continue
        end = min(len(demo), demo.first_success + config.trim_success)
        kept.append(dataclasses.replace(
            demo, states=demo.states[: end + 1], observations=demo.observations[: end + 1],
            actions=None if demo.actions is None else demo.actions[:end],
            rewards=demo.rewards[:end], success=demo.success[:end],
        ))  # fmt: skip
        if demo.actions is not None:
            _warn_if_slipping(config, env, i, kept[-1])
    if not kept:
        listed = "".join(f"\n  {e}" for e in ends)
        check = f"\n(`prefrl demos check {config.demos}` says the same)" if replayed else ""
        raise ValueError(f"none of the demos of {config.demos} ends in success both by its "
                         f"stored success flags and replayed here:{listed}{check}")  # fmt: skip
    return DemoSet(demos.env_id, kept, demos.info)


def action_bound(demos: DemoSet, scale: float | None) -> np.ndarray | None:
    """Per action dimension, `scale` times the largest |action| of the demos, at most the env's
    bound (1); None without a scale."""
    if scale is None:
        return None
    largest = np.max([np.abs(d.actions).max(0) for d in demos.demos], axis=0)
    return np.minimum(scale * largest, 1.0).astype(np.float32)


def _warn_if_slipping(config: RFCLConfig, env: PrefrlEnv, i: int, demo) -> None:
    """Stage 1's first episodes start at a demo's last state and must still be in success when
    their time limit ends: say so when the demo's own last action does not keep it there."""
    limit = time_limit(1, config.reverse_time_divisor)
    holds = success_hold(env, demo.states[-1], demo.actions[-1], limit)
    if holds < limit:
        print(f"warning: demo {i} of {config.demos} ends in a state that keeps success for "
              f"{holds} steps with its last action held; stage 1's first episodes start there "
              f"and are judged {limit} steps later, so its reverse curriculum may not move "
              f"(`prefrl demos check`; `prefrl demos plan|record|script --settle {limit}` "
              "makes demos that end where it lasts)")  # fmt: skip
