"""Atari 2600 games through ale-py (the `atari` extra, which ships the ROMs): `atari:Pong`,
`atari:Enduro`, any ROM ale-py knows, by its CamelCase name.

Settings of the learning-from-preferences papers: no sticky actions, the minimal action set, a
new episode at game over (no life-loss signal: a learned reward must not be told what a life is).
Where a score on the screen would give the reward away it is blanked (Pong's score; Enduro's
dashboard, whose speedometer and odometer say how well the car is doing), and Enduro's episodes
end before its weather changes (the fog and snow that confuse a reward model, per the paper).
"""

from __future__ import annotations

import difflib
import re

import numpy as np

from prefrl.envs.frames import PixelEnv

INSTALL = "pip install 'prefrl[atari]'"

# Rows of the 84x84 frame set to 0. Pong's score sits above the top wall (screen rows 0-23);
# Enduro's dashboard fills screen rows 162-190.
BLANK_ROWS = {"pong": (slice(0, 9),), "enduro": (slice(64, 77),)}
# Agent steps (of 4 frames): Enduro's first weather change comes after about 3500 frames.
TIME_LIMITS = {"enduro": 750}


def rom_id(name: str) -> str:
    """`SpaceInvaders` -> `space_invaders` (ale-py's ROM ids)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _ale():
    try:
        import ale_py
    except ImportError as err:
        raise ImportError(f"Atari games need ale-py: {INSTALL}") from err
    return ale_py


def game_names() -> list[str]:
    """Every game ale-py ships, as `atari:` names."""
    from ale_py import roms

    return sorted("".join(p.capitalize() for p in r.split("_")) for r in roms.get_all_rom_ids())


class AtariGame:
    """One ALE emulator, one frame per `act`."""

    fps = 60.0

    def __init__(self, name: str):
        ale_py = _ale()
        from ale_py import roms

        rom = rom_id(name)
        known = roms.get_all_rom_ids()
        if rom not in known:
            close = difflib.get_close_matches(name, game_names(), n=5, cutoff=0.5)
            hint = f"; close: {', '.join('atari:' + c for c in close)}" if close else ""
            raise ValueError(f"atari:{name} is not an Atari game ale-py knows{hint}")
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
        self.ale = ale_py.ALEInterface()
        self.ale.setFloat("repeat_action_probability", 0.0)
        self.ale.setInt("random_seed", 0)
        self.ale.loadROM(roms.get_rom_path(rom))
        self._actions = self.ale.getMinimalActionSet()
        self.action_meanings = [a.name for a in self._actions]
        self._state_type = ale_py.ALEState

    def reset(self, rng: np.random.Generator) -> None:
        self.ale.reset_game()

    def act(self, action: int) -> float:
        return float(self.ale.act(self._actions[action]))

    def game_over(self) -> bool:
        return bool(self.ale.game_over())

    def screen_grey(self) -> np.ndarray:
        return self.ale.getScreenGrayscale()

    def screen_rgb(self) -> np.ndarray:
        return self.ale.getScreenRGB()

    def get_state(self) -> np.ndarray:
        return np.frombuffer(self.ale.cloneState().serialize(), np.uint8)

    def set_state(self, state: np.ndarray) -> None:
        self.ale.restoreState(self._state_type(np.asarray(state, np.uint8).tobytes()))


def make_atari(name: str, seed: int | None = None) -> PixelEnv:
    game = AtariGame(name)
    rom = rom_id(name)
    return PixelEnv(
        game, f"atari:{name}", seed, blank_rows=BLANK_ROWS.get(rom, ()),
        max_episode_steps=TIME_LIMITS.get(rom),
    )  # fmt: skip
