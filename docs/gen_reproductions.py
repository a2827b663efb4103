"""Write docs/reproductions.md from benchmarks/results/*.json: for each project prefrl replaces,
its headline results beside prefrl's, with the baseline from the same grid, the budget, the
seeds, the command, the plots and videos; a result not yet reproduced says what is missing.

    python docs/gen_reproductions.py       # (`make docs` runs it before building the site)

Each figure comes from one row of a results file, chosen by the fields it must have (its env,
method, teacher, ... and where those are not enough, the command that made it): result files keep rows of many
settings, and the page must not quietly show another one. `check()` lists the selections that
match no row, or more than one (the tests run it).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "reproductions.md"


@functools.cache
def _results(name: str) -> dict:
    """A results file's contents ({} while it does not exist), read once."""
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


@dataclass(frozen=True)
class Pick:
    """One row of a results file: the row of `table` (a key of the file) with these field
    values."""

    file: str
    fields: dict
    table: str = "results"

    def rows(self) -> list[dict]:
        rows = _results(self.file).get(self.table, [])
        return [r for r in rows if all(r.get(k) == v for k, v in self.fields.items())]

    def row(self) -> dict | None:
        rows = self.rows()
        return rows[0] if len(rows) == 1 else None

    def command(self, row: dict) -> str | None:
        """The command that made `row`: its own, or else its table's or its file's."""
        data = _results(self.file)
        return row.get("command") or data.get(f"{self.table}_command") or data.get("command")


@dataclass(frozen=True)
class Result:
    """A headline result of a project and prefrl's figure for it."""

    what: str
    published: str
    ours: Pick | None
    figure: Callable[[dict], str] = lambda r: ""
    baseline: Pick | None = None
    baseline_figure: Callable[[dict], str] = lambda r: ""
    met: Callable[[dict, dict | None], bool | None] = lambda r, b: None
    """Whether prefrl's figure reproduces the published one (None: not a yes-or-no target)."""
    target: str = ""
    missing: str = ""
    """What is missing while `ours` matches no row (or has fewer than `seeds` seeds)."""
    seeds: int = 0
    """Seeds the target asks for: a row (or its baseline) with fewer is met or not only so far."""


@dataclass(frozen=True)
class Project:
    name: str
    source: str
    results: tuple[Result, ...]
    media: tuple[str | tuple[str, str], ...] = ()
    """Plots and videos (paths from the repository root, or (path, caption)) shown under the
    table, where present."""
    how: str = ""


def _mean_std(mean: str, std: str, seeds: str | None = None) -> Callable[[dict], str]:
    def text(row: dict) -> str:
        n = row.get(seeds) if seeds else None
        k = len(n) if isinstance(n, list) else n
        count = f" ({k} seed{'s' if k != 1 else ''})" if n else ""
        return f"{row[mean]:.3g} ± {row[std]:.2g}{count}"

    return text


def _value(key: str, digits: int = 2) -> Callable[[dict], str]:
    return lambda row: f"{row[key]:.{digits}f}"


def _backflip(what: str, published: str, method: str, rule: str, missing: str = "",
              baseline: str = "rule-reward") -> Result:  # fmt: skip
    """A preference method's backflip row of a rule, beside the same agent given the rule
    (`baseline`: SAC on the rule x100, or with `rule-reward-ppo*` PPO on it)."""
    agent = "PPO on the rule" if "ppo" in baseline else "SAC on the rule x100"
    return Result(
        what, published, Pick("backflip", {"rule": rule, "method": method}),
        lambda r: f"{r['landed_flips_mean']:.1f} landed flips an episode, the rule's score "
                  f"{r['rule_score_mean']:.1f} ({len(r['seeds'])} seed)",
        Pick("backflip", {"rule": rule, "method": baseline}),
        lambda r: f"{agent}: {r['landed_flips_mean']:.1f} landed flips, the rule's "
                  f"score {r['rule_score_mean']:.1f}",
        lambda r, b: r["landed_flips_mean"] >= 1.0, "at least one landed flip an episode",
        missing,
    )  # fmt: skip


def _rfcl(env: str, method: str, source: str, scale=None) -> Pick:
    return Pick("rfcl", {"env": env, "method": method, "demo_source": source,
                         "demo_action_scale": scale, "device": "cpu"})  # fmt: skip


