"""A native crash told by where it happened.

A process that dies of a signal or of glibc's heap checks (`*** SIGSEGV received at time=...`, `free(): double free
detected in tcache 2`, `Fatal Python error: Segmentation fault`) says only that it died. The stack its crash handler
prints next says where: Abseil's `PC: @ 0x... (unknown) function` (Ray's workers), Python's faulthandler
`File "...", line N in function` (innermost first), a backtrace's `#0 0x... in function`. When the first frame past
the signal machinery is NCCL's (a `nccl*` function, vLLM's and SGLang's pynccl wrappers), a collective crashed:
the NCCL library, its network transport or its environment, not the model."""

from __future__ import annotations

import re
from dataclasses import dataclass

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


@dataclass
class _Crash:
    """One process's crash whose stack is still being read."""

    notice: tuple[int, str]  # the line that tells it
    where: tuple[int, str] | None = None  # its `PC:` line, which names the function a signal hit
    native: bool = False  # its first native frame was read
    python: bool = False  # its innermost Python frame was read


class NativeCrash:
    """Feed every line; `read` returns a candidate at the line that tells a crash once its stack shows it happened
    in NCCL: its first native frame past the signal machinery, or its innermost Python frame (the call into it).
    Each process's crash is read on its own: ranks that die together print their notices and stacks interleaved."""

    def __init__(self) -> None:
        self._open: dict[str, _Crash] = {}  # by the process a line's prefix names ("" where none does)
        self._last = ""  # the process of the latest notice, for stack lines that name none

    def read(self, line_no: int, line: str) -> Candidate | None:
        if ("***" in line or "()" in line or "Fatal" in line or "corrupt" in line) and NOTICE.search(line):
            # one process's notices are one crash (glibc's heap check, the SIGABRT it raises, the handler's copy of
            # it, faulthandler's `Fatal Python error`); a later one of the same process is another crash
            process = self._last = _process(line)
            crash = self._open.get(process)
            if crash is None or line_no - crash.notice[0] > WITHIN:
                self._open[process] = _Crash((line_no, line))
            return None
        if not self._open or ("PC: @" not in line and 'File "' not in line and "#" not in line):
            return None
        process = _process(line) or self._last
        crash = self._open.get(process)
        if crash is None or line_no - crash.notice[0] > WITHIN:
            return None
        frame = FRAME.search(line)
        if frame is None:
            return None
        if frame["fn"] is not None:
            if crash.python:
                return None
            crash.python, function = True, frame["fn"] + " " + frame["path"]
        else:
            function = frame["pc"] or frame["bt"] or ""
            if crash.native or SIGNAL_MACHINERY.fullmatch(function):
                return None
            crash.native = True
            if frame["pc"] is not None:
                crash.where = (line_no, line)
        if not IN_NCCL.search(function):
            return None
        del self._open[process]
        # a signal's notice names no place; the handler's `PC:` line names the function the signal hit
        told_no, told = (
            crash.where if crash.where is not None and "received at time" in crash.notice[1] else crash.notice
        )
        sig, why = NATIVE_CRASH_IN_NCCL, f"a native crash whose stack shows it happened in NCCL ({function})"
        return Candidate(sig.weight, told_no, told, sig.category, sig, {}, [], [], reasons=(why,))


def _process(line: str) -> str:
    m = _PROCESS.search(line[:200])
    return m[0] if m else ""
