"""Running a sweep on Ray: each run is a Ray task that trains in its own run directory and
resumes from it. A sweep started again skips the finished runs and resumes the stopped ones; a
node that dies mid-run has its runs retried elsewhere (Ray's task retries), where they resume
from their last checkpoint. The sweep directory must be on a filesystem every node sees."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import signal
import socket
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from prefrl.rundir.atomic import atomic_write
from prefrl.rundir.config import config_to_dict
from prefrl.rundir.status import DONE_FILE
from prefrl.sweep.spec import SweepRun, expand_runs, resumable, safe_label, trainer_of

MANIFEST_FILE = "sweep.json"
LOCK_FILE = "sweep.lock"
STOP_SECONDS = 300
"""How long a stopped sweep waits for its runs to checkpoint where they are and end."""


@dataclass
class RunOutcome:
    """How one run of a sweep ended."""

    name: str
    """The run's directory name in the sweep."""
    label: str
    """Its config's label (a key of `run_sweep`'s configs)."""
    seed: int
    """Its seed."""
    status: str
    """done (this time), finished (before: skipped), stopped or failed."""
    seconds: float = 0.0
    """Wall time of the run, in seconds."""
    error: str | None = None
    """A failed run's traceback (its last 4000 characters)."""
    node: str | None = None
    """The Ray node it ran on."""


@dataclass
class SweepResult:
    """What `run_sweep` returns: the sweep's directory, every run's outcome, and the summary
    table."""

    directory: Path
    """The sweep's directory: its runs, their state, the report."""
    outcomes: list[RunOutcome]
    """How each run (config label x seed) ended."""
    table: dict = field(default_factory=dict)
    """Per config and metric: mean, std and values over seeds (`prefrl.sweep.report`)."""

    @property
    def failed(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def complete(self) -> bool:
        return all(o.status in ("done", "finished") for o in self.outcomes)

    def run_dir(self, label: str, seed: int) -> Path:
        """The directory of config `label`'s run with `seed` (labels are made directory names:
        `sac+demos` runs in `sac-demos_s0`)."""
        return self.directory / "runs" / SweepRun(safe_label(label), seed, None).name


def execute_run(config, cwd: str | None = None) -> dict:
    """Train one run to its end, resuming from its directory (what a Ray task does). `cwd`:
    the sweep's working directory, where relative paths in the config (a dataset, demos)
    start from, when this node has it (a shared filesystem)."""
    if cwd is not None and os.path.isdir(cwd):
        os.chdir(cwd)
    _, train = trainer_of(config)
    run_dir = Path(config.runs_dir) / config.name
    done = run_dir / DONE_FILE
    where = socket.gethostname()
    if done.exists():
        return {"status": "finished", **json.loads(done.read_text())}
    if run_dir.exists():
        from prefrl.rundir.checkpoints import latest_checkpoint

        if resumable(config) and latest_checkpoint(run_dir) is not None:
            config = dataclasses.replace(config, resume=run_dir)
        else:  # stopped before its first checkpoint (or a run that keeps none): start again
            shutil.rmtree(run_dir)
    t0 = time.perf_counter()
    try:
        result = train(config)
    except Exception:  # noqa: BLE001 (reported with the run, never lost; the others go on)
        return {"status": "failed", "error": traceback.format_exc()[-4000:], "node": where}
    seconds = time.perf_counter() - t0
    if getattr(result, "interrupted", False):
        return {"status": "stopped", "seconds": seconds, "node": where, "step": result.steps}
    facts = {"seconds": seconds, "node": where, "finished_at": time.time()}
    with atomic_write(done, "w") as f:
        json.dump(facts, f)
    return {"status": "done", **facts}


def connect_ray(address: str | None, num_cpus: int | None = None):
    """A Ray of the sweep's own, started on this machine and ended with it (even where
    someone's `ray start` runs here or RAY_ADDRESS is set), or the cluster at `address` ("auto":
    the one `ray start` started here, or RAY_ADDRESS). An address nobody answers at fails at
    once, naming it. Runs keep the niceness of the process that starts their workers (this one,
    or the cluster's `ray start`): Ray's default adds 15, and a busy machine then starves them."""
    try:
        import ray
    except ImportError as e:
        raise ImportError(
            "prefrl sweep runs on Ray, which is not installed: pip install 'prefrl[sweep]'"
        ) from e
    address = check_address(address)
    if ray.is_initialized():
        return ray
    own = address is None
    kwargs = {"address": "local", "num_cpus": num_cpus} if own else {"address": address}
    try:
        _init_ray(ray, own, **kwargs)
    except (RuntimeError, ConnectionError) as e:
        if "uthenticat" not in str(e):
            raise
        raise ConnectionError(
            f"the Ray cluster at {address!r} wants its token: run prefrl where "
            "RAY_AUTH_MODE=token is set and the cluster's token is in ~/.ray/auth_token (or "
            "RAY_AUTH_TOKEN), as on its nodes"
        ) from None
    return ray


def _init_ray(ray, own: bool, **kwargs) -> None:
    """`ray.init`; a Ray of the sweep's own whose node does not start in Ray's time (a busy
    machine: its processes start slowly) is tried once more, then said plainly."""
    for attempt in (1, 2):
        try:
            ray.init(**kwargs, runtime_env={"env_vars": {"RAY_worker_niceness": "0"}},
                     include_dashboard=False, log_to_driver=False,
                     configure_logging=False)  # fmt: skip
            return
        except Exception as e:
            if not own or "timed out during startup" not in str(e):
                raise
            ray.shutdown()
            if attempt == 2:
                raise ConnectionError(
                    "the sweep's own Ray did not start in time, twice (its processes start "
                    "slowly on a busy machine): start the sweep again when the machine is less "
                    "busy, or start Ray yourself (`ray start --head --num-cpus N`) and give "
                    "--address auto"
                ) from e


def check_address(address: str | None) -> str | None:
    """The cluster's address, checked to answer: nobody there is an error naming it, before
    anything is written. None (or "local"): a Ray of the sweep's own."""
    if address in (None, "", "local"):
        return None
    if address != "auto":
        host, _, port = address.removeprefix("ray://").rpartition(":")
        try:
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=5):
                pass
        except (OSError, ValueError) as e:
            raise ConnectionError(
                f"cannot reach the Ray cluster at {address!r} ({e}); start one with `ray start "
                "--head` and pass the address it prints (host:6379), or leave --address out "
                "to run on this machine"
            ) from None
    return address


