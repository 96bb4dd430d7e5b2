"""GPUs through NVML. No GPU, or no driver, is a fact too: every function returns, never raises."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

try:
    import pynvml
except ImportError:  # nvidia-ml-py is a dependency, but a broken install must not break the watcher
    pynvml = None  # type: ignore[assignment]

GIB = 1024**3


@dataclass
class GpuMemory:
    index: int
    used_gib: float
    total_gib: float
    # pid → GiB held by that compute process, where the driver lets us see it
    processes: dict[int, float]


class Nvml:
    """A handle on NVML for the life of a watcher; `available` is False when there is no GPU or driver."""

    def __init__(self) -> None:
        self.available = False
        self.error: str | None = None
        if pynvml is None:
            self.error = "nvidia-ml-py is not installed"
            return
        try:
            pynvml.nvmlInit()
            self.count = pynvml.nvmlDeviceGetCount()
            self.available = self.count > 0
        except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, …
            self.error = str(e) or type(e).__name__

    def memory(self) -> list[GpuMemory]:
        if not self.available:
            return []
        out = []
        for i in range(self.count):
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
                procs = {p.pid: (p.usedGpuMemory or 0) / GIB for p in _compute_procs(handle)}
                out.append(GpuMemory(i, mem.used / GIB, mem.total / GIB, procs))
            except Exception:
                continue
        return out

    def close(self) -> None:
        if self.available:
            with contextlib.suppress(Exception):
                pynvml.nvmlShutdown()


def _compute_procs(handle: Any) -> list[Any]:
    try:
        return list(pynvml.nvmlDeviceGetComputeRunningProcesses(handle))
    except Exception:
        return []


_TOPOLOGY = {0: "SELF", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def gather_gpu_facts() -> dict[str, Any]:
    """Every GPU with its memory and compute processes, and the links between GPUs, as JSON-ready data."""
    nvml = Nvml()
    if not nvml.available:
        return {"available": False, "error": nvml.error, "gpus": []}
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.count)]
        facts: dict[str, Any] = {
            "available": True,
            "driver": _str(_try(pynvml.nvmlSystemGetDriverVersion)),
            "cuda_driver": _cuda_version(_try(pynvml.nvmlSystemGetCudaDriverVersion_v2)),
            "gpus": [_gpu(i, h) for i, h in enumerate(handles)],
        }
        facts["topology"] = [[_link(handles, a, b) for b in range(len(handles))] for a in range(len(handles))]
        return facts
    finally:
        nvml.close()


def _gpu(index: int, handle: Any) -> dict[str, Any]:
    mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
    cc = _try(pynvml.nvmlDeviceGetCudaComputeCapability, handle)
    pci = _try(pynvml.nvmlDeviceGetPciInfo, handle)
    bus_id = _str(pci.busId) if pci is not None else ""
    return {
        "index": index,
        "name": _str(_try(pynvml.nvmlDeviceGetName, handle)),
        "uuid": _str(_try(pynvml.nvmlDeviceGetUUID, handle)),
        "pci_bus_id": bus_id,
        "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None,
        "memory": {
            "total_gib": round(mem.total / GIB, 3),
            "used_gib": round(mem.used / GIB, 3),
            "free_gib": round(mem.free / GIB, 3),
        },
        "numa_node": _numa_node(handle, bus_id),
        "nvlinks_active": _nvlinks_active(handle),
        "processes": [_process(p) for p in _compute_procs(handle)],
    }


def _process(p: Any) -> dict[str, Any]:
    import psutil

    info: dict[str, Any] = {"pid": p.pid, "used_gib": round((p.usedGpuMemory or 0) / GIB, 3)}
    try:
        proc = psutil.Process(p.pid)
        info["name"] = proc.name()
        info["cmdline"] = " ".join(proc.cmdline())[:500]
        info["user"] = proc.username()
    except Exception:  # another container's pid, or gone already
        info["name"] = None
    return info


def _link(handles: list[Any], a: int, b: int) -> str:
    """How GPU a reaches GPU b, in `nvidia-smi topo -m` terms: NV (NVLink, direct or through an
    NVSwitch), else the PCIe level of their common ancestor (PIX, PXB, PHB, NODE, SYS)."""
    if a == b:
        return "X"
    nvlink_index = getattr(pynvml, "NVML_P2P_CAPS_INDEX_NVLINK", 3)
    status = _try(pynvml.nvmlDeviceGetP2PStatus, handles[a], handles[b], nvlink_index)
    if status == getattr(pynvml, "NVML_P2P_STATUS_OK", 0):
        return "NV"
    level = _try(pynvml.nvmlDeviceGetTopologyCommonAncestor, handles[a], handles[b])
    return _TOPOLOGY.get(level, "?") if level is not None else "?"


def _nvlinks_active(handle: Any) -> int:
    active = 0
    for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            active += pynvml.nvmlDeviceGetNvLinkState(handle, link) == 1
        except Exception:
            break
    return active


def _numa_node(handle: Any, bus_id: str) -> int | None:
    node = _try(getattr(pynvml, "nvmlDeviceGetNumaNodeId", lambda h: None), handle)
    if node is not None:
        return int(node)
    try:
        with open(f"/sys/bus/pci/devices/{bus_id.lower()[-12:]}/numa_node") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _cuda_version(v: int | None) -> str | None:
    return f"{v // 1000}.{(v % 1000) // 10}" if v else None


def _str(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v) if v is not None else ""


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        return None
