"""The `prefrl` command. Each subcommand maps to one loop or tool; flags come from the same frozen
dataclasses that configure the code (tyro)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro


def _pop_option(args: list[str], flag: str) -> tuple[str | None, list[str]]:
    """Remove `flag VALUE` / `flag=VALUE` from args; return (value, remaining)."""
    rest, value, i = [], None, 0
    while i < len(args):
        a = args[i]
        if a == flag:
            if i + 1 >= len(args):
                raise SystemExit(f"prefrl: {flag} needs a value")
            value, i = args[i + 1], i + 2
            continue
        if a.startswith(flag + "="):
            value = a.split("=", 1)[1]
        else:
            rest.append(a)
        i += 1
    return value, rest


def _parse_config(cls, presets, args: list[str], prog: str, summary: str):
    """tyro over `cls`, starting from --preset NAME or, with --resume RUN, the run's own stored
    config (flags given on the command line override either)."""
    from prefrl.rundir.config import config_from_dict

    preset, args = _pop_option(args, "--preset")
    resume = _pop_option(args, "--resume")[0]  # stays in args: tyro parses it too
    if resume is not None:
        stored = Path(resume) / "config.json"
        if not stored.exists():
            raise SystemExit(
                f"{prog}: --resume {resume}: no config.json there (not a run directory)"
            )
        base = config_from_dict(cls, json.loads(stored.read_text()))
    elif preset is not None:
        if preset not in presets:
            raise SystemExit(f"{prog}: unknown --preset {preset!r}; known: {', '.join(presets)}")
        base = presets[preset].config
    else:
        base = cls()
    listing = "\n".join(f"  {name}: {p.description}" for name, p in presets.items())
    description = summary
    if presets:
        description += (
            "\n\n--preset NAME starts from a named published setting (flags given after it "
            f"override it):\n{listing}"
        )
    return tyro.cli(cls, default=base, args=args, prog=prog, description=description)


def _print_run_end(result, steps: int, command: str) -> bool:
    """Report an interrupted or already-finished run; True when there is nothing else to say."""
    if result.interrupted:
        print(
            f"stopped at step {result.step:,}; continue with: {command} --resume {result.run_dir}"
        )
        return True
    if result.final_eval is None:
        print(
            f"{result.run_dir} is already at step {result.step:,} of {steps:,}; "
            "pass a larger --steps to extend it"
        )
        return True
    return False


def cmd_rl(args: list[str]) -> int:
    from prefrl.loops.rl import RLConfig, train_rl
    from prefrl.presets import RL_PRESETS

    config = _parse_config(
        RLConfig, RL_PRESETS, args, "prefrl rl", "Train SAC on an environment's true reward."
    )
    result = train_rl(config)
    if _print_run_end(result, config.steps, "prefrl rl"):
        return 130 if result.interrupted else 0
    _print_eval([result.final_eval], ["final"], f"SAC on {config.env} after {result.step:,} steps")
    print(f"run directory: {result.run_dir}")
    if result.video is not None:
        print(f"video: {result.video}")
    return 0


def cmd_train(args: list[str]) -> int:
    from prefrl.loops.online import OnlineConfig, train_online
    from prefrl.presets import ONLINE_PRESETS

    # `--teacher web` is short for `--teacher.preset web`.
    args = ["--teacher.preset" if a == "--teacher" else a for a in args]
    args = [a.replace("--teacher=", "--teacher.preset=", 1) for a in args]

    config = _parse_config(
        OnlineConfig,
        ONLINE_PRESETS,
        args,
        "prefrl train",
        "Learn a behaviour from preferences between pairs of clips (PEBBLE with SAC, or "
        "PrefPPO), labelled by a scripted teacher or by you (--teacher web or terminal).",
    )
    result = train_online(config)
    if _print_run_end(result, config.steps, "prefrl train"):
        return 130 if result.interrupted else 0
    algo = "PEBBLE" if config.algo == "sac" else "PrefPPO"
    _print_eval(
        [result.final_eval], ["final"], f"{algo} on {config.env} after {result.step:,} steps"
    )
    m = result.reward_metrics
    print(
        f"labels: {result.labels} from the {config.teacher.preset} teacher; learned vs true "
        f"reward: validation accuracy {m.get('reward/val_accuracy', float('nan')):.2f}, "
        f"correlation of segment returns {m.get('reward/segment_return_corr', float('nan')):.2f}"
    )
    learned = result.final_eval.learned_returns
    if learned is not None:
        print(
            f"final return: true {result.final_eval.returns.mean():.1f}, learned {learned.mean():.1f}"
        )
    print(f"run directory: {result.run_dir}")
    if result.video is not None:
        print(f"video: {result.video}")
    return 0


@dataclass(frozen=True)
class EvalArgs:
    """Evaluate trained policies (deterministic actions) on the same seeds and write a video of
    one episode; with several policies, a table of all and their videos side by side."""

    targets: Annotated[tuple[Path, ...], tyro.conf.Positional]
    """Run directories (their latest checkpoint) or checkpoint directories, of one env (e.g. the
    original policy and its CPL fine-tuning)."""
    episodes: int = 10
    video: Path | None = None
    """Write the first episode to this mp4 file (several policies: side by side, in the order
    given)."""
    seed: int = 0
    render_size: int = 256


def cmd_eval(args: list[str]) -> int:
    from prefrl.loops.evaluate import evaluate, make_eval_envs
    from prefrl.loops.rl import load_policy
    from prefrl.render import write_video
    from prefrl.render.clips import side_by_side

    opts = tyro.cli(EvalArgs, args=args, prog="prefrl eval")
    if opts.episodes <= 0:
        raise SystemExit(f"prefrl eval: --episodes={opts.episodes} is invalid: expected >= 1")
    policies = [load_policy(t) for t in opts.targets]
    env_id = policies[0].config.env
    for target, loaded in zip(opts.targets, policies, strict=True):
        if loaded.config.env != env_id:
            raise SystemExit(
                f"prefrl eval: {target} is a {loaded.config.env} policy and {opts.targets[0]} a "
                f"{env_id} one: policies compared side by side must share an env"
            )
    envs = make_eval_envs(env_id, opts.episodes, opts.render_size if opts.video else None)
    results = []
    for loaded in policies:
        params, sac = loaded.state.actor_params, loaded.sac
        results.append(
            evaluate(
                lambda obs, sac=sac, params=params: sac.act(
                    params, obs, None, 0, deterministic=True
                ),
                envs,
                seed=opts.seed,
                record=opts.video is not None,
            )
        )
    names = [str(p.checkpoint) for p in policies]
    _print_eval(results, names, f"on {env_id}, {opts.episodes} episodes, seed {opts.seed}")
    if opts.video is not None:
        frames = results[0].frames
        for result in results[1:]:
            frames = side_by_side(frames, result.frames)
        write_video(opts.video, frames, fps=envs[0].fps, audio=_eval_audio(results))
        order = f" (left to right: {', '.join(names)})" if len(names) > 1 else ""
        print(f"video: {opts.video}{order}")
    for env in envs:
        env.close()
    return 0


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


def _start_renderer(run, size: int, queue: int, pairs: bool = False):
    from prefrl.loops.renderer import RendererSupervisor

    return RendererSupervisor(run, size, queue, pairs)


def cmd_serve(args: list[str]) -> int:
    import uvicorn

    from prefrl.feedback.store import run_info
    from prefrl.web.app import create_app, record_address

    opts = tyro.cli(ServeArgs, args=args, prog="prefrl serve")
    run = run_info(opts.run_dir, opts.store)
    local = opts.host in ("127.0.0.1", "localhost", "::1")
    app = create_app(run, require_token=not local)
    renderer = (
        _start_renderer(run, opts.clip_size, opts.queue, opts.side_by_side) if opts.render else None
    )
    where = f"http://{opts.host}:{opts.port}"
    if opts.host in ("0.0.0.0", "::"):  # (every interface: others reach it by the host's name)
        import socket

        record_address(run.run_dir, f"http://{socket.gethostname()}:{opts.port}")
    else:
        record_address(run.run_dir, where)
    if local:
        print(f"label at {where}/compare  (rate: {where}/rate, run: {where}/run)", flush=True)
    else:
        print(f"serving on {where}; annotators need their link: prefrl annotators add NAME "
              f"--run-dir {opts.run_dir} --url {where}", flush=True)  # fmt: skip
    try:
        uvicorn.run(app, host=opts.host, port=opts.port, log_level="warning")
    finally:
        if renderer is not None:
            renderer.terminate()
    return 0


@dataclass(frozen=True)
class AnnotatorArgs:
    """Add an annotator to a run's store (or show an existing one's link): `add NAME`, `list`."""

    action: Annotated[str, tyro.conf.Positional]
    """add or list."""
    name: Annotated[str | None, tyro.conf.Positional] = None
    run_dir: Path = Path(".")
    store: str | None = None
    url: str | None = None
    """Where the web app is reached, for the printed link (default: where `prefrl serve` of
    this run last said it serves, else http://127.0.0.1:8000)."""


def cmd_annotators(args: list[str]) -> int:
    from prefrl.feedback.store import FeedbackStore, run_info
    from prefrl.web.app import served_at

    opts = tyro.cli(AnnotatorArgs, args=args, prog="prefrl annotators")
    run = run_info(opts.run_dir, opts.store)
    url = opts.url or served_at(run.run_dir) or "http://127.0.0.1:8000"
    with FeedbackStore(run.store, create=False) as store:
        if opts.action == "add":
            if not opts.name:
                raise ValueError("prefrl annotators add NAME: the NAME is missing")
            print(f"{opts.name}: {url}/compare?token={store.add_annotator(opts.name)}")
        elif opts.action == "list":
            for name, token in store.annotators():
                print(f"{name}: {url}/compare?token={token}")
        else:
            raise ValueError(f"prefrl annotators {opts.action!r}: expected add or list")
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
    from prefrl.feedback.store import FeedbackStore, run_info
    from prefrl.feedback.terminal import label_in_terminal

    opts = tyro.cli(LabelArgs, args=args, prog="prefrl label")
    run = run_info(opts.run_dir, opts.store)
    renderer = _start_renderer(run, opts.clip_size, 20, opts.side_by_side) if opts.render else None
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
    from prefrl.envs import make_env
    from prefrl.feedback.exchange import (
        document_origin,
        export_labels,
        import_labels,
        read_labels,
        write_labels,
    )
    from prefrl.feedback.store import FeedbackStore, run_info

    opts = tyro.cli(LabelsArgs, args=args, prog="prefrl labels")
    wanted = {"export": 1, "import": 2}
    if opts.action not in wanted:
        raise ValueError(f"prefrl labels {opts.action!r}: expected export or import")
    if len(opts.paths) != wanted[opts.action]:
        usage = "export RUN_DIR" if opts.action == "export" else "import FILE RUN_DIR"
        raise ValueError(f"prefrl labels {opts.action}: expected `prefrl labels {usage}`")
    run = run_info(opts.paths[-1], opts.store)
    with FeedbackStore(run.store, create=False) as store:
        if opts.action == "export":
            doc = export_labels(store, run.uid, run.run_dir)
            out = opts.out or run.run_dir / "labels.json"
            write_labels(doc, out)
            print(f"{len(doc['labels'])} labels of {run.name} ({doc['env']}) written to {out}")
        else:
            doc = read_labels(opts.paths[0])
            env = make_env(run.env, seed=0)
            try:
                n = import_labels(store, run.uid, run.run_dir, doc, env.obs_dim, env.action_dim)
            finally:
                env.close()
            own = document_origin(doc) == run.uid
            note = (
                ""
                if n
                else " (these are the run's own labels)"
                if own
                else f" (the labels of {doc.get('run')!r} were imported before)"
            )
            print(f"{n} labels imported into {run.name}{note}; a resumed run trains on them")
    return 0


@dataclass(frozen=True)
class DatasetCollectArgs:
    """Make a D4RL-style dataset from a `prefrl rl` run (see prefrl.loops.datasets)."""

    run: Annotated[Path, tyro.conf.Positional]
    """The SAC run directory (train it with --keep-checkpoints 0 for medium datasets)."""
    kind: str = "medium-replay"
    """random, medium, medium-replay, expert or medium-expert."""
    out: Path = Path("datasets/dataset")
    """The Minari dataset directory to write."""
    steps: int = 200_000
    """Transitions of rollouts (not used by medium-replay: the buffer up to the medium step)."""
    medium_step: int | None = None
    """Use the checkpoint at this step as the medium policy (default: the one whose evaluation
    return is nearest half the final one)."""
    seed: int = 0


@dataclass(frozen=True)
class DatasetImportArgs:
    """Import a D4RL-layout HDF5 file as a Minari dataset."""

    file: Annotated[Path, tyro.conf.Positional]
    env: str
    """The prefrl env id the data comes from (e.g. Hopper-v5)."""
    out: Path = Path("datasets/imported")
    ref_min_score: float | None = None
    """Random-policy return for the normalised score (D4RL's REF_MIN_SCORE)."""
    ref_max_score: float | None = None
    """Expert return for the normalised score (D4RL's REF_MAX_SCORE)."""


@dataclass(frozen=True)
class DatasetQueriesArgs:
    """Sample query pairs from a dataset and label them with a scripted teacher."""

    dataset: Annotated[Path, tyro.conf.Positional]
    """The Minari dataset directory."""
    num: int = 500
    """Query pairs to sample."""
    length: int = 100
    """Steps per segment (each segment lies inside one episode)."""
    teacher: str = "oracle"
    """A scripted teacher preset (oracle, stoc, mistake, skip, equal, myopic); web or terminal
    (a person: makes a labelling run for `prefrl serve` / `prefrl label`); or none."""
    out: Path = Path("queries.json")
    seed: int = 0
    queries: Path | None = None
    """Label these queries (a query file of the same dataset) instead of sampling new ones."""
    label_dir: Path | None = None
    """With --teacher web/terminal: the labelling run to make (default: OUT without .json,
    plus -labelling)."""
    from_run: Path | None = None
    """Take the labels a person gave in this labelling run (with --queries: the file it was
    made from); unanswered queries are left out."""


@dataclass(frozen=True)
class DatasetPTArgs:
    """Import Preference Transformer's released labels (pickled indices and labels)."""

    dataset: Annotated[Path, tyro.conf.Positional]
    """The dataset the labels were made on (D4RL's flat layout)."""
    indices_1: Path
    """Pickled start indices of the first segments (PT's `indices_num*`)."""
    indices_2: Path
    """Pickled start indices of the second segments (`indices_2_num*`)."""
    labels: Path
    """Pickled labels (`label_human`): 0 first better, 1 second, -1 equal."""
    length: int = 100
    """The queries' segment length."""
    out: Path = Path("queries.json")


def cmd_dataset(args: list[str]) -> int:
    actions = {
        "collect": DatasetCollectArgs,
        "import-d4rl": DatasetImportArgs,
        "queries": DatasetQueriesArgs,
        "import-pt-labels": DatasetPTArgs,
        "info": None,
    }
    if not args or args[0] in ("-h", "--help") or args[0] not in actions:
        if args and args[0] not in ("-h", "--help"):
            print(f"prefrl dataset: unknown action {args[0]!r}", file=sys.stderr)
        said = {"info": "print a dataset's size, episodes and returns: info DATASET_DIR"}
        lines = ["usage: prefrl dataset ACTION [--help] [flags]", "", "actions:"]
        for name, spec in actions.items():
            doc = said.get(name) or (spec.__doc__ or "").strip().splitlines()[0]
            lines.append(f"  {name:<17} {doc}")
        print("\n".join(lines))
        return 0 if not args or args[0] in ("-h", "--help") else 2
    action, rest = args[0], args[1:]
    from prefrl.data.dataset import OfflineDataset

    if action == "info":
        if not rest or rest[0].startswith("-"):
            print("usage: prefrl dataset info DATASET_DIR")
            return 0 if rest else 2
        _print_dataset(OfflineDataset.load(rest[0]))
        return 0
    opts = tyro.cli(actions[action], args=rest, prog=f"prefrl dataset {action}")
    if action == "collect":
        from prefrl.loops.datasets import collect_dataset

        data = collect_dataset(opts.run, opts.kind, opts.steps, opts.seed, opts.medium_step)
        data.name = opts.out.name
        data.save(opts.out)
        _print_dataset(data)
        print(f"written to {opts.out}")
    elif action == "import-d4rl":
        from prefrl.data.dataset import import_d4rl_hdf5
        from prefrl.envs import make_env

        env = make_env(opts.env, seed=0)
        dims = (env.obs_dim, env.action_dim)
        env.close()
        data = import_d4rl_hdf5(
            opts.file, opts.env, opts.out.name, opts.ref_min_score, opts.ref_max_score, dims
        )
        data.save(opts.out)
        _print_dataset(data)
        print(f"written to {opts.out}")
    elif action == "queries":
        from prefrl.feedback.dataset_queries import (
            DatasetQueries,
            label_queries,
            labels_from_store,
            sample_queries,
            send_to_store,
        )
        from prefrl.feedback.teachers import TeacherConfig

        data = OfflineDataset.load(opts.dataset)
        _keep_human_labels(opts.out)
        if opts.queries is not None:
            queries = DatasetQueries.load(opts.queries)
            queries.check(data)
        else:
            queries = sample_queries(data, opts.num, opts.length, opts.seed)
        if opts.from_run is not None:
            if opts.queries is None:
                raise ValueError(
                    "--from-run needs --queries: the file the labelling run was made from"
                )
            queries = labels_from_store(queries, opts.from_run)
            what = f"answered in {opts.from_run} (of {queries.info['asked']} asked)"
        elif opts.teacher in ("web", "terminal"):
            label_dir = opts.label_dir or opts.out.with_name(opts.out.stem + "-labelling")
            then = (
                f"prefrl dataset queries {opts.dataset} --queries {opts.out} --from-run "
                f"{label_dir} --out LABELLED.json"
            )
            send_to_store(queries, data, label_dir, next_step=then)
            queries.save(opts.out)
            tool = "prefrl serve" if opts.teacher == "web" else "prefrl label"
            print(
                f"{len(queries)} queries written to {opts.out} and put up for labelling in "
                f"{label_dir}\nlabel them: {tool} {label_dir}\nthen: {then}"
            )
            return 0
        elif opts.teacher != "none":
            queries = label_queries(queries, data, TeacherConfig(opts.teacher), opts.seed)
            what = f"labelled by the {opts.teacher} teacher"
        else:
            what = "unlabelled"
        queries.save(opts.out)
        print(f"{len(queries)} queries of {queries.length} steps, {what}, written to {opts.out}")
        if queries.labels is not None:
            counts = np.bincount(queries.labels, minlength=4)
            print(
                f"labels: left {counts[0]}, right {counts[1]}, equal {counts[2]}, skip {counts[3]}"
            )
    else:
        from prefrl.feedback.dataset_queries import import_pt_labels

        data = OfflineDataset.load(opts.dataset)
        queries = import_pt_labels(data, opts.indices_1, opts.indices_2, opts.labels, opts.length)
        queries.save(opts.out)
        print(f"{len(queries)} Preference Transformer labels written to {opts.out}")
    return 0


def _keep_human_labels(out: Path) -> None:
    """Refuse to write over a queries file that holds a person's labels."""
    from prefrl.feedback.dataset_queries import DatasetQueries

    if not out.is_file():
        return
    try:
        old = DatasetQueries.load(out)
    except (ValueError, KeyError, OSError):
        return  # not a queries file we could lose labels from
    if old.labels is not None and old.source in ("human", "pt-human"):
        raise FileExistsError(
            f"--out {out} holds {len(old)} labels given by people; choose another --out (or "
            "move that file away first): they are not written over"
        )


def _print_dataset(data) -> None:
    starts, ends = data.episode_bounds()
    returns = data.episode_returns()
    print(
        f"{data.name}: {data.env_id}, {len(data):,} transitions in {len(starts):,} episodes "
        f"(length {np.mean(ends - starts):.0f} mean), episode return {returns.mean():.1f} "
        f"mean, {returns.min():.1f} to {returns.max():.1f}"
    )
    if data.ref_min_score is not None and data.ref_max_score is not None:
        score = data.normalized_score(returns)
        print(
            f"reference returns: random {data.ref_min_score:.1f}, expert {data.ref_max_score:.1f}"
            f"; normalised episode score {score.mean():.1f} mean"
        )


def cmd_offline(args: list[str]) -> int:
    from prefrl.loops.offline import OfflineConfig, train_offline
    from prefrl.presets import OFFLINE_PRESETS

    given = [a.split("=")[0] for a in args]
    if "--iql.steps" in given:
        raise ValueError(
            "--iql.steps is not a setting of its own here: IQL takes --steps steps (which also "
            "set its actor's schedule); use --steps"
        )
    config = _parse_config(
        OfflineConfig,
        OFFLINE_PRESETS,
        args,
        "prefrl offline",
        "Offline learning from preferences: fit a reward model (mr, nmr, pt) to a dataset's "
        "labelled queries, relabel the dataset, train IQL; reports the D4RL-normalised score.",
    )
    result = train_offline(config)
    if result.stopped:
        print(
            f"stopped at step {result.steps:,}; continue with: prefrl offline --resume "
            f"{result.run_dir}"
        )
        return 130
    m = result.reward_metrics
    if config.reward != "true":
        print(
            f"reward model ({config.reward}): validation accuracy "
            f"{m.get('reward/val_accuracy', float('nan')):.2f}, correlation with the true "
            f"episode returns {m.get('reward/episode_return_correlation', float('nan')):.2f}"
        )
    print(
        f"IQL on the {config.reward} reward after {result.steps:,} steps: normalised score "
        f"{result.score_mean:.1f} +- {result.score_std:.1f} (return {result.return_mean:.1f})"
    )
    print(f"run directory: {result.run_dir}")
    return 0


@dataclass(frozen=True)
class CollectArgs:
    """Roll out checkpoints of a run at several action-noise levels into a rating run (segments
    with their provenance, and clips) for people or a scripted rater to rate 1-100."""

    checkpoints: tuple[Path, ...]
    """Run directories (their latest checkpoint) or checkpoint directories, of one env."""
    noise: tuple[float, ...] = (0.0, 0.1, 0.3)
    """Std of the Gaussian noise added to the policy's deterministic action (before its tanh,
    so actions stay inside (-1, 1))."""
    segments: int = 150
    """Segments in all, an equal share per (checkpoint, noise)."""
    length: int = 50
    siblings: int = 1
    """Segments per start state: above 1, each family of segments starts from one state the
    noisy policy reached and differs by its action noise alone (rate them, then fine-tune with
    `prefrl finetune --pairs siblings`). Needs every --noise above 0."""
    out: Path = Path("runs/ratings")
    clip_size: int = 256
    """Clip size in pixels; 0 renders no clips (scripted raters need none)."""
    seed: int = 0


def cmd_collect(args: list[str]) -> int:
    from prefrl.loops.collect import policy_segments
    from prefrl.loops.finetune import make_rating_run
    from prefrl.loops.rl import load_policy

    opts = tyro.cli(CollectArgs, args=args, prog="prefrl collect")
    segments, infos = policy_segments(
        list(opts.checkpoints), list(opts.noise), opts.segments, opts.length, opts.seed,
        opts.siblings,
    )  # fmt: skip
    env_id = load_policy(opts.checkpoints[0]).config.env
    make_rating_run(opts.out, env_id, segments, infos, opts.clip_size or None)
    print(
        f"{len(segments)} segments of {opts.length} steps from {len(opts.checkpoints)} "
        f"checkpoint(s) x noise {list(opts.noise)}"
        + (f", in families of {opts.siblings} siblings" if opts.siblings > 1 else "")
        + f" in {opts.out}\nrate them: prefrl serve "
        f"{opts.out} (then /rate), or prefrl rate {opts.out} --rater return"
    )
    return 0


@dataclass(frozen=True)
class RateArgs:
    """Rate every segment of a rating run 1-100: yourself in the terminal, or a scripted rater."""

    run_dir: Annotated[Path, tyro.conf.Positional]
    rater: str = "return"
    """terminal (you: one clip at a time, typed 1-100), or a scripted rater: return (true
    return), regret:RUN (advantage of the segment's actions under the critic of a better SAC run
    or checkpoint), low-action / high-action (smaller / larger actions), obs:I (higher
    observation I on average), low-obs:I (lower), piano-f1 / piano-wrong-keys (piano runs:
    higher key-press F1 / fewer keys pressed that the song did not ask for), A+w*B: weighted
    standardised scores, e.g. return+0.5*low-action, or A@B/N: A at equal B, e.g.
    low-action@return/5 (N bands of B's score; a higher band always wins, inside a band A
    decides)."""
    noise: float = 0.0
    """Std of the rating noise, as a share of the 1-100 scale (scripted raters)."""
    seed: int = 0
    annotator: str = "terminal"
    """Who is rating (--rater terminal)."""
    open_clips: bool = True
    """Open each clip with the system viewer where there is a display (--rater terminal)."""


def cmd_rate(args: list[str]) -> int:
    from prefrl.loops.finetune import rate_scripted

    opts = tyro.cli(RateArgs, args=args, prog="prefrl rate")
    if opts.rater == "terminal":
        from prefrl.feedback.store import FeedbackStore, run_info
        from prefrl.feedback.terminal import rate_in_terminal

        run = run_info(opts.run_dir)
        try:
            with FeedbackStore(run.store, create=False) as store:
                n = rate_in_terminal(
                    store, run.uid, run.run_dir, opts.annotator, open_clips=opts.open_clips
                )
        except KeyboardInterrupt:
            return 0
        print(f"{n} clips of {opts.run_dir} rated")
        return 0
    n = rate_scripted(opts.run_dir, opts.rater, opts.noise, opts.seed)
    print(f"{n} segments of {opts.run_dir} rated by the scripted {opts.rater} rater")
    return 0


def cmd_finetune(args: list[str]) -> int:
    from prefrl.loops.finetune import FinetuneConfig, finetune

    config = tyro.cli(
        FinetuneConfig,
        args=args,
        prog="prefrl finetune",
        description="Fine-tune a SAC policy with Contrastive Preference Learning from the "
        "ratings of its clips (every pair of differently rated clips is a preference).",
    )
    result = finetune(config)
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"CPL on {result.pairs} pairs from {config.ratings}")
    for col in ("policy", "return mean", "return std", "min", "max"):
        table.add_column(col, justify="right")
    for label, r in (("original", result.start_returns), ("fine-tuned", result.finetuned_returns)):
        table.add_row(
            label, f"{r.mean():.1f}", f"{r.std():.1f}", f"{r.min():.1f}", f"{r.max():.1f}"
        )
    Console().print(table)
    for key, value in result.metrics.items():  # the env's own figures (the piano's F1)
        name = key.removeprefix("eval/")
        if key.startswith("eval/") and f"start/{name}" in result.metrics:
            print(f"{name}: original {result.metrics[f'start/{name}']:.3f}, fine-tuned {value:.3f}")
    _print_cpl_end(result.metrics, "original policy", result.run_dir)
    return 0


