"""`firstlight render SPEC --format systemd|sh|lws|slurm [-o FILE]`: the launch as a production artefact."""

from pathlib import Path
from typing import Annotated

import typer

from firstlight.cli.common import console, err_console, fail

FORMATS = ("systemd", "sh", "lws", "slurm")  # the renderers' own list, kept here so that --help loads none of them


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
    from firstlight.rendering import render as render_spec

    artefact = render_spec(spec, fmt, facts_file, image)
    if output is None:
        print(artefact.text, end="")
        if artefact.secrets:
            err_console().print(
                f"secrets ({', '.join(sorted(artefact.secrets))}) are not in the output: with -o, a 0600 "
                f"environment file is written beside it"
            )
        return
    try:
        env_path = artefact.write(output)
    except OSError as e:
        fail(f"cannot write {output}: {e.strerror}", 2)
    console().print(f"{fmt} written to {output}")
    if env_path is not None:
        where = f"install it as {artefact.env_install_path}" if fmt == "systemd" else "keep it private"
        console().print(f"secrets written to {env_path} (mode 0600; {where})")
