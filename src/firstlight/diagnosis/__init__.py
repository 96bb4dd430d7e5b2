"""`diagnose`: what happened in a launch log, and why it failed, read from the whole log of every rank."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from firstlight.diagnosis.outcome import Diagnosis, PhaseSeen, Report
from firstlight.diagnosis.reader import detect_engine, diagnose_file, diagnose_lines, looks_binary
from firstlight.diagnosis.signatures import CATEGORIES
from firstlight.logs import iter_lines


def diagnose(log: Path | str | BinaryIO, engine: str = "auto") -> Report:
    """Diagnose a log file (a path) or a binary stream: the outcome, the phases reached, and for a launch
    that did not reach ready the root-cause line, its category and the remedy (`report.diagnosis`)."""
    if isinstance(log, Path | str):
        return diagnose_file(log, engine)
    return diagnose_lines(iter_lines(log), engine)


__all__ = [
    "CATEGORIES",
    "Diagnosis",
    "PhaseSeen",
    "Report",
    "detect_engine",
    "diagnose",
    "diagnose_file",
    "diagnose_lines",
    "looks_binary",
]
