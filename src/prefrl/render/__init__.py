"""Clip rendering and encoding."""

from prefrl.render.video import write_video

__all__ = ["write_video"]
