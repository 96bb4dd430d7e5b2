"""A candidate: one line of a log that may state the launch's root cause, with its score and why."""

from __future__ import annotations

from dataclasses import dataclass, field

from firstlight.diagnosis.signatures import Signature

ERROR_LEVEL = 0.3  # a line the engine itself marks as an error, without an exception's shape
BARE_EXCEPTION = 0.2  # an exception without a message (`NotImplementedError:`): something was raised


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
    last_seen: int = 0  # the line of its last repeat (0: never repeated)
    reasons: tuple[str, ...] = ()  # how the score came about, for `diagnose --explain`
    quiet: bool = False  # logged at INFO/WARNING
    ignored: bool = False  # an error the engine says it ignores or carries on past
    traceback_follows: bool = False  # a traceback starts once its message's own lines end (`logger.exception`)

    @property
    def fatal(self) -> bool:
        """An exception or an error-level line: a log that stops on it died of it."""
        return not self.quiet and self.score >= ERROR_LEVEL

    @property
    def raised(self) -> bool:
        """Fatal, or a bare exception (`NotImplementedError:`) the engine did not carry on past: a log that ends on
        it died of it (yet SIGTERM's bare `CancelledError` does not make a stopped launch a failed one)."""
        return not self.quiet and not self.ignored and self.score >= BARE_EXCEPTION

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
