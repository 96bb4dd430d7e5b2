"""`firstlight watch [LAUNCH]`: re-attach to a launch's live view."""

from typing import Annotated

import typer

from firstlight.cli.common import LaunchArg, StoreOption


def watch(
    launch: LaunchArg = None,
    json_out: Annotated[bool, typer.Option("--json", help="print events as JSON lines")] = False,
    store: StoreOption = None,
) -> None:
    """Follow a launch until it is ready, failed or stalled (Ctrl-C detaches; the launch keeps running)."""
    from firstlight.cli.view import follow
    from firstlight.launch import get_launch

    raise typer.Exit(follow(get_launch(launch, store), json_out, stop_on_interrupt=False))
