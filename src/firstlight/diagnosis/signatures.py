"""Failure signatures, loaded from signatures.yaml: data, not code."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

from firstlight.engines import ENGINES

CATEGORIES: tuple[str, ...] = (
    "gpu_memory_imbalance",
    "cuda_oom",
    "insufficient_kv_cache",
    "unsupported_quantization_format",
    "library_version_mismatch",
    "attention_backend_unsupported",
    "nccl_error",
    "port_in_use",
    "model_arch_unsupported",
    "trust_remote_code",
    "missing_model_files",
    "cuda_arch_mismatch",
    "cuda_driver_mismatch",
    "import_dependency_error",
    "invalid_config",
    "hang_timeout",
    "hardware_unsupported",
    "unknown",
)


@dataclass(frozen=True)
class Signature:
    id: str
    category: str
    weight: float
    pattern: re.Pattern[str]
    remedy: str
    source: str = ""  # the engine source file(s) the message comes from
    versions: str = ""  # the engine versions that print it
    example: str = ""  # one line it matches, as an engine prints it
    request: bool = False  # one request's failure: after the engine's ready line the server goes on serving
    detailed: bool = False  # its message goes on in the next lines, which may name the cause (NCCL's "Last error:")
    # the pattern in any case: engines change a message's case between versions and between their parts
    # ("Failed to connect to NATS" in one, "failed to connect to NATS" in another)
    folded: re.Pattern[str] | None = None
    # the category on a GPU newer than the engine's build (gpu.py): "cannot run on this GPU" is then the build's
    on_newer_gpu: str | None = None
    # a cause in plain words (no engine's own message): read only where no other signature names the line
    plain: bool = False
    # another signature that tells the line when the traceback raising it passed through certain code (a frame's
    # `path in function` matches): "No CUDA GPUs are available" inside a Ray actor is the actor's placement
    in_traceback: tuple[tuple[re.Pattern[str], str], ...] = ()

    def search(self, line: str) -> re.Match[str] | None:
        """The pattern's match on the line, in its own case or else in any case."""
        return self.pattern.search(line) or (self.folded.search(line) if self.folded is not None else None)

    def remedy_for(self, groups: dict[str, str | None]) -> str:
        return self.remedy.format_map(_Captured(groups)).strip()


class _Captured(dict):  # type: ignore[type-arg]
    """Template values: a group the line did not capture reads as <name>, never a KeyError."""

    def __init__(self, groups: dict[str, str | None]) -> None:
        super().__init__({k: v for k, v in groups.items() if v is not None})

    def __missing__(self, key: str) -> str:
        return f"<{key}>"


@cache
def load_signatures() -> tuple[Signature, ...]:
    text = resources.files("firstlight.diagnosis").joinpath("signatures.yaml").read_text()
    raw = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    out = []
    for entry in raw:
        _category(entry, "category")
        out.append(
            Signature(
                entry["id"],
                entry["category"],
                float(entry["weight"]),
                re.compile(entry["pattern"]),
                " ".join(entry["remedy"].split()),
                entry.get("source", ""),
                entry.get("versions", ""),
                entry.get("example", ""),
                _flag(entry, "request"),
                _flag(entry, "detailed"),
                None if _tests_case(entry["pattern"]) else re.compile(entry["pattern"], re.IGNORECASE),
                _category(entry, "on_newer_gpu"),
                _flag(entry, "plain"),
                tuple((re.compile(frames), other) for other, frames in entry.get("in_traceback", {}).items()),
            )
        )
    known = {sig.id for sig in out}
    for sig in out:
        for _, other in sig.in_traceback:
            if other not in known:
                raise ValueError(f"signature {sig.id}: `in_traceback` names no signature {other}")
    return tuple(out)


@cache
def signatures_by_id() -> dict[str, Signature]:
    return {sig.id: sig for sig in load_signatures()}


# a character class of capitals alone (`[A-Z]\w+Error`, `cu[A-Z]\w+`): the pattern itself tells by case; one inside
# a group that keeps its case whatever the flags (`(?-i:[A-Z]\w+_\w+=)`, an environment variable) does not
_CASE_CLASS = re.compile(r"\[(?![^\]]*a-z)[^\]]*A-Z[^\]]*\]")
_CASE_KEPT = re.compile(r"\(\?-i:[^()]*\)")


def _tests_case(pattern: str) -> bool:
    """Whether a pattern's case is part of what it matches, so that it must not be folded."""
    return _CASE_CLASS.search(_CASE_KEPT.sub("", pattern)) is not None


