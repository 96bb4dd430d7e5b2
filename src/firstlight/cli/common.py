"""What every command shares: the store option, finding a launch, printing a failure."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from firstlight.store import Launch, Store

# Piped output is read in logs and CI: wide enough that result tables are not cut.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200)

StoreOption = Annotated[
    Path | None,
    typer.Option("--store", help="SQLite store (default ~/.firstlight/firstlight.db, or $FIRSTLIGHT_STORE)."),
]
LaunchArg = Annotated[int | None, typer.Argument(help="launch id (default: the latest)")]


def fail(message: str, code: int = 1) -> NoReturn:
    err_console.print(Text(f"error: {message}", style="red"))
    raise typer.Exit(code)


def open_store(path: Path | None) -> Store:
    try:
        return Store(path)
    except Exception as e:  # sqlite3.DatabaseError on a file that is not a store, permissions, …
        fail(f"cannot open the store {path or '~/.firstlight/firstlight.db'}: {e}", 2)


def resolve_launch(store: Store, launch_id: int | None) -> Launch:
    launch = store.get_launch(launch_id) if launch_id is not None else store.latest_launch()
    if launch is None:
        fail(f"no launch {launch_id} in {store.path}" if launch_id is not None else f"no launches in {store.path}")
    return launch


def view_mode(json_out: bool) -> str:
    if json_out:
        return "json"
    return "live" if sys.stdout.isatty() else "plain"


def print_diagnosis(diag: dict[str, Any] | None, log_path: str | None = None) -> None:
    """The outcome of a failed or stalled launch: the cause, its line, the evidence, the remedy."""
    if not diag:
        return
    d = diag.get("diagnosis") if "diagnosis" in diag else diag
    if not d:
        return
    console.print(
        Text.assemble(("cause: ", "bold"), (d["category"], "bold red"), f"  (confidence {d['confidence']:.2f})")
    )
    where = f"{log_path}:{d['line']}" if log_path else f"line {d['line']}"
    console.print(Text(f"root-cause line ({where}):", style="bold"))
    console.print(Text("  " + d["root_cause_line"].strip()[:2000]))
    if d.get("repeats", 1) > 1:
        console.print(Text(f"  (the same line appears {d['repeats']} times, e.g. once per rank)", style="dim"))
    evidence = [e for e in d.get("evidence", []) if e.strip() and e != d["root_cause_line"]]
    if evidence:
        console.print(Text("evidence:", style="bold"))
        for e in evidence:
            console.print(Text("  " + e.strip()[:300], style="dim"))
    console.print(Text.assemble(("remedy: ", "bold green"), d["remedy"]))
