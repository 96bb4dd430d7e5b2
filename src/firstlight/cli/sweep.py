"""`firstlight sweep PLAN`: every variant launched, benchmarked over the load and stopped, one screen for the
whole campaign; `--resume` runs only what is missing."""

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from firstlight.cli.common import StoreOption, console, err_console

if TYPE_CHECKING:
    from firstlight.sweep.progress import Progress


def sweep(
    plan: Annotated[Path, typer.Argument(help="a sweep plan (YAML): base spec, variants, ladder, load, repeats, slo")],
    resume: Annotated[
        int | None, typer.Option("--resume", help="a stored sweep to complete: runs only its missing cells")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print the cells and every launch's command line; start nothing")
    ] = False,
    retry_failed: Annotated[
        bool, typer.Option("--retry-failed", help="with --resume: run again the cells whose variant did not come up")
    ] = False,
    store: StoreOption = None,
) -> None:
    """Run a campaign: each variant checked, launched (down the ladder if it fails), benchmarked at every
    level and repeat, and stopped; every cell stored as it ends."""
    from firstlight.store import Store
    from firstlight.sweep import dry_run as plan_lines
    from firstlight.sweep import load_plan, run_sweep, sweep_report
    from firstlight.sweep.report import terminal

    spec = load_plan(plan)
    if dry_run:
        for line in plan_lines(spec):
            console().print(line, markup=False, highlight=False)
        return
    db = Store(store)
    screen = Screen()
    try:
        with screen:
            outcome = run_sweep(spec, store=db, resume=resume, retry_failed=retry_failed, on_progress=screen.update)
    except KeyboardInterrupt:
        sweep_id = screen.sweep_id or resume
        err_console().print(
            f"interrupted: sweep {sweep_id} is kept, its engine stopped; finish it with "
            f"`firstlight sweep {plan} --resume {sweep_id}`",
            markup=False,
        )
        raise typer.Exit(130) from None
    console().print(terminal(sweep_report(outcome.sweep_id, db)))
    console().print(f"report: firstlight report sweep:{outcome.sweep_id} --html sweep-{outcome.sweep_id}.html")
    if outcome.state != "complete":
        raise typer.Exit(1)


class Screen:
    """The campaign on one screen where stdout is a terminal; one line per event otherwise (logs, CI)."""

    def __init__(self) -> None:
        from rich.live import Live

        self.live = Live(console=console(), refresh_per_second=4, transient=True) if sys.stdout.isatty() else None
        self.sweep_id: int | None = None
        self.printed = 0

    def __enter__(self) -> "Screen":
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def update(self, p: "Progress") -> None:
        self.sweep_id = p.sweep_id
        if self.live is None:
            new = min(p.said - self.printed, len(p.log))
            for line in p.log[len(p.log) - new :] if new > 0 else []:
                err_console().print(f"[{time.strftime('%H:%M:%S')}] {line}", markup=False, highlight=False)
            self.printed = p.said
            return
        self.live.update(_panel(p))


def _panel(p: "Progress") -> Any:
    from rich.table import Table

    eta = p.eta_s
    table = Table.grid(padding=(0, 2))
    table.add_row("sweep", f"{p.sweep_id} {p.plan.name}: {p.done}/{p.total} cells ({p.failed} not measured)")
    table.add_row("ETA", "measuring…" if eta is None else f"{eta / 60:.1f} min")
    rung = " ".join(f"--{k} {v}" for k, v in p.rung.items())
    table.add_row("variant", f"{p.variant}  attempt {p.attempt_no}  {rung}  phase {p.phase}")
    if p.cell is not None:
        level = p.level
        detail = (
            f"{level.done}/{level.total} requests, {level.failed} failed" if level and not level.warmup else "warm-up"
        )
        table.add_row("cell", f"{p.cell.load_name} repeat {p.cell.repeat + 1}/{p.plan.repeats}: {detail}")
    for line in p.log[-4:]:
        table.add_row("", line)
    return table
