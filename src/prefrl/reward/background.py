"""Fitting a reward model in a process of its own, so that the agent trains on meanwhile.

The online loop starts a fit at one step and takes its result a fixed number of steps later
(`OnlineConfig.fit_lag`), waiting only if it is not done by then: a run does the same whatever
the machine's speed, and a fit costs wall time only for as long as it outlasts the lag. The
worker is a spawned process (JAX does not survive `fork`) that lives as long as the loop; model
and labels travel through a job directory, in the formats checkpoints use.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import shutil
import signal
import time
import traceback
from pathlib import Path

from prefrl.data.segments import PreferenceData
from prefrl.reward.base import RewardModel
from prefrl.reward.saved import load_reward_model


def _single_threaded() -> None:
    """Worker start-up, before JAX makes its CPU client: one thread, leaving the other cores to
    the agent, whose small per-step updates keep about one core busy."""
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = (
        f"{flags} --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1".strip()
    )


def _fit_job(job_dir: Path) -> dict[str, float]:
    model = load_reward_model(job_dir / "model_in")
    metrics = model.fit(PreferenceData.load(job_dir / "labels.npz"))
    model.save(job_dir / "model_out")
    return metrics


def _worker(jobs, results) -> None:
    # Ctrl-C reaches the whole process group: the loop saves (recording the fit in flight) and
    # ends this process itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _single_threaded()
    while (job := jobs.get()) is not None:
        try:
            results.put(("ok", _fit_job(Path(job))))
        except Exception:  # noqa: BLE001 (handed to the loop, raised there with this traceback)
            results.put(("error", traceback.format_exc()))


class BackgroundFitter:
    """One fit at a time in a worker process: `start` it, later `result` (waits if need be)."""

    def __init__(self, job_dir: Path):
        self.job_dir = Path(job_dir)
        self._proc = None
        self._jobs = self._results = None
        self.running = False

    def start(self, model: RewardModel, data: PreferenceData, count: int) -> None:
        """Fit a copy of `model` on the first `count` labels of `data`."""
        if self.running:
            raise RuntimeError("a reward-model fit is already running; take its result first")
        shutil.rmtree(self.job_dir, ignore_errors=True)
        self.job_dir.mkdir(parents=True)
        model.save(self.job_dir / "model_in")
        data.save(self.job_dir / "labels.npz", count=count)
        if self._proc is None:
            ctx = multiprocessing.get_context("spawn")
            self._jobs, self._results = ctx.Queue(), ctx.Queue()
            # daemon: it ends with the loop's process, a fit in flight with it (redone on resume)
            self._proc = ctx.Process(target=_worker, args=(self._jobs, self._results), daemon=True)
            self._proc.start()
        self._jobs.put(str(self.job_dir))
        self.running = True

    def result(self) -> tuple[RewardModel, dict[str, float], float]:
        """(the fitted model, its fit metrics, seconds spent waiting for it here)."""
        if not self.running:
            raise RuntimeError("no reward-model fit is running")
        t0 = time.perf_counter()
        while True:
            try:
                status, payload = self._results.get(timeout=1.0)
                break
            except queue.Empty:
                if not self._proc.is_alive():
                    self.running = False
                    raise RuntimeError(
                        f"the reward-model fit's worker process died (exit code "
                        f"{self._proc.exitcode}; job in {self.job_dir})"
                    ) from None
        self.running = False
        if status == "error":
            raise RuntimeError(f"the reward-model fit failed in its worker process:\n{payload}")
        waited = time.perf_counter() - t0
        return load_reward_model(self.job_dir / "model_out"), payload, waited

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            if self.running:
                self._proc.terminate()
            else:
                self._jobs.put(None)
            self._proc.join(timeout=30)
            if self._proc.is_alive():
                self._proc.kill()
        self._proc = None
        self.running = False
        shutil.rmtree(self.job_dir, ignore_errors=True)  # scratch: a checkpoint records a fit