def _print_cpl_end(metrics: dict, start: str, run_dir: Path) -> None:
    """The held-out accuracy of a CPL run (and of its start) and where the run is."""
    if "cpl/val_accuracy" in metrics:
        print(
            f"held-out pairs: implied preference accuracy {metrics['cpl/val_accuracy']:.2f} "
            f"({start} {metrics['cpl/val_accuracy_start']:.2f})"
        )
    print(f"run directory: {run_dir} (prefrl eval {run_dir} --video out.mp4)")


def cmd_offline_cpl(args: list[str]) -> int:
    from prefrl.loops.offline_cpl import OfflineCPLConfig, train_offline_cpl

    config = tyro.cli(
        OfflineCPLConfig,
        args=args,
        prog="prefrl offline-cpl",
        description="Offline CPL: behaviour cloning on a dataset, then Contrastive Preference "
        "Learning on its labelled queries (no reward model, no critic); reports the "
        "D4RL-normalised score before and after CPL.",
    )
    result = train_offline_cpl(config)
    m = result.metrics
    print(
        f"behaviour cloning ({config.bc_steps:,} steps): normalised score "
        f"{m['eval/bc_score_mean']:.1f} +- {m['eval/bc_score_std']:.1f}"
    )
    print(
        f"CPL on {m['pairs']} pairs ({config.steps:,} steps): normalised score "
        f"{m['eval/score_mean']:.1f} +- {m['eval/score_std']:.1f} (return "
        f"{m['eval/return_mean']:.1f})"
    )
    _print_cpl_end(m, "BC policy", result.run_dir)
    return 0


