"""The `firstlight` command line: one thin module per command over the library.

Each command parses its options, calls the library and prints; commands never import each other, and
import the library when they run, so a quick command does not pay for the others. A `FirstlightError`
from the library ends any command with `error: <reason>` and the error's exit code, here, in one place.
"""

from __future__ import annotations

import sys

import typer

from firstlight.cli.bench import bench
from firstlight.cli.check import check, facts
from firstlight.cli.diagnose import diagnose
from firstlight.cli.down import down
from firstlight.cli.logs import logs
from firstlight.cli.render import render
from firstlight.cli.report import report
from firstlight.cli.status import status
from firstlight.cli.sweep import sweep
from firstlight.cli.up import up
from firstlight.cli.watch import watch
from firstlight.errors import FirstlightError

app = typer.Typer(
    name="firstlight",
    help="Bring an LLM inference server up, prove that it serves, measure it, and say why when it does not.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
for command in (check, facts, up, watch, status, logs, down, diagnose, bench, sweep, report, render):
    app.command()(command)


def main() -> None:
    try:
        app()
    except FirstlightError as e:
        from firstlight.cli.common import err_console

        err_console().print(f"error: {e}", style="red", markup=False, highlight=False)
        sys.exit(e.exit_code)
