"""Read a log as it is written, without blocking: what was appended since the last call, as segments."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from firstlight.logs.lines import LineSplitter


class LogFollower:
    """Reads whatever was appended to a file since the last call, without blocking."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._splitter = LineSplitter()

    def read_available(self) -> Iterator[tuple[int, str]]:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return
        while chunk := os.read(self._fd, 1 << 16):
            yield from self._splitter.feed(chunk)

    def flush(self) -> Iterator[tuple[int, str]]:
        """Everything left, including an unterminated last line, once the writer is gone."""
        yield from self.read_available()
        yield from self._splitter.finish()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
