"""The order a log is read in: a log exported from a cloud log viewer (GCP's Logs Explorer, Datadog) runs newest
line first, so its tracebacks read upwards and its last cause comes first. Such a log is read oldest line first, and
its report numbered as the file is."""

from __future__ import annotations

import re
from itertools import pairwise

from firstlight.diagnosis.outcome import Report

# A newest-first log up to this many lines is held to be read in time order; a longer one is read as it is.
NEWEST_FIRST_CAP = 200_000
_STAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?")


def newest_first(head: list[tuple[int, str]]) -> bool:
    """The log's timestamps (date and time, each line's first) fall from line to line far more often than they rise."""
    stamps = [m[0] for _, text in head if (m := _STAMP.search(text[:120]))]
    falls = sum(a > b for a, b in pairwise(stamps))
    rises = sum(a < b for a, b in pairwise(stamps))
    return falls >= 5 and falls > 3 * rises


def in_time_order(lines: list[tuple[int, str]]) -> tuple[list[tuple[int, str]], list[int]]:
    """A newest-first log oldest line first, numbered 1..n, and each line's number in the file."""
    lines = lines[::-1]
    return [(n, text) for n, (_, text) in enumerate(lines, 1)], [line_no for line_no, _ in lines]


def numbered_as_in_file(report: Report, numbers: list[int]) -> Report:
    """A report on a log read in time order, its line numbers turned back into the file's."""

    def in_file(n: int) -> int:
        return numbers[n - 1] if 0 < n <= len(numbers) else n

    for seen in report.phases:
        seen.line = in_file(seen.line)
    if report.diagnosis is not None:
        report.diagnosis.line = in_file(report.diagnosis.line)
    for cand in report.candidates:
        cand["line"] = in_file(int(cand["line"]))
    report.wrappers = [(in_file(n), text) for n, text in report.wrappers]
    report.rule = f"the log runs newest line first: read in time order (lines in this rule counted so); {report.rule}"
    return report
