"""The embedded supervisor: the engine in its own session and process group, its output whole in a file."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from firstlight.deployment import Deployment
    from firstlight.engines import EngineAdapter


@dataclass
class Started:
    proc: subprocess.Popen[bytes]
    argv: list[str]

    @property
    def pid(self) -> int:
        return self.proc.pid


def engine_env(dep: Deployment, adapter: EngineAdapter) -> dict[str, str]:
    env = dict(os.environ)
    env.update(adapter.default_env)
    env.update(dep.env)
    # Unbuffered Python output: the watcher must see a line when the engine writes it.
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def start_engine(dep: Deployment, adapter: EngineAdapter, log_path: Path) -> Started:
    argv = adapter.argv(dep)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab", buffering=0) as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=engine_env(dep, adapter),
            start_new_session=True,  # its own session and process group: `down` signals the group
        )
    return Started(proc, argv)


def group_members(pgid: int) -> list[psutil.Process]:
    """Every live process of the engine's group or session (children may start their own group)."""
    members = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if os.getpgid(proc.pid) == pgid or os.getsid(proc.pid) == pgid:
                members.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return members


def stop_group(pgid: int, grace: float = 15.0) -> list[int]:
    """SIGTERM the group, SIGKILL what is left after `grace` seconds; return pids still alive after that."""
    members = group_members(pgid)
    if not members:
        return []
    _signal_all(pgid, members, signal.SIGCONT)  # a stopped process cannot act on SIGTERM
    _signal_all(pgid, members, signal.SIGTERM)
    _, alive = psutil.wait_procs(members, timeout=grace)
    if alive or group_members(pgid):
        _signal_all(pgid, group_members(pgid), signal.SIGKILL)
        deadline = time.monotonic() + 5
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
    return [p.pid for p in group_members(pgid)]


def _signal_all(pgid: int, members: list[psutil.Process], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for proc in members:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)
