"""Showing a launch: a live phase view on a terminal, plain lines in a pipe, JSON lines for machines.

The view reads events from the store, so `up`, `watch` and `status` show the same thing whether or
not the process that started the launch is still around.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from firstlight.store import Event, Launch, Store

POLL_S = 0.05
DECIDED = ("ready", "failed", "stalled", "stopped", "exited")


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
        if ev.kind == "phase" and ev.data.get("entered", True):
            if self.rows:
                self.rows[-1].end = ev.ts
            self.rows.append(PhaseRow(ev.phase or "?", ev.ts, line=str(ev.data.get("line", ""))))
        elif ev.kind == "progress" and self.rows:
            self.rows[-1].progress = _progress_text(ev.data.get("progress"))
            self.rows[-1].line = str(ev.data.get("line", ""))
        elif ev.kind == "gpu":
            self.gpus = ev.data.get("gpus", [])
        elif ev.kind == "probe":
            self.last_probe = str(ev.data.get("detail", ""))

    def close(self, ts: float) -> None:
        if self.rows and self.rows[-1].end is None and self.rows[-1].phase != "ready":
            self.rows[-1].end = ts

    def durations(self) -> list[dict[str, Any]]:
        t0 = self.t0 or 0.0
        return [
            {
                "phase": r.phase,
                "start_s": round(r.start - t0, 3),
                "duration_s": None if r.end is None else round(r.end - r.start, 3),
            }
            for r in self.rows
        ]


def _progress_text(progress: Any) -> str:
    if not isinstance(progress, dict):
        return ""
    label = progress.get("label", "")
    if "done" in progress and "total" in progress:
        return f"{label} {progress['done']}/{progress['total']}"
    return f"{label} {progress.get('detail', '')}".strip()


def timeline_table(tl: Timeline, now: float | None = None, title: str = "timeline") -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("phase", no_wrap=True, min_width=18)
    table.add_column("at", justify="right", no_wrap=True, min_width=7)
    table.add_column("took", justify="right", no_wrap=True, min_width=7)
    table.add_column("progress / last line", overflow="ellipsis", no_wrap=True, ratio=1)
    t0 = tl.t0 or 0.0
    for row in tl.rows:
        end = row.end if row.end is not None else now
        took = "" if end is None else f"{end - row.start:.1f}s"
        detail = (row.progress or _strip_prefix(row.line)).strip()[:200]
        table.add_row(row.phase, f"{row.start - t0:.1f}s", took, Text(detail, style="dim"))
    return table


_PREFIX = re.compile(r"^\(\w[\w-]* pid=\d+\)\s*|^(INFO|WARNING|ERROR|DEBUG)\s+[\d-]+ [\d:.]+\s*(\[[^\]]*\]\s*)?")


def _strip_prefix(line: str) -> str:
    """Engine log prefixes (pid, level, time, file) crowd out the message in a narrow column."""
    previous = None
    while previous != line:
        previous, line = line, _PREFIX.sub("", line)
    return line


def gpu_text(gpus: list[dict[str, Any]]) -> Text:
    if not gpus:
        return Text("")
    parts = [f"GPU{g['index']} {g['used_gib']:.1f}/{g['total_gib']:.0f} GiB" for g in gpus]
    return Text("memory: " + "  ".join(parts), style="dim")


class LaunchView:
    """Follows one launch's events until it is decided (or, with `until_end`, until the engine is gone)."""

    def __init__(self, store: Store, launch_id: int, mode: str, console: Console) -> None:
        self.store, self.launch_id, self.mode, self.console = store, launch_id, mode, console
        self.timeline = Timeline()
        self.last_id = 0

    def _poll(self) -> list[Event]:
        events = self.store.events(self.launch_id, after_id=self.last_id)
        if events:
            self.last_id = events[-1].id
        return events

    def _emit_plain(self, ev: Event) -> None:
        if self.mode == "json":
            print(
                json.dumps({"id": ev.id, "ts": ev.ts, "kind": ev.kind, "phase": ev.phase, **ev.data}),
                flush=True,
            )
            return
        if ev.kind == "gpu" or (ev.kind == "progress" and not ev.data.get("progress")):
            return
        t0 = self.timeline.t0 or ev.ts
        detail = _progress_text(ev.data.get("progress")) or ev.data.get("reason") or ev.data.get("detail") or ""
        if ev.kind == "phase" and not detail:
            detail = _strip_prefix(str(ev.data.get("line", "")))[:160]
        self.console.print(
            f"[{ev.ts - t0:7.2f}s] {ev.kind:<9} {ev.phase or '':<19} {detail}".rstrip(),
            highlight=False,
            markup=False,
            soft_wrap=True,
        )

    def follow(self, until_end: bool = False) -> Launch:
        live: Live | None = None
        if self.mode == "live":
            live = Live(self._render(None), console=self.console, refresh_per_second=8, transient=False)
            live.start()
        try:
            return self._follow(live, until_end)
        finally:
            if live is not None:
                live.stop()

    def _follow(self, live: Live | None, until_end: bool) -> Launch:
        last_alive_check = 0.0
        while True:
            for ev in self._poll():
                self.timeline.add(ev)
                if live is None:
                    self._emit_plain(ev)
            launch = self.store.get_launch(self.launch_id)
            assert launch is not None
            if live is not None:
                live.update(self._render(launch))
            if _finished(launch, until_end):
                for ev in self._poll():  # events written in the same instant as the decision
                    self.timeline.add(ev)
                    if live is None:
                        self._emit_plain(ev)
                if live is not None:
                    live.update(self._render(launch))
                return launch
            now = time.monotonic()
            if now - last_alive_check > 1.0:
                last_alive_check = now
                if launch.state in ("starting", "ready") and not _watcher_alive(launch):
                    self.store.update_launch(
                        launch.id,
                        state="failed",
                        reason="the watcher process is gone; the engine may still run",
                    )
            time.sleep(POLL_S)

    def _render(self, launch: Launch | None) -> Group:
        now = time.time()
        state = launch.state if launch else "starting"
        head = Text.assemble(
            (f"launch {self.launch_id}", "bold"),
            "  ",
            (state, {"ready": "green", "failed": "red", "stalled": "yellow"}.get(state, "cyan")),
            f"  {launch.name} ({launch.engine}) → {launch.url}" if launch else "",
        )
        parts: list[Any] = [head, timeline_table(self.timeline, now if state == "starting" else None)]
        if self.timeline.gpus:
            parts.append(gpu_text(self.timeline.gpus))
        if self.timeline.last_probe and state == "starting":
            parts.append(Text(f"probe: {self.timeline.last_probe}", style="dim"))
        return Group(*parts)


def _finished(launch: Launch, until_end: bool) -> bool:
    if until_end:
        return launch.state in ("failed", "stopped", "exited")
    return launch.state in DECIDED


def _watcher_alive(launch: Launch) -> bool:
    if not launch.watcher_pid:
        return True  # not started yet
    try:
        os.kill(launch.watcher_pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
