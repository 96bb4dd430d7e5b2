"""`firstlight diagnose LOGFILE|-`: what happened in a launch log, and why it failed.

Exit codes: 0 the log reached ready; 1 it failed or did not reach ready (the diagnosis says why);
2 the input could not be read (missing file, binary data).
"""

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from firstlight.cli.common import console, fail, print_diagnosis

if TYPE_CHECKING:
    from firstlight.diagnosis import Report


def diagnose(
    logfile: Annotated[str, typer.Argument(help="a launch log, or - for standard input")],
    engine: Annotated[str, typer.Option(help="auto, or an engine's name (vllm, sglang, llama.cpp, ...)")] = "auto",
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="also show the candidates considered, their scores, and the rule")
    ] = False,
) -> None:
    """Read the whole log (every rank) and say what happened: phases, outcome, root cause, remedy."""
    from firstlight.diagnosis import diagnose as diagnose_log
    from firstlight.diagnosis import looks_binary
    from firstlight.engines import ENGINES

    choices = ("auto", *ENGINES)
    if engine not in choices:
        fail(f"--engine {engine!r} is not one of {', '.join(choices)}", 2)
    if logfile == "-":
        stream = sys.stdin.buffer
        name = "<stdin>"
    else:
        path = Path(logfile)
        if not path.is_file():
            fail(f"{logfile}: no such file", 2)
        stream = open(path, "rb")  # noqa: SIM115 - closed below, after the stream is consumed
        name = logfile
    with stream:
        head = stream.peek(4096)[:4096] if hasattr(stream, "peek") else b""
        if looks_binary(head):
            fail(f"{name}: binary data, not a log", 2)
        report = diagnose_log(stream, engine)
    if json_out:
        out = report.to_dict() | ({"explain": report.explained()} if explain else {})
        print(json.dumps(out, ensure_ascii=False))
    else:
        show_report(report, None if logfile == "-" else logfile)
        if explain:
            show_explanation(report)
    raise typer.Exit(0 if report.outcome == "ready" and report.diagnosis is None else 1)


def show_report(report: "Report", log_path: str | None) -> None:
    from rich.text import Text

    out = console()
    style = {"ready": "bold green", "failed": "bold red"}.get(report.outcome, "bold yellow")
    out.print(
        Text.assemble(
            ("outcome: ", "bold"),
            (report.outcome, style),
            f"  engine: {report.engine}  lines: {report.lines}",
        )
    )
    out.print(Text("phases:", style="bold"))
    for p in report.phases:
        when = f"  {p.log_time}" if p.log_time else ""
        aside = "  (out of the usual order)" if p.aside else ""
        out.print(Text(f"  {p.phase:<20} line {p.line}{when}{aside}"))
    if report.outcome == "not_ready":
        out.print(Text(f"the log ends in {report.last_phase} without ready and without a fatal error", style="yellow"))
    elif report.outcome == "ready" and report.diagnosis is not None:
        out.print(Text("it started and answered requests, then failed while serving:", style="yellow"))
    print_diagnosis(report.to_dict().get("diagnosis"), log_path)


def show_explanation(report: "Report") -> None:
    from rich.table import Table
    from rich.text import Text

    out = console()
    out.print(Text.assemble(("rule: ", "bold"), report.rule))
    explained = report.explained()["candidates"]
    if not explained:
        out.print("no line of the log was a candidate")
        return
    table = Table(show_edge=False, title="candidates, best first", title_justify="left")
    for column in ("line", "score", "category", "why", "text"):
        table.add_column(column, no_wrap=column in ("line", "score"))
    for c in explained:
        # a log line is text, not markup (`[/path/context.cc:243]` reads as a closing tag)
        why, text = escape("; ".join(c["why"])), escape(c["text"][:160])
        table.add_row(str(c["line"]), f"{c['score']:.3f}", c["category"], why, text)
    out.print(table)
