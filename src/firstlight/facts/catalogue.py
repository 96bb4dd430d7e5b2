"""Host facts for hardware you do not have yet: `check SPEC --gpus 8xB200`.

A small catalogue of GPU models with what the checks need of each: the memory NVML reports (nominal: what
`nvidia-smi` shows on the common SKU, which is a little less than the marketing figure), the compute
capability, whether the GPUs of one host talk over NVLink or PCIe, and a typical host's memory. Facts made
from it are synthetic, and every finding that uses them says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from firstlight.errors import FactsError
from firstlight.facts.gpus import Gpu, GpuFacts, MemoryGiB
from firstlight.facts.host import Disk, HostFacts


@dataclass(frozen=True)
class GpuModel:
    name: str  # as NVML names it, which is also what the engines' tuned-kernel file names are made of
    memory_gib: float
    compute_capability: str
    nvlink: bool
    host_ram_gib_per_gpu: float  # a typical server's memory, per GPU


CATALOGUE: dict[str, GpuModel] = {
    "A100-40G": GpuModel("NVIDIA A100-SXM4-40GB", 39.4, "8.0", True, 128),
    "A100-80G": GpuModel("NVIDIA A100-SXM4-80GB", 79.3, "8.0", True, 256),
    "L40S": GpuModel("NVIDIA L40S", 44.4, "8.9", False, 128),
    "H100": GpuModel("NVIDIA H100 80GB HBM3", 79.6, "9.0", True, 256),
    "H20": GpuModel("NVIDIA H20", 95.6, "9.0", True, 256),
    "H200": GpuModel("NVIDIA H200", 140.4, "9.0", True, 256),
    "B200": GpuModel("NVIDIA B200", 179.1, "10.0", True, 256),
    "GB200": GpuModel("NVIDIA GB200", 184.0, "10.0", True, 240),
    "B300": GpuModel("NVIDIA B300 SXM6 AC", 268.0, "10.3", True, 384),
    "GB300": GpuModel("NVIDIA GB300", 268.0, "10.3", True, 240),
    "RTX PRO 6000": GpuModel("NVIDIA RTX PRO 6000 Blackwell Server Edition", 95.6, "12.0", False, 192),
    "RTX 5090": GpuModel("NVIDIA GeForce RTX 5090", 31.4, "12.0", False, 64),
    "RTX 4090": GpuModel("NVIDIA GeForce RTX 4090", 23.6, "8.9", False, 64),
}

_SPEC = re.compile(r"^\s*(?:(?P<count>\d+)\s*[xX*]\s*)?(?P<model>.+?)\s*$")


def _key(text: str) -> str:
    return re.sub(r"[\s_-]+", "", text).upper()


def parse_gpus(spec: str) -> tuple[int, GpuModel]:
    """`8xB200`, `4 x H100`, `RTX PRO 6000` (one): the count and the catalogue entry."""
    m = _SPEC.match(spec)
    wanted = _key(m.group("model")) if m else ""
    found = next((model for name, model in CATALOGUE.items() if _key(name) == wanted), None)
    if m is None or found is None:
        known = ", ".join(CATALOGUE)
        raise FactsError(f"--gpus {spec!r}: not a GPU firstlight knows; give COUNTxMODEL with MODEL one of: {known}")
    count = int(m.group("count") or 1)
    if not 1 <= count <= 72:
        raise FactsError(f"--gpus {spec!r}: the count must be 1 to 72")
    return count, found


def synthetic_gpus(count: int, model: GpuModel) -> GpuFacts:
    """`count` idle GPUs of one model on one host, linked by NVLink or by PCIe as that model usually is."""
    gpus = [
        Gpu(
            index=i,
            name=model.name,
            compute_capability=model.compute_capability,
            memory=MemoryGiB(total_gib=model.memory_gib, used_gib=0.0, free_gib=model.memory_gib),
            nvlinks_active=18 if model.nvlink else 0,
        )
        for i in range(count)
    ]
    link = "NV" if model.nvlink else "PIX"
    topology = [["X" if a == b else link for b in range(count)] for a in range(count)]
    return GpuFacts(available=True, gpus=gpus, topology=topology)


def synthetic_host(count: int, model: GpuModel) -> HostFacts:
    """A typical server for those GPUs: its memory, a /dev/shm of half of it, and a generous open-files limit."""
    ram = model.host_ram_gib_per_gpu * count
    return HostFacts(
        hostname=f"{count}x{model.name} (synthetic)",
        ram_total_gib=ram,
        ram_available_gib=ram,
        nofile_soft=1048576,
        nofile_hard=1048576,
        shm_gib=Disk(path="/dev/shm", total=ram / 2, free=ram / 2),
    )
