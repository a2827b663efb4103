"""When the online loop fits its reward model, and from which step it uses the fit.

New labels make a fit due (`due`); it begins (`start`), in place or in a background process;
its result is ready (`ready`) at once, or `fit_lag` steps later; the loop takes it (`take`) and
relabels what the agent learns from. Only the last step costs the agent wall time when a fit
runs in the background (`prefrl.reward.background`).
"""

from __future__ import annotations

import time
from pathlib import Path

from prefrl.data import PreferenceData
from prefrl.reward import RewardModel
from prefrl.reward.background import BackgroundFitter
from prefrl.rundir.checkpoints import IncompatibleCheckpoint


class RewardFitting:
    def __init__(
        self,
        model: RewardModel,
        fit_lag: int,
        refit_labels: int,
        refit_growth: float,
        pretraining: bool,
        job_dir: Path,
    ):
        """`pretraining`: the agent has an intrinsic reward before the first fit, so the first
        fit may land late too (without one the agent has nothing to learn from meanwhile)."""
        self.model = model
        self.fit_lag, self.refit_labels, self.refit_growth = fit_lag, refit_labels, refit_growth
        self.pretraining = pretraining
        self.fitter = BackgroundFitter(job_dir) if fit_lag else None
        self.fitted = False
        self.unfitted_labels = 0
        self.pending: dict | None = None  # {"start": step, "labels": count} of a fit begun

    def due(self, labels: int, all_asked: bool, unanswered, is_human: bool) -> bool:
        """New labels are enough of a change (`refit_growth`), or the budget's last: then
        scripted answers (they come all at once) get a fit. A person's come one by one: fit
        every `refit_labels` of them, or when nothing asked is left unanswered. Without a model
        yet, any labels are: the agent has no reward to learn from until the first fit (a run
        restarted from step 0 finds its first session answered and a later one not).
        `unanswered()` may ask the store: it is called only when needed."""
        if self.unfitted_labels == 0:
            return False
        if not self.fitted:
            return True
        fitted = labels - self.unfitted_labels
        if self.unfitted_labels < self.refit_growth * fitted and not (
            all_asked and unanswered() == 0
        ):
            return False
        if not is_human or self.unfitted_labels >= self.refit_labels:
            return True
        return unanswered() == 0

    def start(self, step: int, labels: PreferenceData) -> None:
        """A fit on every label so far begins: in the worker with a lag, otherwise done in
        place by `take` at this same step."""
        self.unfitted_labels = 0
        self.pending = {"start": step, "labels": len(labels)}
        if self.fitter is not None:
            self.fitter.start(self.model, labels, len(labels))

    def ready(self, step: int) -> bool:
        lag = self.fit_lag if self.fitted or self.pretraining else 0
        return self.pending is not None and step >= self.pending["start"] + lag

    @property
    def model_fits(self) -> int:
        """Fits the model has had (its own count where it keeps one)."""
        return getattr(self.model, "fits", 0)

    def take(self, labels: PreferenceData, unlabelled: dict | None = None) -> dict[str, float]:
        """The fitted model replaces the old one; returns the fit's metrics. `unlabelled`:
        pairs for pseudo-labels (fits in place only)."""
        if self.fitter is None:
            t0 = time.perf_counter()
            extra = {} if unlabelled is None else {"unlabelled": unlabelled}
            metrics = self.model.fit(labels, **extra)
            metrics["reward/fit_wait_seconds"] = time.perf_counter() - t0
        else:
            self.model, metrics, waited = self.fitter.result()
            metrics["reward/fit_wait_seconds"] = waited
            metrics["reward/fit_started"] = float(self.pending["start"])
        self.pending = None
        self.fitted = True
        return metrics

    def state_dict(self) -> dict:
        return {"fitted": self.fitted, "unfitted_labels": self.unfitted_labels,
                "pending_fit": self.pending}  # fmt: skip

    def load_state_dict(self, state: dict, labels: PreferenceData, where: Path) -> None:
        """A fit running at the checkpoint is begun again from the same model and labels (the
        checkpoint's are those it started from): the same result, at the same step."""
        self.fitted = state["fitted"]
        self.unfitted_labels = state.get("unfitted_labels", 0)
        pending = state.get("pending_fit")
        if pending is not None:
            if self.fitter is None:
                raise IncompatibleCheckpoint(
                    f"{where} was taken while a reward-model fit ran in the background; resume "
                    f"it with --fit-lag N (N > 0), as it was run"
                )
            self.pending = pending
            self.fitter.start(self.model, labels, pending["labels"])

    def close(self) -> None:
        if self.fitter is not None:
            self.fitter.close()
