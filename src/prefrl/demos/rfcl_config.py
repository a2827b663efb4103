"""`RFCLConfig`: the settings of an RFCL run (`prefrl rfcl`), and what a run of them is called."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prefrl.agents import SACConfig
from prefrl.envs.registry import resolve
from prefrl.fielddocs import document_fields
from prefrl.rundir.config import check_fields

RFCL_SAC = SACConfig(hidden_dims=(256, 256, 256), num_critics=10, num_min_critics=2,
                     critic_layer_norm=True, backup_entropy=False, target_entropy_scale=0.5)  # fmt: skip
"""The paper's SAC: 10 critics of 3x256 with LayerNorm, target = min of 2 sampled, actor loss on
their mean, no entropy term in the target, target entropy -|A|/2."""


@document_fields
@dataclass(frozen=True)
class RFCLConfig:
    """Learn a sparse-reward task from a few demonstrations with RFCL."""

    env: str = "toy:maze"
    """A task with a success flag and exact state save/restore: toy:maze*, adroit:door|pen|
    relocate|hammer, metaworld:<task>, sparse:pusher."""
    demos: Path = Path("demos/maze")
    """A demo folder with simulator states (`prefrl demos plan|script|record`, or
    `import-d4rl|import-dapg|import-maniskill2`)."""
    num_demos: int | None = None
    """Use the first this many demos of the file (default: all)."""
    demo_actions: bool = True
    """Sample demo transitions into every stage-1 batch (False: the demos give start states
    alone)."""
    demo_action_scale: float | None = None
    """Bound the agent's actions, per dimension, to this multiple (>= 1) of the largest the demos
    take (the env's bounds at most): RFCL's `data_action_scale`, off by default as in the paper,
    which sets it (1.25) on ManiSkill2's PlugCharger alone. Needs the demos' actions (with
    --no-demo-actions too: they then bound the agent's, and are not trained on)."""
    steps: int = 60_000
    """Env steps in all (with --resume: the total to reach, not more steps)."""
    seed: int = 0
    """Random seed: the networks, the resets, the actions sampled, the curriculum's draws."""
    warmstart_steps: int = 5_000
    """Uniform-random actions for this many steps (stage 1 starts still follow the curriculum),
    and no updates; stage 2 begins with as many steps of the policy's, again without updates."""
    update_every: int = 1
    """An update every this many env steps (with sac.utd_ratio critic steps each), counted over
    all the envs."""
    envs: int = 1
    """Envs stepped together, each with its own episode and start (the paper steps 8 on a GPU;
    on a few CPU cores the updates take the time and one env is enough)."""
    env_workers: int = 0
    """Processes the envs are stepped in (0: this process)."""
    reverse_delta: int = 4
    """How far back a demo's start frontier moves after a streak (the paper's 8 on Adroit)."""
    reverse_streak: int = 2
    """Successes in a row from the frontier that move it (the paper's 3 on Adroit; 2 the maze)."""
    reverse_time_divisor: int = 1
    """Time limit of a stage-1 episode: 16 + (demo steps left) // this. The paper's 3 on Adroit
    is for its slow human demos; planned or scripted demos, about as fast as a trained policy,
    need 1."""
    solved_share: float = 0.9
    """Stage 1 ends once more than this share of the demos are solved."""
    trim_success: int = 50
    """Keep at most this many steps of a demo after its first success."""
    forward_seeds: int = 1000
    """The task's initial states as this many reset seeds (stage 2)."""
    forward_history: int = 5
    """Stage 2 scores a reset seed by its last this many episodes (PLR)."""
    reverse_curriculum: bool = True
    """False: no stage 1, every episode from the task's initial states (a baseline: SAC, or
    SAC with demo transitions in half of each batch)."""
    forward_curriculum: bool = True
    """False: stage 2 draws the reset seeds uniformly (a baseline)."""
    eval_interval: int = 5_000
    """Evaluate every this many env steps (and at the end): deterministic actions from the
    task's own initial states."""
    eval_episodes: int = 20
    """Episodes per evaluation (success at the end and at some step are their means)."""
    checkpoint_interval: int = 10_000
    """Save everything to resume from every this many env steps (and at the end, and on
    Ctrl-C)."""
    log_interval: int = 1_000
    """Write training metrics and the curriculum's every this many env steps."""
    buffer_size: int = 1_000_000
    """Transitions the replay buffer keeps."""
    video: bool = False
    """Write evaluation videos (H.264 mp4) to the run's videos/ folder."""
    video_interval: int = 100_000
    """With --video: record an evaluation episode every this many env steps."""
    render_size: int = 256
    """Evaluation videos' size in pixels (square)."""
    name: str | None = None
    """The run directory's name under --runs-dir (default: env, rfcl, seed and time)."""
    runs_dir: Path = Path("runs")
    """The folder run directories are made in."""
    resume: Path | None = None
    """Continue the run in this directory from its latest checkpoint."""
    progress: bool = True
    """Show a progress bar; --no-progress: a plain line every --log-interval env steps
    instead (as where the output is not a terminal)."""
    sac: SACConfig = RFCL_SAC
    """SAC's settings (RFCL's by default: 10 critics, a target entropy of -|A|/2, ...)."""

    def __post_init__(self) -> None:
        resolve(self.env)
        positive = ("steps", "update_every", "envs", "reverse_delta", "reverse_streak",
                    "reverse_time_divisor", "trim_success", "forward_seeds", "forward_history",
                    "eval_interval", "eval_episodes", "checkpoint_interval", "log_interval",
                    "buffer_size")  # fmt: skip
        check_fields(self, {
            **{n: (getattr(self, n) > 0, "a positive integer") for n in positive},
            "warmstart_steps": (self.warmstart_steps >= 0, ">= 0"),
            "env_workers": (self.env_workers >= 0, ">= 0 (0: step the envs in this process)"),
            "num_demos": (self.num_demos is None or self.num_demos >= 1, ">= 1 or None"),
            "solved_share": (0 <= self.solved_share < 1, "a share in [0, 1)"),
            "demo_action_scale": (self.demo_action_scale is None or self.demo_action_scale >= 1,
                                  "a multiple >= 1 of the demos' largest actions, or None"),
        }, "--")  # fmt: skip


def method_name(config: RFCLConfig) -> str:
    """What a run of `config` runs: RFCL, or the baseline that switching its parts off leaves
    (the benchmark's "SAC + demos": no curricula, demo transitions in half of each batch)."""
    if config.reverse_curriculum:
        name = "RFCL" if config.forward_curriculum else "RFCL without its forward curriculum"
        return name if config.demo_actions else f"{name}, from demo states alone"
    name = "SAC + demos" if config.demo_actions else "SAC"
    return f"{name} + forward curriculum" if config.forward_curriculum else name


def method_slug(config: RFCLConfig) -> str:
    """The method in run directory names: rfcl, or a baseline's (sac-demos, sac)."""
    if config.reverse_curriculum:
        return "rfcl"
    return "sac-demos" if config.demo_actions else "sac"
