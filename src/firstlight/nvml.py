"""A live handle on NVML for the watcher and `down`: memory and compute processes per GPU, cheaply.

Kept apart from the typed facts (facts/gpus.py, which uses it), so that commands which only sample
memory do not pay for the models. No GPU, or no driver, is a fact too: nothing here raises.
"""

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
                procs = {p.pid: (p.usedGpuMemory or 0) / GIB for p in compute_procs(handle)}
                out.append(GpuMemory(i, mem.used / GIB, mem.total / GIB, procs))
            except Exception:
                continue
        return out

    def close(self) -> None:
        if self.available:
            with contextlib.suppress(Exception):
                pynvml.nvmlShutdown()


def compute_procs(handle: Any) -> list[Any]:
    try:
        return list(pynvml.nvmlDeviceGetComputeRunningProcesses(handle))
    except Exception:
        return []
