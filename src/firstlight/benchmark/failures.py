"""When failed requests mean a level should stop: the server refused a connection (it is down), or a run of
failures as long as the level's concurrency (at least 10) came back in a row.

One rule for every sender: the level's runner applies it to the merged stream of requests, and each worker
process to its own, so a worker stops at once against a dead server instead of failing its whole share.
"""

from __future__ import annotations

from firstlight.records import RequestRecord

MIN_FAILURES_IN_A_ROW = 10


class FailureRun:
    """Failures in a row, and whether they are reason enough to stop."""

    def __init__(self, concurrency: int | None) -> None:
        self.limit = max(MIN_FAILURES_IN_A_ROW, concurrency or 1)
        self.in_a_row = 0

    def see(self, rec: RequestRecord) -> str | None:
        """Count one finished request; returns why the level should stop, or None."""
        if rec.ok:
            self.in_a_row = 0
            return None
        self.in_a_row += 1
        if rec.error_kind == "connection_refused":
            return f"the server refused connections ({rec.error}): it is down"
        if self.in_a_row >= self.limit:
            return f"{self.in_a_row} requests failed in a row, the last with {rec.error_kind}: {rec.error}"
        return None
