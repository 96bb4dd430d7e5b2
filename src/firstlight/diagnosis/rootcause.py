"""Root-cause extraction: every line of every rank is a possible cause; rank them, keep the best.

Ranking, highest first:
1. a specific signature (it names one cause) beats a generic exception, which beats a wrapper
   ("EngineCore failed to start" only says that something failed before it);
2. levels: an exception or a line at the engine's error level outranks anything logged at INFO or
   WARNING, whatever that line matches (a quiet line's score stays under a generic exception's);
3. causality: among named causes of about the same strength (within CAUSAL_BAND) the earliest wins, unless
   a more specific line of the same cause follows within DETAIL_SPAN lines (a message and its detail:
   NCCL's "Last error:" line, pydantic's field line), and among equals the earliest: in a chain of
   exceptions the first is the cause, a rank that fails first is the one that made the others fail, and a
   warning that a GPU is not supported comes before the kernel that then cannot run on it (a Python warning of another
   cause than the strongest's is no link of its chain: the program went on past it). A failure that follows
   from an earlier line (causes.py) is told by that line, and a message wrapped on its way up by where it was
   first stated.
4. an error the engine says it ignores, or carries on past, ranks below every error it did not.
A configuration dump or an echo of the command line is never a candidate: it names every setting, so it
matches signatures about settings without saying anything failed.
A generic exception that no signature names is placed by where it was raised (from an engine's config validation,
by its last traceback frame, it is about the settings), else by an engine argument its message names. Identical
lines from many ranks (after their rank, pid and time prefixes are removed) are one cause."""

from __future__ import annotations

import heapq
import re
from collections import deque

from firstlight.diagnosis.candidate import BARE_EXCEPTION, ERROR_LEVEL, Candidate
from firstlight.diagnosis.causes import ExceptionChains, cause_behind, echoes_warning, first_statement, raised_below
from firstlight.diagnosis.crashes import NativeCrash
from firstlight.diagnosis.frames import TracebackPlace
from firstlight.diagnosis.levels import (
    CARRIES_ON,
    IgnoredMessage,
    is_python_warning,
    is_quiet,
    is_settings_dump,
    states_error,
)
from firstlight.diagnosis.signatures import (
    EXCEPTION_LINE,
    PANIC_HEADER,
    PROCESS_DIED,
    TRACEBACK_TEXT,
    Signature,
    error_level_lines,
    heaviest,
    ignored_errors,
    load_signatures,
    names_its_cause,
    restating_lines,
    wrapper_lines,
)
from firstlight.diagnosis.trigger import TRIGGER
from firstlight.engines import strip_line_prefix
from firstlight.logs import fold_digits

EVIDENCE_BEFORE = 3
EVIDENCE_AFTER = 2
MAX_CANDIDATES = 5000
VERDICT_CACHE = 100_000
# Signatures read a line's first MATCH_CHARS characters: a cause is stated at the start of its line, and a line of
# tens of kilobytes (a dumped tensor, a base64 blob) must not cost a regex's worst case.
MATCH_CHARS = 4000

GENERIC_EXCEPTION = 0.31  # above an error-level line: an exception says what was raised, not only that it went wrong
EXCEPTION_BONUS = 0.03
QUIET_LEVEL_FACTOR = 0.5
QUIET_CEILING = 0.28  # a line logged at INFO/WARNING stays below any exception or error-level line
CAUSAL_BAND = 0.1  # named causes this close in strength are ordered by time, not score
DETAIL_SPAN = 3  # a message's own detail follows it this closely (NCCL's "Last error:", pydantic's field line)
MESSAGE_SPAN = 6  # a message of several lines (FastAPI's "... to be installed." and how to install it) ends this soon
IGNORED_FACTOR = 0.3  # an error the engine says it ignores ranks below any exception it did not ignore
RESTATED = CAUSAL_BAND + 0.01  # a line that restates an exception shown after it ranks just out of its band
FAILED_SCORE = 0.45  # a candidate this strong means the launch failed
UNKNOWN_CONFIDENCE = 0.2
QUIET_CONFIDENCE = 0.8
CONTESTED_CONFIDENCE = 0.85
# A signature weighted below BROAD_WEIGHT names a family of causes (a loader's catch-all, an engine's guess
# about why a step failed, an exception placed by where it was raised), not one cause. On four sets of real
# logs, each scored before it was read, diagnoses at confidence 0.6-0.8 (nearly all from such signatures)
# were right 6 times in 22; at 0.8 and above, 93 times in 102.
BROAD_WEIGHT = 0.8
BROAD_CONFIDENCE = 0.65


# What a line is: a wrapper, a scored candidate (score, signature, how the score came about, logged at
# INFO/WARNING, an error the engine ignores or carries on past), or nothing.
Verdict = str | tuple[float, Signature | None, tuple[str, ...], bool, bool] | None

