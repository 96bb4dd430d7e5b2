"""`firstlight watch [LAUNCH]`: re-attach to a launch's live view."""

from typing import Annotated

import typer

from firstlight.cli.common import LaunchArg, StoreOption, err_console


def watch(
    launch: LaunchArg = None,
    json_out: Annotated[bool, typer.Option("--json", help="print events as JSON lines")] = False,
    store: StoreOption = None,
) -> None:
    """Follow a launch until it is ready, failed or stalled (Ctrl-C detaches; the launch keeps running). A
    launch whose watcher is gone while its engine runs gets a new watcher, which decides."""
    from firstlight.cli.view import follow
    from firstlight.launch import get_launch

    handle = get_launch(launch, store)
    if handle.watcher_lost:
        handle.reattach()
        err_console().print(f"launch {handle.id}: its watcher was gone, its engine runs on: a new watcher took over")
    raise typer.Exit(follow(handle, json_out, stop_on_interrupt=False))
