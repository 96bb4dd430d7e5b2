"""A standalone script that reproduces the launch exactly: for a bug report, or a machine without firstlight."""

from __future__ import annotations

import shlex

from firstlight.rendering.common import Rendering, env_lines, shell_join


def script(r: Rendering) -> str:
    dep = r.dep
    lines = [
        "#!/usr/bin/env bash",
        r.header().rstrip(),
        f"# {dep.name}: {dep.engine} serving {dep.model} on {dep.host}:{dep.port}.",
        "set -euo pipefail",
        "",
    ]
    lines += env_lines(r, lambda name, value: f"export {name}={shlex.quote(value)}")
    if r.secrets:
        names = " ".join(sorted(r.secrets))
        lines += [
            "",
            f"# Secrets are not in this script: set {names} in the environment, or put them in a",
            "# file (mode 0600) named by FIRSTLIGHT_ENV_FILE.",
            'if [ -n "${FIRSTLIGHT_ENV_FILE:-}" ]; then set -a; . "$FIRSTLIGHT_ENV_FILE"; set +a; fi',
        ]
        lines += [f': "${{{name}:?set {name} (a secret, not stored in this script)}}"' for name in sorted(r.secrets)]
    lines += ["", f"exec {shell_join(r.argv)}", ""]
    return "\n".join(lines)
