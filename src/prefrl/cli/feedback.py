"""The commands people label with: `serve`, `label`, `labels`, `annotators`."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import tyro

KEEP_ALIVE_SECONDS = 75
STOP_SECONDS = 5


@dataclass(frozen=True)
class ServeArgs:
    """Serve the labelling web app of a run (running or finished): compare pairs, rate clips,
    watch the run. Also renders the clips of open queries in a worker process."""

    run_dir: Annotated[Path, tyro.conf.Positional]
    host: str = "127.0.0.1"
    """Bind address. Anything but loopback requires annotators' token links."""
    port: int = 8000
    store: str | None = None
    """Feedback store URL (default: the one in the run's config, else its SQLite file)."""
    render: bool = True
    """Run the clip renderer beside the server."""
    clip_size: int = 256
    queue: int = 20
    """Open queries kept rendered; older unrendered ones are dropped as stale."""
    side_by_side: bool = False
    """Also write each open query as one video, both clips side by side (clips/pair*.mp4)."""
    workers: int = 1
    """Server processes sharing the port, for a team labelling at once; with more than one,
    use a PostgreSQL store (--store postgresql://...): SQLite takes one writer at a time."""
    overlap: float = 0.0
    """Share of queries that a second annotator labels too, to measure agreement (0-1)."""


def cmd_serve(args: list[str]) -> int:
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from prefrl.feedback.renderer import RendererSupervisor
    from prefrl.feedback.store import run_info, store_url
    from prefrl.feedback.waiting import run_kind
    from prefrl.web.app import SERVE_ENV, create_app, record_address
    from prefrl.web.serve import PortTaken, bind, follow_parent

    follow_parent()  # (started by a trainer: it ends with it)
    opts = tyro.cli(ServeArgs, args=args, prog="prefrl serve")
    if opts.workers < 1:
        raise ValueError(f"--workers {opts.workers} is invalid: expected 1 or more processes")
    run = run_info(opts.run_dir, opts.store)
    local = opts.host in ("127.0.0.1", "localhost", "::1")
    app = create_app(run, require_token=not local, overlap=opts.overlap)  # (checks the store)
    try:  # (bound before the link is printed: a link that leads elsewhere is never given)
        sock = bind(opts.host, opts.port, run.uid)
    except PortTaken as e:
        stop = f" (kill {e.holder.pid})" if e.holder.ours else ""
        raise RuntimeError(f"{e}: stop it{stop}, or serve on another port: --port "
                           f"{opts.port + 1}") from None  # fmt: skip
    if opts.workers > 1:  # each process makes its own app, by name, from PREFRL_SERVE
        app.state.store.close()
        os.environ[SERVE_ENV] = json.dumps({"run_dir": str(run.run_dir), "store": run.store,
                                            "require_token": not local, "overlap": opts.overlap})  # fmt: skip
        app = "prefrl.web.app:app_from_environment"
        if store_url(run.store).startswith("sqlite"):
            print(f"note: {opts.workers} server processes share a SQLite store, which takes one "
                  "writer at a time; a PostgreSQL store (--store postgresql://...) scales "
                  "further", flush=True)  # fmt: skip
    where = f"http://{opts.host}:{opts.port}"
    if opts.host in ("0.0.0.0", "::"):  # (every interface: others reach it by the host's name)
        import socket

        where = f"http://{socket.gethostname()}:{opts.port}"
    # People pause longer than uvicorn's 5 s between requests: keep their connection open (a
    # browser reusing one the server just closed sees an error). A clip still being sent when
    # the server is stopped does not keep it (and its port) for longer than a few seconds.
    config = uvicorn.Config(app, log_level="warning", workers=opts.workers,
                            factory=opts.workers > 1, timeout_keep_alive=KEEP_ALIVE_SECONDS,
                            timeout_graceful_shutdown=STOP_SECONDS)  # fmt: skip
    if opts.workers > 1:
        supervisor = Multiprocess(config, sockets=[sock])
        serve, end = supervisor.run, supervisor.should_exit.set
    else:
        server = uvicorn.Server(config)  # (ends at once, started, if asked to end already)
        serve, end = (
            lambda: server.run(sockets=[sock]),
            lambda: setattr(server, "should_exit", True),
        )
    # SIGTERM (a trainer stopping its server) ends it, the renderer with it, also while it
    # starts: the handler asks the server to end rather than raising, as an exception raised
    # in a garbage collector's callback (JAX has one) is printed and lost, the server serving on.
    signal.signal(signal.SIGTERM, lambda signum, frame: end())
    renderer = None
    try:
        if opts.render:
            renderer = RendererSupervisor(run, opts.clip_size, opts.queue, opts.side_by_side)
        record_address(run.run_dir, where)
        if local and run_kind(run.run_dir).get("kind") == "ratings":  # (clips to rate, no pairs)
            print(f"rate at {where}/rate  (run: {where}/run)", flush=True)
        elif local:
            print(f"label at {where}/compare  (rate: {where}/rate, run: {where}/run)", flush=True)
        else:
            print(f"serving on {where}; annotators need their link: prefrl annotators add NAME "
                  f"--run-dir {opts.run_dir} --url {where}", flush=True)  # fmt: skip
        serve()
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        if renderer is not None:
            renderer.terminate()
    print("stopped serving", flush=True)
    return 0


