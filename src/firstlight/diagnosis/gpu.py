"""The GPU a log was written on, when the log names it, and what that changes in a diagnosis.

A kernel that "cannot run on this GPU" says the same words on a GPU too old for it and on one newer than the
engine's build: CUTLASS's `Error Internal`, vLLM's `Failed to find a kernel that can implement the ScaledMM linear
layer`, TensorRT-LLM's `FP8 FMHA cannot be enabled except on Ada or Hopper or Blackwell Arch`, cuBLAS's
`NOT_SUPPORTED`. On a Blackwell-class GPU (compute capability 10.0 and up: B200, GB200, GB10, RTX 50 series, RTX
PRO) the GPU is not too old: the build has no kernels for its architecture (PyTorch's `with CUDA capability
sm_120 is not compatible with the current PyTorch installation` before it). Signatures that read both ways say
so with `on_newer_gpu`, the category they take on such a GPU.

Where a log names the GPU: PyTorch's compatibility warning (`NVIDIA GeForce RTX 5090 with CUDA capability
sm_120`), vLLM's kernel choice (`current compute capability is 120`), llama.cpp's device list (`Device 0: NVIDIA
GB10, compute capability 12.1, VMM: yes`), vLLM's symmetric-memory check (`Device capability 12.1 not supported`),
nvidia-smi's table and an engine's device line (the GPU's name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A GPU of compute capability 10.x-12.x, named as this machine's: its product name as NVIDIA's tools and the
# engines print it (after "NVIDIA"), or its capability stated as the device's. Only lines that say "NVIDIA",
# "capability" or "DGX" are searched: most lines say none of them.
NEWER_GPU = re.compile(
    r"\b(?:RTX 50[5-9]0(?: Ti)?|RTX PRO \d{4}|GB10|G?B[123]00|DGX Spark|Jetson (?:AGX )?Thor)\b"
    r"|\bcapability sm_?(?:1[0-2]\d)\b"
    r"|\b(?:current(?: device)?|[Dd]evice) (?:compute )?capability(?: is|:)? ?(?:1[0-2]\d|1[0-2]\.\d)\b"
    r"|\bcompute capability 1[0-2]\.\d, VMM"
)

# A line that names a GPU as a requirement ("NVFP4 kernels need an NVIDIA B200", "requires capability sm_100") says
# nothing of the GPU here, unless it states the current device's capability as well.
REQUIREMENT = re.compile(r"(?i)requir|\bneeds?\b|only support|supported on|at least|or (newer|later|higher)|>=")

NEWER_GPU_REMEDY = (
    "The GPU ({gpu}) is newer than the kernels this build ships: it is not too old, the engine, PyTorch or the "
    "kernel library was built without its architecture. Install a build for it (PyTorch for CUDA 12.8+ lists "
    "sm_100 and sm_120; use the engine's release or image for Blackwell), or choose a path with kernels for it "
    "(another quantization or backend)."
)


@dataclass
class GpuSeen:
    """Reads a log's lines for the GPU it ran on; `newer` is the first line that names a Blackwell-class GPU."""

    newer: tuple[int, str] | None = None

    def read(self, line_no: int, line: str) -> None:
        if self.newer is not None or not ("NVIDIA" in line or "apabilit" in line or "DGX" in line):
            return
        head = line[:2000]
        m = NEWER_GPU.search(head)
        if m and (m[0].startswith("current") or not REQUIREMENT.search(head)):
            self.newer = (line_no, m[0])
