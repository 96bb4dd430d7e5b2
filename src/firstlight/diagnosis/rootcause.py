"""Root-cause extraction: every line of every rank is a possible cause; rank them, keep the best.

Ranking, highest first:
1. a specific signature (it names one cause) beats a generic exception, which beats a wrapper
   ("EngineCore failed to start" only says that something failed before it);
2. a line at ERROR level or a raw traceback line beats the same text logged at INFO or WARNING;
3. among equals the earliest wins: in a chain of exceptions the first is the cause, and a rank that
   fails first is the one that made the others fail.
A generic exception that no signature names is placed by where it was raised: from an engine's argument or
config validation (the last traceback frame before it), it is about the settings.
Identical lines from many ranks (after their rank, pid and time prefixes are removed) are one cause.
"""

from __future__ import annotations

import heapq
import re
from collections import deque
from dataclasses import dataclass, field

from firstlight.diagnosis.signatures import (
    EXCEPTION_LINE,
    FRAME_LINE,
    RAISED_IN_CONFIG,
    TRIGGER,
    Signature,
    config_sources,
    error_level_lines,
    ignored_errors,
    load_signatures,
    wrapper_lines,
)
from firstlight.engines import strip_line_prefix
from firstlight.logs import fold_digits

EVIDENCE_BEFORE = 3
EVIDENCE_AFTER = 2
MAX_CANDIDATES = 5000
VERDICT_CACHE = 100_000

GENERIC_EXCEPTION = 0.3
ERROR_LEVEL = 0.3  # a line the engine itself marks as an error, without an exception's shape
BARE_EXCEPTION = 0.2
EXCEPTION_BONUS = 0.03
QUIET_LEVEL_FACTOR = 0.5
IGNORED_FACTOR = 0.3  # an error the engine says it ignores ranks below any exception it did not ignore
FAILED_SCORE = 0.45  # a candidate this strong means the launch failed


_QUIET_LEVEL = re.compile(
    r"^\W*(?:\(\w[\w-]* pid=\d+\)\s*)?(?:INFO|WARNING|WARN|DEBUG)\b|\s(?:INFO|WARN|WARNING|DEBUG)\s+[\w.:]+[:\]]|^\[W\d"
)


# What a line is: a wrapper, a scored candidate (score, signature, how the score came about), or nothing.
Verdict = str | tuple[float, Signature | None, tuple[str, ...]] | None

_CARETS = re.compile(r"^\s*[\^~]+\s*$")


def _rank(c: Candidate) -> tuple[float, int]:
    """Strongest first; among equals the earliest."""
    return (-round(c.score, 6), c.line_no)


def normalise(line: str) -> str:
    """The line without rank, pid and time prefixes (every engine's, as their adapters declare them), so
    the same message from 8 ranks is one key."""
    return strip_line_prefix(line).strip()


@dataclass
class Candidate:
    score: float
    line_no: int
    line: str
    category: str
    signature: Signature | None
    groups: dict[str, str | None]
    before: list[str]
    after: list[str] = field(default_factory=list)
    count: int = 1
    reasons: tuple[str, ...] = ()  # how the score came about, for `diagnose --explain`

    @property
    def remedy(self) -> str:
        if self.signature is None:
            return ""
        return self.signature.remedy_for(self.groups)

    def explained(self) -> dict[str, object]:
        return {
            "line": self.line_no,
            "text": self.line,
            "score": round(self.score, 3),
            "category": self.category,
            "signature": self.signature.id if self.signature else None,
            "why": list(self.reasons),
            "repeats": self.count,
        }


