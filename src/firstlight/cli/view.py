"""Showing a launch: a live phase view on a terminal, plain lines in a pipe, JSON lines for machines.

The view only shows: it reads the launch's events through the library's `Launch.follow()`, so `up`,
`watch` and `bench --launch` show the same thing whether or not the process that started the launch
is still around. Every decision about the launch is the watcher's (or the library's).
"""

from __future__ import annotations

import json
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from firstlight.cli.common import console, err_console, print_diagnosis, view_mode
from firstlight.launch import Launch, LaunchRecord, LaunchState
from firstlight.launch.timeline import Timeline, progress_text
from firstlight.store import Event


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
        detail = (row.progress or _message(row.line)).strip()[:200]
        table.add_row(row.phase, f"{row.start - t0:.1f}s", took, Text(detail, style="dim"))
    return table


def _message(line: str) -> str:
    """A log line without its engine's prefix: the engines are loaded only when a line is shown, so
    `watch --json` does not pay for them."""
    from firstlight.engines import strip_line_prefix

    return strip_line_prefix(line)


def gpu_text(gpus: list[dict[str, Any]]) -> Text:
    if not gpus:
        return Text("")
    parts = [f"GPU{g['index']} {g['used_gib']:.1f}/{g['total_gib']:.0f} GiB" for g in gpus]
    return Text("memory: " + "  ".join(parts), style="dim")


class LaunchView:
    """Draws one launch's events as they come: a live table, plain lines, or JSON lines."""

    def __init__(self, launch: Launch, mode: str, out: Console) -> None:
        self.launch, self.mode, self.out = launch, mode, out
        self.timeline = Timeline()

    def show(self) -> LaunchRecord:
        live: Live | None = None
        if self.mode == "live":
            live = Live(self._render(None), console=self.out, refresh_per_second=8, transient=False)
            live.start()
        try:
            for ev in self.launch.follow():
                if ev is not None:
                    self.timeline.add(ev)
                    if live is None:
                        self._emit_plain(ev)
                elif live is not None:
                    live.update(self._render(self.launch.record))
            final = self.launch.record
            if live is not None:
                live.update(self._render(final))
            return final
        finally:
            if live is not None:
                live.stop()

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
        detail = progress_text(ev.data.get("progress")) or ev.data.get("reason") or ev.data.get("detail") or ""
        if ev.kind == "phase" and not detail:
            detail = _message(str(ev.data.get("line", "")))[:160]
        if ev.kind == "phase" and ev.data.get("aside"):
            detail = f"(out of the usual order) {detail}"
        self.out.print(
            f"[{ev.ts - t0:7.2f}s] {ev.kind:<9} {ev.phase or '':<19} {detail}".rstrip(),
            highlight=False,
            markup=False,
            soft_wrap=True,
        )

    def _render(self, record: LaunchRecord | None) -> Group:
        now = time.time()
        state = record.state if record else LaunchState.STARTING
        head = Text.assemble(
            (f"launch {self.launch.id}", "bold"),
            "  ",
            (str(state), {"ready": "green", "failed": "red", "stalled": "yellow"}.get(state.value, "cyan")),
            f"  {record.name} ({record.engine}) → {record.url}" if record else "",
        )
        parts: list[Any] = [head, timeline_table(self.timeline, now if state == LaunchState.STARTING else None)]
        if self.timeline.gpus:
            parts.append(gpu_text(self.timeline.gpus))
        if self.timeline.last_probe and state == LaunchState.STARTING:
            parts.append(Text(f"probe: {self.timeline.last_probe}", style="dim"))
        return Group(*parts)


def follow(launch: Launch, json_out: bool, stop_on_interrupt: bool) -> int:
    """Show a launch until it is decided; 0 when ready, 1 otherwise, 130 on Ctrl-C (which stops the launch
    when `stop_on_interrupt`, else only detaches)."""
    mode = view_mode(json_out)
    view = LaunchView(launch, mode, console())
    try:
        final = view.show()
    except KeyboardInterrupt:
        if not stop_on_interrupt:
            err_console().print(f"detached from launch {launch.id}; it keeps running (`firstlight down {launch.id}`)")
            return 130
        launch.down()
        err_console().print(f"interrupted: launch {launch.id} stopped; full log kept at {launch.log_path}")
        return 130
    if mode != "json":
        rows = view.timeline.rows
        view.timeline.close(final.ended or (rows[-1].start if rows else 0.0))
        if mode == "plain":
            console().print(timeline_table(view.timeline))
        report_outcome(final)
    return 0 if final.state == LaunchState.READY else 1


def report_outcome(record: LaunchRecord) -> None:
    out = console()
    if record.state == LaunchState.READY:
        out.print(Text.assemble(("ready", "bold green"), f": {record.name} serves at {record.url}"))
        return
    style = "bold yellow" if record.state == LaunchState.STALLED else "bold red"
    out.print(Text.assemble((str(record.state), style), f": {record.reason or ''}"))
    print_diagnosis(record.diagnosis, record.log_path)
    out.print(f"full log: {record.log_path}")
    if record.state == LaunchState.STALLED:
        out.print(f"the engine is still running for inspection; stop it with `firstlight down {record.id}`")
