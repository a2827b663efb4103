"""How prefrl compiles its training steps: `jax.jit` plus XLA:CPU options that make them faster.

The training steps compiled here donate their state (parameters, optimiser moments), so that
XLA can update it in place. XLA:CPU's default copy insertion cannot prove that the step's last
read of a donated parameter comes before the in-place write of its new value, so it copies the
parameters first (SAC's 2x256x256 critic kernel alone is 0.5 MB per update). Region analysis
proves that order and drops the copies without changing a bit of the result: SAC's update runs
about 10% faster.

Measured by `benchmarks/xla_cpu_options.py` at 3d73e48; see docs/design.md. Other backends get plain jit.

`SummedGrads` computes the gradients of the CNNs on frames a few dozen frames at a time on a
CPU, where XLA's convolution gradients run several times faster on small batches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

CPU_STEP_OPTIONS: dict[str, Any] = {
    "xla_cpu_copy_insertion_use_region_analysis": True,
}


def jit_step(fn: Callable, **jit_kwargs) -> Callable:
    """`jax.jit(fn, **jit_kwargs)`, with `CPU_STEP_OPTIONS` when JAX runs on the CPU."""
    options = CPU_STEP_OPTIONS if jax.default_backend() == "cpu" else None
    return jax.jit(fn, compiler_options=options, **jit_kwargs)


class SummedGrads:
    """The gradient of a loss that is a mean over rows, computed chunk by chunk and summed.

    `loss_fn(params, data, rows, *args) -> (loss, metrics)` reads the rows `rows` (an index
    array) of `data` and returns their mean loss and metrics that are means over them too.
    Called with `(params, data, rows, *args)`, it splits `rows` into chunks of `chunk` rows,
    runs one compiled call per chunk, and returns the gradients and metrics of the whole, each chunk
    weighted by its share of the rows: the same step as one call on all rows, up to rounding.

    Why: XLA:CPU computes a convolution's gradients several times faster on a few dozen frames
    than on hundreds at once (the Nature CNN on 256 frames: 0.12 s in chunks of 16 against 0.31 s
    in one; docs/performance.md), as the patches it works on then stay in the caches. Other
    backends get the whole batch in one call (`chunk=None` does the same anywhere).
    """

    def __init__(self, loss_fn: Callable, chunk: int | None):
        if chunk is not None and chunk < 1:
            raise ValueError(
                f"chunk={chunk} is invalid: expected a positive number of rows or None"
            )
        self.chunk = chunk if jax.default_backend() == "cpu" else None
        grad_fn = jax.grad(loss_fn, has_aux=True)

        def first(params, weight, data, rows, *args):
            return jax.tree.map(lambda x: weight * x, grad_fn(params, data, rows, *args))

        def add(totals, params, weight, data, rows, *args):
            new = grad_fn(params, data, rows, *args)
            return jax.tree.map(lambda t, x: t + weight * x, totals, new)

        self._first = jit_step(first)
        self._add = jit_step(add, donate_argnums=0)

    def __call__(self, params, data, rows, *args):
        rows = np.asarray(rows)
        if len(rows) == 0:
            raise ValueError("no rows to take gradients over")
        size = len(rows) if self.chunk is None else self.chunk
        totals = None
        for start in range(0, len(rows), size):
            part = rows[start : start + size]
            weight = np.float32(len(part) / len(rows))
            if totals is None:
                totals = self._first(params, weight, data, part, *args)
            else:
                totals = self._add(totals, params, weight, data, part, *args)
        return totals