class RootCauseFinder:
    """Feed lines in order; ask for the best candidate at any time (bounded memory for any log size)."""

    def __init__(self) -> None:
        self.signatures = load_signatures()
        self.wrappers_rx = wrapper_lines()
        self.error_rx = error_level_lines()
        self.config_rx = config_sources()
        self.ignored_rx = ignored_errors()
        self._frame: str | None = None  # the last traceback frame's file, until an exception line follows
        self.candidates: dict[str, Candidate] = {}
        self.wrappers: list[tuple[int, str]] = []
        self.tracebacks = 0
        self._recent: deque[str] = deque(maxlen=EVIDENCE_BEFORE)
        self._open: list[Candidate] = []  # candidates still collecting their following lines
        self._verdicts: dict[str, Verdict] = {}

    def feed(self, line_no: int, line: str, shape: str | None = None) -> None:
        if ("^" in line or "~" in line) and _CARETS.match(line):  # Python 3.11's `^^^^` under a code line
            return
        for cand in self._open:
            cand.after.append(line)
        self._open = [c for c in self._open if len(c.after) < EVIDENCE_AFTER]
        frame = FRAME_LINE.search(line) if 'File "' in line else None  # the substring test spares the regex
        if frame is not None:
            self._frame = frame.group("path")
        cand = self._candidate(line_no, line, shape if shape is not None else fold_digits(line))
        if cand is not None:
            self._open.append(cand)
        if frame is None and self._frame is not None and EXCEPTION_LINE.search(line):
            self._frame = None  # the exception that frame raised: the next one has frames of its own
        self._recent.append(line)

    def _candidate(self, line_no: int, line: str, shape: str) -> Candidate | None:
        if "Traceback (most recent call last)" in line:
            self.tracebacks += 1
        verdict = self._classify(shape, line)
        if verdict is None:
            return None
        if verdict == "wrapper":
            if len(self.wrappers) < 50:
                self.wrappers.append((line_no, line))
            return None
        key = normalise(line)
        seen = self.candidates.get(key)
        if seen is not None:
            seen.count += 1
            return None
        score, sig, reasons = verdict
        if sig is None and self._raised_in_config(line):
            sig = RAISED_IN_CONFIG
            score = max(score, sig.weight + EXCEPTION_BONUS)
            reasons = (*reasons, f"raised in an engine's config validation ({self._frame})")
        groups: dict[str, str | None] = {}
        category = "unknown"
        if sig is not None:
            m = sig.pattern.search(line)
            groups = m.groupdict() if m else {}
            category = sig.category
        if len(self.candidates) >= MAX_CANDIDATES and score <= min(c.score for c in self.candidates.values()):
            return None
        cand = Candidate(score, line_no, line, category, sig, groups, list(self._recent), reasons=reasons)
        self.candidates[key] = cand
        if len(self.candidates) > MAX_CANDIDATES:
            worst = min(self.candidates, key=lambda k: (self.candidates[k].score, -self.candidates[k].line_no))
            del self.candidates[worst]
        return cand

    def _raised_in_config(self, line: str) -> bool:
        """A generic exception whose last traceback frame is an engine's argument or config validation."""
        if self._frame is None or self.config_rx is None or not EXCEPTION_LINE.search(line):
            return False
        return self.config_rx.search(self._frame) is not None

    def _classify(self, shape: str, line: str) -> Verdict:
        """What a line is: a wrapper, a scored candidate, or nothing. Multi-rank logs repeat the same
        messages with other numbers, so the verdict is cached by the line's shape (digits folded)."""
        if shape in self._verdicts:
            return self._verdicts[shape]
        verdict = self._classify_uncached(line)
        if len(self._verdicts) > VERDICT_CACHE:
            self._verdicts.clear()
        self._verdicts[shape] = verdict
        return verdict

    def _classify_uncached(self, line: str) -> Verdict:
        if not TRIGGER.search(line):
            return None
        if self.wrappers_rx.search(line):
            return "wrapper"
        best: Signature | None = None
        for sig in self.signatures:
            if best is not None and sig.weight <= best.weight:
                continue
            if sig.pattern.search(line):
                best = sig
        exc = EXCEPTION_LINE.search(line)
        reasons: list[str] = []
        if best is not None:
            score = best.weight + (EXCEPTION_BONUS if exc else 0.0)
            reasons.append(f"signature {best.id} ({best.category}, weight {best.weight})")
            if exc:
                reasons.append("an exception line")
        elif exc:
            score = GENERIC_EXCEPTION if (exc.group("msg") or "").strip() else BARE_EXCEPTION
            reasons.append("a generic exception" if score == GENERIC_EXCEPTION else "a bare exception, no message")
        elif self.error_rx is not None and self.error_rx.search(line):
            score = ERROR_LEVEL
            reasons.append("the engine's error level")
        else:
            return None
        if _QUIET_LEVEL.search(line):
            score *= QUIET_LEVEL_FACTOR
            reasons.append(f"logged at INFO/WARNING (x{QUIET_LEVEL_FACTOR})")
        if self.ignored_rx is not None and self.ignored_rx.search(line):
            score *= IGNORED_FACTOR
            reasons.append(f"an error the engine says it ignores (x{IGNORED_FACTOR})")
        return score, best, tuple(reasons)

    def ranked(self, limit: int = 5) -> list[Candidate]:
        """The strongest candidates, best first (the order `best` chooses by)."""
        return heapq.nsmallest(limit, self.candidates.values(), key=_rank)

    def best(self, after: int = 0) -> Candidate | None:
        """The most likely cause (among the lines after line `after`, when given)."""
        found = [c for c in self.candidates.values() if c.line_no > after]
        if not found:
            return None
        return min(found, key=_rank)

    def failed_after(self, line_no: int) -> Candidate | None:
        """A cause that names itself (a signature, not a bare error) after the engine said it was ready:
        the server failed while serving, or before it could (a port taken after startup completed)."""
        best = self.best(after=line_no)
        return best if best is not None and best.category != "unknown" and best.score >= FAILED_SCORE else None

    @property
    def failed(self) -> bool:
        """Whether the log shows a launch that died, rather than one that stopped printing."""
        best = self.best()
        if self.wrappers:
            return True
        if best is None:
            return False
        return best.score >= FAILED_SCORE or (best.category == "unknown" and self.tracebacks > 0)
