"""Sweeps on Ray: a grid (or list) of training configs x seeds, each run a normal run
directory, stopped and started again at will; results as mean ± std per config.

    from prefrl import OnlineConfig
    from prefrl.sweep import grid, run_sweep

    configs = grid(OnlineConfig(env="Pendulum-v1", steps=20_000),
                   {"teacher.preset": ["oracle", "mistake"], "schedule.budget": [50, 100]})
    result = run_sweep(configs, seeds=[0, 1, 2], directory="runs/teachers")
"""

from prefrl.sweep.runner import RunOutcome, SweepResult, connect_ray, execute_run, run_sweep
from prefrl.sweep.spec import TRAINERS, SweepRun, grid, replace_field

__all__ = [
    "TRAINERS",
    "RunOutcome",
    "SweepResult",
    "SweepRun",
    "connect_ray",
    "execute_run",
    "grid",
    "replace_field",
    "run_sweep",
]
