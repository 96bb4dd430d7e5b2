"""Sweeps: a campaign of variants (each a launch) × load levels × repeats, with a fallback ladder, stored
cell by cell and resumable, and a report of where each variant pays.

    from firstlight.sweep import load_plan, run_sweep, sweep_report

    plan = load_plan("campaign.yaml")
    outcome = run_sweep(plan)                      # check, up, bench every cell, down; per variant
    data = sweep_report(outcome.sweep_id)          # medians, speedups, crossover, SLO knee, Pareto
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from firstlight.errors import RunNotFound
from firstlight.store import Store
from firstlight.sweep.analysis import sweep_data
from firstlight.sweep.dryrun import dry_run
from firstlight.sweep.plan import Cell, SweepPlan, load_plan
from firstlight.sweep.runner import SweepOutcome, run_sweep


def find_sweep(ref: int | str | None, store: Store | Path | str | None = None) -> int:
    """A sweep by id, by name (the latest of that name), or the latest; RunNotFound when there is none."""
    db = Store.open(store)
    if ref is None:
        found = db.latest_sweep()
    elif isinstance(ref, int) or str(ref).isdigit():
        found = db.get_sweep(int(ref))
    else:
        found = db.find_sweep(str(ref))
    if found is None:
        raise RunNotFound(f"no sweep {ref if ref is not None else ''} in {db.path}".replace("  ", " "))
    return int(found["id"])


def sweep_report(ref: int | str | None = None, store: Store | Path | str | None = None) -> dict[str, Any]:
    """A stored sweep (by id or name; default the latest) with its analysis, as data."""
    db = Store.open(store)
    return sweep_data(db, find_sweep(ref, db))


def save_report(data: dict[str, Any], *, md: Path | None = None, html: Path | None = None) -> dict[str, Path]:
    """Write the sweep's report as Markdown (PNG plots beside it) and/or a self-contained HTML page."""
    if md is None and html is None:
        return {}
    from firstlight.sweep import plots, report

    directory = (md or html).parent  # type: ignore[union-attr]
    images = plots.all_plots(data, directory, f"sweep-{data['sweep']}")
    written: dict[str, Path] = {}
    if md is not None:
        md.write_text(report.markdown(data, {title: path.name for title, path in images.items()}))
        written["Markdown"] = md
    if html is not None:
        html.write_text(report.page(data, images))
        written["HTML"] = html
    return written


__all__ = [
    "Cell",
    "SweepOutcome",
    "SweepPlan",
    "dry_run",
    "find_sweep",
    "load_plan",
    "run_sweep",
    "save_report",
    "sweep_data",
    "sweep_report",
]
