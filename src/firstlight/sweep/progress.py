"""Where a sweep stands, for a live screen: the variant, its attempt and launch phase, the level running,
cells done of the total, and an ETA from the launch and level times measured so far."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import mean
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from firstlight.benchmark import LevelState
    from firstlight.sweep.plan import Cell, SweepPlan

REDRAW_S = 0.25


@dataclass
class Progress:
    plan: SweepPlan
    notify: Callable[[Progress], None] | None = None
    sweep_id: int = 0
    total: int = 0
    done: int = 0
    failed: int = 0
    variant: str = ""
    attempt_no: int = 0
    rung: dict[str, Any] = field(default_factory=dict)
    phase: str = ""
    cell: Cell | None = None
    level: LevelState | None = None
    log: list[str] = field(default_factory=list)  # the last few things that happened
    said: int = 0  # how many things have happened
    launch_s: list[float] = field(default_factory=list)
    cell_s: dict[int, list[float]] = field(default_factory=dict)  # by level index
    variants_up: set[str] = field(default_factory=set)
    remaining: list[Cell] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    _drawn: float = 0.0

    def begin(self, sweep_id: int, cells: list[Cell], remaining: list[Cell]) -> None:
        self.sweep_id, self.total, self.done = sweep_id, len(cells), len(cells) - len(remaining)
        self.remaining = list(remaining)
        self.say(f"sweep {sweep_id}: {self.total} cells, {self.done} already done")

    def attempt(self, variant: str, attempt: int, rung: dict[str, Any]) -> None:
        self.variant, self.attempt_no, self.rung, self.phase, self.cell, self.level = (
            variant,
            attempt,
            rung,
            "check",
            None,
            None,
        )
        rung_text = " ".join(f"--{k} {v}" for k, v in rung.items())
        self.say(f"{variant}: attempt {attempt}" + (f" ({rung_text})" if rung_text else ""))

    def phase_seen(self, phase: str) -> None:
        self.phase = phase
        self._emit()

    def launched(self, seconds: float) -> None:
        self.launch_s.append(seconds)
        self.variants_up.add(self.variant)
        self.phase = "ready"
        self.say(f"{self.variant}: ready in {seconds:.0f} s")

    def cell_started(self, cell: Cell) -> None:
        self.cell, self.level = cell, None
        self._emit(force=True)

    def level_seen(self, state: LevelState) -> None:
        self.level = state
        self._emit()

    def cell_done(self, cell: Cell, seconds: float, ok: bool) -> None:
        self.done += 1
        if cell in self.remaining:
            self.remaining.remove(cell)
        if ok:
            self.cell_s.setdefault(cell.level, []).append(seconds)
        else:
            self.failed += 1
        self.say(f"{cell.variant} {cell.load_name} r{cell.repeat}: {'done' if ok else 'not measured'}")

    def released(self, seconds: float) -> None:
        self.say(f"{self.variant}: down, released in {seconds:.1f} s")

    def say(self, text: str) -> None:
        self.said += 1
        self.log = [*self.log[-5:], text]
        self._emit(force=True)

    @property
    def eta_s(self) -> float | None:
        """Seconds left: the cells still to run at their level's measured time, plus a launch for each
        variant not yet up; None until something has been measured."""
        every = [s for times in self.cell_s.values() for s in times]
        if not every:
            return None
        cells = sum(mean(self.cell_s.get(c.level) or every) for c in self.remaining)
        launches = len({c.variant for c in self.remaining} - self.variants_up - {self.variant})
        return cells + launches * (mean(self.launch_s) if self.launch_s else 0.0)

    def _emit(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.notify is None or (not force and now - self._drawn < REDRAW_S):
            return
        self._drawn = now
        self.notify(self)
