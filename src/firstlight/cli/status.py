"""`firstlight status [--json]`: the launch history from the store, with what is running now."""

import json
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from firstlight.cli.common import StoreOption, console

if TYPE_CHECKING:
    from firstlight.store import LaunchRecord


def _row(launch: "LaunchRecord") -> dict[str, Any]:
    from firstlight.launch.supervisor import alive, launch_members

    running = bool(launch_members(launch.pgid, launch.leader_start))
    watcher = bool(launch.watcher_pid) and alive(launch.watcher_pid or 0)
    return {
        "id": launch.id,
        "name": launch.name,
        "engine": launch.engine,
        "state": launch.state.value,
        "phase": launch.phase,
        "url": launch.url,
        "pid": launch.pid,
        "running": running,
        # the engine runs on, but nothing watches it: `watch` takes it over
        "watcher_lost": running and not watcher and launch.state.value != "stopped",
        "created": launch.created,
        "ended": launch.ended,
        "exit_code": launch.exit_code,
        "reason": launch.reason,
        "log": launch.log_path,
        "category": ((launch.diagnosis or {}).get("diagnosis") or {}).get("category"),
    }


def status(
    json_out: Annotated[bool, typer.Option("--json", help="print the launches as a JSON list")] = False,
    limit: Annotated[int, typer.Option(help="how many launches, newest first")] = 20,
    store: StoreOption = None,
) -> None:
    """Show recent launches: state, phase, whether their processes still run, and why they ended."""
    from firstlight.store import Store

    db = Store.open(store)
    rows = [_row(launch) for launch in db.launches(limit)]
    if json_out:
        print(json.dumps(rows, indent=2))
        return
    if not rows:
        console().print(f"no launches in {db.path}")
        return
    from rich.table import Table

    table = Table(show_edge=False)
    for col in ("id", "name", "engine", "state", "phase", "running", "age", "url", "why"):
        table.add_column(col)
    now = time.time()
    for r in rows:
        why = r["category"] or (r["reason"] or "")
        if r["watcher_lost"]:
            why = f"watcher lost: `firstlight watch {r['id']}` takes over; {why}"
        table.add_row(
            str(r["id"]),
            r["name"],
            r["engine"],
            r["state"],
            r["phase"],
            "yes" if r["running"] else "no",
            _age(now - r["created"]),
            r["url"],
            why[:60],
        )
    console().print(table)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"
