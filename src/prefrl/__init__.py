"""prefrl: teach reinforcement-learning agents behaviours from what people prefer."""

import os

# Offscreen rendering without a display. MuJoCo reads this when it is first imported, so it is
# set here, before any prefrl module imports mujoco; a value set by the user wins.
os.environ.setdefault("MUJOCO_GL", "egl")
# pygame (classic-control rendering) draws offscreen; without these SDL looks for a display.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

__version__ = "0.1.0"
