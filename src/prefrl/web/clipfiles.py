"""A run's clips, served from memory. A clip, once rendered, never changes, and each is asked
for by every page shown its pair (a browser's video asks for `Range: bytes=0-`): read once, an
answer is bytes already in memory instead of a file stat-ed, opened, read and closed in threads,
which was most of a clip request's CPU (`benchmarks/web_load.py`)."""

from __future__ import annotations

import os
import re
from email.utils import formatdate
from pathlib import Path

from fastapi import HTTPException
from fastapi.responses import FileResponse, Response

RANGE = re.compile(r"bytes=(\d+)-(\d*)")
"""The one range a video element asks for (`bytes=0-`, or a part from where it left off);
anything else (several ranges, a suffix, If-Range) is answered from the file."""


class ClipFiles:
    def __init__(self, folder: Path, max_bytes: int = 256 * 2**20):
        self.folder = Path(folder).resolve()
        self.max_bytes = max_bytes
        self.cache: dict[str, tuple[tuple[int, int], bytes, dict[str, str]]] = {}
        self.held = 0

    def response(self, name: str, range_header: str | None, if_range: str | None) -> Response:
        """The clip `name` (a file directly in the folder), whole or the range asked for."""
        path = self.folder / name
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            raise HTTPException(404, f"no clip {name!r}") from None
        version = (st.st_mtime_ns, st.st_size)
        cached = self.cache.get(name)
        if cached is None or cached[0] != version:
            if path.resolve().parent != self.folder or not path.is_file():
                raise HTTPException(404, f"no clip {name!r}")
            cached = self._read(name, path, version)
        body, headers = cached[1], cached[2]
        if range_header is None:
            return Response(body, headers=headers)
        match = RANGE.fullmatch(range_header.strip())
        if match is None or if_range is not None or int(match[1]) >= len(body):
            return FileResponse(path, media_type="video/mp4")
        start = int(match[1])
        end = min(int(match[2]) + 1 if match[2] else len(body), len(body))
        part = {**headers, "content-range": f"bytes {start}-{end - 1}/{len(body)}"}
        return Response(body[start:end], status_code=206, headers=part)

    def _read(self, name: str, path: Path, version: tuple[int, int]):
        body = path.read_bytes()
        headers = {"content-type": "video/mp4", "accept-ranges": "bytes",
                   "etag": f'"{version[0]:x}-{version[1]:x}"',
                   "last-modified": formatdate(version[0] / 1e9, usegmt=True)}  # fmt: skip
        if self.held + len(body) > self.max_bytes:  # (a run's open pairs' clips fit many times)
            self.cache.clear()
            self.held = 0
        old = self.cache.pop(name, None)
        self.held += len(body) - (len(old[1]) if old else 0)
        self.cache[name] = version, body, headers
        return self.cache[name]
