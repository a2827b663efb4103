"""The labelling web app: compare pairs, rate clips, watch the run (FastAPI + Jinja2, no build step).

It shares only the feedback store and the run directory with the trainer, so either can be
restarted. Every POST is validated and idempotent; a label is committed before the page is told
it was saved. On 127.0.0.1 (the default) the page needs no token; served on another address,
each annotator needs the link with their token (`prefrl annotators add NAME`).
"""

# No `from __future__ import annotations` here: FastAPI reads the endpoints' annotations, and
# the dependency alias `Who` exists only inside create_app.
import contextlib
import functools
import json
import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import anyio.to_thread
from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
)
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, Field

from prefrl.feedback.store import (
    FeedbackStore,
    LabelConflict,
    NotFound,
    RunInfo,
    StoreError,
    run_info,
)
from prefrl.feedback.waiting import no_pair_message, resume_notice, run_kind
from prefrl.render.video import has_audio
from prefrl.rundir.metrics import read_fit_scatter, read_metrics
from prefrl.web.clipfiles import ClipFiles

HERE = Path(__file__).parent
LOCAL_ANNOTATOR = "local"
FAMILY_WINDOW = 50  # unrated clips looked at to gather the next clip's family of siblings


ADDRESS_FILE = "serve.json"
REQUEST_THREADS = 8


def record_address(run_dir: Path, url: str) -> None:
    """Where this run's labelling app serves (for the links `prefrl annotators` prints)."""
    (Path(run_dir) / ADDRESS_FILE).write_text(json.dumps({"url": url}))


