"""Log text as segments: split on both `\\n` and `\\r` (progress bars redraw with `\\r`), in bounded memory,
without the terminal's colour codes (engines colour their prefixes when they write to a terminal, and a log
captured from one keeps them)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

_SPLIT = re.compile(rb"[\r\n]")
MAX_SEGMENT = 64 * 1024  # a pathological line without newlines is cut, never held whole in memory
_DIGITS = re.compile(r"\d+")
# also as text: rsyslog's /var/log/syslog escapes control characters in octal (#033[1;36m), and a log copied from
# `less` or `cat -v` shows the escape as ESC[1;36m or ^[[1;36m
_ANSI = re.compile(rb"(?:\x1b|#033|ESC|\^\[)\[[0-9;?]*[A-Za-z]")

# What carried a log from the engine to the file may put its own prefix before the engine's: syslog and journald
# (`Apr  3 17:38:57 host unit[pid]: `, `2026-04-03T17:38:57+0000 host unit[pid]: `), kubectl --timestamps and CI
# runners (`2026-04-03T17:38:57.123456789Z `), docker compose (`vllm-1  | `, v1's `vllm_1  | `, honcho's `web.1  | `),
# pm2 (`0|vllm  | `). A service's name alone (`vllm  | `, compose's container_name) is not told from a table's row.
_SYSLOG = r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]+ [\w.@/-]+(?:\[\d+\])?:\s*"
RELAY_PREFIX = (
    rf"{_SYSLOG}|\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)\s+(?:[\w.-]+ [\w.@/-]+\[\d+\]:\s*)?"
    r"|[\w.-]+[-_.]\d+\s+\|(?:\s|$)|\d+\|[\w.-]+\s*\|(?:\s|$)"
)
_RELAYED = re.compile(f"^(?:{RELAY_PREFIX})+")


def without_relay(line: str) -> str:
    """The line as the engine wrote it, without the prefixes a log collector or a terminal tool put before it."""
    m = _RELAYED.match(line)
    return line[m.end() :] if m else line


# A progress bar's last redraw ends without a newline, so what another process prints next is glued to it
# (`13%|██▏   | 3/23 [00:11<00:55,  2.79s/it]Failed: Cuda error ...`): tqdm's closing `[elapsed<left, rate]`.
_BAR_END = re.compile(rb"\[[\d:]+<[\d:?]+,[^\]\n]{0,40}?(?:/s|/it)\](?=\S)")


def _after_bar(segment: bytes) -> Iterator[bytes]:
    """The segment, split where text is glued to the end of a progress bar."""
    if b"/s]" not in segment and b"/it]" not in segment:
        yield segment
        return
    start = 0
    for m in _BAR_END.finditer(segment):
        yield segment[start : m.end()]
        start = m.end()
    yield segment[start:]


def _text(segment: bytes) -> str:
    # one scan: without a code, sub hands back the segment itself, faster than testing for each form first
    return _ANSI.sub(b"", segment).decode("utf-8", "replace")


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
            yield from self._segments(data[start : m.start()])
            if m.group() == b"\n":
                self.line_no += 1
            start = m.end()
        rest = data[start:]
        if len(rest) > MAX_SEGMENT:
            yield from self._segments(rest[:MAX_SEGMENT])
            rest = b""
        self._pending = rest

    def finish(self) -> Iterator[tuple[int, str]]:
        yield from self._segments(self._pending)
        self._pending = b""

    def _segments(self, raw: bytes) -> Iterator[tuple[int, str]]:
        """The text between two line ends, split after a progress bar, without its blank parts."""
        for segment in _after_bar(raw):
            if segment.strip():
                yield self.line_no, _text(segment)


def iter_lines(stream: BinaryIO) -> Iterator[tuple[int, str]]:
    """Every segment of a binary stream (a file or stdin), in bounded memory."""
    splitter = LineSplitter()
    while chunk := stream.read(1 << 20):
        yield from splitter.feed(chunk)
    yield from splitter.finish()


def fold_digits(line: str) -> str:
    """A line's shape: logs repeat the same lines with other numbers (ranks, pids, times, counts)."""
    return _DIGITS.sub("0", line)
