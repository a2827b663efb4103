"""H.264 mp4 files (yuv420p, faststart) that play in browsers, written with PyAV.

PyAV is imported where a video is read or written, so the training loops (which import
`write_video`) load without it until a video is made."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np


def write_video(
    path: str | Path,
    frames: Iterable[np.ndarray] | Sequence[np.ndarray],
    fps: float = 30,
    audio: tuple[np.ndarray, int] | None = None,
) -> Path:
    """Encode RGB uint8 frames (H, W, 3) to `path`, with `audio` (int16 samples, mono (n,) or
    stereo (n, 2), and their sample rate) as an AAC track if given. Written to a temporary name
    of this writer's own, then renamed: a partly written video never appears under its final
    name, and two writers of the same clip (two renderers on one run) never mix their bytes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}-{threading.get_ident()}.partial{path.suffix}")
    frames = iter(frames)
    first = next(frames, None)
    if first is None:
        raise ValueError(f"no frames to write to {path}")
    first = _check_frame(first)
    h, w = first.shape[:2]
    # yuv420p needs even sizes; pad by one pixel where needed.
    pad = ((0, h % 2), (0, w % 2), (0, 0))
    try:
        _encode(tmp, first, frames, fps, audio, h, w, pad)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return path


def _encode(tmp: Path, first, frames, fps, audio, h: int, w: int, pad) -> None:
    import av

    with av.open(str(tmp), mode="w", format="mp4", options={"movflags": "faststart"}) as out:
        stream = out.add_stream("libx264", rate=round(fps))
        stream.width, stream.height = w + w % 2, h + h % 2
        stream.pix_fmt = "yuv420p"
        stream.options = {"crf": "23", "preset": "veryfast"}
        # Every stream must exist before the first packet is written.
        sound = None
        if audio is not None:
            layout = "stereo" if np.ndim(audio[0]) == 2 else "mono"
            sound = out.add_stream("aac", rate=audio[1], layout=layout)
        for frame in _chain(first, frames):
            frame = _check_frame(frame)
            if frame.shape[:2] != (h, w):
                raise ValueError(f"frame size {frame.shape[:2]} differs from the first {(h, w)}")
            if pad[0][1] or pad[1][1]:
                frame = np.pad(frame, pad, mode="edge")
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
        if sound is not None:
            write_audio_stream(out, sound, *audio)


def write_audio_stream(out, stream, samples: np.ndarray, rate: int, chunk: int = 4096) -> None:
    """Encode int16 samples (mono (n,) or stereo (n, 2)) into an audio `stream` of `out`."""
    import av

    samples = np.asarray(samples, np.int16)
    layout = "stereo" if samples.ndim == 2 else "mono"
    for start in range(0, len(samples), chunk):
        # PyAV's packed s16 layout: one row of interleaved samples.
        part = np.ascontiguousarray(samples[start : start + chunk]).reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(part, format="s16", layout=layout)
        frame.sample_rate, frame.pts = rate, start
        for packet in stream.encode(frame):
            out.mux(packet)
    for packet in stream.encode():
        out.mux(packet)


def block_scale(height: int, size: int) -> int:
    """The smallest whole factor that makes frames `height` pixels high at least `size` high."""
    return max(1, -(-size // height))


def enlarge(frame: np.ndarray, scale: int) -> np.ndarray:
    """Each pixel as a `scale` x `scale` block (nearest neighbour: small games stay sharp)."""
    return frame if scale == 1 else np.repeat(np.repeat(frame, scale, 0), scale, 1)


class Enlarged(Sequence):
    """Frames enlarged (`enlarge`) one at a time as they are read, so that a long episode's
    enlarged frames are never all in memory at once."""

    def __init__(self, frames: Sequence[np.ndarray], scale: int):
        self.frames, self.scale = frames, scale

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Enlarged(self.frames[i], self.scale)
        return enlarge(self.frames[i], self.scale)


def read_video(path: str | Path) -> list[np.ndarray]:
    """The RGB frames of a video file."""
    import av

    with av.open(str(path)) as f:
        return [frame.to_ndarray(format="rgb24") for frame in f.decode(video=0)]


def has_audio(path: str | Path) -> bool:
    """Whether a video file has a sound track (False where it cannot be read)."""
    import av

    try:
        with av.open(str(path)) as f:
            return bool(f.streams.audio)
    except (OSError, av.FFmpegError):
        return False


def _chain(first, rest):
    yield first
    yield from rest


def _check_frame(frame: np.ndarray) -> np.ndarray:
    frame = np.asarray(frame)
    if frame.ndim != 3 or frame.shape[2] != 3:
        raise ValueError(f"expected RGB frames of shape (H, W, 3), got {frame.shape}")
    if frame.dtype != np.uint8:
        raise ValueError(f"expected uint8 frames, got {frame.dtype}")
    return np.ascontiguousarray(frame)
