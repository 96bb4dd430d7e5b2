"""A launch's phases with their start and end times, built from its events: data, shown by the views."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from firstlight.store import Event


@dataclass
class PhaseRow:
    phase: str
    start: float
    end: float | None = None
    progress: str = ""
    line: str = ""


@dataclass
class Timeline:
    """Phases with their start and end times, built from events."""

    t0: float | None = None
    rows: list[PhaseRow] = field(default_factory=list)
    gpus: list[dict[str, Any]] = field(default_factory=list)
    last_probe: str = ""

    def add(self, ev: Event) -> None:
        if self.t0 is None:
            self.t0 = ev.ts
        if ev.kind == "phase" and ev.data.get("entered", True) and not ev.data.get("aside"):
            if self.rows:
                self.rows[-1].end = ev.ts
            self.rows.append(PhaseRow(ev.phase or "?", ev.ts, line=str(ev.data.get("line", ""))))
        elif ev.kind == "progress" and self.rows:
            self.rows[-1].progress = progress_text(ev.data.get("progress"))
            self.rows[-1].line = str(ev.data.get("line", ""))
        elif ev.kind == "gpu":
            self.gpus = ev.data.get("gpus", [])
        elif ev.kind == "probe":
            self.last_probe = str(ev.data.get("detail", ""))

    def close(self, ts: float) -> None:
        if self.rows and self.rows[-1].end is None and self.rows[-1].phase != "ready":
            self.rows[-1].end = ts


def progress_text(progress: Any) -> str:
    """Progress inside a phase as a person reads it: `shards 12/64`, `graphs 8/36`."""
    if not isinstance(progress, dict):
        return ""
    label = progress.get("label", "")
    if "done" in progress and "total" in progress:
        return f"{label} {progress['done']}/{progress['total']}"
    return f"{label} {progress.get('detail', '')}".strip()
