"""A native crash told by where it happened.

A process that dies of a signal or of glibc's heap checks (`*** SIGSEGV received at time=...`, `free(): double free
detected in tcache 2`, `Fatal Python error: Segmentation fault`) says only that it died. The stack its crash handler
prints next says where: Abseil's `PC: @ 0x... (unknown) function` (Ray's workers), Python's faulthandler
`File "...", line N in function` (innermost first), a backtrace's `#0 0x... in function`. When the first frame past
the signal machinery is NCCL's (a `nccl*` function, vLLM's and SGLang's pynccl wrappers), a collective crashed:
the NCCL library, its network transport or its environment, not the model."""

from __future__ import annotations

import re

from firstlight.diagnosis.candidate import Candidate
from firstlight.diagnosis.signatures import Signature

NOTICE = re.compile(
    r"\*\*\* SIG[A-Z]+ received at time=|\b(?:free|malloc|realloc)\(\): \w|double free or corruption"
    r"|corrupted (?:size vs\. prev_size|double-linked list)"
    r"|Fatal Python error: (?:Segmentation fault|Aborted|Bus error)"
)
FRAME = re.compile(
    r"PC: @\s+0x[0-9a-f]+\s+\S+\s+(?P<pc>[\w:~]+)|File \"(?P<path>[^\"]+)\", line \d+ in (?P<fn>\w+)"
    r"|#\d+\s+0x[0-9a-f]+ in (?P<bt>[\w:~]+)"
)
# the frames a signal passes through on its way to the handler, which say nothing of where the crash happened
SIGNAL_MACHINERY = re.compile(r"unknown|pthread_kill|raise|abort|gsignal|__\w+|\w*[Ss]ignal\w*")
IN_NCCL = re.compile(r"(?i)nccl")
WITHIN = 40  # the crash handler's stack follows its notice this closely
_PROCESS = re.compile(r"pid=\d+|\brank ?\d+|\[rank\d+\]")  # which process a line is from, where its prefix says

NATIVE_CRASH_IN_NCCL = Signature(
    "native_crash_in_nccl",
    "nccl_error",
    0.6,
    NOTICE,
    "A process crashed inside NCCL (the first frame of its stack is NCCL's): a collective's library, transport or "
    "environment failed, not the model. Rerun with NCCL_DEBUG=INFO to see the transport and the rank; check that "
    "every node runs the same NCCL (the engine's pinned nvidia-nccl), the network settings (NCCL_SOCKET_IFNAME, "
    "NCCL_IB_HCA, NCCL_IB_DISABLE=1 to rule InfiniBand out), and try without CUDA graphs (--enforce-eager) or "
    "with NCCL_P2P_DISABLE=1 to find the path that fails.",
    source="NVIDIA/nccl (its collectives and ncclCommInitRank, called through vllm-project/vllm:vllm/distributed/"
    "device_communicators/pynccl_wrapper.py and SGLang's copy); the crash handlers: Abseil's failure signal handler "
    "in Ray's workers, CPython's faulthandler, glibc's malloc checks",
    versions="NCCL 2.x",
    example="*** SIGSEGV received at time=1746566409 on cpu 131 ***",
)


class NativeCrash:
    """Feed every line; `read` returns a candidate at the line that tells a crash once its stack shows it happened
    in NCCL: its first native frame past the signal machinery, or its innermost Python frame (the call into it)."""

    def __init__(self) -> None:
        self._notice: tuple[int, str] | None = None  # the last crash notice whose stack is still being read
        self._where: tuple[int, str] | None = None  # its `PC:` line, which names the function a signal hit
        self._native = self._python = False  # its first native and its innermost Python frame were read

    def read(self, line_no: int, line: str) -> Candidate | None:
        if ("***" in line or "()" in line or "Fatal" in line or "corrupt" in line) and NOTICE.search(line):
            # one process's notices are one crash (glibc's heap check, the SIGABRT it raises, the handler's copy of
            # it, faulthandler's `Fatal Python error`); another process's, or a later one, is another crash
            if (
                self._notice is None
                or _process(line) != _process(self._notice[1])
                or line_no - self._notice[0] > WITHIN
            ):
                self._notice, self._where, self._native, self._python = (line_no, line), None, False, False
            return None
        if self._notice is None or ("PC: @" not in line and 'File "' not in line and "#" not in line):
            return None
        frame = FRAME.search(line) if line_no - self._notice[0] <= WITHIN else None
        if frame is None:
            return None
        if frame["fn"] is not None:
            if self._python:
                return None
            self._python, function = True, frame["fn"] + " " + frame["path"]
        else:
            function = frame["pc"] or frame["bt"] or ""
            if self._native or SIGNAL_MACHINERY.fullmatch(function):
                return None
            self._native = True
            if frame["pc"] is not None:
                self._where = (line_no, line)
        if not IN_NCCL.search(function):
            return None
        notice, self._notice = self._notice, None
        # a signal's notice names no place; the handler's `PC:` line names the function the signal hit
        told_no, told = self._where if self._where is not None and "received at time" in notice[1] else notice
        sig, why = NATIVE_CRASH_IN_NCCL, f"a native crash whose stack shows it happened in NCCL ({function})"
        return Candidate(sig.weight, told_no, told, sig.category, sig, {}, [], [], reasons=(why,))


def _process(line: str) -> str:
    m = _PROCESS.search(line[:200])
    return m[0] if m else ""
