"""The `firstlight` command line: one thin module per command."""

from __future__ import annotations

import typer

from firstlight.cli.bench import bench
from firstlight.cli.check import check, facts
from firstlight.cli.diagnose import diagnose
from firstlight.cli.down import down
from firstlight.cli.logs import logs
from firstlight.cli.render import render
from firstlight.cli.report import report
from firstlight.cli.status import status
from firstlight.cli.up import up
from firstlight.cli.watch import watch

app = typer.Typer(
    name="firstlight",
    help="Bring an LLM inference server up, prove that it serves, measure it, and say why when it does not.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command()(check)
app.command()(facts)
app.command()(up)
app.command()(watch)
app.command()(status)
app.command()(logs)
app.command()(down)
app.command()(diagnose)
app.command()(bench)
app.command()(report)
app.command()(render)


def main() -> None:
    app()