def heaviest(signatures: tuple[Signature, ...], line: str) -> Signature | None:
    """The heaviest signature that names the line in its own case or, when none does, in any case; one in plain
    words only where no engine's own message does (an engine's specific wording, however broad its weight, knows
    better than the words it is made of)."""
    return (
        _heaviest(signatures, line, folded=False, plain=False)
        or _heaviest(signatures, line, folded=True, plain=False)
        or _heaviest(signatures, line, folded=False, plain=True)
    )


def _heaviest(signatures: tuple[Signature, ...], line: str, folded: bool, plain: bool) -> Signature | None:
    best: Signature | None = None
    for sig in signatures:
        if sig.plain != plain or (best is not None and sig.weight <= best.weight):
            continue
        pattern = sig.folded if folded and sig.folded is not None else sig.pattern
        if pattern.search(line):
            best = sig
    return best


def _category(entry: dict, name: str) -> str | None:
    value = entry.get(name)
    if value is not None and value not in CATEGORIES:
        raise ValueError(f"signature {entry['id']}: unknown category {value} in `{name}`")
    return value


def _flag(entry: dict, name: str) -> bool:
    value = entry.get(name, False)
    if not isinstance(value, bool):
        raise ValueError(f"signature {entry['id']}: `{name}` must be true or false, not {value!r}")
    return value


# An exception as Python prints it: `torch.OutOfMemoryError: …`, `AssertionError`, or any class with its module
# path (`huggingface_hub.errors.OfflineModeIsEnabled: …`).
EXCEPTION_LINE = re.compile(
    r"(?:^|[\s|:\]\)>-])(?P<exc>(?:[a-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit)|Exception(?=:\s)"
    r"|(?:[a-z_]\w*\.)+[A-Z]\w+(?=:\s))"
    r"(?::\s*(?P<msg>.*))?$"
)

# Lines that only say something failed elsewhere: the cause is before them. These are the generic ones
# (C++ and Python runtimes, process supervision); each engine adds its own (`EngineAdapter.wrapper_lines`).
# A crash notice (`Fatal Python error: Segmentation fault`, a shell's `Segmentation fault (core dumped)`, zsh's
# `[1] 3804384 segmentation fault (core dumped)`, `Aborted (core dumped)`) says a process died, not why: in the
# real logs that carry one, the cause was always another line.
# A process stopped by SIGTERM or Ctrl-C: someone ended the wait (the reader tells a hang ended so from a crash).
# vLLM's API server turns SIGTERM into `KeyboardInterrupt("terminated")` (entrypoints/openai/api_server.py); Ctrl-C
# raises a bare `KeyboardInterrupt`.
SIGTERM_EXIT = r"(SystemExit: (15|143)|KeyboardInterrupt: terminated|^\s*KeyboardInterrupt:?)\s*$"
TRACEBACK_TEXT = "Traceback (most recent call last)"  # a traceback's header, wherever a line's prefix puts it
# After a logger's prefix: vLLM's, `[time TP0]`, or a pipe-separated one (FastChat's `2024-04-27 10:13:05 | ERROR |
# stderr | `).
TRACEBACK_HEADER = (
    r"^\W{0,20}(\(\w+ pid=\d+\)\s{0,4})?(ERROR|WARNING|INFO)?[\d: -]{0,40}(\[[^\]]{0,80}\])?(\| \w+ \| [\w.-]+ \| )?"
    r"\s{0,10}Traceback \(most recent call last\)"
)
# A line that says a process died (not that it was stopped: SIGTERM is someone ending it). After the engine's ready
# line it means the server no longer serves, whatever the cause above it was.
LM_STUDIO_EXIT = r"\(Exit code: -?[1-9]\d*\)"  # LM Studio's runtime says only how it ended
# A shell's notice that its child died of a signal: macOS's shells name it by number (`Segmentation fault: 11`,
# `Illegal instruction: 4`), fish by name (`fish: Job 1, './llama-cli ...' terminated by signal SIGSEGV (Address
# boundary error)`), zsh before the command (`zsh: abort      ./main -m ...`). SIGKILL's
# notices (`zsh: killed`, fish's `SIGKILL`) are a cause of their own: process_sigkilled.
SHELL_DEATH = (
    r"^\s*(?:Segmentation fault|Abort trap|Bus error|Illegal instruction): \d+\s*$"
    r"|^fish: Job \d+, .{0,400} terminated by signal SIG(?!KILL)[A-Z]+"
    r"|^zsh: (?:abort|segmentation fault|bus error|illegal hardware instruction|floating point exception)\s"
)
# ggml's SYCL backend catches a SYCL exception, prints its message and this, and exits
SYCL_CAUGHT = r"Exception caught at file:\S+, line:\d+"
PROCESS_DIED = re.compile(
    r"terminate called after throwing|exited with (code|status) [-1-9]|Fatal Python error|(?i:core dumped)|"
    rf"^\s*Aborted\s*$|runner (process has )?terminated|{LM_STUDIO_EXIT}|{SHELL_DEATH}|{SYCL_CAUGHT}"
)
# A wrapper that quotes the error its worker failed with (vLLM's `RuntimeError: Worker failed with error 'Could not
# find nvcc ...', please check the stack trace above for the root cause`; Ollama's `llama runner process has
# terminated: signal: aborted (core dumped) error loading model: ...`, the runner's last error after its status,
# llm/server.go): a signature that names the quote makes it a candidate.
QUOTED_ERROR = re.compile(
    r"failed with error '|runner process has terminated: (?:exit status \S+|signal: \w+(?: \(core dumped\))?) \S"
)
# A process's death that names how it died this specifically is that cause (`llama-server exited with code
# 3221225501`: the code is an illegal instruction); a broad one (`exited with code 137`) only says that it died.
WRAPPER_NAMED = 0.85


