"""Stored benchmark runs as data, tables, Markdown and HTML with plots; several runs compared level by
level against the first.

    from firstlight.reports import report, comparison
    runs = report([3, 4])            # the shape of `bench --json`, one per run
    rows = comparison(runs)          # run 4 against run 3, level by level
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from firstlight.benchmark.result import run_data
from firstlight.errors import RunNotFound
from firstlight.reports.tables import comparison, comparison_table, markdown, run_table
from firstlight.store import Store

__all__ = ["RunNotFound", "comparison", "comparison_table", "markdown", "report", "run_table", "save"]


def report(run_ids: Sequence[int] | None = None, store: Store | Path | str | None = None) -> list[dict[str, Any]]:
    """The runs (default: the latest) as data; raises RunNotFound for a run the store does not hold."""
    db = Store.open(store)
    ids = list(run_ids or [])
    if not ids:
        latest = db.latest_run()
        if latest is None:
            raise RunNotFound(f"no benchmark runs in {db.path}")
        ids = [latest["id"]]
    return [run_data(db, i) for i in ids]


def save(
    runs: list[dict[str, Any]],
    *,
    md: Path | None = None,
    html: Path | None = None,
    store: Store | Path | str | None = None,
) -> dict[str, Path]:
    """Write Markdown (with PNG plots beside it) and/or a self-contained HTML page; returns what was
    written, by kind. The plots need the stored requests (latency CDFs), hence the store."""
    if md is None and html is None:
        return {}
    from firstlight.reports import plots  # matplotlib: only when plots are asked for
    from firstlight.reports.html import page

    directory = (md or html).parent  # type: ignore[union-attr]
    stem = "report-" + "-".join(str(run["run"]) for run in runs)
    images = plots.all_plots(Store.open(store), runs, directory, stem)
    written: dict[str, Path] = {}
    if md is not None:
        md.write_text(markdown(runs, {title: path.name for title, path in images.items()}))
        written["Markdown"] = md
    if html is not None:
        html.write_text(page(runs, images))
        written["HTML"] = html
    return written
