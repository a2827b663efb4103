"""`prefrl demos ACTION`: make, check and look at demonstrations (with simulator states)."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro


@dataclass(frozen=True)
class ScriptArgs:
    """Scripted demos of a built-in maze (shortest path, then held at the goal) or of a
    MetaWorld task (MetaWorld's own scripted policy)."""

    env: str = "toy:maze"
    """toy:maze, toy:maze-open, toy:maze-medium or metaworld:<task> (e.g. metaworld:stick-push)."""
    episodes: int = 5
    out: Path = Path("demos/maze")
    """The Minari dataset directory to write."""
    force: bool = False
    """Replace the demos already at --out (once the new ones are made)."""
    seed: int = 0
    hold: int = 20
    """Steps kept after the first success (each must stay a success)."""
    settle: int = 0
    """After --hold, go on to a state from which success lasts this many steps with the last
    action held (0: cut at --hold). RFCL's first episodes start at a demo's end and are judged
    17 steps later: --settle 17 (`prefrl demos check` measures it)."""


@dataclass(frozen=True)
class PlanArgs:
    """Demos planned with the simulator, one reset seed at a time (model-predictive control)."""

    env: str = "adroit:door"
    """adroit:door, adroit:pen, adroit:relocate or adroit:hammer."""
    episodes: int = 5
    """Demos to make (one per solved reset seed)."""
    out: Path | None = None
    """The Minari dataset directory to write (None: demos/<task>, e.g. demos/door)."""
    force: bool = False
    """Replace the demos already at --out (once the new ones are made)."""
    seed: int = 0
    """The first reset seed; seeds the planner cannot solve are skipped (5 x --episodes tried
    at most)."""
    hold: int = 20
    """Steps kept after the first success (each must stay a success)."""
    settle: int = 0
    """After --hold, go on to a state from which success lasts this many steps with the last
    action held (0: cut at --hold). RFCL's first episodes start at a demo's end and are judged
    17 steps later: --settle 17 (`prefrl demos check` measures it)."""
    samples: int = 32
    """Variations of the plan rolled out before each step."""
    horizon: int | None = None
    """Steps each variation looks ahead (None: the task's own, 40 on the pen, 20 elsewhere)."""


@dataclass(frozen=True)
class RecordArgs:
    """Demos from a trained prefrl policy: the episodes that reach a stable success."""

    policy: Annotated[Path, tyro.conf.Positional]
    """A run directory (its latest checkpoint) or a checkpoint: of prefrl rl, train or rfcl."""
    episodes: int = 5
    """Demos to keep (one per episode that reaches a stable success; 10 x this tried at
    most)."""
    out: Path = Path("demos/recorded")
    env: str | None = None
    """Record on this task instead of the one the policy was trained on: the same
    observations and actions, another reward (a policy trained on adroit:pen-dense records
    demos of adroit:pen)."""
    spread_from: int = 0
    """Record this many successes and keep the --episodes of them whose first observations
    lie farthest apart: demos spread over the task's starts (the pen's goals) instead of the
    first ones solved (0: off)."""
    force: bool = False
    """Replace the demos already at --out (once the new ones are made)."""
    seed: int = 0
    hold: int = 20
    """Steps kept after the first success (each must stay a success)."""
    settle: int = 0
    """After --hold, go on to a state from which success lasts this many steps with the last
    action held (0: cut at --hold). RFCL's first episodes start at a demo's end and are judged
    17 steps later: --settle 17 (`prefrl demos check` measures it)."""


@dataclass(frozen=True)
class ImportArgs:
    """Import D4RL's Adroit human demonstrations (a D4RL-layout HDF5 file) with their states."""

    file: Annotated[Path, tyro.conf.Positional]
    env: str
    """adroit:door, adroit:pen, adroit:hammer or adroit:relocate."""
    out: Path = Path("demos/imported")
    force: bool = False
    """Replace the demos already at --out (once the new ones are made)."""


@dataclass(frozen=True)
class DapgArgs:
    """Import hand_dapg's Adroit demos (a pickle of reset states and actions), replayed here."""

    file: Annotated[Path, tyro.conf.Positional]
    """hand_dapg's `dapg/demonstrations/<task>-v0_demos.pickle` (a pickle runs code when
    loaded: import only files you trust)."""
    env: str
    """adroit:door, adroit:pen, adroit:hammer or adroit:relocate."""
    out: Path = Path("demos/imported")
    force: bool = False
    """Replace the demos already at --out (once the new ones are made)."""
    hold: int | None = None
    """Steps kept after the first success (each must stay a success). None: the person's whole
    demo, as RFCL takes it (`prefrl rfcl` keeps 50 steps after the first success)."""
    settle: int = 0
    """After --hold (or the demo's end), go on to a state from which success lasts this many
    steps with the last action held (0: no such check)."""


@dataclass(frozen=True)
class ManiSkillArgs:
    """Convert ManiSkill2 demonstrations (trajectory.h5 + trajectory.json) to a demo file."""

    file: Annotated[Path, tyro.conf.Positional]
    env: str | None = None
    """The prefrl env whose states the file holds (default: the .json's env_info.env_id, when
    prefrl has that env); its action, state and observation sizes must be the file's."""
    out: Path = Path("demos/maniskill2")
    force: bool = False
    """Replace the demos already at --out (once the new ones are made)."""


@dataclass(frozen=True)
class CheckArgs:
    """Replay each demo: which end in success (stored flags, replayed), how long each end holds.

    A demo counts when it ends in success both by its stored flags and replayed here (as
    `prefrl rfcl` takes demos). Its end holds while its last state keeps success with the last
    action held."""

    demos: Annotated[Path, tyro.conf.Positional]
    """The demo folder."""
    env: str | None = None
    """The env the demos must be of (default: the demos' own; another is refused)."""
    hold_horizon: int = 50
    """The most steps the hold after each demo's end is measured for."""


@dataclass(frozen=True)
class VideoArgs:
    """A demo rendered from its stored states to an mp4."""

    demos: Annotated[Path, tyro.conf.Positional]
    """The demo folder."""
    out: Path = Path("demo.mp4")
    index: int = 0
    size: int = 256


ACTIONS = {"script": ScriptArgs, "plan": PlanArgs, "record": RecordArgs, "import-d4rl": ImportArgs,
           "import-dapg": DapgArgs, "import-maniskill2": ManiSkillArgs, "check": CheckArgs,
           "video": VideoArgs, "info": None}  # fmt: skip


def cmd_demos(args: list[str]) -> int:
    if not args or args[0] not in ACTIONS:
        if args and args[0] not in ("-h", "--help"):
            print(f"prefrl demos: unknown action {args[0]!r}", file=sys.stderr)
        lines = ["usage: prefrl demos ACTION [--help] [flags]", "", "actions:"]
        for name, spec in ACTIONS.items():
            doc = "A demo folder's env, demos, lengths, first successes and making: info PATH"
            doc = doc if spec is None else spec.__doc__.strip().splitlines()[0]
            lines.append(f"  {name:<17} {doc}")
        print("\n".join(lines))
        return 0 if not args or args[0] in ("-h", "--help") else 2
    from prefrl.data.demos import DemoSet
    from prefrl.demos import imports, make

    action, rest = args[0], args[1:]
    if action == "info":
        if not rest or rest[0].startswith("-"):
            print("usage: prefrl demos info PATH\n\nA demo folder's env, demos, lengths, first "
                  "successes and how they were made (PATH: a demo folder, or ManiSkill2's "
                  "trajectory .h5).")  # fmt: skip
            return 0 if rest else 2
        if rest[0].endswith(".h5"):  # (ManiSkill2's trajectory file, read as it is)
            from prefrl.data.demos import read_maniskill2

            _print_demos(read_maniskill2(rest[0]), rest[0])
        else:
            demos = DemoSet.load(rest[0])
            _print_demos(demos, rest[0])
            made = {k: v for k, v in demos.info.items() if v is not None}
            if made:  # (how they were made: source, seeds, --hold, --settle, ...)
                print("made with: " + ", ".join(f"{k} {v}" for k, v in made.items()))
        return 0
    opts = tyro.cli(ACTIONS[action], args=rest, prog=f"prefrl demos {action}")
    if action in ("script", "plan", "record", "import-d4rl", "import-dapg", "import-maniskill2"):
        if action == "plan" and opts.out is None:
            opts = dataclasses.replace(opts, out=Path("demos") / opts.env.split(":")[-1])
        saved = {"out": opts.out, "replace": opts.force}
        if action == "script":
            demos = make.script_demos(opts.env, opts.episodes, **saved, seed=opts.seed,
                                      hold=opts.hold, settle=opts.settle)  # fmt: skip
        elif action == "plan":
            from prefrl.demos.planner import PlanConfig, plan_demos

            config = PlanConfig(samples=opts.samples, horizon=opts.horizon)
            demos = plan_demos(opts.env, opts.episodes, **saved, seed=opts.seed, hold=opts.hold,
                               settle=opts.settle, config=config)  # fmt: skip
        elif action == "record":
            demos = make.record_demos(opts.policy, opts.episodes, **saved, seed=opts.seed,
                                      hold=opts.hold, settle=opts.settle, env=opts.env,
                                      spread_from=opts.spread_from)  # fmt: skip
        elif action == "import-d4rl":
            demos = imports.import_d4rl_demos(opts.file, opts.env, **saved)
        elif action == "import-dapg":
            demos = imports.import_dapg_demos(opts.file, opts.env, **saved, hold=opts.hold,
                                              settle=opts.settle)  # fmt: skip
        else:
            demos = imports.import_maniskill2_demos(opts.file, opts.env, **saved)
        _print_demos(demos, opts.out)
    elif action == "check":
        checks = make.check_demos(opts.demos, opts.env, hold_horizon=opts.hold_horizon)
        for c in checks:
            held = f"{c.holds}+" if c.holds == opts.hold_horizon else str(c.holds)
            print(f"demo {c.index}: {c.steps} steps; {c.ends} (largest state difference "
                  f"{c.max_state_error:.2g}); its last state keeps success for {held} steps with "
                  "the last action held")  # fmt: skip
        good = sum(c.usable for c in checks)
        print(f"{good} of {len(checks)} demos end in success both by their stored flags and "
              "replayed here: `prefrl rfcl` uses those")  # fmt: skip
        return 0 if good == len(checks) else 1
    else:
        demos = DemoSet.load(opts.demos)
        print(f"video: {make.demo_video(demos, opts.index, opts.out, opts.size)}")
    return 0


def _print_demos(demos, where) -> None:
    lengths = [len(d) for d in demos.demos]
    firsts = [d.first_success for d in demos.demos]
    steps = f"{min(lengths)}-{max(lengths)}" if min(lengths) < max(lengths) else f"{lengths[0]}"
    print(f"{where}: {len(demos)} demo{'s' * (len(demos) != 1)} of {demos.env_id} "
          f"({'with' if demos.has_actions else 'no'} actions), {steps} steps, first success at "
          f"steps {firsts}, "
          f"{sum(d.ends_in_success for d in demos.demos)} end in success")  # fmt: skip
    for key, what in (("index", "the source's demos"), ("seed", "reset seeds")):
        origins = [d.info.get(key) for d in demos.demos]
        if all(o is not None for o in origins):  # (which of an import's demos these are)
            print(f"from {what} {', '.join(map(str, origins))}")
            break
