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


def put_rows(path: Path, key: str, rows: list[dict], **more) -> None:
    """Set `key` (and `<key>_command`: this invocation, and any `more` keys) in the JSON file at
    `path`, keeping its other keys."""
    import json
    import sys

    results = json.loads(path.read_text()) if path.exists() else {}
    script = Path(sys.argv[0]).name
    results[key] = rows
    results[f"{key}_command"] = " ".join(["python", f"benchmarks/{script}", *sys.argv[1:]])
    results.update(more)
    path.write_text(json.dumps(results, indent=1) + "\n")