@dataclass(frozen=True)
class AnnotatorArgs:
    """Add an annotator to a run's store (or show an existing one's link): `add NAME`, `list`."""

    action: Annotated[Literal["add", "list"], tyro.conf.Positional, tyro.conf.arg(metavar="ACTION")]
    """add (NAME) or list."""
    name: Annotated[str | None, tyro.conf.Positional, tyro.conf.arg(metavar="NAME")] = None
    """The annotator's name (add)."""
    run_dir: Path = Path(".")
    """The run whose pairs they label."""
    store: str | None = None
    """Feedback store URL (default: the one in the run's config, else its SQLite file)."""
    url: str | None = None
    """Where the web app is reached, for the printed link (default: where `prefrl serve` of
    this run last said it serves, else http://127.0.0.1:8000). `list` shows an annotator
    added with --url on that address, whatever served since."""


LINKS_FILE = "annotator_links.json"
"""In the run directory: the --url each annotator was added with (name -> base)."""


def _link_bases(run_dir: Path) -> dict[str, str]:
    try:
        return dict(json.loads((Path(run_dir) / LINKS_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return {}


def cmd_annotators(args: list[str]) -> int:
    from prefrl.feedback.store import FeedbackStore, run_info
    from prefrl.feedback.waiting import run_kind
    from prefrl.rundir.atomic import atomic_write
    from prefrl.web.app import LOCAL_ANNOTATOR, served_at

    opts = tyro.cli(AnnotatorArgs, args=args, prog="prefrl annotators")
    run = run_info(opts.run_dir, opts.store)
    url = opts.url or served_at(run.run_dir) or "http://127.0.0.1:8000"
    bases = _link_bases(run.run_dir)  # (kept: a later local serve is not where they label)
    # (a rating run's clips are rated one by one on /rate; other runs' pairs compared)
    page = "rate" if run_kind(run.run_dir).get("kind") == "ratings" else "compare"
    with FeedbackStore(run.store, create=False) as store:
        if opts.action == "add":
            if not opts.name:
                raise ValueError("prefrl annotators add NAME: the NAME is missing")
            token = store.add_annotator(opts.name)
            if opts.url:
                with atomic_write(run.run_dir / LINKS_FILE, "w") as f:
                    json.dump({**bases, opts.name: opts.url}, f)
            print(f"{opts.name}: {url}/{page}?token={token}")
        else:  # list
            annotators = store.annotators()
            if not annotators:
                print(f"no annotators yet: prefrl annotators add NAME --run-dir {opts.run_dir}")
            for name, token in annotators:
                if name == LOCAL_ANNOTATOR:  # (made by the server: nobody was given its link)
                    print(f"{name}: whoever labels on the page served on 127.0.0.1 (no link)")
                else:
                    print(f"{name}: {opts.url or bases.get(name, url)}/{page}?token={token}")
    return 0


@dataclass(frozen=True)
class LabelArgs:
    """Label a run's pairs in the terminal: L, R, E, Enter (can't tell), Q."""

    run_dir: Annotated[Path, tyro.conf.Positional]
    store: str | None = None
    annotator: str = "terminal"
    open_clips: bool = True
    """Open each clip with the system viewer (where there is a display)."""
    render: bool = True
    """Run the clip renderer while labelling."""
    clip_size: int = 256
    side_by_side: bool = False
    """Show (and open) each pair as one video, both clips side by side."""


def cmd_label(args: list[str]) -> int:
    from prefrl.feedback.renderer import RendererSupervisor
    from prefrl.feedback.store import FeedbackStore, run_info
    from prefrl.feedback.terminal import label_in_terminal

    opts = tyro.cli(LabelArgs, args=args, prog="prefrl label")
    run = run_info(opts.run_dir, opts.store)
    renderer = (
        RendererSupervisor(run, opts.clip_size, 20, opts.side_by_side) if opts.render else None
    )
    try:
        with FeedbackStore(run.store, create=False) as store:
            n = label_in_terminal(store, run.uid, run.run_dir, opts.annotator,
                                  open_clips=opts.open_clips,
                                  side_by_side=opts.side_by_side)  # fmt: skip
    except KeyboardInterrupt:
        n = None
    finally:
        if renderer is not None:
            renderer.terminate()
    print("" if n is None else f"{n} labels stored")
    return 0


@dataclass(frozen=True)
class LabelsArgs:
    """Share labels between runs as JSON: `export RUN_DIR [--out FILE]`, `import FILE RUN_DIR`.
    (`prefrl train --load-labels RUN_DIR_OR_FILE` starts a new run with them.)"""

    action: Annotated[str, tyro.conf.Positional]
    """export or import."""
    paths: Annotated[tuple[Path, ...], tyro.conf.Positional]
    """export: the run directory; import: the labels file, then the run directory."""
    out: Path | None = None
    """export: write here (default: labels.json in the run directory)."""
    store: str | None = None
    """The run's feedback store URL (default: the one in its config)."""


def cmd_labels(args: list[str]) -> int:
    from prefrl.feedback.run_labels import export_run_labels, import_run_labels

    opts = tyro.cli(LabelsArgs, args=args, prog="prefrl labels")
    wanted = {"export": 1, "import": 2}
    if opts.action not in wanted:
        raise ValueError(f"prefrl labels {opts.action!r}: expected export or import")
    if len(opts.paths) != wanted[opts.action]:
        usage = "export RUN_DIR" if opts.action == "export" else "import FILE RUN_DIR"
        raise ValueError(f"prefrl labels {opts.action}: expected `prefrl labels {usage}`")
    run_dir = opts.paths[-1]
    if opts.action == "export":
        doc = export_run_labels(run_dir, opts.out, opts.store)
        print(f"{len(doc['labels'])} labels of {run_dir.name} ({doc['env']}) written to "
              f"{doc['path']}")  # fmt: skip
    else:
        done = import_run_labels(opts.paths[0], run_dir, opts.store)
        note = f" ({done.why_none})" if done.why_none else ""
        print(f"{done.count} labels imported into {run_dir.name}{note}; a resumed run trains on "
              "them")  # fmt: skip
    return 0
