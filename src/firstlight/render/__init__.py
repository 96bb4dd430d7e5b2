"""The launch as a production artefact: a systemd unit, a shell script, a LeaderWorkerSet, a Slurm script."""

from __future__ import annotations

from typing import Any

from firstlight.deployment import Deployment
from firstlight.render import multinode, shell, systemd
from firstlight.render.common import RenderError, Rendering, prepare

FORMATS = ("systemd", "sh", "lws", "slurm")


def render(
    dep: Deployment, source: str, fmt: str, facts: dict[str, Any] | None = None, image: str | None = None
) -> tuple[str, Rendering]:
    r = prepare(dep, source, facts)
    if fmt == "systemd":
        return systemd.unit(r), r
    if fmt == "sh":
        return shell.script(r), r
    if fmt == "lws":
        return multinode.lws(r, image), r
    if fmt == "slurm":
        return multinode.slurm(r), r
    raise RenderError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")


__all__ = ["FORMATS", "RenderError", "render"]
