"""`firstlight check SPEC` and `firstlight facts`: every launch-killer, before the launch.

Exit codes of `check`: 0 every check passed, 1 a warning, 2 a failure (or an unusable spec or facts file).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from firstlight.cli.common import console, fail
from firstlight.deployment import Deployment, SpecError, load_deployment
from firstlight.facts import gather_facts, load_facts, save_facts
from firstlight.preflight import Finding, exit_code, facts_for, run_checks

STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def check(
    spec: Annotated[Path, typer.Argument(help="the Deployment spec (YAML)")],
    json_out: Annotated[bool, typer.Option("--json", help="print the findings as a JSON list")] = False,
    facts_file: Annotated[Path | None, typer.Option("--facts", help="recorded facts (from `facts --save`)")] = None,
) -> None:
    """Check the host, the GPUs, the model and the engine's environment against the spec."""
    try:
        dep = load_deployment(spec)
    except SpecError as e:
        fail(str(e), 2)
    findings = findings_for(dep, facts_file)
    if json_out:
        print(json.dumps([f.to_dict() for f in findings], indent=1))
    else:
        show_findings(findings)
    raise typer.Exit(exit_code(findings))


def findings_for(dep: Deployment, facts_file: Path | None = None) -> list[Finding]:
    recorded = None
    if facts_file is not None:
        try:
            recorded = load_facts(facts_file)
        except (OSError, ValueError) as e:
            fail(f"cannot read facts from {facts_file}: {e}", 2)
    return run_checks(facts_for(dep, recorded), dep)


def show_findings(findings: list[Finding]) -> None:
    table = Table(show_edge=False, show_header=True)
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("finding")
    for f in findings:
        text = Text(f.message)
        if f.remedy and f.severity != "ok":
            text.append("\n→ " + f.remedy, style="cyan")
        table.add_row(Text(f.severity, style=STYLE[f.severity]), f.id, text)
    console.print(table)


def facts(
    save: Annotated[Path | None, typer.Option("--save", help="write the facts to this JSON file")] = None,
    python: Annotated[Path | None, typer.Option("--python", help="the engine's interpreter")] = None,
    model: Annotated[Path | None, typer.Option("--model", help="a model directory")] = None,
    port: Annotated[int | None, typer.Option("--port", help="a port to check")] = None,
) -> None:
    """Print what firstlight sees (GPUs, host, model, engine software) as JSON."""
    observed = gather_facts(python, model, "127.0.0.1", port)
    if save is not None:
        save_facts(observed, save)
        console.print(f"facts saved to {save}")
    else:
        print(json.dumps(observed, indent=1, sort_keys=True))
