"""Where a log that stops without an error stalled: the first of the run of like lines it ends with (a wait repeated
every few seconds began at the first), before what a stop leaves behind."""

from __future__ import annotations

import re

from firstlight.diagnosis.levels import PYTHON_WARNING_TEXT
from firstlight.logs import log_time

_CLOCK = re.compile(r"(\d\d):(\d\d):(\d\d)")
# Not where a start-up stopped: a Python warning (`file.py:254: UserWarning: msg`, then its source line
# `  warnings.warn(...)`; often printed at exit), a progress bar that has not begun (`0/58 [00:00<?`: the step it
# belongs to began on the line before)
_NOT_PROGRESS = re.compile(PYTHON_WARNING_TEXT + r"|^\s*warnings\.warn\(|\b0/\d+ \[00:00<")


def left_behind(line: str) -> bool:
    """The line is what a stop leaves behind, not progress: a Python warning, a progress bar that never moved."""
    return ("Warning" in line or "warnings.warn" in line or "00:00<" in line) and _NOT_PROGRESS.search(line) is not None


CUT_LINE_CHARS = 20  # a log cut off mid-line ends on a part of the line it repeated: as long as this, it is that line


def same_run(shape: str, run_shape: str) -> bool:
    """The line repeats the run's line (digits folded), or is its start cut off where the log ends, or the run began
    with it printed onto the end of another process's unfinished line (`NCCL INFO Channel 01/0 : (APIServer pid=1)
    DEBUG ... Waiting for 1 local, 0 remote core engine proc(s) to start.`)."""
    return shape == run_shape or (
        len(shape) >= CUT_LINE_CHARS and (run_shape.startswith(shape) or run_shape.endswith(shape))
    )


def stall(
    run_start: tuple[int, str] | None, last: tuple[int, str] | None, clocks: tuple[re.Pattern[str], ...]
) -> tuple[int, str] | None:
    """Where a log that stops stalled: its last line, or the first of the run of like lines it ends with when
    that run spans time (a stalled engine repeats `Waiting for 1 core engine proc(s) to start` every few
    seconds: the wait began at the first). Ranks printing one line in the same second are not a wait."""
    if run_start is None or last is None or run_start == last:
        return last
    began, ended = seconds(log_time(run_start[1], clocks)), seconds(log_time(last[1], clocks))
    return run_start if began is not None and ended is not None and ended - began >= 2 else last


def seconds(stamp: str | None) -> int | None:
    """Seconds since midnight of a log time's HH:MM:SS (a launch that crosses midnight is not judged)."""
    m = _CLOCK.search(stamp or "")
    return int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3]) if m else None
