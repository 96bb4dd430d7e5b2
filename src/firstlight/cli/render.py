"""`firstlight render SPEC --format systemd|sh|lws|slurm [-o FILE]`: the launch as a production artefact."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from firstlight.cli.common import console, err_console, fail
from firstlight.deployment import SpecError, load_deployment
from firstlight.facts import gather_facts, load_facts
from firstlight.render import FORMATS, RenderError, systemd
from firstlight.render import render as render_spec


def render(
    spec: Annotated[Path, typer.Argument(help="the Deployment spec (YAML)")],
    fmt: Annotated[str, typer.Option("--format", "-f", help=f"one of {', '.join(FORMATS)}")] = "systemd",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="write here instead of stdout")] = None,
    facts_file: Annotated[
        Path | None, typer.Option("--facts", help="recorded facts for the environment profile")
    ] = None,
    image: Annotated[str | None, typer.Option(help="container image (lws)")] = None,
) -> None:
    """Write the launch as a systemd unit, a standalone script, a LeaderWorkerSet or a Slurm script."""
    try:
        dep = load_deployment(spec)
    except SpecError as e:
        fail(str(e), 2)
    try:
        facts = load_facts(facts_file) if facts_file else gather_facts(None, None, dep.host, None)
        text, r = render_spec(dep, str(spec), fmt, facts, image)
    except (RenderError, ValueError, OSError) as e:
        fail(str(e), 2)
    if output is None:
        print(text, end="")
        if r.secrets:
            err_console.print(
                f"secrets ({', '.join(sorted(r.secrets))}) are not in the output: with -o, a 0600 "
                f"environment file is written beside it"
            )
        return
    try:
        output.write_text(text)
    except OSError as e:
        fail(f"cannot write {output}: {e.strerror}", 2)
    if fmt == "sh":
        output.chmod(0o755)
    console.print(f"{fmt} written to {output}")
    if r.secrets:
        env_path = output.with_suffix(".env")
        fd = os.open(env_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(systemd.env_file(r))
        os.chmod(env_path, 0o600)
        where = f"install it as {systemd.env_file_path(r)}" if fmt == "systemd" else "keep it private"
        console.print(f"secrets written to {env_path} (mode 0600; {where})")
