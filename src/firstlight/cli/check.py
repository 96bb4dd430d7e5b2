"""`firstlight check SPEC` and `firstlight facts`: every launch-killer, before the launch.

Exit codes of `check`: 0 every check passed, 1 a warning, 2 a failure (or an unusable spec or facts file).
"""

import json
from pathlib import Path
from typing import Annotated

import typer

from firstlight.cli.common import console, show_findings


def check(
    spec: Annotated[Path, typer.Argument(help="the Deployment spec (YAML)")],
    json_out: Annotated[bool, typer.Option("--json", help="print the findings as a JSON list")] = False,
    facts_file: Annotated[
        Path | None, typer.Option("--facts", help="the GPUs and host as recorded elsewhere (`facts --save`)")
    ] = None,
    gpus: Annotated[
        str | None,
        typer.Option("--gpus", help="plan for GPUs you do not have: COUNTxMODEL, e.g. 8xB200 (facts synthetic)"),
    ] = None,
    context: Annotated[
        int | None, typer.Option("--context", help="tokens per request (prompt + output) for the KV capacity")
    ] = None,
) -> None:
    """Check the host, the GPUs, the model and the engine's environment against the spec."""
    from firstlight.preflight import check as run_check

    findings = run_check(spec, facts_file, gpus, context)
    if json_out:
        print(json.dumps(findings.to_list(), indent=1))
    else:
        show_findings(findings)
    raise typer.Exit(findings.exit_code)


def facts(
    save: Annotated[Path | None, typer.Option("--save", help="write the facts to this JSON file")] = None,
    python: Annotated[Path | None, typer.Option("--python", help="the engine's interpreter")] = None,
    program: Annotated[Path | None, typer.Option("--program", help="the engine's binary (llama-server)")] = None,
    model: Annotated[Path | None, typer.Option("--model", help="a model directory (or GGUF file)")] = None,
    port: Annotated[int | None, typer.Option("--port", help="a port to check")] = None,
) -> None:
    """Print what firstlight sees (GPUs, host, model, engine software) as JSON."""
    from firstlight.facts import gather_facts, save_facts

    observed = gather_facts(python, model, "127.0.0.1", port, program)
    if save is not None:
        save_facts(observed, save)
        console().print(f"facts saved to {save}")
    else:
        print(observed.to_json(), end="")