def _measured(pick: Pick, say: Callable[[dict], str]) -> str:
    """What `say` makes of `pick`'s row, where it has one (a run that tells the way on)."""
    row = pick.row()
    return say(row) if row else ""


_SUCCESS = _mean_std("success_mean", "success_std", "per_seed")


def _last_evaluations(row: dict) -> str:
    """The mean success of a row's runs over their last few evaluations, where the row has it:
    one evaluation of a MetaWorld policy can swing from 0.9 to 0."""
    if "success_last_evaluations_mean" not in row:
        return ""
    return (f"; over the last {row['last_evaluations']} evaluations "
            f"{row['success_last_evaluations_mean']:.2f}")  # fmt: skip


def _START(row: dict) -> str:
    return f"the policy it starts from {row['start_return']:.0f}"


_METAWORLD_HARD = ("stick-pull", "stick-push", "pick-place-wall")


# fmt: off
PROJECTS = (
    Project(
        "PEBBLE and B-Pref (Lee et al. 2021)", "online preferences: `prefrl train`",
        (
            Result(
                "dmc:walker-walk, 1000 Oracle labels, 500k steps: PEBBLE's return against SAC on "
                "the true reward", "≈ SAC on the true reward",
                Pick("label_efficiency", {"env": "dmc:walker-walk", "teacher": "oracle",
                     "command": "python benchmarks/label_efficiency.py --envs dmc:walker-walk "
                                "--teacher oracle --variant bpref-script --seeds 0 --resume"}),
                lambda r: f"{r['pref_return_mean']:.1f} (1 seed)",
                Pick("label_efficiency", {"env": "dmc:walker-walk", "teacher": "oracle",
                     "command": "python benchmarks/label_efficiency.py --envs dmc:walker-walk "
                                "--teacher oracle --variant bpref-script --seeds 0 --resume"}),
                lambda r: f"SAC on the true reward {r['true_reward_return_mean']:.1f} "
                          f"({r['ratio']:.2f})",
                lambda r, b: r["ratio"] >= 0.9, "at least 0.9 of SAC's return",
            ),
            Result(
                "the same with B-Pref's Mistake teacher (10% of answers flipped)",
                "close to the Oracle's",
                Pick("label_efficiency", {"env": "dmc:walker-walk", "teacher": "mistake"}),
                lambda r: f"{r['pref_return_mean']:.1f} (1 seed)",
                Pick("label_efficiency", {"env": "dmc:walker-walk", "teacher": "mistake"}),
                lambda r: f"SAC on the true reward {r['true_reward_return_mean']:.1f} "
                          f"({r['ratio']:.2f})",
                lambda r, b: r["ratio"] >= 0.9, "at least 0.9 of SAC's return",
            ),
        ),
        how="`python benchmarks/label_efficiency.py`; the online guide has the settings.",
    ),
    Project(
        "Preference Transformer (Kim et al. 2023)", "offline preferences: `prefrl offline`",
        tuple(
            Result(
                f"{task}-v5 medium-replay (D4RL's recipe, collected here from a SAC run: D4RL's "
                "own files are of MuJoCo 2.1), 500 Oracle queries, Preference Transformer reward "
                "+ IQL, 1M steps (normalised score)",
                published,
                Pick("offline", {"dataset": f"{task}-v5-medium-replay", "teacher": "oracle",
                                 "reward": "pt", "iql_steps": 1_000_000,
                                 "device": "NVIDIA H100 80GB HBM3"}),
                _mean_std("score_mean", "score_std", "seed_ids"),
                Pick("offline", {"dataset": f"{task}-v5-medium-replay", "teacher": "none",
                                 "reward": "true", "iql_steps": 1_000_000,
                                 "device": "NVIDIA H100 80GB HBM3"}),
                lambda r: "IQL on the true reward "
                + _mean_std("score_mean", "score_std", "seed_ids")(r),
                lambda r, b: r["score_mean"] >= 0.9 * b["score_mean"],
                "at least 0.9 of IQL on the true reward of the same data (the paper: 1.02 and 0.97 "
                "on D4RL)",
            )
            for task, published in (("Hopper", "84.5 from people's labels on D4RL (IQL on the true reward 83.1)"),
                                    ("Walker2d", ("71.3 from people's labels on D4RL (IQL on the true "
                                                 "reward 73.1)")))
        ),
        how="`python benchmarks/offline.py` (the offline guide); on an H100 through the device tool.",
    ),
    Project(
        "Contrastive Preference Learning (Hejna et al. 2024)", "fine-tuning from ratings: "
        "`prefrl finetune`",
        (
            Result(
                "Hopper-v5 policy fine-tuned with CPL from 500 rated pairs (return, x its start)",
                "better than the policy it starts from",
                Pick("cpl", {"env": "Hopper-v5", "rater": "return", "conservative": True,
                             "command": "python benchmarks/cpl.py --envs Hopper-v5 --seeds 0 1 2"}),
                lambda r: f"{r['finetuned_return_mean']:.0f} ± {r['finetuned_return_std']:.0f} "
                          f"(x{r['ratio']:.2f}, {r['seeds']} seeds)",
                None, _START,
                lambda r, b: r["ratio"] > 1.0, "above the start's return",
            ),
            Result(
                "HalfCheetah-v5 from 500 pairs of a regret rater, conservative, mean only",
                "better than the policy it starts from",
                Pick("cpl", {"env": "HalfCheetah-v5", "conservative": True,
                             "command": "python benchmarks/cpl.py --envs HalfCheetah-v5 --sources "
                                        "start --noise 0.3 --siblings 10 --pair-within siblings "
                                        "--bias 1.0 --rater regret:runs/datasets/HalfCheetah-v5_"
                                        "sac_s0 --eval-episodes 30 --conservative both --mean-only"}),
                lambda r: f"{r['finetuned_return_mean']:.0f} ± {r['finetuned_return_std']:.0f} "
                          f"(x{r['ratio']:.2f}, {r['seeds']} seeds)",
                None, _START,
                lambda r, b: r["ratio"] > 1.0, "above the start's return",
            ),
        ),
        how="`python benchmarks/cpl.py` (the fine-tuning guide).",
    ),
    Project(
        "Reverse Forward Curriculum Learning (Tao et al. 2024)", "demonstrations: `prefrl rfcl`",
        (
            Result(
                "toy:maze (prefrl's point maze, like the paper's) from 1 demo, 60k steps (success at "
                "the end)", "mazes solved from a demo",
                _rfcl("toy:maze", "rfcl", "scripted"), _SUCCESS,
                _rfcl("toy:maze", "sac", "scripted"), lambda r: f"SAC {r['success_mean']:.2f}",
                lambda r, b: r["success_mean"] >= 0.9, "success at least 0.9",
            ),
            Result(
                "adroit:door from 5 people's demos (hand_dapg's), actions within 1.25x theirs, "
                "500k steps", "door ≈ 0.9",
                _rfcl("adroit:door", "rfcl", "dapg-human", 1.25), _SUCCESS,
                _rfcl("adroit:door", "sac+demos", "dapg-human", 1.25),
                lambda r: f"SAC + demos {r['success_mean']:.2f}",
                lambda r, b: r["success_mean"] >= 0.9, "success at least 0.9",
            ),
            Result(
                "adroit:pen from 5 planned demos, 500k steps", "part of the Adroit mean above",
                _rfcl("adroit:pen", "rfcl", "planned"), _SUCCESS,
                _rfcl("adroit:pen", "sac+demos", "planned"),
                lambda r: f"SAC + demos {r['success_mean']:.2f}",
                lambda r, b: r["success_mean"] >= b["success_mean"], "at least SAC + demos",
            ),
            Result(
                "adroit:pen from 5 demos recorded from SAC on the pen's shaped reward "
                "(`adroit:pen-dense`), spread over the goals (`prefrl demos record --spread-from "
                "20 --settle 37`), 500k steps", "part of the Adroit mean above",
                _rfcl("adroit:pen", "rfcl", "policy"), _SUCCESS,
                _rfcl("adroit:pen", "sac+demos", "policy"),
                lambda r: f"SAC + demos {r['success_mean']:.2f}",
                lambda r, b: r["success_mean"] >= b["success_mean"], "at least SAC + demos",
                "the others run two a session (benchmarks/QUEUE.md row 15): `python "
                "benchmarks/rfcl.py --env adroit:pen --demos 5 --demos-from "
                "benchmarks/demos/pen-spread --preset rfcl-adroit-cpu --methods rfcl sac+demos "
                "--seeds 0 1 2 --jobs 2`", seeds=3,
            ),
            Result(
                "adroit:relocate from 5 planned demos (--settle 17), 500k steps",
                "part of the Adroit mean above",
                _rfcl("adroit:relocate", "rfcl", "planned"), _SUCCESS,
                _rfcl("adroit:relocate", "sac+demos", "planned"),
                lambda r: f"SAC + demos {r['success_mean']:.2f}",
                lambda r, b: r["success_mean"] >= b["success_mean"] and r["success_mean"] > 0,
                "at least SAC + demos, and above 0",
            ),
            *(
                Result(
                    f"metaworld:{task} from 1 scripted demo, 500k steps", "most hard MetaWorld "
                    "tasks solved from 1 demo (15 tasks ≈ 78% at 400k)",
                    _rfcl(f"metaworld:{task}", "rfcl", "scripted"),
                    lambda r: _SUCCESS(r) + _last_evaluations(r),
                    _rfcl(f"metaworld:{task}", "sac+demos", "scripted"),
                    lambda r: f"SAC + demos {r['success_mean']:.2f}" + _last_evaluations(r),
                    lambda r, b: r["success_mean"] >= b["success_mean"], "at least SAC + demos",
                    "1.5-3 h a run on one core, two at once (benchmarks/QUEUE.md rows 11-13): "
                    f"`python benchmarks/rfcl.py --env metaworld:{task} --demos 1 --preset "
                    "rfcl-metaworld-cpu --methods rfcl sac+demos --seeds 0 1 2 --jobs 2`", seeds=3,
                )
                for task in _METAWORLD_HARD
            ),
        ),
        media=("benchmarks/results/rfcl_adroit-door-dapg-as1.25.png",
               *(f"benchmarks/results/rfcl_metaworld-{t}.png" for t in _METAWORLD_HARD),
               ("docs/img/metaworld-stick-pull-rfcl-vs-sac-demos.mp4",
                ("stick-pull, RFCL (left) and SAC + demos (right), seed 1 of each at 500k steps, "
                 "the same episode: one RFCL solves (reset seed 7; it solves 2 of the 5 of reset "
                 "seeds 5-9, SAC + demos none)"))),
        how="`python benchmarks/rfcl.py` (the demonstrations guide). The paper's Adroit figure is "
            "the mean of door, pen and relocate: ≈ 0.50 at 400k steps, ≈ 0.62 at 1M (RLPD ≈ 0.49 "
            "/ 0.57); prefrl's mean of its door, pen and relocate rows is the table's first line.",
    ),
    Project(
        "learning-from-human-preferences (Christiano et al. 2017; mrahtz)", "pixels: "
        "`prefrl frames`",
        (
            Result(
                "MovingDot from 1500 synthetic preferences, 150k agent steps (return)",
                "learns the dot's task (the seed's test env)",
                Pick("pixels", {"env": "movingdot", "method": "prefs"}, table="movingdot"),
                _mean_std("return_mean", "return_std", "seeds"),
                Pick("pixels", {"env": "movingdot", "method": "true"}, table="movingdot"),
                lambda r: f"true reward {r['return_mean']:.1f}",
                lambda r, b: r["return_mean"] >= 0.9 * b["return_mean"],
                "at least 0.9 of the true reward's return",
            ),
            Result(
                "Pong from synthetic preferences (mean of the last 10 evaluation episodes, 3 "
                "seeds, 20M frames; PPO)", "+15 or more (the score's agent: +21)",
                Pick("atari", {"env": "atari:Pong", "method": "prefs", "algo": "ppo"}),
                _mean_std("return_mean", "return_std", "seeds"),
                Pick("atari", {"env": "atari:Pong", "method": "score", "algo": "ppo"}),
                lambda r: f"PPO on the score {r['return_mean']:.1f}",
                lambda r, b: r["return_mean"] >= 15, "at least +15",
                "no preference run finished yet. " + _measured(
                    Pick("atari", {"env": "atari:Pong", "method": "score", "algo": "a2c"}),
                    lambda r: f"A2C, the seed's agent, reached only {r['return_mean']:.1f} on the "
                    f"score itself in {r['frames'] / 1e6:.0f}M frames (seed {r['seeds'][0]}, "
                    f"{r['hours_per_seed'][0]:.1f} h), so the preference runs take PPO; ")
                + _measured(
                    Pick("atari", {"env": "atari:Pong", "method": "score", "algo": "ppo"}),
                    lambda r: f"PPO reached {r['return_mean']:.1f} on the score in the same "
                    f"frames (seed {r['seeds'][0]}, {r['hours_per_seed'][0]:.1f} h); ")
                + "from preferences (`--preset pong-ppo`, 7-15 h a run on a busy core of this "
                "project's CPU machines; two starts of seed 0 were lost with their machines at "
                "1.2M and 1.6M steps, the second at -2.8 and rising, where PPO on the score was "
                "at +15.2: [pixels note](notes/2026-11-28-pixels.md)): `python "
                "benchmarks/atari.py --env atari:Pong --algo ppo --seeds 0 1 2 --jobs 2`; the "
                "paper's 10M on a GPU: "
                "`python benchmarks/gpu_rows.py`",
            ),
            Result(
                "Enduro from synthetic preferences (time-limited, 2 seeds, 20M frames; PPO)",
                "about the score's agent",
                Pick("atari", {"env": "atari:Enduro", "method": "prefs", "algo": "ppo"}),
                _mean_std("return_mean", "return_std", "seeds"),
                Pick("atari", {"env": "atari:Enduro", "method": "score", "algo": "ppo"}),
                lambda r: f"PPO on the score {r['return_mean']:.1f}",
                missing="not run yet (after Pong): `python benchmarks/atari.py --env atari:Enduro "
                "--algo ppo --seeds 0 1 --jobs 2`",
            ),
        ),
        media=("benchmarks/results/atari_pong.png", "benchmarks/results/atari_pong_ppo-prefs.mp4",
               "benchmarks/results/atari_pong_ppo-score.mp4", "benchmarks/results/atari_enduro.png",
               "benchmarks/results/atari_enduro_ppo-prefs.mp4",
               "benchmarks/results/atari_enduro_ppo-score.mp4"),
        how="`python benchmarks/movingdot.py` (the pixels guide).",
    ),
    Project(
        "rl-teacher (Christiano et al. 2017; OpenAI)", "a behaviour with no reward: "
        "`examples/backflip.py`",
        (
            _backflip(
                "Hopper-v5 backflips from at most 1000 answers of a rule teacher (landed flips "
                "an episode; the fifth rule, 'one-turn')", "a backflip from about 900 labels",
                "pref", "one-turn",
            ),
            _backflip(
                "the same, the 100-label sessions spread over the run (every 45k steps)",
                "rl-teacher asks for labels all through training", "pref-spread", "one-turn",
            ),
            _backflip(
                "the seventh rule ('best-leap': each clip's best leap by its turns, so one big "
                "leap beats many small ones and a small one beats standing; a leap of most of a "
                "turn that comes down foot first pays half a turn x how upright), sessions "
                "spread", "a backflip from about 900 labels",
                "pref-spread", "best-leap", "no flip landed: with 1000 labels the run "
                "(`python benchmarks/backflip.py --seeds 0 --only pref-spread`) scored 0.3-0.4 "
                "at 500k, 811 leaps in its last 100 episodes, none of half a turn (its row was "
                "lost with its machine; the backflip note keeps the figures); under the fifth "
                "rule PEBBLE made ten leaps of 0.3 of a turn onto its back an episode, under "
                "the sixth it stood still. SAC given this rule made leaps of most of a turn "
                "and landed none (the next row's baseline)",
            ),
            _backflip(
                "the ninth try: the same rule and sessions, a linear-output reward model "
                "(3 x 3x128; the eighth try's tanh ensemble rated big leaps below small ones)",
                "a backflip from about 900 labels", "pref-linear", "best-leap",
            ),
            _backflip(
                "the eleventh try ('stance'): the seventh rule in episodes of one try (one clip, "
                "from standing), the touch-down paid by how near standing it comes down, a 3 x "
                "3x128 tanh reward", "a backflip from about 900 labels", "pref-small", "stance",
                "not run: SAC given the rule landed no flip in 500k steps (295 of its last 432 "
                "big leaps came down foot first), so PEBBLE had no landing to be taught. The "
                "tenth try's SAC, the touch-down paid foot first only, ended every try sitting "
                "(stopped at 134k)",
            ),
            _backflip(
                "the twelfth try ('flights'): the fifth rule with each leap paid only its turns "
                "past a quarter (ten leaps of 0.3 of a turn earn less than one flip), the stance "
                "touch-down, 1000-step episodes (a landing lets it flip again)",
                "a backflip from about 900 labels", "pref-small", "flights",
                "not run: SAC given the rule landed no flip in 500k steps (rule score 2.3: "
                "about five unlanded flips an episode, each ending on its back or seated)",
            ),
            _backflip(
                "the thirteenth try ('practice'): the twelfth rule, 70% of training episodes "
                "starting mid-flip from states of the Hopper's own leaps, one clip long "
                "(practice at landing; rl-teacher's started standing; evaluations here do too)",
                "a backflip from about 900 labels", "pref-small", "practice",
                "not run: SAC given the rule landed no flip in 500k steps, nor in any of its "
                "1113 training episodes, though a search from its own leap states lands flips "
                "(`tools/backflip_landable.py`): its actions in the air had saturated, its "
                "temperature tuned down to 0.004. The fourteenth try held SAC's temperature: "
                "at 0.05 it hardly leapt (stopped at 170k); at 0.02 (`--only "
                "rule-reward-alpha0.02`) its flights came down nearer standing and it landed one "
                "flip in training, none in any evaluation by 500k (rule score 0.99). PEBBLE "
                "only if SAC lands flips; next, that run to more steps",
            ),
            _backflip(
                "the fifteenth try: the same rule and env, PPO in place of SAC (rl-teacher's "
                "backflip was TRPO's, an on-policy agent's), observations normalised; PrefPPO "
                "after 200k unsupervised steps, then sessions of 100 answers every 130k, to 3M "
                "steps. It turns one flip an episode and comes down on its back. PPO given the "
                "rule without normalising (`--only rule-reward-ppo`) landed 1.0 flips an episode "
                "at 0.95M and 1.05M and 0.2 at 3M on seed 0 (rule score 1.0), the first agent to "
                "land any since the fifth rule's SAC; seed 1 none (3.8: unlanded flips); seed 2 "
                "1.0 in every evaluation from 400k to 3M but one (rule score 1.9 at 3M)",
                "a backflip from about 900 labels", "pref-ppo-norm", "practice",
                baseline="rule-reward-ppo-norm",
            ),
        ),
        media=("benchmarks/results/backflip-one-turn.png", "benchmarks/results/backflip-best-leap.png",
               "benchmarks/results/backflip-stance.png", "benchmarks/results/backflip-flights.png",
               "benchmarks/results/backflip-practice.png", "benchmarks/results/backflip-ppo.png",
               "docs/img/backflip.mp4"),
        how="`python benchmarks/backflip.py`; the rule is `examples/backflip.py`'s teacher.",
    ),
)
# fmt: on


