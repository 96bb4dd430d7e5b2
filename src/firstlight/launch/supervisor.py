"""The embedded supervisor: the engine in its own session and process group, its output whole in a file."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import psutil

# The watcher's environment variable that carries a launch's secrets (the store keeps them redacted).
SECRETS_VAR = "FIRSTLIGHT_LAUNCH_SECRETS"

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
    with private_log(log_path) as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=engine_env(dep, adapter),
            start_new_session=True,  # its own session and process group: `down` signals the group
        )
    return Started(proc, argv)


def process_start_time(pid: int) -> float | None:
    """When a process started (seconds since the epoch), or None when it is gone."""
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True  # another user's process: it exists


def group_reused(pgid: int, leader_start: float | None) -> psutil.Process | None:
    """The process now holding `pgid` as its pid when it is not the group leader that was started: then the
    number belongs to someone else and must not be signalled. While any member of a group is alive its id
    cannot be reused, so a group whose leader is gone is still the launch's own."""
    if leader_start is None:
        return None  # a launch recorded before start times were
    try:
        holder = psutil.Process(pgid)
        started = holder.create_time()
    except psutil.Error:
        return None
    return holder if abs(started - leader_start) > 0.5 else None


def launch_members(pgid: int | None, leader_start: float | None) -> list[psutil.Process]:
    """The live processes of a launch's group; none when the group id now belongs to someone else."""
    if pgid is None or group_reused(pgid, leader_start) is not None:
        return []
    return group_members(pgid)


def private_log(path: Path) -> BinaryIO:
    """A log opened for appending, readable by its owner only (mode 0600): engines print their arguments."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab", buffering=0)


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