@dataclass(frozen=True)
class MidiInfoArgs:
    """A MIDI file's length and notes."""

    path: Annotated[Path, tyro.conf.Positional]
    notes: int = 20
    """How many of the first notes to list (0: none, -1: all)."""


@dataclass(frozen=True)
class MidiClipArgs:
    """Cut a MIDI file to a time window (notes crossing a bound are cut; the pedal state at the
    window's start is kept), shifted to start at 0."""

    path: Annotated[Path, tyro.conf.Positional]
    out: Path
    """The MIDI file to write."""
    start: float | None = None
    """Window start in seconds (default 0)."""
    end: float | None = None
    """Window end in seconds (default: the song's end)."""
    first: float | None = None
    """The first this many seconds."""
    middle: float | None = None
    """This many seconds around the song's middle."""
    last: float | None = None
    """The last this many seconds."""


@dataclass(frozen=True)
class MidiRenderArgs:
    """Play a MIDI file on the piano soundfont into an audio file (.wav or .m4a)."""

    path: Annotated[Path, tyro.conf.Positional]
    out: Path
    tail: float = 1.0
    """Seconds of silence after the last note, for it to ring out."""


def cmd_midi(args: list[str]) -> int:
    from prefrl.music import midi as m

    actions = {"info": MidiInfoArgs, "clip": MidiClipArgs, "render": MidiRenderArgs}
    if not args or args[0] in ("-h", "--help") or args[0] not in actions:
        if args and args[0] not in ("-h", "--help"):
            print(f"prefrl midi: unknown action {args[0]!r}", file=sys.stderr)
        print("usage: prefrl midi {" + ",".join(actions) + "} [--help] MIDI_FILE [flags]")
        return 0 if not args or args[0] in ("-h", "--help") else 2
    action, rest = args[0], args[1:]
    opts = tyro.cli(actions[action], args=rest, prog=f"prefrl midi {action}")
    song = m.load_midi_file(opts.path)
    if action == "info":
        notes = m.notes(song)
        pitches = [n.pitch for n in notes]
        print(
            f"{opts.path}: {m.duration(song):.2f} s, {len(notes)} notes, pitches "
            f"{min(pitches)}-{max(pitches)}, sustain pedal held {len(m.pedal_spans(song))} times"
        )
        shown = notes if opts.notes < 0 else notes[: opts.notes]
        for n in shown:
            print(f"  {n.start:8.3f} - {n.end:8.3f} s  {n.name:<4} (pitch {n.pitch}, velocity "
                  f"{n.velocity})")  # fmt: skip
        if len(shown) < len(notes):
            print(f"  ... {len(notes) - len(shown)} more (--notes -1 lists all)")
    elif action == "clip":
        start, end = m.resolve_window(
            m.duration(song), opts.start, opts.end, opts.first, opts.middle, opts.last
        )
        clipped = m.clip(song, start, end)
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        clipped.write(str(opts.out))
        print(
            f"{opts.out}: {start:.2f}-{end:.2f} s of {opts.path}, {len(m.notes(clipped))} notes "
            f"(train on it with --env 'robopianist:{opts.out}')"
        )
    else:
        samples, rate = m.render_audio(song, opts.tail)
        m.write_audio(opts.out, samples, rate)
        print(f"{opts.out}: {len(samples) / rate:.1f} s of audio")
    return 0


