"""A systemd unit (and its 0600 environment file for secrets) for the launch.

Quoting: systemd splits ExecStart= on whitespace and honours double quotes with C escapes; `%` starts
a specifier and `$` an environment expansion, so both are doubled unless they are a `${SECRET}` the
unit means to expand. Hardening keeps what CUDA needs: `PrivateDevices=` would hide /dev/nvidia*, and
`ProtectHome=`/`ProtectSystem=strict` would hide the caches engines write (~/.cache, the model's
directory), so neither is set; `NoNewPrivileges=yes` and `PrivateTmp=yes` are safe with GPU device files.
"""

from __future__ import annotations

import re

from firstlight.rendering.common import Rendering, env_lines

_SECRET_REF = re.compile(r"\$\{[A-Z0-9_]+\}")


def quote_word(word: str) -> str:
    """One ExecStart= word: doubled % and $ (no specifiers, no expansion), C-escaped inside double quotes."""
    if _SECRET_REF.fullmatch(word):
        return word  # expanded by systemd from EnvironmentFile=
    escaped = word.replace("%", "%%").replace("$", "$$")
    if escaped and not re.search(r'[\s"\'\\;]', escaped):
        return escaped
    escaped = escaped.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def path_setting(path: str) -> str:
    """A path setting such as WorkingDirectory=: taken whole, unquoted (systemd does not unquote it, so quotes
    would become part of the path), with specifiers: only % is doubled."""
    return path.replace("%", "%%")


def quote_env(name: str, value: str) -> str:
    """An Environment= assignment: % doubled (specifiers apply here too); quotes around the whole pair."""
    pair = f"{name}={value}".replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"')
    return f'"{pair}"'


def env_file_path(r: Rendering) -> str:
    return f"/etc/firstlight/{r.unit_name}.env"


def env_file(r: Rendering) -> str:
    """Secrets, one per line; install with mode 0600 (never put them in the unit or a log)."""
    lines = [r.header().rstrip(), "# Mode 0600, owner root. Read by the unit's EnvironmentFile=."]
    for name, value in r.secrets.items():
        if any(c in value for c in "\"'\\ $`"):
            value = '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'
        lines.append(f"{name}={value}")
    return "\n".join(lines) + "\n"


def unit(r: Rendering, working_directory: str | None = None) -> str:
    dep = r.dep
    health = f"http://{'127.0.0.1' if dep.host in ('0.0.0.0', '::') else dep.host}:{dep.port}{r.health_path}"
    lines = [
        r.header().rstrip(),
        "",
        "[Unit]",
        "Description=" + f"firstlight: {dep.name} ({dep.engine}, {dep.model.name})".replace("%", "%%"),
        "After=network-online.target nvidia-persistenced.service",
        "Wants=network-online.target",
        "# A model that fails to start five times in 30 minutes stays down for a person to look at.",
        "StartLimitIntervalSec=1800",
        "StartLimitBurst=5",
        "",
        "[Service]",
        "Type=simple",
        f"WorkingDirectory={path_setting(working_directory or str(dep.model.parent))}",
    ]
    lines += env_lines(r, lambda name, value: f"Environment={quote_env(name, value)}", comment_out="#")
    if r.secrets:
        lines.append("# Secrets live only here, mode 0600: never inline in this unit, never in a log.")
        lines.append(f"EnvironmentFile={env_file_path(r)}")
    lines += [
        "ExecStart=" + " ".join(quote_word(w) for w in r.argv),
        "# The unit counts as started once the engine answers its health check (TimeoutStartSec bounds it).",
        f"ExecStartPost=/bin/sh -c 'until curl -sf -o /dev/null {health}; do sleep 2; done'",
        f"# About 10 minutes plus the weights at 200 MB/s: a {dep.model.name} load is slow, a hang is not.",
        f"TimeoutStartSec={r.start_timeout_s}",
        "TimeoutStopSec=60",
        "Restart=on-failure",
        "RestartSec=30",
        "# Every process of the engine (workers, compile helpers) is stopped with the unit.",
        "KillMode=control-group",
        "KillSignal=SIGTERM",
        "LimitNOFILE=1048576",
        "# NCCL and RDMA pin host memory.",
        "LimitMEMLOCK=infinity",
        "NoNewPrivileges=yes",
        "PrivateTmp=yes",
        "# Not set on purpose: PrivateDevices= hides /dev/nvidia*; ProtectHome=/ProtectSystem=strict hide caches.",
        "StandardOutput=journal",
        "StandardError=journal",
        f"SyslogIdentifier={r.unit_name}",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(lines)
