"""Several envs worked on together: in this process, or spread over worker processes.

An `EnvPool` holds `n` envs built by `make(i)`. `pool.map(fn, args)` runs `fn(env_i, *args[i])`
on every env (or on the ones named) and returns the results in order. With `workers=0` that is
a loop in this process; with `workers=k` the envs are split over k spawned processes, each works
through its share, and the shares run at the same time. Slow envs (MuJoCo hands, Atari
emulators) then step on every core while the learner waits for the slowest share.

`make` and `fn` must be picklable (module-level functions, `functools.partial` of them) when
there are workers. Workers are spawned, never forked: the parent may hold JAX or a GL context.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import signal
import traceback
from collections.abc import Callable, Sequence
from typing import Any


def seeded(make: Callable[..., Any], env_id: str, first_seed: int) -> Callable[[int], Any]:
    """A picklable `make(i)` for a pool: env i is `make(env_id, seed=first_seed + i)`."""
    return functools.partial(_nth, make, env_id, first_seed)


def _nth(make: Callable[..., Any], env_id: str, first_seed: int, i: int) -> Any:
    return make(env_id, seed=first_seed + i)


def _worker(conn, make: Callable[[int], Any], indices: list[int]) -> None:
    """Builds its envs, then answers (fn, [(local index, args)]) with ("ok", results) or
    ("error", what went wrong) until told None, or until the parent has gone. Ctrl-C and SIGTERM
    reach the whole process group: the worker leaves them to the parent, which stops the run
    between steps, saves it, and then closes the pool."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    envs = {}
    try:
        envs = {i: make(i) for i in indices}
        conn.send(("ok", None))
        while (job := conn.recv()) is not None:
            fn, calls = job
            try:
                conn.send(("ok", [fn(envs[i], *args) for i, args in calls]))
            except Exception:  # noqa: BLE001 (any failure goes to the parent, which raises it)
                conn.send(("error", traceback.format_exc()))
    except (EOFError, BrokenPipeError):
        pass  # (the parent exited)
    except Exception:  # noqa: BLE001 (building the envs: the parent raises it)
        with contextlib.suppress(BrokenPipeError):
            conn.send(("error", traceback.format_exc()))
    finally:
        for env in envs.values():
            close = getattr(env, "close", None)
            if close is not None:
                close()
        conn.close()


class EnvPool:
    """`n` envs; `map` runs a function on each of them, over `workers` processes (0: here)."""

    def __init__(self, make: Callable[[int], Any], n: int, workers: int = 0):
        if n < 1:
            raise ValueError(f"an env pool needs at least 1 env, not {n}")
        if workers < 0:
            raise ValueError(f"env workers must be >= 0 (0: step the envs in this process), "
                             f"not {workers}")  # fmt: skip
        self.n, self.workers = n, min(workers, n)
        self.envs: list[Any] = []
        self._conns: list = []
        self._procs: list = []
        if self.workers == 0:
            self.envs = [make(i) for i in range(n)]
            return
        ctx = multiprocessing.get_context("spawn")
        shares = [list(range(w, n, self.workers)) for w in range(self.workers)]
        for share in shares:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(child, make, share), daemon=True)
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)
        self._gather(range(self.workers), "building its envs")

    def __len__(self) -> int:
        return self.n

    def map(self, fn: Callable, args: Sequence[tuple] | None = None,
            indices: Sequence[int] | None = None) -> list:  # fmt: skip
        """[fn(env_i, *args[k]) for the k-th i of `indices`] (default: every env; no args)."""
        indices = list(range(self.n)) if indices is None else [int(i) for i in indices]
        args = [()] * len(indices) if args is None else list(args)
        if len(args) != len(indices):
            raise ValueError(f"{len(args)} argument tuples for {len(indices)} envs")
        if not self._conns:
            return [fn(self.envs[i], *a) for i, a in zip(indices, args, strict=True)]
        jobs: dict[int, list] = {}
        for k, (i, a) in enumerate(zip(indices, args, strict=True)):
            jobs.setdefault(i % self.workers, []).append((k, i, a))  # (env i is in share i % w)
        for w, calls in jobs.items():
            self._conns[w].send((fn, [(i, a) for _, i, a in calls]))
        out: list = [None] * len(indices)
        results = self._gather(jobs, getattr(fn, "__name__", repr(fn)))
        for w, calls in jobs.items():
            for (k, _, _), result in zip(calls, results[w], strict=True):
                out[k] = result
        return out

    def call(self, i: int, fn: Callable, *args) -> Any:
        """fn(env_i, *args)."""
        return self.map(fn, [args], [i])[0]

    def _gather(self, workers, doing: str) -> dict[int, Any]:
        """Every named worker's answer (all are read, so none is left in its pipe); raises the
        first failure, naming the worker."""
        answers, failed = {}, None
        for w in workers:
            try:
                status, payload = self._conns[w].recv()
            except (EOFError, OSError):  # (a worker that died mid-message: OSError)
                status, payload = "error", "it exited"
            if status == "error":
                failed = failed or f"env worker {w} failed while {doing}:\n{payload}"
            answers[w] = payload
        if failed:
            self.close()
            raise RuntimeError(failed)
        return answers

    def close(self) -> None:
        for env in self.envs:
            close = getattr(env, "close", None)
            if close is not None:
                close()
        for conn in self._conns:
            with contextlib.suppress(BrokenPipeError, OSError):
                conn.send(None)
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
        self.envs, self._conns, self._procs = [], [], []
