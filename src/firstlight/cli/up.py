"""`firstlight up SPEC`: launch, watch phase by phase, return 0 when ready or 1 with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from firstlight.cli.check import findings_for, show_findings
from firstlight.cli.common import (
    StoreOption,
    console,
    err_console,
    fail,
    open_store,
    print_diagnosis,
    view_mode,
)
from firstlight.deployment import SpecError, load_deployment
from firstlight.launch import systemd
from firstlight.launch.control import start_launch, stop_launch
from firstlight.launch.view import LaunchView, timeline_table
from firstlight.store import Launch, Store


def up(
    spec: Annotated[Path, typer.Argument(help="the Deployment spec (YAML)")],
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="return once launched; the watcher keeps recording")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print events as JSON lines")] = False,
    force: Annotated[bool, typer.Option("--force", help="launch even when a preflight check fails")] = False,
    supervisor: Annotated[
        str | None, typer.Option(help="embedded (own process group) or systemd (a unit); default: the spec's")
    ] = None,
    facts_file: Annotated[Path | None, typer.Option("--facts", help="recorded facts for the preflight")] = None,
    store: StoreOption = None,
) -> None:
    """Check, launch, and watch until ready (exit 0), failed or stalled (exit 1); a failed check exits 2."""
    try:
        dep = load_deployment(spec)
    except SpecError as e:
        fail(str(e), 2)
    if supervisor is not None:
        if supervisor not in ("embedded", "systemd"):
            fail("--supervisor must be embedded or systemd", 2)
        dep = dep.model_copy(update={"supervisor": supervisor})
    if dep.supervisor == "systemd":
        try:
            systemd.require_systemd()
        except systemd.SystemdUnavailable as e:
            fail(str(e), 2)
    findings = findings_for(dep, facts_file)
    blocking = [f for f in findings if f.severity == "fail"]
    if blocking and not json_out:
        show_findings([f for f in findings if f.severity != "ok"])
    if blocking and not force:
        fail(f"{len(blocking)} preflight check(s) failed; fix them, or launch anyway with --force", 2)
    db = open_store(store)
    launch = start_launch(db, dep)
    if detach:
        console.print(f"launch {launch.id}: {dep.name} ({dep.engine}) starting → {dep.url}")
        console.print(f"log: {launch.log_path}")
        console.print(f"follow it with `firstlight watch {launch.id}`; stop it with `firstlight down {launch.id}`")
        return
    raise typer.Exit(watch_until_decided(db, launch, json_out, stop_on_interrupt=True))


def watch_until_decided(db: Store, launch: Launch, json_out: bool, stop_on_interrupt: bool) -> int:
    mode = view_mode(json_out)
    view = LaunchView(db, launch.id, mode, console)
    try:
        final = view.follow()
    except KeyboardInterrupt:
        if not stop_on_interrupt:
            err_console.print(f"detached from launch {launch.id}; it keeps running (`firstlight down {launch.id}`)")
            return 130
        current = db.get_launch(launch.id) or launch
        stop_launch(db, current)
        err_console.print(f"interrupted: launch {launch.id} stopped; full log kept at {current.log_path}")
        return 130
    if mode != "json":
        view.timeline.close(final.ended or view.timeline.rows[-1].start if view.timeline.rows else 0.0)
        if mode == "plain":
            console.print(timeline_table(view.timeline))
        report_outcome(final)
    return 0 if final.state == "ready" else 1


def report_outcome(launch: Launch) -> None:
    if launch.state == "ready":
        console.print(Text.assemble(("ready", "bold green"), f": {launch.name} serves at {launch.url}"))
        return
    style = "bold yellow" if launch.state == "stalled" else "bold red"
    console.print(Text.assemble((launch.state, style), f": {launch.reason or ''}"))
    print_diagnosis(launch.diagnosis, launch.log_path)
    console.print(f"full log: {launch.log_path}")
    if launch.state == "stalled":
        console.print(f"the engine is still running for inspection; stop it with `firstlight down {launch.id}`")
