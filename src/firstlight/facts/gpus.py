"""GPUs through NVML. No GPU, or no driver, is a fact too: every function returns, never raises."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from firstlight.nvml import GIB, Nvml, compute_procs, pynvml


class GpuProcess(BaseModel):
    """A compute process holding memory on a GPU, with who it is where the driver lets us see."""

    model_config = ConfigDict(extra="ignore")
    pid: int
    used_gib: float = 0.0
    name: str | None = None
    cmdline: str | None = None
    user: str | None = None

    @property
    def who(self) -> str:
        return self.cmdline or self.name or "unknown"


class MemoryGiB(BaseModel):
    model_config = ConfigDict(extra="ignore")
    total_gib: float
    used_gib: float
    free_gib: float


class Gpu(BaseModel):
    model_config = ConfigDict(extra="ignore")
    index: int
    name: str = ""
    uuid: str = ""
    pci_bus_id: str = ""
    compute_capability: str | None = None
    memory: MemoryGiB
    numa_node: int | None = None
    nvlinks_active: int = 0
    processes: list[GpuProcess] = Field(default_factory=list)

    @property
    def sm_major(self) -> int | None:
        return int(self.compute_capability.split(".")[0]) if self.compute_capability else None

    def is_named(self, ident: str) -> bool:
        """Whether CUDA_VISIBLE_DEVICES' entry `ident` (an index, a UUID or its prefix) names this GPU."""
        ident = ident.strip()
        if ident.isdigit():
            return int(ident) == self.index
        return (
            bool(ident)
            and bool(self.uuid)
            and self.uuid.startswith(ident if ident.startswith("GPU-") else f"GPU-{ident}")
        )


class GpuFacts(BaseModel):
    """Every GPU with its memory and compute processes, and the links between GPUs (`nvidia-smi topo -m` terms)."""

    model_config = ConfigDict(extra="ignore")
    available: bool = False
    error: str | None = None
    driver: str | None = None
    cuda_driver: str | None = None
    gpus: list[Gpu] = Field(default_factory=list)
    topology: list[list[str]] = Field(default_factory=list)

    def visible(self, cuda_visible_devices: str | None) -> list[Gpu]:
        """The GPUs a process sees under CUDA_VISIBLE_DEVICES (indices or UUIDs, spaces allowed), in its order."""
        if cuda_visible_devices is None:
            return list(self.gpus)
        wanted = [w.strip() for w in cuda_visible_devices.split(",") if w.strip()]
        return [g for w in wanted for g in self.gpus if g.is_named(w)]


_TOPOLOGY = {0: "SELF", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def gather_gpu_facts() -> GpuFacts:
    """Every GPU with its memory and compute processes, and the links between GPUs."""
    nvml = Nvml()
    if not nvml.available:
        return GpuFacts(available=False, error=nvml.error)
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.count)]
        return GpuFacts(
            available=True,
            driver=_str(_try(pynvml.nvmlSystemGetDriverVersion)),
            cuda_driver=_cuda_version(_try(pynvml.nvmlSystemGetCudaDriverVersion_v2)),
            gpus=[Gpu.model_validate(_gpu(i, h)) for i, h in enumerate(handles)],
            topology=[[_link(handles, a, b) for b in range(len(handles))] for a in range(len(handles))],
        )
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
        "processes": [_process(p) for p in compute_procs(handle)],
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
