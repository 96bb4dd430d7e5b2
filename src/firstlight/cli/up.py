"""`firstlight up SPEC`: check, launch, watch phase by phase; exit 0 when ready, 1 with the reason, 2 refused."""

from pathlib import Path
from typing import Annotated

import typer

from firstlight.cli.common import StoreOption, console, fail, show_findings


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
    from firstlight.cli.view import follow
    from firstlight.errors import PreflightFailed
    from firstlight.launch import up as launch_up

    if supervisor not in (None, "embedded", "systemd"):
        fail("--supervisor must be embedded or systemd", 2)
    try:
        launch = launch_up(spec, store=store, force=force, facts=facts_file, supervisor=supervisor)
    except KeyboardInterrupt:
        fail("interrupted during the checks: nothing was launched", 130)
    except PreflightFailed as e:
        if not json_out:
            show_findings([f for f in e.findings if f.severity != "ok"])
        raise
    if launch.findings and launch.findings.failures and not json_out:
        show_findings([f for f in launch.findings if f.severity != "ok"])  # --force: launched all the same
    if detach:
        record = launch.record
        out = console()
        out.print(f"launch {launch.id}: {record.name} ({record.engine}) starting → {record.url}")
        out.print(f"log: {record.log_path}")
        out.print(f"follow it with `firstlight watch {launch.id}`; stop it with `firstlight down {launch.id}`")
        return
    raise typer.Exit(follow(launch, json_out, stop_on_interrupt=True))