def names_its_cause(line: str, sig: Signature | None) -> bool:
    """The wrapper quotes the error a worker failed with, and a signature names it; or it says a process died, and
    a specific signature names how (its exit code or signal)."""
    if sig is None:
        return False
    died = sig.weight >= WRAPPER_NAMED and PROCESS_DIED.search(line) is not None
    return died or QUOTED_ERROR.search(line) is not None


# An Ascend CANN error code as its error report starts a line with it (`EZ1001: [PID: 5] ...`, `EZ9999: Inner Error!`)
CANN_CODE = r"E[0-9A-Z]{5}"
# Rust's panic header: since 1.73 its message is on the line after it; newer releases name the thread's id too
# (`thread 'main' (7412) panicked at src/main.rs:722:23:`)
PANIC_HEADER = r"thread '[^']{1,60}'(?: \(\d+\))? panicked at \S+:\d+:\d+:\s*$"
GENERIC_WRAPPERS = (
    r"terminate called after throwing|exited with (code|status)|See root cause above|child failed|^\s*Aborted\s*$|"
    rf"{LM_STUDIO_EXIT}|"
    # vLLM's and SGLang's model registry inspect a model in a subprocess and report only that it failed (or raise
    # `RuntimeError: Error raised in subprocess:` with the subprocess's own error on the lines after it)
    r"failed to be inspected\. Please check the logs|Error raised in subprocess:\s*$|"
    # a kernel library's summary of the error it printed before (Triton's MLIR, FlashMLA, aiter's JIT, torch_npu's ACL)
    r"PassManager::run failed|See message above for details|PTA call acl api failed|\] build \[\w+\] under \S+ failed|"
    # torch_npu names only the ACL call that failed and its code; the CANN error report after it says why (`EZ1001:
    # [PID: 55172] ... tensor 0 not implemented for DT_UINT64, ...`), under a header when the error is internal
    rf"NPU function error: call \w+ failed, error code is \d+|(?:^|\]\s+){CANN_CODE}: Inner Error!?\s*$|"
    # a rank that calls MPI_Abort after its own error (mpi4py's excepthook, TensorRT-LLM's executor): Open MPI's notice
    r"MPI_ABORT was invoked on rank \d+|"
    r"Fatal Python error: (Segmentation fault|Aborted)|(?i:segmentation fault|aborted|bus error) \(core dumped\)|"
    rf"{SHELL_DEATH}|{SYCL_CAUGHT}|" + SIGTERM_EXIT + f"|{PANIC_HEADER}|" + TRACEBACK_HEADER
)


@cache
def wrapper_lines() -> re.Pattern[str]:
    """Every wrapper: the generic ones and every engine's, in one pattern (a log's engine may be unknown)."""
    engine_wrappers = [p.pattern for a in ENGINES.values() for p in a.wrapper_lines]
    return re.compile("|".join(f"(?:{p})" for p in (GENERIC_WRAPPERS, *engine_wrappers)))


@cache
def restating_lines() -> re.Pattern[str] | None:
    """Lines that state the message of an exception the log then shows in full (every engine's)."""
    return any_of([p.pattern for a in ENGINES.values() for p in a.restating_lines])


@cache
def error_level_lines() -> re.Pattern[str] | None:
    """Lines an engine writes at its error level (llama.cpp's ` E ` marker): candidates even without an
    exception's shape."""
    return any_of([a.error_line.pattern for a in ENGINES.values() if a.error_line is not None])


@cache
def ignored_errors() -> re.Pattern[str] | None:
    """Errors an engine logs and carries on from, every engine's in one pattern."""
    return any_of([p.pattern for a in ENGINES.values() for p in a.ignored_errors])


def any_of(patterns: list[str]) -> re.Pattern[str] | None:
    """One pattern matching any of these (every engine's in one search); None when there are none."""
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None
