"""Where a speed benchmark writes its figures: the reference file for this repository's 2-core
CPU, a file named after the accelerator otherwise, so a GPU run never overwrites the CPU figures
(and ratios are only ever taken within one file)."""

from __future__ import annotations

import re
from pathlib import Path


def device_kind() -> str:
    """JAX's name for the first device: "cpu", or e.g. "NVIDIA H100 80GB HBM3"."""
    import jax

    return jax.devices()[0].device_kind


def results_path(base: Path, kind: str) -> Path:
    if kind == "cpu":
        return base
    slug = re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-")
    return base.with_name(f"{base.stem}_{slug}{base.suffix}")
