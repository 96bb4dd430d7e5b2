"""`firstlight watch [LAUNCH]`: re-attach to a launch's live view."""

from __future__ import annotations

from typing import Annotated

import typer

from firstlight.cli.common import LaunchArg, StoreOption, open_store, resolve_launch
from firstlight.cli.up import watch_until_decided


def watch(
    launch: LaunchArg = None,
    json_out: Annotated[bool, typer.Option("--json", help="print events as JSON lines")] = False,
    store: StoreOption = None,
) -> None:
    """Follow a launch until it is ready, failed or stalled (Ctrl-C detaches; the launch keeps running)."""
    db = open_store(store)
    found = resolve_launch(db, launch)
    raise typer.Exit(watch_until_decided(db, found, json_out, stop_on_interrupt=False))