def _adroit_mean() -> str:
    recorded = _rfcl("adroit:pen", "rfcl", "policy").row()  # (the pen's best demos, once run)
    pen = recorded or _rfcl("adroit:pen", "rfcl", "planned").row()
    rows = [_rfcl("adroit:door", "rfcl", "dapg-human", 1.25).row(), pen,
            _rfcl("adroit:relocate", "rfcl", "planned").row()]  # fmt: skip
    if any(r is None for r in rows):
        return ""
    mean = sum(r["success_mean"] for r in rows) / 3
    verdict = "met" if mean >= 0.5 else f"not met, {0.5 - mean:.2f} short"
    if any(_seed_count(r) < 3 for r in rows):
        verdict += " so far (a row below has fewer than 3 seeds)"
    pens = "recorded" if recorded else "planned"
    return (f"| the Adroit mean of door, pen and relocate (rows below: the door from people's "
            f"demos, the pen from {pens} ones, relocate from planned ones; 500k steps) | "
            f"≈ 0.50 at 400k, 5 people's demos each | {mean:.2f} | | ≥ 0.5: {verdict} |")  # fmt: skip


def _seed_count(row: dict) -> int:
    seeds = row.get("seeds", 1)
    return len(seeds) if isinstance(seeds, list) else int(seeds)


