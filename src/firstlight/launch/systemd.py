"""The systemd supervisor: the engine as a unit, its journal followed by the same watcher.

The unit and its 0600 environment file are the ones `firstlight render --format systemd` writes. The
journal (`journalctl -f -u UNIT -o cat`) is copied into the launch's log file, so the phase machine,
the diagnosis and `firstlight logs` work as with the embedded supervisor; the unit's end is read from
`systemctl show` (ActiveState and the main process's exit status).
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from firstlight.deployment import Deployment
from firstlight.errors import SystemdUnavailable
from firstlight.rendering.common import unit_name

UNIT_DIR = Path("/etc/systemd/system")


def systemd_running() -> bool:
    return Path("/run/systemd/system").is_dir()


def require_systemd() -> None:
    if not systemd_running():
        raise SystemdUnavailable(
            "systemd is not running on this host (a container or CI?): use `supervisor: "
            "embedded`, or `firstlight render --format systemd` to install the unit elsewhere"
        )


@dataclass
class Unit:
    name: str
    path: Path


def install(dep: Deployment, source: str) -> Unit:
    """Write the unit (and the secrets file, 0600), reload systemd, and start the unit without waiting."""
    from firstlight.rendering import render  # the unit is only rendered when one is installed

    require_systemd()
    unit = render(dep, "systemd", source=source)
    name = unit.rendering.unit_name
    path = UNIT_DIR / f"{name}.service"
    unit.write(path, Path(unit.env_install_path))  # the unit reads its secrets from /etc/firstlight/<unit>.env
    _systemctl("daemon-reload")
    _systemctl("reset-failed", f"{name}.service", check=False)
    _systemctl("start", "--no-block", f"{name}.service")
    return Unit(name, path)


def follow_journal(unit: str, log_path: Path) -> subprocess.Popen[bytes]:
    """The unit's journal from now on, appended to the launch's log file as it is written."""
    log = open(log_path, "ab", buffering=0)  # noqa: SIM115 - owned by the child for its whole life
    return subprocess.Popen(
        ["journalctl", "-f", "-o", "cat", "--since", "now", "-u", f"{unit}.service"],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )


def state(unit: str) -> dict[str, str]:
    out = _systemctl(
        "show", f"{unit}.service", "-p", "ActiveState,SubState,MainPID,ExecMainStatus,ExecMainCode", capture=True
    )
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def wait_for_end(unit: str, poll_s: float = 0.25) -> int:
    """Block until the unit's main process has ended (failed or inactive); return its exit status."""
    seen_active = False
    while True:
        s = state(unit)
        active = s.get("ActiveState", "")
        if active in ("activating", "active", "reloading", "deactivating"):
            seen_active = True
        elif seen_active or active == "failed":
            return int(s.get("ExecMainStatus") or 0)
        time.sleep(poll_s)


def stop(unit: str) -> None:
    _systemctl("stop", f"{unit}.service", check=False)


def _systemctl(*args: str, check: bool = True, capture: bool = False) -> str:
    res = subprocess.run(["systemctl", *args], capture_output=True, text=True)
    if check and res.returncode != 0:
        raise SystemdUnavailable(f"systemctl {' '.join(args)} failed: {res.stderr.strip()[:300]}")
    return res.stdout if capture else ""


__all__ = ["SystemdUnavailable", "install", "require_systemd", "stop", "systemd_running", "unit_name"]
