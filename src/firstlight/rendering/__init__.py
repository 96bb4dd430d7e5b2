"""The launch as a production artefact: a systemd unit, a shell script, a LeaderWorkerSet, a Slurm script."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from firstlight.deployment import Deployment, as_deployment
from firstlight.errors import RenderError
from firstlight.facts import Facts, gather_facts, load_facts
from firstlight.rendering import multinode, shell, systemd
from firstlight.rendering.common import Rendering, prepare

FORMATS = ("systemd", "sh", "lws", "slurm")


@dataclass
class Artefact:
    """A rendered launch: the text, and the secrets kept out of it (for a 0600 environment file)."""

    format: str
    text: str
    rendering: Rendering

    @property
    def secrets(self) -> dict[str, str]:
        return self.rendering.secrets

    def write(self, path: Path, env_path: Path | None = None) -> Path | None:
        """Write the text (a script executable), and the secrets, mode 0600, to `env_path` (default: beside
        the text as `<name>.env`); returns the environment file's path when there are secrets."""
        path.write_text(self.text)
        if self.format == "sh":
            path.chmod(0o755)
        if not self.secrets:
            return None
        env_path = env_path or path.with_suffix(".env")
        env_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(env_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(systemd.env_file(self.rendering))
        os.chmod(env_path, 0o600)  # an existing file keeps its mode through O_CREAT
        return env_path

    @property
    def env_install_path(self) -> str:
        """Where the systemd unit expects its environment file."""
        return systemd.env_file_path(self.rendering)


def render(
    spec: Deployment | Path | str,
    fmt: str = "systemd",
    facts: Facts | Path | str | None = None,
    image: str | None = None,
    source: str | None = None,
) -> Artefact:
    """Render a spec (a Deployment or a spec file) in one of FORMATS. The environment profile comes from
    `facts` (a Facts value or a recorded file), else from this host."""
    dep = as_deployment(spec)
    if isinstance(facts, Path | str):
        facts = load_facts(facts)
    elif facts is None:
        facts = gather_facts(host=dep.host, sections=("gpus", "host"))
    r = prepare(dep, source or str(spec if not isinstance(spec, Deployment) else dep.name), facts)
    if fmt == "systemd":
        return Artefact(fmt, systemd.unit(r), r)
    if fmt == "sh":
        return Artefact(fmt, shell.script(r), r)
    if fmt == "lws":
        return Artefact(fmt, multinode.lws(r, image), r)
    if fmt == "slurm":
        return Artefact(fmt, multinode.slurm(r), r)
    raise RenderError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")


__all__ = ["FORMATS", "Artefact", "RenderError", "render"]
