import contextlib
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# One persistent XLA compilation cache for the test session, shared by pytest's workers and every
# process a test starts: many tests start, kill and resume trainers, and each start compiled the
# same networks again (a short `prefrl train` run: 52 s without it, 21 s with it warm). The cache
# is new each session (its entries are built for this machine's CPU) and removed at its end; a
# size limit turns on JAX's file lock, so that workers writing one entry at once do not read it
# half written.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="prefrl-test-xla-cache-")
    os.environ["PREFRL_TEST_OWNS_XLA_CACHE"] = str(os.getpid())
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(4 << 30))


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory):
    """Two scripted demos of toy:maze, saved (RFCL's tests)."""
    from prefrl.demos.make import script_demos

    path = tmp_path_factory.mktemp("demos") / "maze"
    script_demos("toy:maze", 2, seed=0).save(path)
    return path


def dapg_door_demos(steps: int = 230) -> list[dict]:
    """Two door demos in hand_dapg's layout (reset qpos, qvel and door position, then actions):
    the first starts with the door open past the 1.35 rad that counts and holds still for
    `steps` steps, the second never opens it (random actions from a closed door)."""
    import numpy as np

    from prefrl.envs import make_env

    env = make_env("adroit:door", seed=0)
    env.reset(seed=3)
    scene = env.unwrapped.get_env_state()
    env.close()
    opened = {**scene, "qpos": scene["qpos"].copy()}
    opened["qpos"][28] = 1.45  # (the door's hinge)
    rng = np.random.default_rng(0)
    return [{"actions": np.zeros((steps, 28)), "init_state_dict": opened},
            {"actions": rng.uniform(-1, 1, (30, 28)), "init_state_dict": scene}]  # fmt: skip


def _postgres_bin() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


def free_port() -> int:
    """A TCP port nobody listens on now (for servers started by tests)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server for the session (Debian's `postgresql`, which .ci/run installs);
    yields a function that makes a fresh database and returns its URL."""
    bindir = _postgres_bin()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql); .ci/run installs it")
    root = tempfile.mkdtemp(prefix="prefrl-pg-")
    data = os.path.join(root, "data")
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        shutil.chown(root, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()

    def run(*cmd: str) -> None:
        subprocess.run([*as_user, *cmd], check=True, capture_output=True)

    run(f"{bindir}/initdb", "-D", data, "-U", "prefrl", "--auth=trust", "-E", "UTF8")
    run(
        f"{bindir}/pg_ctl", "-D", data, "-l", os.path.join(root, "log"), "-w", "-o",
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off", "start",
    )  # fmt: skip
    counter = iter(range(10**6))

    def new_database() -> str:
        name = f"prefrl_test_{next(counter)}"
        run(f"{bindir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "prefrl", name)
        return f"postgresql://prefrl@127.0.0.1:{port}/{name}"

    try:
        yield new_database
    finally:
        stop = [*as_user, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"]
        subprocess.run(stop, check=False, capture_output=True)
        time.sleep(0.2)
        shutil.rmtree(root, ignore_errors=True)


def short_sac_run(runs_dir, name: str, env: str = "toy:point-reach", steps: int = 1000):
    """A short SAC run that keeps a checkpoint (and an evaluation) every 500 steps (300 for
    runs of 300 steps); returns its directory."""
    from prefrl.rl.config import RLConfig
    from prefrl.rl.learner import train_rl

    every = min(500, steps)
    config = RLConfig(
        env=env, steps=steps, warmstart_steps=min(500, steps), eval_interval=every,
        eval_episodes=2, checkpoint_interval=every, keep_checkpoints=0, video=False,
        progress=False, runs_dir=runs_dir, name=name,
    )  # fmt: skip
    return train_rl(config).run_dir


@contextlib.contextmanager
def served(app):
    """The ASGI `app` served by uvicorn on a free local port (in a thread); yields the port."""
    import threading

    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def launch_chromium(playwright, *args: str):
    """Debian's chromium (a test tool's own browser download fails here), headless."""
    return playwright.chromium.launch(
        executable_path=shutil.which("chromium"),
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run", *args],
    )  # fmt: skip


PREFRL_WITH_CTRL_C = [
    sys.executable, "-c",
    ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
     "runpy.run_module('prefrl', run_name='__main__', alter_sys=True)"),
]  # fmt: skip
"""`python -m prefrl` for a child that a test stops with SIGINT, as Ctrl-C would: with Python's
own SIGINT handler, which a test run started as a shell's background job (`make test &`) would
otherwise hand down as ignored."""


_exit_status = {"code": 0}


def pytest_sessionfinish(session, exitstatus):
    _exit_status["code"] = int(exitstatus)


def pytest_unconfigure(config):
    if os.environ.get("PREFRL_TEST_OWNS_XLA_CACHE") == str(os.getpid()):
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
    _exit_watchdog()


def _exit_watchdog():
    """A test that leaves a non-daemon thread running (a trainer waiting for labels that never
    come) would keep the interpreter from exiting after the summary, and CI would hang until its
    limit. A watchdog (a daemon, so it dies with a normal exit) names such threads two minutes
    on and ends the process with the run's status (1 if the tests passed but a thread was
    left)."""
    import threading
    import traceback

    def watchdog():
        time.sleep(float(os.environ.get("PREFRL_TEST_EXIT_WATCHDOG_S", "120")))
        frames, main = sys._current_frames(), threading.main_thread()
        left = [t for t in threading.enumerate() if t.is_alive() and not t.daemon and t is not main]
        for t in left:
            print(f"\nthread {t.name!r} still running after the tests:", file=sys.stderr)
            traceback.print_stack(frames.get(t.ident), file=sys.stderr)
        sys.stderr.flush()
        os._exit(_exit_status["code"] or (1 if left else 0))

    threading.Thread(target=watchdog, name="exit-watchdog", daemon=True).start()