def cmd_envs(args: list[str]) -> int:
    from prefrl.envs import known_env_ids

    family = args[0] if args and not args[0].startswith("-") else None
    if "--help" in args or "-h" in args:
        if family == "robopianist":
            from prefrl.envs.piano import PianoTask

            print("robopianist:<song> [flags]: <song> is a bundled song (prefrl envs robopianist) "
                  "or a .mid/.midi path; the flags below (defaults: the published SAC run's task "
                  "settings) follow it inside the id.\n")  # fmt: skip
            tyro.cli(PianoTask, args=["--help"], prog="robopianist:<song>")
        print(
            "usage: prefrl envs [toy|dmc|gymnasium|robopianist]\n\nList the environment ids "
            "make_env accepts (prefrl envs robopianist --help: the piano task flags)."
        )
        return 0
    for env_id in known_env_ids(family):
        print(env_id)
    return 0


def _eval_audio(results):
    """The sound of the recorded episodes (piano): one policy's as it is; two side by side in
    stereo, each on the side of its picture; more have none (a mix would be noise)."""
    sounds = [r.audio for r in results]
    if any(s is None for s in sounds) or len(sounds) > 2:
        return None
    if len(sounds) == 1:
        return sounds[0]
    (left, rate), (right, _) = sounds
    n = max(len(left), len(right))
    stereo = np.zeros((n, 2), np.int16)
    stereo[: len(left), 0], stereo[: len(right), 1] = left, right
    return stereo, rate


