"""`firstlight report RUN [RUN ...]` or `firstlight report sweep:ID|NAME`: stored runs as tables (several
compared level by level, the first the baseline), or a sweep's campaign report."""

import json
from pathlib import Path
from typing import Annotated

import typer

from firstlight.cli.common import StoreOption, console, err_console, fail


def report(
    what: Annotated[
        list[str] | None,
        typer.Argument(
            help="run ids (default: the latest run; the first is the baseline), or one sweep: sweep:ID, "
            "sweep:NAME, or sweep (the latest)"
        ),
    ] = None,
    html_path: Annotated[Path | None, typer.Option("--html", help="write an HTML page with plots here")] = None,
    md_path: Annotated[Path | None, typer.Option("--md", help="write Markdown (and PNG plots beside it) here")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the data as JSON")] = False,
    store: StoreOption = None,
) -> None:
    """Show stored benchmark runs as tables and compare them level by level, or a sweep's report."""
    from firstlight.store import Store

    db = Store(store)
    items = list(what or [])
    say = err_console() if json_out else console()  # keep stdout pure JSON with --json
    if items and items[0].startswith("sweep"):
        from firstlight.sweep import save_report, sweep_report
        from firstlight.sweep.report import terminal

        if len(items) > 1:
            fail("report one sweep at a time")
        ref = items[0].partition(":")[2] or None
        data = sweep_report(ref, db)
        if json_out:
            print(json.dumps(data, indent=1, default=str))
        else:
            console().print(terminal(data))
        for kind, path in save_report(data, md=md_path, html=html_path).items():
            say.print(f"{kind} written to {path}")
        return
    from firstlight.reports import comparison, comparison_table, report, run_table, save

    try:
        runs = [int(item) for item in items]
    except ValueError:
        fail(f"{' '.join(items)}: give run ids (numbers), or sweep:ID for a sweep")
    data = report(runs, db)
    if json_out:
        print(json.dumps({"runs": data, "comparison": comparison(data) if len(data) > 1 else []}, indent=1))
    else:
        for run in data:
            console().print(run_table(run))
        if len(data) > 1:
            console().print(comparison_table(data))
    for kind, path in save(data, md=md_path, html=html_path, store=db).items():
        say.print(f"{kind} written to {path}")
