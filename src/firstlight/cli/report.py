"""`firstlight report RUN [RUN ...]`: one run, or several compared level by level (the first is the baseline)."""

import json
from pathlib import Path
from typing import Annotated

import typer

from firstlight.cli.common import StoreOption, console, err_console


def report(
    runs: Annotated[
        list[int] | None, typer.Argument(help="run ids (default: the latest); the first is the baseline")
    ] = None,
    html_path: Annotated[Path | None, typer.Option("--html", help="write an HTML page with plots here")] = None,
    md_path: Annotated[Path | None, typer.Option("--md", help="write Markdown (and PNG plots beside it) here")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the runs and the comparison as JSON")] = False,
    store: StoreOption = None,
) -> None:
    """Show stored benchmark runs as tables, and compare them level by level."""
    from firstlight.reports import comparison, comparison_table, report, run_table, save
    from firstlight.store import Store

    db = Store(store)
    data = report(runs, db)
    if json_out:
        print(json.dumps({"runs": data, "comparison": comparison(data) if len(data) > 1 else []}, indent=1))
    else:
        for run in data:
            console().print(run_table(run))
        if len(data) > 1:
            console().print(comparison_table(data))
    say = err_console() if json_out else console()  # keep stdout pure JSON with --json
    for kind, path in save(data, md=md_path, html=html_path, store=db).items():
        say.print(f"{kind} written to {path}")
