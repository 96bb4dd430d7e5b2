"""Read a log as it is written, splitting on both `\\n` and `\\r` (progress bars redraw with `\\r`)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

_SPLIT = re.compile(rb"[\r\n]")
MAX_SEGMENT = 64 * 1024  # a pathological line without newlines is cut, never held whole in memory


class LineSplitter:
    """Bytes in, (line number, segment) out. Line numbers count `\\n` only, so they match what an
    editor shows; the `\\r` redraws of one progress bar share their line's number."""

    def __init__(self) -> None:
        self._pending = b""
        self.line_no = 1

    def feed(self, chunk: bytes) -> Iterator[tuple[int, str]]:
        data = self._pending + chunk
        start = 0
        for m in _SPLIT.finditer(data):
            segment = data[start : m.start()]
            if segment.strip():
                yield self.line_no, segment.decode("utf-8", "replace")
            if m.group() == b"\n":
                self.line_no += 1
            start = m.end()
        rest = data[start:]
        if len(rest) > MAX_SEGMENT:
            yield self.line_no, rest[:MAX_SEGMENT].decode("utf-8", "replace")
            rest = b""
        self._pending = rest

    def finish(self) -> Iterator[tuple[int, str]]:
        if self._pending.strip():
            yield self.line_no, self._pending.decode("utf-8", "replace")
        self._pending = b""


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


def iter_lines(stream: BinaryIO) -> Iterator[tuple[int, str]]:
    """Every segment of a binary stream (a file or stdin), in bounded memory."""
    splitter = LineSplitter()
    while chunk := stream.read(1 << 20):
        yield from splitter.feed(chunk)
    yield from splitter.finish()
