"""What every command shares: the store option, the consoles, printing a failure or a diagnosis.

Kept light on purpose: a command imports what it uses when it runs, so `status` does not pay for
the benchmark stack. Rich is imported when something is printed.
"""

import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

if TYPE_CHECKING:
    from rich.console import Console

StoreOption = Annotated[
    Path | None,
    typer.Option("--store", help="SQLite store (default ~/.firstlight/firstlight.db, or $FIRSTLIGHT_STORE)."),
]
LaunchArg = Annotated[int | None, typer.Argument(help="launch id (default: the latest)")]
SEVERITY_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


@cache
def console() -> "Console":
    from rich.console import Console

    # Piped output is read in logs and CI: wide enough that result tables are not cut.
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


@cache
def err_console() -> "Console":
    from rich.console import Console

    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200)


def fail(message: str, code: int = 1) -> NoReturn:
    """A one-line reason on stderr, and the exit code."""
    from rich.text import Text

    err_console().print(Text(f"error: {message}", style="red"))
    raise typer.Exit(code)


def view_mode(json_out: bool) -> str:
    if json_out:
        return "json"
    return "live" if sys.stdout.isatty() else "plain"


def show_findings(findings: list[Any]) -> None:
    """Preflight findings as a table: severity, check, what was seen and the remedy."""
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False, show_header=True)
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    # where the facts of each finding came from, when some were not observed here and now
    kinds = [sorted({s.get("kind", "live") for s in getattr(f, "facts", {}).values()}) for f in findings]
    elsewhere = any(set(k) - {"live"} for k in kinds)
    if elsewhere:
        table.add_column("facts", no_wrap=True)
    table.add_column("finding")
    for f, kind in zip(findings, kinds, strict=True):
        text = Text(f.message)
        if f.remedy and f.severity != "ok":
            text.append("\n→ " + f.remedy, style="cyan")
        row = [Text(f.severity, style=SEVERITY_STYLE[f.severity]), f.id]
        if elsewhere:
            row.append(Text(", ".join(kind), style="" if kind == ["live"] else "magenta"))
        table.add_row(*row, text)
    console().print(table)


def print_diagnosis(diag: dict[str, Any] | None, log_path: str | None = None) -> None:
    """The outcome of a failed or stalled launch: the cause, its line, the evidence, the remedy."""
    if not diag:
        return
    d = diag.get("diagnosis") if "diagnosis" in diag else diag
    if not d:
        return
    from rich.text import Text

    out = console()
    out.print(Text.assemble(("cause: ", "bold"), (d["category"], "bold red"), f"  (confidence {d['confidence']:.2f})"))
    where = f"{log_path}:{d['line']}" if log_path else f"line {d['line']}"
    out.print(Text(f"root-cause line ({where}):", style="bold"))
    out.print(Text("  " + d["root_cause_line"].strip()[:2000]))
    if d.get("repeats", 1) > 1:
        out.print(Text(f"  (the same line appears {d['repeats']} times, e.g. once per rank)", style="dim"))
    evidence = [e for e in d.get("evidence", []) if e.strip() and e != d["root_cause_line"]]
    if evidence:
        out.print(Text("evidence:", style="bold"))
        for e in evidence:
            out.print(Text("  " + e.strip()[:300], style="dim"))
    out.print(Text.assemble(("remedy: ", "bold green"), d["remedy"]))
