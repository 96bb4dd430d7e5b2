"""`firstlight report RUN [RUN ...]`: one run, or several compared level by level (the first is the baseline)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from firstlight.cli.common import StoreOption, console, err_console, fail, open_store
from firstlight.report.data import RunNotFound, run_data
from firstlight.report.tables import comparison, comparison_table, markdown, run_table


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
    db = open_store(store)
    ids = runs or []
    if not ids:
        latest = db.latest_run()
        if latest is None:
            fail(f"no benchmark runs in {db.path}")
        ids = [latest["id"]]
    try:
        data = [run_data(db, i) for i in ids]
    except RunNotFound as e:
        fail(str(e))
    if json_out:
        print(json.dumps({"runs": data, "comparison": comparison(data) if len(data) > 1 else []}, indent=1))
    else:
        for run in data:
            console.print(run_table(run))
        if len(data) > 1:
            console.print(comparison_table(data))
    say = err_console if json_out else console  # keep stdout pure JSON with --json
    stem = "report-" + "-".join(str(i) for i in ids)
    if md_path is not None or html_path is not None:
        from firstlight.report import plots

        directory = (md_path or html_path).parent  # type: ignore[union-attr]
        images = plots.all_plots(db, data, directory, stem)
        if md_path is not None:
            md_path.write_text(markdown(data, {t: p.name for t, p in images.items()}))
            say.print(f"Markdown written to {md_path}")
        if html_path is not None:
            from firstlight.report.html import page

            html_path.write_text(page(data, images))
            say.print(f"HTML written to {html_path}")