@contextlib.contextmanager
def sweep_lock(directory: Path) -> Iterator[None]:
    """One sweep at a time writes to a directory."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    f = open(path, "a+")  # noqa: SIM115 (held for the sweep)
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise FileExistsError(
            f"another sweep is writing to {directory} ({holder}); wait for it or stop it, or "
            "give this one another directory"
        ) from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} on {socket.gethostname()}")
    f.flush()
    try:
        yield
    finally:
        f.close()


def _check_manifest(directory: Path, runs: list[SweepRun]) -> None:
    """A directory holds one sweep: started again with a run of the same name but another
    config, it refuses (new runs may join)."""
    path = directory / MANIFEST_FILE
    old = json.loads(path.read_text())["runs"] if path.exists() else {}
    new = {
        r.name: {"label": r.label, "seed": r.seed, "command": trainer_of(r.config)[0],
                 "config": config_to_dict(r.config)}
        for r in runs
    }  # fmt: skip
    for name, spec in new.items():
        changed = name in old and _first_difference(old[name], json.loads(json.dumps(spec)))
        if changed:
            raise ValueError(
                f"{directory} holds a sweep whose run {name} has another config ({changed}); "
                "give this sweep another directory (or delete that run to redo it)"
            )
    with atomic_write(path, "w") as f:
        json.dump({"runs": {**old, **new}}, f, indent=1)


def _first_difference(old, new, path: str = "") -> str | None:
    """The first field whose stored value differs from the new one, said; None when none does.
    Fields the stored config lacks are left out: prefrl added them since, and the run stored
    there ran without them."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old):
            found = _first_difference(old[key], new.get(key), f"{path}.{key}" if path else key)
            if found:
                return found
        return None
    return None if old == new else f"{path.removeprefix('config.')}: {old!r} there, {new!r} now"


def run_sweep(
    configs: dict,
    seeds=(0,),
    directory: str | Path = "runs/sweep",
    address: str | None = None,
    cpus_per_run: float = 1.0,
    gpus_per_run: float = 0.0,
    max_retries: int = 3,
    progress: bool = True,
    num_cpus: int | None = None,
) -> SweepResult:
    """Run every config (label -> a training config: `OnlineConfig`, `RLConfig`, ...; see
    `grid`) with every seed as Ray tasks, `cpus_per_run` CPUs (and `gpus_per_run` of a GPU)
    each, then summarise them (`prefrl.sweep.report`). Runs land in `directory`/runs/<label>_s<seed>.
    `num_cpus`: for a Ray started here, how many CPUs it may hand out (default: all)."""
    from prefrl.sweep.report import summarise

    directory = Path(directory).absolute()  # (Ray's workers start elsewhere)
    if cpus_per_run <= 0 or gpus_per_run < 0:
        raise ValueError(f"resources per run (cpus {cpus_per_run}, gpus {gpus_per_run}) are "
                         "invalid: expected cpus > 0, gpus >= 0")  # fmt: skip
    runs = expand_runs(configs, seeds, directory / "runs")
    address = check_address(address)  # (before anything is written)
    with sweep_lock(directory):
        _check_manifest(directory, runs)
        outcomes = {r.name: RunOutcome(r.name, r.label, r.seed, "pending") for r in runs}
        todo = []
        for r in runs:
            done = directory / "runs" / r.name / DONE_FILE
            if done.exists():
                outcomes[r.name] = RunOutcome(r.name, r.label, r.seed, "finished",
                                              **_facts(json.loads(done.read_text())))  # fmt: skip
            else:
                todo.append(r)
        from prefrl.rundir.checkpoints import latest_checkpoint

        begun = [r for r in todo if (directory / "runs" / r.name).exists()]
        resumed = sum(resumable(r.config) and latest_checkpoint(directory / "runs" / r.name)
                      is not None for r in begun)  # fmt: skip
        if progress and (len(todo) < len(runs) or begun):
            print(f"sweep: {_runs(len(runs) - len(todo))} finished (skipped); {_runs(len(todo))} "
                  f"to go (resuming from a checkpoint: {resumed}, starting over: "
                  f"{len(begun) - resumed})", flush=True)  # fmt: skip
        if todo:
            _run_on_ray(todo, outcomes, address, cpus_per_run, gpus_per_run, max_retries,
                        progress, num_cpus)  # fmt: skip
        result = SweepResult(directory, list(outcomes.values()))
        result.table = summarise(directory, runs, result.outcomes)
    return result


