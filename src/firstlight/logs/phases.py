"""The phase machine: log lines in, phase and progress events out.

One machine serves both the live watcher and the offline diagnosis, so they agree. It never goes
backwards: a line that matches an earlier phase (a second rank's "Load weight begin") is progress,
not a regression.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from firstlight.logs.lines import fold_digits

PHASES: tuple[str, ...] = (
    "process_start",
    "distributed_init",
    "weights_loading",
    "weights_loaded",
    "torch_compile",
    "kv_cache_allocated",
    "cuda_graph_capture",
    "cuda_graph_done",
    "http_listening",
    "warmup_done",
    "ready",
)
PHASE_INDEX = {p: i for i, p in enumerate(PHASES)}

# Python logging's clock (and ISO 8601): lines of any engine's libraries may carry it. Each engine's
# own dialect is on its adapter (`EngineAdapter.log_time`); the text is kept as the engine wrote it.
GENERIC_CLOCK = re.compile(r"(?P<ts>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)")


def log_time(line: str, clocks: tuple[re.Pattern[str], ...] = (GENERIC_CLOCK,)) -> str | None:
    """The time a line says it was written, read by the first clock (a pattern with a `ts` group) that
    finds one near the start of the line."""
    head = line[:120]
    for clock in clocks:
        m = clock.search(head)
        if m:
            return m.group("ts")
    return None


@dataclass(frozen=True)
class PhaseRule:
    """A line matching `pattern` means the launch has reached `phase`. An `aside` phase is one the engine
    reaches out of the usual order (llama-server listens for HTTP before it loads the model): it is
    recorded once, where it happens, and the machine stays where it was."""

    phase: str
    pattern: re.Pattern[str]
    aside: bool = False


@dataclass(frozen=True)
class ProgressRule:
    """A line matching `pattern` is progress inside `phase`; groups `done` and `total` when known."""

    phase: str
    pattern: re.Pattern[str]
    label: str


def phase_rules(*pairs: tuple[str, str]) -> tuple[PhaseRule, ...]:
    for phase, _ in pairs:
        assert phase in PHASE_INDEX, phase
    return tuple(PhaseRule(phase, re.compile(rx)) for phase, rx in pairs)


def aside_rules(*pairs: tuple[str, str]) -> tuple[PhaseRule, ...]:
    return tuple(PhaseRule(r.phase, r.pattern, aside=True) for r in phase_rules(*pairs))


def progress_rules(*triples: tuple[str, str, str]) -> tuple[ProgressRule, ...]:
    return tuple(ProgressRule(phase, re.compile(rx), label) for phase, rx, label in triples)


@dataclass
class PhaseEvent:
    phase: str
    entered: bool  # True when this event moved the machine into `phase`
    line_no: int
    line: str
    log_time: str | None
    progress: dict[str, object] | None = None
    aside: bool = False  # reached out of order: recorded, but the machine did not move


@dataclass
class PhaseMachine:
    rules: tuple[PhaseRule, ...]
    progress: tuple[ProgressRule, ...] = ()
    clocks: tuple[re.Pattern[str], ...] = (GENERIC_CLOCK,)  # the engine's own dialect first
    current: str = "process_start"
    seen: list[str] = field(default_factory=lambda: ["process_start"])
    _cache: dict[str, tuple[ProgressRule | PhaseRule, ...]] = field(default_factory=dict, repr=False)

    @property
    def index(self) -> int:
        return PHASE_INDEX[self.current]

    def advance(self, phase: str) -> bool:
        """Move forward to `phase`; return whether the machine moved."""
        if PHASE_INDEX[phase] <= self.index:
            return False
        self.current = phase
        self.seen.append(phase)
        return True

    def feed(self, line: str, line_no: int, shape: str | None = None) -> PhaseEvent | None:
        """The one event a line produces, if any. A line that moves the machine forward enters the furthest
        phase it names; otherwise it is progress inside the current phase. A progress bar's k/n travels
        with the event either way (a bar at 100% may also mark the next phase)."""
        matches = self._matching(line, shape)
        if not matches:
            return None
        # a line that also moves the machine forward does that instead
        aside = next((r for r in matches if _is_aside(r) and r.phase not in self.seen), None)
        if aside is not None and not any(PHASE_INDEX[r.phase] > self.index for r in matches if not _is_aside(r)):
            self.seen.append(aside.phase)
            return PhaseEvent(aside.phase, True, line_no, line, log_time(line, self.clocks), aside=True)
        matches = tuple(r for r in matches if not _is_aside(r))
        bar = next(((r, m) for r in matches if isinstance(r, ProgressRule) and (m := r.pattern.search(line))), None)
        forward = [r for r in matches if PHASE_INDEX[r.phase] > self.index]
        if forward:
            target = max(forward, key=lambda r: PHASE_INDEX[r.phase])
            self.advance(target.phase)
            when = log_time(line, self.clocks)
            return PhaseEvent(target.phase, True, line_no, line, when, _progress(*bar) if bar else None)
        if bar is not None and bar[0].phase == self.current:
            return PhaseEvent(self.current, False, line_no, line, log_time(line, self.clocks), _progress(*bar))
        if any(r.phase == self.current for r in matches):
            return PhaseEvent(self.current, False, line_no, line, log_time(line, self.clocks))
        return None

    def _matching(self, line: str, shape: str | None) -> tuple[ProgressRule | PhaseRule, ...]:
        """The rules a line matches, in order. Logs repeat the same lines with other numbers, so the
        answer is cached by the line's shape (digits folded)."""
        if shape is None:
            shape = fold_digits(line)
        found = self._cache.get(shape)
        if found is None:
            found = tuple(r for r in (*self.progress, *self.rules) if r.pattern.search(line))
            if len(self._cache) > 50_000:
                self._cache.clear()
            self._cache[shape] = found
        return found


def _is_aside(rule: ProgressRule | PhaseRule) -> bool:
    return isinstance(rule, PhaseRule) and rule.aside


def _progress(rule: ProgressRule, m: re.Match[str]) -> dict[str, object]:
    info: dict[str, object] = {"label": rule.label}
    groups = m.groupdict()
    for key in ("done", "total"):
        if groups.get(key) is not None:
            info[key] = int(groups[key])
    if groups.get("detail"):
        info["detail"] = groups["detail"]
    return info
