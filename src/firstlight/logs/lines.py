"""Log text as segments: split on both `\\n` and `\\r` (progress bars redraw with `\\r`), in bounded memory."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

_SPLIT = re.compile(rb"[\r\n]")
MAX_SEGMENT = 64 * 1024  # a pathological line without newlines is cut, never held whole in memory
_DIGITS = re.compile(r"\d+")


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


def iter_lines(stream: BinaryIO) -> Iterator[tuple[int, str]]:
    """Every segment of a binary stream (a file or stdin), in bounded memory."""
    splitter = LineSplitter()
    while chunk := stream.read(1 << 20):
        yield from splitter.feed(chunk)
    yield from splitter.finish()


def fold_digits(line: str) -> str:
    """A line's shape: logs repeat the same lines with other numbers (ranks, pids, times, counts)."""
    return _DIGITS.sub("0", line)