def _runs(n: int) -> str:
    return f"{n} run" + ("s" if n != 1 else "")


def _facts(d: dict) -> dict:
    return {k: d[k] for k in ("seconds", "node", "error") if k in d}


def _run_on_ray(todo, outcomes, address, cpus, gpus, retries, progress, num_cpus) -> None:
    with _terminate_as_interrupt():
        ray = connect_ray(address, num_cpus)
    with _terminate_as_interrupt():  # (again: `ray.init` put its own in place)
        _watch_runs(ray, todo, outcomes, cpus, gpus, retries, progress)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the sweep as Ctrl-C does (a KeyboardInterrupt): its runs are stopped and
    it says how to go on (Ray's own handler prints a crash dump and aborts)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _watch_runs(ray, todo, outcomes, cpus, gpus, retries, progress) -> None:
    from rich.progress import Progress

    # A fresh worker process a run (`max_calls=1`): each run imports prefrl as it is when it
    # starts, so code updated under a long sweep never mixes versions inside one run.
    task = ray.remote(max_calls=1)(execute_run)
    refs = {
        task.options(num_cpus=cpus, num_gpus=gpus, max_retries=retries,
                     name=f"prefrl:{r.name}").remote(r.config, os.getcwd()): r
        for r in todo
    }  # fmt: skip
    for r in todo:
        outcomes[r.name].status = "running"
    pending = list(refs)
    with Progress(disable=not progress, transient=True) as bar:
        job = bar.add_task(f"sweep: {len(todo)} runs", total=len(todo))
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1, timeout=5.0)
                for ref in ready:
                    r = refs[ref]
                    try:
                        out = ray.get(ref)
                    except Exception as e:  # noqa: BLE001 (retries spent: its nodes died)
                        out = {"status": "failed", "error": f"{type(e).__name__}: {e}"[-4000:]}
                    outcomes[r.name] = RunOutcome(r.name, r.label, r.seed, out["status"],
                                                  **_facts(out))  # fmt: skip
                    bar.advance(job)
                    if out["status"] == "failed":
                        bar.console.print(f"[red]{r.name} failed[/red]: "
                                          f"{out['error'].strip().splitlines()[-1]}")  # fmt: skip
        except KeyboardInterrupt:
            _stop_runs(ray, refs, pending, outcomes, bar.console)
            raise


def _stop_runs(ray, refs: dict, pending: list, outcomes: dict, console) -> None:
    """Ctrl-C or SIGTERM of a sweep: each running run is stopped as Ctrl-C stops it alone (Ray's
    cancel raises its SIGINT handler): it checkpoints where it is and ends, waited for up to
    `STOP_SECONDS`; a second Ctrl-C (or the wait's end) ends them at once, losing their steps
    since their last checkpoint. Runs not started yet are not started."""
    console.print(f"stopping the {_runs(len(pending))} left: each one running checkpoints where "
                  "it is (Ctrl-C again ends them at once, losing their steps since their last "
                  "checkpoint)", soft_wrap=True)  # fmt: skip
    for ref in pending:
        ray.cancel(ref, force=False)
    try:
        ended, left = ray.wait(pending, num_returns=len(pending), timeout=STOP_SECONDS)
    except KeyboardInterrupt:
        ended, left = [], pending
    for ref in left:
        ray.cancel(ref, force=True)
    for ref in pending:
        r, out = refs[ref], {"status": "stopped"}
        if ref in ended:
            with contextlib.suppress(Exception):  # (cancelled before it started)
                out = ray.get(ref, timeout=5)  # (stopped, or done as the stop came)
        outcomes[r.name] = RunOutcome(r.name, r.label, r.seed, out["status"], **_facts(out))
        if "step" in out:
            console.print(f"{r.name} stopped at step {out['step']:,}, checkpointed: it resumes "
                          "from there", soft_wrap=True)  # fmt: skip
        elif out["status"] == "stopped" and ref not in ended:
            console.print(f"{r.name} ended at once: it resumes from its last checkpoint",
                          soft_wrap=True)  # fmt: skip
