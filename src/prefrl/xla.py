"""How prefrl compiles its training steps: `jax.jit` plus XLA:CPU options that make them faster.

The training steps compiled here donate their state (parameters, optimiser moments), so that
XLA can update it in place. XLA:CPU's default copy insertion cannot prove that the step's last
read of a donated parameter comes before the in-place write of its new value, so it copies the
parameters first (SAC's 2x256x256 critic kernel alone is 0.5 MB per update). Region analysis
proves that order and drops the copies without changing a bit of the result: SAC's update runs
about 10% faster.

Measured by `benchmarks/xla_cpu_options.py`; see docs/design.md. Other backends get plain jit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

CPU_STEP_OPTIONS: dict[str, Any] = {
    "xla_cpu_copy_insertion_use_region_analysis": True,
}


def jit_step(fn: Callable, **jit_kwargs) -> Callable:
    """`jax.jit(fn, **jit_kwargs)`, with `CPU_STEP_OPTIONS` when JAX runs on the CPU."""
    options = CPU_STEP_OPTIONS if jax.default_backend() == "cpu" else None
    return jax.jit(fn, compiler_options=options, **jit_kwargs)
