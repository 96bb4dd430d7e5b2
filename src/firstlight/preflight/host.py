"""The host: the port, the address the server binds, disk, /dev/shm and the open-files limit."""

from __future__ import annotations

from firstlight.deployment import Deployment
from firstlight.engines import EngineAdapter
from firstlight.facts import Facts
from firstlight.preflight.finding import Finding, fail, ok, warn

MIN_DISK_GIB = 20
MIN_SHM_GIB = 1
MIN_NOFILE = 65536


def check_host(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    host = facts.host
    out = []
    port = host.port
    if port is not None and not port.free:
        holder = port.holder
        who = f" by pid {holder.pid} ({holder.cmdline or holder.name})" if holder else ""
        out.append(
            fail(
                "port",
                f"port {dep.port} on {dep.host} is in use{who}",
                f"Stop that process, or set another `port:` in the spec. Find the holder: `ss -ltnp | grep "
                f":{dep.port}`.",
                **port.model_dump(exclude_none=True),
            )
        )
    elif port is not None:
        out.append(ok("port", f"port {dep.port} on {dep.host} is free"))
    if dep.host in ("0.0.0.0", "::", "") and not engine.api_key(dep):
        out.append(
            warn(
                "bind",
                f"the server binds {dep.host or 'all interfaces'} without an API key",
                f"Bind 127.0.0.1, or set an API key (--{engine.api_key_flag}, from an environment file, not the spec).",
            )
        )
    disk = host.disk_free_gib
    if disk is not None and disk.free < MIN_DISK_GIB:
        out.append(
            warn(
                "disk",
                f"{disk.free:.1f} GiB free at {disk.path}",
                "Engines write compile and kernel caches next to the model and in ~/.cache; free some space.",
                **disk.model_dump(),
            )
        )
    shm = host.shm_gib
    world = dep.parallel.tp * dep.parallel.pp
    if world > 1 and shm is not None and shm.total < MIN_SHM_GIB:
        out.append(
            fail(
                "shm",
                f"/dev/shm is {shm.total * 1024:.0f} MiB; NCCL needs more for {world} ranks",
                "Give the container more shared memory (docker --shm-size=16g or --ipc=host; on Kubernetes an "
                "emptyDir with medium: Memory at /dev/shm).",
                **shm.model_dump(),
            )
        )
    if host.nofile_soft is not None and host.nofile_soft < MIN_NOFILE:
        out.append(
            warn(
                "open_files",
                f"the open-files limit is {host.nofile_soft}; high concurrency can hit 'Too many open files'",
                f"Raise it (ulimit -n {MIN_NOFILE}, LimitNOFILE= in a systemd unit).",
                nofile=host.nofile_soft,
            )
        )
    if not out:
        out.append(ok("host", "port, disk, /dev/shm and limits are fine"))
    return out
