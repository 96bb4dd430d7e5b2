"""The host: memory, disks, /dev/shm, limits and the port the engine wants."""

from __future__ import annotations

import os
import resource
import shutil
import socket
from pathlib import Path
from typing import Any

import psutil

GIB = 1024**3


def gather_host_facts(model_path: Path | str | None, host: str, port: int | None) -> dict[str, Any]:
    vm = psutil.virtual_memory()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    facts: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "cpus": os.cpu_count(),
        "ram_total_gib": round(vm.total / GIB, 2),
        "ram_available_gib": round(vm.available / GIB, 2),
        "nofile_soft": soft,
        "nofile_hard": hard,
        "shm_gib": _disk_gib("/dev/shm"),
        "disk_free_gib": _disk_gib(_existing_parent(Path(model_path))) if model_path else None,
        "infiniband": sorted(os.listdir("/sys/class/infiniband")) if os.path.isdir("/sys/class/infiniband") else [],
    }
    if port is not None:
        facts["port"] = port_facts(host, port)
    return facts


def _existing_parent(path: Path) -> Path:
    path = path.expanduser()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _disk_gib(path: str | Path) -> dict[str, float] | None:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    return {"path": str(path), "total": round(usage.total / GIB, 2), "free": round(usage.free / GIB, 2)}


def port_facts(host: str, port: int) -> dict[str, Any]:
    """Whether the port can be bound, and if not, which process listens on it."""
    bind_host = "0.0.0.0" if host in ("", "0.0.0.0") else host
    family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((bind_host, port))
            return {"port": port, "host": host, "free": True}
        except OSError as e:
            result: dict[str, Any] = {"port": port, "host": host, "free": False, "error": e.strerror}
    holder = port_holder(port)
    if holder:
        result["holder"] = holder
    return result


def port_holder(port: int) -> dict[str, Any] | None:
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, PermissionError):
        return None
    for c in conns:
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN and c.pid:
            try:
                proc = psutil.Process(c.pid)
                return {"pid": c.pid, "name": proc.name(), "cmdline": " ".join(proc.cmdline())[:300]}
            except psutil.Error:
                return {"pid": c.pid}
    return None