def _row(result: Result) -> str:
    row = result.ours.row() if result.ours else None
    if row is None:
        return f"| {result.what} | {result.published} | — | | {result.missing or 'not run'} |"
    base = result.baseline.row() if result.baseline else row  # (none: the row's own start)
    if base is None:  # (its baseline not run yet: nothing to judge it against)
        return (f"| {result.what} | {result.published} | {result.figure(row)} | — | "
                f"{result.target}: its baseline not run yet ({result.missing}) |")  # fmt: skip
    met = result.met(row, base)
    verdict = "" if met is None else ("met" if met else "not met")
    seeds = min(_seed_count(row), _seed_count(base)) if base else _seed_count(row)
    if verdict and seeds < result.seeds:  # (a baseline short of seeds too)
        verdict += f" so far ({seeds} of {result.seeds} seeds; {result.missing})"
    target = f"{result.target}: {verdict}" if result.target else verdict
    return (f"| {result.what} | {result.published} | {result.figure(row)} | "
            f"{result.baseline_figure(base) if base else ''} | {target} |")  # fmt: skip


def _commands(project: Project) -> list[str]:
    seen = []
    for result in project.results:
        row = result.ours.row() if result.ours else None
        command = result.ours.command(row) if row else None
        if command and command not in seen:
            seen.append(command)
    return seen


