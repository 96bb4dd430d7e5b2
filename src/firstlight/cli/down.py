"""`firstlight down [LAUNCH]`: stop the engine's whole process group and check that nothing is left."""

from typing import Annotated

import typer

from firstlight.cli.common import LaunchArg, StoreOption, console, fail


def down(
    launch: LaunchArg = None,
    grace: Annotated[float, typer.Option(help="seconds between SIGTERM and SIGKILL")] = 15.0,
    store: StoreOption = None,
) -> None:
    """SIGTERM the launch's process group, SIGKILL after the grace period, verify no process is left."""
    from firstlight.launch import get_launch

    found = get_launch(launch, store)
    result = found.down(grace)
    if result.refused:
        fail(f"launch {found.id}: {result.refused}")
    if not result.stopped:
        console().print(f"launch {found.id}: no process was running")
        return
    if result.survivors:
        fail(f"launch {found.id}: processes survived SIGKILL: {result.survivors}")
    if result.gpu_holders:
        fail(f"launch {found.id}: stopped, but NVML still shows GPU memory held by pids {result.gpu_holders}")
    console().print(
        f"launch {found.id}: stopped {len(result.stopped)} processes ({', '.join(map(str, result.stopped))}); none left"
    )