_CARETS = re.compile(r"^\s*[\^~]+\s*$")
PANIC_RX = re.compile(PANIC_HEADER)


def _rank(c: Candidate) -> tuple[float, int]:
    """Strongest first; among equals the earliest."""
    return (-round(c.score, 6), c.line_no)


def normalise(line: str) -> str:
    """The line without rank, pid and time prefixes (every engine's, as their adapters declare them), so
    the same message from 8 ranks is one key."""
    return strip_line_prefix(line).strip()


class RootCauseFinder:
    """Feed lines in order; ask for the best candidate at any time (bounded memory for any log size)."""

    def __init__(self) -> None:
        self.signatures = load_signatures()
        self.wrappers_rx = wrapper_lines()
        self.error_rx = error_level_lines()
        self.ignored_rx = ignored_errors()
        self.restating_rx = restating_lines()
        self._traceback = TracebackPlace()
        self._chains = ExceptionChains()
        self._ignored = IgnoredMessage(self.ignored_rx)  # an ignored error's message running on over the next lines
        self.candidates: dict[str, Candidate] = {}
        self.wrappers: list[tuple[int, str]] = []
        self.tracebacks = 0
        self.died_at = 0  # the last line that says a process died
        self._recent: deque[str] = deque(maxlen=EVIDENCE_BEFORE)
        self._open: list[Candidate] = []  # candidates still collecting their following lines
        self._verdicts: dict[tuple[str, bool], Verdict] = {}
        self._panicked = False  # the last line was a panic header: this one is its message
        self._before_code: list[str] = []  # the lines before the last traceback source line
        self._last: Candidate | None = None  # the latest candidate: a traceback may follow the rest of its message
        self._crash = NativeCrash()

    def feed(self, line_no: int, line: str, shape: str | None = None) -> None:
        if ("^" in line or "~" in line) and _CARETS.match(line):  # Python 3.11's `^^^^` under a code line
            return
        for cand in self._open:
            cand.after.append(line)
        self._open = [c for c in self._open if len(c.after) < EVIDENCE_AFTER]
        place = self._traceback.read(line_no, line)
        if place.code:
            self._before_code = list(self._recent)  # the evidence before it, should it stand for its exception
            self._recent.append(line)
            return
        frame = place.frame
        self._chains.read(line_no, line)
        crashed = self._crash.read(line_no, line)
        if crashed is not None:  # a cause of its own, at the line that tells the crash
            if any(c.fatal and not c.ignored for c in self.candidates.values()):
                # NCCL crashing as the processes tear down after an error: that error came first
                crashed.score, crashed.reasons = ERROR_LEVEL, (*crashed.reasons, "after an error: its teardown")
            seen = self.candidates.setdefault(normalise(crashed.line), crashed)
            seen.score = max(seen.score, crashed.score)
        if self._last is not None and TRACEBACK_TEXT in line:
            # no candidate since the last one: the lines between carried on its message
            self._last.traceback_follows = line_no - self._last.line_no <= MESSAGE_SPAN
            self._last = None
        ignored = self._ignored.continues(line, frame)
        # this line is a panic's message when the line before it was the panic's header
        told, self._panicked = self._panicked, PANIC_RX.search(line) is not None
        cand = self._candidate(line_no, line, shape if shape is not None else fold_digits(line), ignored, told)
        if cand is not None:
            # a traceback's own exception line is no message logged before one (a chain's next traceback follows it)
            self._last = cand if self._traceback.frame is None else None
            self._open.append(cand)
            if not ignored:
                self._ignored.starts(line)
        self._traceback.raised(line, frame)
        self._recent.append(line)

    def finish(self) -> None:
        """The log ended inside a traceback whose last frame shows a `raise` with its message (or an `assert`), and no
        exception line after it (a paste cut short): that statement says what the exception would have."""
        cut_off = self._traceback.cut_off_raise()
        if cut_off is None:
            return
        line_no, code, stated = cut_off
        cand = self._candidate(line_no, stated, fold_digits(stated))
        if cand is not None:
            cand.line, cand.before, cand.after = code, self._before_code, []
            cand.reasons = (*cand.reasons, "the statement a traceback cut off before its exception line shows")

    def _candidate(
        self, line_no: int, line: str, shape: str, ignored: bool = False, told: bool = False
    ) -> Candidate | None:
        if TRACEBACK_TEXT in line:
            self.tracebacks += 1
        verdict = self._classify(shape, line, told)
        if verdict is None:
            return None
        if PROCESS_DIED.search(line):
            self.died_at = line_no
        if verdict == "wrapper":
            if len(self.wrappers) < 50:
                self.wrappers.append((line_no, line))
            return None
        score, sig, reasons, quiet, carried = verdict
        if not quiet and self._recent and echoes_warning(line, self._recent[-1]):
            score, quiet = min(score * QUIET_LEVEL_FACTOR, QUIET_CEILING), True
            reasons = (*reasons, "the message of the warning on the line before, logged again without its level")
        before = list(self._recent)
        after: list[str] = []
        statement = self._traceback.failed_assert(line)
        if statement is not None:  # `AssertionError` alone: the assert statement above it says what failed
            exception = line
            line_no, line = statement
            sig = self._signature(line)
            base = sig.weight + EXCEPTION_BONUS if sig is not None else GENERIC_EXCEPTION
            named = [f"signature {sig.id} ({sig.category}, weight {sig.weight})"] if sig is not None else []
            score, level, _, carried = self._level(exception, base)
            reasons = ("the assert statement a bare AssertionError failed on", *named, *level)
            before, after = before[:-1], [exception]
        key = normalise(line)
        if ignored:  # its own key: the same words later, not ignored, are a cause of their own
            key = f"ignored:{key}"
            score *= IGNORED_FACTOR
            reasons = (*reasons, f"goes on with the message of an ignored error above it (x{IGNORED_FACTOR})")
        seen = self.candidates.get(key)
        if seen is not None:
            seen.count += 1
            seen.last_seen = line_no
            self._chains.seen(line_no, line, seen)
            return None
        placed = self._traceback.retold(sig, line) if sig else self._traceback.placed(line, statement is not None)
        if placed is not None:
            sig, why = placed
            score = max(score, sig.weight + EXCEPTION_BONUS)
            reasons = (*reasons, why)
        groups: dict[str, str | None] = {}
        category = "unknown"
        if sig is not None:
            m = sig.search(line)
            groups = m.groupdict() if m else {}
            category = sig.category
        if len(self.candidates) >= MAX_CANDIDATES and score <= min(c.score for c in self.candidates.values()):
            return None
        cand = Candidate(
            score,
            line_no,
            line,
            category,
            sig,
            groups,
            before,
            after,
            reasons=reasons,
            quiet=quiet,
            ignored=ignored or carried,
        )
        self.candidates[key] = cand
        self._chains.seen(line_no, line, cand)
        if len(self.candidates) > MAX_CANDIDATES:
            worst = min(self.candidates, key=lambda k: (self.candidates[k].score, -self.candidates[k].line_no))
            del self.candidates[worst]
        return cand

    def _classify(self, shape: str, line: str, told: bool = False) -> Verdict:
        """What a line is: a wrapper, a scored candidate, or nothing. Multi-rank logs repeat the same
        messages with other numbers, so the verdict is cached by the line's shape (digits folded). `told`: the
        line is the message of a panic header above it, an error whatever its words."""
        key = (line if "xit" in line or "signal" in line else shape, told)  # an exit code or signal: its digits tell
        if key in self._verdicts:
            return self._verdicts[key]
        verdict = self._classify_uncached(line, told)
        if len(self._verdicts) > VERDICT_CACHE:
            self._verdicts.clear()
        self._verdicts[key] = verdict
        return verdict

    def _classify_uncached(self, full: str, told: bool = False) -> Verdict:
        line = full[:MATCH_CHARS]  # a cause is stated at the start of its line; a 60 KB line costs no more
        error_level = told or (self.error_rx is not None and self.error_rx.search(line) is not None)
        if not (error_level or TRIGGER.search(line)) or is_settings_dump(line):
            return None
        best = self._signature(line)
        if self.wrappers_rx.search(line) and not names_its_cause(line, best):
            return "wrapper"
        exc = EXCEPTION_LINE.search(line)
        if best is not None and best.plain and not (exc or error_level or states_error(line)):
            best = None  # plain words name a cause only where the line states an error (not in a note or a warning)
        reasons: list[str] = []
        if best is not None:
            score = best.weight + (EXCEPTION_BONUS if exc else 0.0)
            reasons.append(f"signature {best.id} ({best.category}, weight {best.weight})")
            if best.pattern.search(line) is None:
                reasons.append("its words in another case")
            if exc:
                reasons.append("an exception line")
        elif exc:
            score = GENERIC_EXCEPTION if (exc.group("msg") or "").strip() else BARE_EXCEPTION
            reasons.append("a generic exception" if score == GENERIC_EXCEPTION else "a bare exception, no message")
        elif error_level or states_error(line):
            score = ERROR_LEVEL
            reasons.append("the message of a panic" if told else "an error-level line")
        else:
            return None
        score, level, quiet, carried = self._level(line, score)
        return score, best, (*reasons, *level), quiet, carried

    def _signature(self, line: str) -> Signature | None:
        """The heaviest signature that names the line (read to its first MATCH_CHARS characters)."""
        return heaviest(self.signatures, line[:MATCH_CHARS])

    def _level(self, line: str, score: float) -> tuple[float, list[str], bool, bool]:
        """The score as the line's level leaves it (quiet, restating an exception, carried on from), why, whether
        the line is quiet, and whether the engine ignores or carries on past it."""
        reasons = []
        quiet = is_quiet(line)
        if quiet:
            score = min(score * QUIET_LEVEL_FACTOR, QUIET_CEILING)
            reasons.append(f"logged at INFO/WARNING (x{QUIET_LEVEL_FACTOR}, at most {QUIET_CEILING})")
        if self.restating_rx is not None and self.restating_rx.search(line):
            score -= RESTATED
            reasons.append(f"restates an exception shown after it (-{RESTATED})")
        carried = (self.ignored_rx is not None and self.ignored_rx.search(line) is not None) or bool(
            CARRIES_ON.search(line)
        )
        if carried:
            score *= IGNORED_FACTOR
            reasons.append(f"an error the engine ignores or carries on past (x{IGNORED_FACTOR})")
        return score, reasons, quiet, carried

    def ranked(self, limit: int = 5) -> list[Candidate]:
        """The strongest candidates by score, earliest of equals first (`best` then applies the causal band)."""
        return heapq.nsmallest(limit, self.candidates.values(), key=_rank)

    def best(self, after: int = 0, requests: bool = True) -> Candidate | None:
        """The most likely cause (among the lines after line `after`, when given; without one request's failures
        unless `requests`): the strongest, or the earliest named cause about as strong as it (a cause comes before
        its consequences), or the line it follows from or was first stated in (among the same lines). It may be a
        copy: compare candidates by line, not identity."""
        found = [
            c
            for c in self.candidates.values()
            if max(c.line_no, c.last_seen) > after and (requests or c.signature is None or not c.signature.request)
        ]
        if not found:
            return None
        top = min(found, key=_rank)
        if top.signature is None:
            return self._first_statement(cause_behind(top, found) or top, found)
        floor = top.score - CAUSAL_BAND
        band = [
            c
            for c in found
            if c.signature is not None
            and c.quiet == top.quiet
            and c.score >= floor
            and (c.category == top.category or not is_python_warning(c.line))
        ]
        first = min(band, key=lambda c: c.line_no)
        details = [
            c
            for c in band
            if (c.category == first.category or first.signature.detailed)
            and c.line_no > first.line_no
            and c.line_no - first.line_no <= DETAIL_SPAN
            and c.signature.weight > first.signature.weight  # more specific, not the same message as an exception
        ]
        chosen = min(details, key=_rank) if details else self._chains.retyped(first)
        chosen = raised_below(self._chains.head(chosen), found)
        return self._first_statement(cause_behind(chosen, found) or chosen, found)

    def _first_statement(self, chosen: Candidate, found: list[Candidate]) -> Candidate:
        """Where the chosen message was first stated, other than by an error the engine ignored or by a line that
        restates an exception shown after it (the engine's summary of a traceback yields to the traceback's
        exception)."""
        rx = self.restating_rx
        return first_statement(chosen, (c for c in found if rx is None or not rx.search(c.line)))

    def confidence(self, chosen: Candidate) -> float:
        """How far to trust the category: the signature's specificity (much less for a broad one), less when the
        line was only logged as a warning, and less when a cause of another category was about as strong (the
        choice between them was made by order, not by evidence). A line no signature names is `unknown` at
        UNKNOWN_CONFIDENCE."""
        if chosen.signature is None or chosen.category == "unknown":
            return UNKNOWN_CONFIDENCE
        weight = chosen.signature.weight
        confidence = weight * (BROAD_CONFIDENCE if weight < BROAD_WEIGHT else 1.0)
        confidence *= QUIET_CONFIDENCE if chosen.quiet else 1.0
        contested = any(
            c.signature is not None and c.category != chosen.category and c.score >= chosen.score - CAUSAL_BAND
            for c in self.candidates.values()
        )
        return min(confidence * (CONTESTED_CONFIDENCE if contested else 1.0), 0.99)

    def failed_after(self, line_no: int) -> Candidate | None:
        """A cause that names itself (a signature, not a bare error, nor one request's failure) after the engine
        said it was ready: the server failed while serving, or before it could (a port taken after startup
        completed)."""
        best = self.best(after=line_no, requests=False)
        return best if best is not None and best.category != "unknown" and best.score >= FAILED_SCORE else None

    def failed(self, best: Candidate | None) -> bool:
        """Whether the log shows a launch that died, rather than one that stopped printing (`best`: what
        `best()` chose, which the caller has already)."""
        if self.wrappers:
            return True
        if best is None:
            return False
        return best.score >= FAILED_SCORE or (best.category == "unknown" and self.tracebacks > 0)