def _record_block(record: str) -> list[str]:
    """A row's record of several commands with words ("seeds 0-1: python ... ; python ... (a
    remark)") as a bash block, each command on its line under its words as a comment, the closing
    remark after it."""
    remark = ""
    if record.endswith(")") and " (" in record:
        record, remark = record[: record.rfind(" (")], record[record.rfind(" (") + 2 : -1]
    block = ["```bash"]
    for part in record.split(" ; "):
        words, python, command = part.partition("python ")
        if words.strip():  # (a part without a command is words alone)
            block.append(f"# {words.strip().rstrip(':')}")
        if python:
            block.append(f"python {command}")
    block.append("```")
    return block + (["", remark[0].upper() + remark[1:] + "."] if remark else [])


def render() -> str:
    lines = [
        "# Reproductions",
        "",
        (
            "The headline results of the projects prefrl replaces, beside prefrl's, each with the "
            "baseline measured in the same grid. Generated from `benchmarks/results/*.json` by "
            "`docs/gen_reproductions.py`; the [benchmarks page](benchmarks.md) has every figure of "
            "every file. A row without a figure says what is missing and the command that fills "
            "it. Runs that need a GPU (Pong at the paper's budget, RFCL's wall-time config on "
            "Adroit, QPA's walker with its own 2x1024 agent) take one command on a machine with "
            "one, `python benchmarks/gpu_rows.py` "
            "(resumable, in chunks of at most 9 minutes); none has run to its end yet."
        ),
    ]
    for project in PROJECTS:
        lines += ["", f"## {project.name}", "", f"In prefrl: {project.source}. {project.how}", "",
                  "| result | published | prefrl | baseline, same grid | target |",
                  "|---|---|---|---|---|"]  # fmt: skip
        if project.name.startswith("Reverse Forward") and (mean := _adroit_mean()):
            lines.append(mean)
        lines += [_row(result) for result in project.results]
        commands = _commands(project)
        runnable = [c for c in commands if c.startswith("python ")]
        if runnable:
            lines += ["", "Commands:", "", "```bash", *runnable, "```"]
        for record in (c for c in commands if c not in runnable):
            lines += ["", "As recorded with their rows:", "", *_record_block(record)]
        for media in project.media:
            media, caption = (media, None) if isinstance(media, str) else media
            path = ROOT / media
            if path.exists():
                # (docs/gen_benchmarks.py copies benchmarks/results/*.png to docs/results/)
                link = media.replace("benchmarks/", "", 1).replace("docs/", "", 1)
                lines += ["", f"[video: {caption or _film_caption(media) or path.name}]({link})"
                          if media.endswith(".mp4") else f"![{path.name}]({link})"]  # fmt: skip
    return "\n".join(lines) + "\n"


def _film_caption(media: str) -> str | None:
    """The caption a results row gives the video it made (its `video` entry names the file), so
    that a video of a try that missed is not taken for the result."""
    for file in sorted(RESULTS.glob("*.json")):
        for row in json.loads(file.read_text()).get("results", []):
            film = row.get("video")
            if isinstance(film, dict) and film.get("path") == media:
                return film.get("caption")
    return None


def check() -> list[str]:
    """Selections that match more than one row (a row that matches none is a result not yet
    run, and says so on the page)."""
    picks = [p for project in PROJECTS for r in project.results for p in (r.ours, r.baseline)
             if p is not None]  # fmt: skip
    return [f"{p.file}: {p.fields}" for p in picks if len(p.rows()) > 1]


if __name__ == "__main__":
    bad = check()
    if bad:
        sys.exit("selections matching more than one row:\n" + "\n".join(bad))
    PAGE.write_text(render())
    print(f"wrote {PAGE.relative_to(ROOT)}")