def _print_eval(results, names: list[str], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    columns = ("policy", "episodes", "return mean", "return std", "min", "max", "length mean")
    for col in columns:
        table.add_column(col, justify="left" if col == "policy" else "right")
    for name, result in zip(names, results, strict=True):
        r = result.returns
        table.add_row(
            name, str(len(r)), f"{r.mean():.1f}", f"{r.std():.1f}", f"{r.min():.1f}",
            f"{r.max():.1f}", f"{result.lengths.mean():.0f}",
        )  # fmt: skip
    Console().print(table)
    for name, result in zip(names, results, strict=True):
        r = result.returns
        prefix = f"{name}: " if len(results) > 1 else ""
        print(f"{prefix}evaluation return: {r.mean():.1f} +- {r.std():.1f} over {len(r)} episodes")
        for key, value in result.extra.items():  # the env's own figures (the piano's key-press F1)
            print(f"{prefix}{key.removeprefix('eval/')}: {value:.3f}")


COMMANDS = {  # name -> (handler, one-line description)
    "train": (cmd_train, "learn from preferences (PEBBLE / PrefPPO) with a scripted teacher"),
    "rl": (cmd_rl, "train SAC on an environment's true reward"),
    "eval": (cmd_eval, "evaluate a run or checkpoint: returns table and a video"),
    "serve": (cmd_serve, "label a run's pairs and rate clips in the browser"),
    "label": (cmd_label, "label a run's pairs in the terminal"),
    "labels": (cmd_labels, "export a run's labels as JSON, or import them into a run"),
    "annotators": (cmd_annotators, "add annotators (prints their links) or list them"),
    "dataset": (cmd_dataset, "make, import and inspect offline datasets; sample and label queries"),
    "offline": (cmd_offline, "offline preferences: reward model (mr/nmr/pt) + IQL on a dataset"),
    "offline-cpl": (cmd_offline_cpl, "offline preferences: CPL on a dataset's labelled queries"),
    "collect": (cmd_collect, "roll out checkpoints x action noise into clips to rate"),
    "rate": (cmd_rate, "rate a rating run's clips with a scripted rater"),
    "finetune": (cmd_finetune, "fine-tune a SAC policy with CPL from ratings of its clips"),
    "midi": (cmd_midi, "MIDI files for piano tasks: list notes, cut a window, render audio"),
    "envs": (cmd_envs, "list environment ids"),
}


def _usage() -> str:
    lines = ["usage: prefrl COMMAND [--help] [flags]", "", "commands:"]
    lines += [f"  {name:<11} {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    command, args = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"prefrl: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[command][0](args)
    except (
        ValueError,
        LookupError,
        FileNotFoundError,
        FileExistsError,
        FloatingPointError,
        RuntimeError,
        TypeError,
        ImportError,  # an optional extra that is not installed (the message says how)
    ) as e:
        print(f"prefrl {command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