def served_at(run_dir: Path) -> str | None:
    try:
        return json.loads((Path(run_dir) / ADDRESS_FILE).read_text())["url"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _finite(x) -> float | None:
    """JSON has no NaN: a metric that is not a number is sent as null."""
    return x if x is not None and math.isfinite(x) else None


def _as_text_where_not_json(x):
    """`x` with the numbers JSON has no word for (NaN, infinities) as text."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _as_text_where_not_json(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_as_text_where_not_json(v) for v in x]
    return x


StoreId = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
"""A row id as the store keeps it (64-bit signed): a larger one is refused (422), never sent to
the database."""


class LabelIn(BaseModel):
    query_id: StoreId
    label: str
    response_ms: Annotated[int, Field(ge=0, le=2**63 - 1)] | None = None


class ReleaseIn(BaseModel):
    query_ids: list[StoreId]


class RatingIn(BaseModel):
    segment_id: StoreId
    rating: Any


SERVE_ENV = "PREFRL_SERVE"
"""How `prefrl serve --workers N` tells each server process what to serve (JSON)."""


def app_from_environment() -> FastAPI:
    """The app of one of several server processes (uvicorn's `--workers`, which imports it by
    name in each): the run and options come in `PREFRL_SERVE`."""
    opts = json.loads(os.environ[SERVE_ENV])
    run = run_info(Path(opts["run_dir"]), opts["store"])
    return create_app(run, require_token=opts["require_token"], overlap=opts["overlap"])


def create_app(run: RunInfo, require_token: bool = False, overlap: float = 0.0) -> FastAPI:
    """The labelling app of `run`. `overlap`: the share of queries that a second annotator
    labels too, to measure how often annotators agree."""
    if not 0.0 <= overlap <= 1.0:
        raise ValueError(f"overlap {overlap} is invalid: expected a share in [0, 1]")
    store = FeedbackStore(run.store, create=False)
    run_id = store.run_id(run.uid, create=False)
    local_token = store.add_annotator(LOCAL_ANNOTATOR)
    total_steps = run_kind(run.run_dir).get("steps")
    online = total_steps is not None
    templates = Jinja2Templates(directory=HERE / "templates")

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        # The few endpoints left in threads (the hot path runs on the event loop) hold the GIL
        # between database round trips; under a crowd, fewer threads that swap it sooner than
        # every 5 ms keep the loop's latency low (measured: benchmarks/web_load.py --pace).
        anyio.to_thread.current_default_thread_limiter().total_tokens = REQUEST_THREADS
        sys.setswitchinterval(0.0005)
        yield
        store.close()

    app = FastAPI(title=f"prefrl: {run.name}", docs_url=None, redoc_url=None, lifespan=lifespan)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.state.store = store

    @app.exception_handler(StoreError)
    async def _store_down(_request, exc):  # the database went away under us
        return JSONResponse({"detail": str(exc)}, status_code=503)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request, exc):
        """FastAPI's 422, whose errors echo the bad input: a NaN or infinity sent (or 1e400,
        read as infinity) is echoed as text, else the answer could not be written (a 500)."""
        detail = _as_text_where_not_json(jsonable_encoder(exc.errors()))
        return JSONResponse({"detail": detail}, status_code=422)

    known_tokens: dict[str, tuple[int, str]] = {}

    async def annotator(  # (async: a thread hop per request costs more than this look-up)
        token: Annotated[str | None, Query()] = None,
        x_prefrl_token: Annotated[str | None, Header()] = None,
    ) -> tuple[int, str, str]:
        given = x_prefrl_token or token
        if given is None:
            if require_token:
                raise HTTPException(401, "this page needs your annotator link (?token=...); "
                                         "ask the run's owner for it: prefrl annotators add NAME")  # fmt: skip
            given = local_token
        if given not in known_tokens:  # tokens are never reassigned: look each up once
            try:
                known_tokens[given] = store.annotator(given)
            except NotFound:
                raise HTTPException(403, "unknown annotator token") from None
        who, name = known_tokens[given]
        return who, name, given

    Who = Annotated[tuple[int, str, str], Depends(annotator)]

    def page(request: Request, template: str, who, **extra) -> HTMLResponse:
        context = {"run": run.name, "env": run.env, "annotator": who[1], "token": who[2],
                   **extra}  # fmt: skip
        return templates.TemplateResponse(request, template, context)

    @app.get("/")
    def index(who: Who) -> RedirectResponse:
        return RedirectResponse(f"/compare?token={who[2]}")

    @app.get("/compare", response_class=HTMLResponse)
    def compare(request: Request, who: Who):
        return page(request, "compare.html", who)

    @app.get("/rate", response_class=HTMLResponse)
    def rate(request: Request, who: Who):
        return page(request, "rate.html", who)

    @app.get("/run", response_class=HTMLResponse)
    def run_page(request: Request, who: Who):
        return page(request, "run.html", who, status=status(who))

    @app.get("/api/server")
    def server() -> dict:
        """Which run this server serves, and its process (no token: a trainer that finds its
        port taken asks, to say by what)."""
        return {"app": "prefrl", "run": run.name, "run_uid": run.uid, "pid": os.getpid()}

    @app.get("/api/status")
    def status(who: Who) -> dict:
        """What the run page shows, and polls for: labels (per annotator, and how often two
        agree), the reward model's fits, the learning curve."""
        counts = store.label_counts(run_id)
        rows = read_metrics(run.run_dir)
        # (every fit logs its learned-vs-true correlation; a fit without held-out labels has
        # no accuracy)
        fits = [r for r in rows if {"reward/segment_return_corr", "reward/clip_return_corr",
                                    "reward/val_accuracy"} & r.keys()]  # fmt: skip
        accuracies = [r["reward/val_accuracy"] for r in fits if "reward/val_accuracy" in r]
        evals = [r for r in rows if "eval/return_mean" in r]
        open_queries = store.query_count(run_id, status="open")
        crowd = store.annotator_stats(run_id)
        return {
            "run": run.name,
            "env": run.env,
            "labels": sum(counts.values()),
            "counts": counts,
            "open_queries": open_queries,
            # (only a training run waits; a labelling run of a dataset's pairs has no trainer)
            "waiting_for_first_labels": open_queries > 0 and not fits and online,
            "reward_val_accuracy": accuracies[-1] if accuracies else None,
            "reward_fits": len(fits),
            "fits": [
                {
                    "step": r["step"],
                    "val_accuracy": _finite(r.get("reward/val_accuracy")),
                    "labels": r.get("feedback/labels"),
                }
                for r in fits
            ],
            "fit_scatter": read_fit_scatter(run.run_dir),
            "step": rows[-1]["step"] if rows else 0,
            "finished": bool(online and rows and rows[-1]["step"] >= total_steps),
            "curve": [
                {
                    "step": r["step"],
                    "return": _finite(r["eval/return_mean"]),
                    "learned": _finite(r.get("eval/learned_return_mean")),
                }
                for r in evals
            ],
            "annotators": [
                {
                    "name": t.name,
                    "labels": t.labels,
                    "doubly_labelled": t.doubly_labelled,
                    "agreed": t.agreed,
                }
                for t in crowd.annotators
            ],
            "overlap": overlap,
            "doubly_labelled": crowd.doubly_labelled,
            "agreement": crowd.agreement,
            "waiting_for_second": crowd.waiting_for_second,
        }

    def clip_urls(segment_ids: list[int], token: str) -> dict[int, str | None]:
        paths = store.clips(segment_ids)
        return {i: f"/{paths[i]}?token={token}" if i in paths else None for i in segment_ids}

    known_clips: dict[int, tuple[str, float | None]] = {}

    def clip_infos(segment_ids: list[int]) -> dict[int, tuple[str, float | None]]:
        """(A segment's clip, once made, never changes: each is read from the store once.)"""
        missing = [i for i in segment_ids if i not in known_clips]
        if missing:
            if len(known_clips) > 100_000:
                known_clips.clear()
            known_clips.update(store.clip_infos(missing))
        return known_clips

    tally = {"at": -1.0, "version": 0, "labels": 0, "open": 0, "notice": None}
    tally_lock = threading.Lock()

    def counts() -> dict:
        """The run's labels and unanswered pairs, as shown beside each pair, and `notice`:
        whether its trainer has finished or stopped (`resume_notice`). Counted at most
        once a second per process (counting costs as much as the rest of a request with
        thousands open), this process's own labels added as they are stored (`counted`), so
        that a page is never behind the answers given through it."""
        with tally_lock:
            if time.monotonic() - tally["at"] > 1.0:
                labels = sum(store.label_counts(run_id).values())
                open_ = store.query_count(run_id, status="open")
                notice = resume_notice(run.run_dir) if online else None
                tally.update(at=time.monotonic(), version=tally["version"] + 1, labels=labels,
                             open=open_, notice=notice)  # fmt: skip
            return {"labels": tally["labels"], "open": tally["open"], "notice": tally["notice"]}

    def counted(version: int) -> None:
        """A pair's first label was stored, by a call that began at count `version`: added to
        the count; where the count was taken again since, it may hold it already: count anew."""
        with tally_lock:
            if tally["version"] == version:
                tally["labels"] += 1
                tally["open"] -= 1
            else:
                tally["at"] = -1.0

    async def in_store(fn, *args, **kwargs):
        """The labelling hot path's store calls. On PostgreSQL they run on the event loop: each
        is a millisecond of CPU, and a thread hop for each costs more than it saves (GIL
        hand-offs turn a crowd's milliseconds into seconds). SQLite may wait for its write
        lock, so there they run in a thread."""
        if store.is_sqlite:
            return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
        return fn(*args, **kwargs)

    @app.get("/api/next")
    async def next_queries(who: Who, n: Annotated[int, Query(ge=1, le=10)] = 2) -> dict:
        """Up to `n` pairs for this annotator; with none, `waiting` says why. `labels` counts the
        run's labels, `open` its unanswered pairs (this annotator's included); `notice` says
        that the run's trainer has finished or stopped."""
        queries = await in_store(store.assign_queries, run_id, who[0], n=n, need_clips=True)
        segments = [i for q in queries for i in (q.left_segment, q.right_segment)]
        clips = await in_store(clip_infos, segments)
        if not queries:
            waiting = await in_store(no_pair_message, store, run_id, run.run_dir, who[0])
        return {
            "queries": [
                {
                    "id": q.id,
                    "left": f"/{clips[q.left_segment][0]}?token={who[2]}",
                    "right": f"/{clips[q.right_segment][0]}?token={who[2]}",
                    "seconds": clips[q.left_segment][1],
                }
                for q in queries
            ],
            **await in_store(counts),
            "waiting": None if queries else waiting,
        }

    @app.post("/api/release")
    def release(body: ReleaseIn, who: Who) -> dict:
        """Give back pairs handed to this page and not answered (sent when the page closes), so
        that nobody waits for a lease to run out."""
        return {"released": store.release_queries(run_id, who[0], body.query_ids)}

    @app.post("/api/label")
    async def post_label(body: LabelIn, who: Who) -> dict:
        """Store a label; the answer holds the run's counts after it (`labels`, `open`)."""
        version = tally["version"]
        try:
            stored, created = await in_store(
                store.add_label, body.query_id, body.label, source="web", annotator_id=who[0],
                response_ms=body.response_ms, overlap=overlap,
            )  # fmt: skip
        except NotFound as e:
            raise HTTPException(404, str(e)) from None
        except LabelConflict as e:
            raise HTTPException(409, str(e)) from None
        except ValueError as e:
            raise HTTPException(400, str(e)) from None
        if created and not stored.second:  # (a second annotator's label closes no pair)
            counted(version)
        return {"saved": True, "created": created, "label_id": stored.id,
                "label": stored.label.name.lower(), "second": stored.second,
                **await in_store(counts)}  # fmt: skip

    known_sound: dict[int, bool] = {}

    def clip_sound(segment_id: int, path: str) -> bool:
        """Whether a clip has a sound track (the piano's), probed once per clip."""
        if segment_id not in known_sound:
            known_sound[segment_id] = has_audio(run.run_dir / path)
        return known_sound[segment_id]

    @app.get("/api/rate/next")
    def next_to_rate(who: Who, n: Annotated[int, Query(ge=1, le=20)] = 4) -> dict:
        """The next `n` clips to rate; where the next clip has siblings (`prefrl collect
        --siblings`), its family's unrated clips instead (up to 20), to be rated together."""
        todo = store.segments_to_rate(run_id, who[0], FAMILY_WINDOW)
        infos = store.segment_infos(todo)
        family = infos[todo[0]].get("family") if todo else None
        if family is None:
            todo = todo[:n]
        else:  # families are collected one after another, so they are contiguous in id order
            todo = [s for s in todo if infos[s].get("family") == family][:20]
        urls, clips = clip_urls(todo, who[2]), clip_infos(todo)
        without = 0
        if not todo:  # (say why nothing is shown: segments collected without clips)
            ids = store.segment_ids(run_id)
            without = len(ids) - len(store.clips(ids))
        # (seconds: the page slows short clips down to a speed a person can follow)
        segments = [{"id": s, "clip": urls[s], "seconds": clips[s][1],
                     "sound": clip_sound(s, clips[s][0])} for s in todo]  # fmt: skip
        return {"family": family, "segments": segments, "without_clips": without}

    @app.post("/api/rating")
    def post_rating(body: RatingIn, who: Who) -> dict:
        try:
            created = store.add_rating(body.segment_id, body.rating, "web", who[0])
        except NotFound as e:
            raise HTTPException(404, str(e)) from None
        except ValueError as e:
            raise HTTPException(400, str(e)) from None
        return {"saved": True, "created": created}

    clip_files = ClipFiles(run.run_dir / "clips")

    @app.get("/clips/{name}")
    async def clip(name: str, request: Request, who: Who) -> Response:
        """(On the event loop, from memory: see ClipFiles.)"""
        return clip_files.response(name, request.headers.get("range"),
                                   request.headers.get("if-range"))  # fmt: skip

    @app.get("/favicon.ico")
    def favicon() -> FileResponse:
        return FileResponse(HERE / "static" / "favicon.svg", media_type="image/svg+xml")

    return app
