"""`firstlight logs [LAUNCH] [-f]`: the engine's whole log, kept per launch."""

import sys
import time
from typing import TYPE_CHECKING, Annotated

import typer

from firstlight.cli.common import LaunchArg, StoreOption, fail

if TYPE_CHECKING:
    from firstlight.launch import Launch


def logs(
    launch: LaunchArg = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="keep printing while the engine runs")] = False,
    store: StoreOption = None,
) -> None:
    """Print a launch's log (secret-named values redacted; the file keeps them); with -f keep following it
    until the engine exits (or Ctrl-C)."""
    from firstlight.launch import get_launch
    from firstlight.secrets import redact_text

    handle = get_launch(launch, store)
    found = handle.record
    try:
        f = open(found.log_path, "rb")  # noqa: SIM115 - used as a context manager below
    except OSError as e:
        fail(f"launch {found.id}: cannot read its log {found.log_path}: {e.strerror}")
    out = sys.stdout.buffer
    rest = b""

    def show(data: bytes) -> None:
        text = data.decode("utf-8", "surrogateescape")
        out.write(redact_text(text).encode("utf-8", "surrogateescape"))
        out.flush()

    with f:
        try:
            while True:
                chunk = f.read(1 << 16)
                if chunk:
                    whole, _, rest = (rest + chunk).rpartition(b"\n")
                    if whole or _:
                        show(whole + b"\n")
                    continue
                if not follow or not _engine_running(handle):
                    break
                time.sleep(0.1)
            if rest:
                show(rest)
        except KeyboardInterrupt:
            pass
        except BrokenPipeError:
            pass


def _engine_running(handle: "Launch") -> bool:
    from firstlight.launch import LaunchState
    from firstlight.launch.supervisor import launch_members

    launch = handle.record
    if launch.pgid is None:
        return launch.state == LaunchState.STARTING  # the watcher has not started the engine yet
    return bool(launch_members(launch.pgid, launch.leader_start))
