"""The host: memory, disks, /dev/shm, limits and the port the engine wants."""

from __future__ import annotations

import os
import resource
import shutil
import socket
from pathlib import Path

import psutil
from pydantic import BaseModel, ConfigDict, Field

GIB = 1024**3


class Disk(BaseModel):
    model_config = ConfigDict(extra="ignore")
    path: str
    total: float
    free: float


class PortHolder(BaseModel):
    model_config = ConfigDict(extra="ignore")
    pid: int
    name: str | None = None
    cmdline: str | None = None


class PortFacts(BaseModel):
    model_config = ConfigDict(extra="ignore")
    port: int
    host: str
    free: bool
    error: str | None = None
    holder: PortHolder | None = None


class HostFacts(BaseModel):
    """The host: memory, disks, /dev/shm, limits, InfiniBand adapters, and the port the engine wants."""

    model_config = ConfigDict(extra="ignore")
    hostname: str = ""
    cpus: int | None = None
    ram_total_gib: float | None = None
    ram_available_gib: float | None = None
    nofile_soft: int | None = None
    nofile_hard: int | None = None
    shm_gib: Disk | None = None
    disk_free_gib: Disk | None = None
    infiniband: list[str] = Field(default_factory=list)
    port: PortFacts | None = None


def gather_host_facts(model_path: Path | str | None, host: str, port: int | None) -> HostFacts:
    vm = psutil.virtual_memory()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return HostFacts(
        hostname=socket.gethostname(),
        cpus=os.cpu_count(),
        ram_total_gib=round(vm.total / GIB, 2),
        ram_available_gib=round(vm.available / GIB, 2),
        nofile_soft=soft,
        nofile_hard=hard,
        shm_gib=_disk_gib("/dev/shm"),
        disk_free_gib=_disk_gib(_existing_parent(Path(model_path))) if model_path else None,
        infiniband=sorted(os.listdir("/sys/class/infiniband")) if os.path.isdir("/sys/class/infiniband") else [],
        port=port_facts(host, port) if port is not None else None,
    )


def _existing_parent(path: Path) -> Path:
    path = path.expanduser()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _disk_gib(path: str | Path) -> Disk | None:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    return Disk(path=str(path), total=round(usage.total / GIB, 2), free=round(usage.free / GIB, 2))


def port_facts(host: str, port: int) -> PortFacts:
    """Whether the port can be bound, and if not, which process listens on it."""
    bind_host = "0.0.0.0" if host in ("", "0.0.0.0") else host
    family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        # as the engines' servers bind (uvicorn sets it): a port whose last server's connections linger in
        # TIME_WAIT is free to them; one that something listens on is not
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((bind_host, port))
            return PortFacts(port=port, host=host, free=True)
        except OSError as e:
            error = e.strerror
    return PortFacts(port=port, host=host, free=False, error=error, holder=port_holder(port))


def port_holder(port: int) -> PortHolder | None:
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, PermissionError):
        return None
    for c in conns:
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN and c.pid:
            try:
                proc = psutil.Process(c.pid)
                return PortHolder(pid=c.pid, name=proc.name(), cmdline=" ".join(proc.cmdline())[:300])
            except psutil.Error:
                return PortHolder(pid=c.pid)
    return None
