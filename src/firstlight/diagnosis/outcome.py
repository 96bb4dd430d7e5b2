"""What a diagnosis says: the outcome of a log, the phases it reached, and why it failed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from firstlight.secrets import redact_text


@dataclass
class Diagnosis:
    category: str
    root_cause_line: str
    line: int
    evidence: list[str]
    remedy: str
    confidence: float
    signature: str | None = None
    repeats: int = 1

    def to_dict(self) -> dict[str, Any]:
        """As stored and shown: log lines with secret-named values redacted."""
        return {
            "category": self.category,
            "root_cause_line": redact_text(self.root_cause_line),
            "line": self.line,
            "evidence": [redact_text(line) for line in self.evidence],
            "remedy": self.remedy,
            "confidence": round(self.confidence, 2),
            "signature": self.signature,
            "repeats": self.repeats,
        }


@dataclass
class PhaseSeen:
    phase: str
    line: int
    log_time: str | None
    aside: bool = False  # reached out of the usual order (see PhaseRule.aside); not where the launch stands
    process: str | None = None  # the process or rank whose line marked it (`VllmWorker TP1`, `TP1`), when it says


def furthest(phases: list[PhaseSeen]) -> PhaseSeen:
    """The furthest phase the launch moved into (not one reached aside)."""
    return next((p for p in reversed(phases) if not p.aside), PhaseSeen("process_start", 1, None))


@dataclass
class Report:
    outcome: str  # ready | failed | not_ready
    engine: str
    phases: list[PhaseSeen]
    diagnosis: Diagnosis | None
    lines: int = 0
    wrappers: list[tuple[int, str]] = field(default_factory=list)
    rule: str = ""  # what decided the outcome and the cause, for `diagnose --explain`
    candidates: list[dict[str, Any]] = field(default_factory=list)  # the strongest lines considered, best first

    @property
    def last_phase(self) -> str:
        return self.where.phase

    @property
    def where(self) -> PhaseSeen:
        return furthest(self.phases)

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "engine": self.engine,
            "phases": [p.phase for p in self.phases],
            "last_phase": self.last_phase,
            "diagnosis": self.diagnosis.to_dict() if self.diagnosis else None,
            "phase_lines": [
                {"phase": p.phase, "line": p.line, "log_time": p.log_time, "aside": p.aside} for p in self.phases
            ],
            "lines": self.lines,
        }

    def explained(self) -> dict[str, Any]:
        """Why: the rule that decided, and the candidates with their scores and how each score came about."""
        return {
            "rule": self.rule,
            "candidates": [{**c, "text": redact_text(str(c["text"]))} for c in self.candidates],
        }
