"""A line's level, read from its words whatever engine wrote it: an error, a quiet line (INFO, WARNING), a line
that says the program carries on past what it reports, or a dump of settings that is never a cause."""

from __future__ import annotations

import re

from firstlight.diagnosis.signatures import CANN_CODE, EXCEPTION_LINE, TRACEBACK_TEXT
from firstlight.engines import strip_line_prefix
from firstlight.logs import without_relay

QUIET_LEVEL = re.compile(
    r"^\W*(?:\(\w[\w-]* pid=\d+(?:, ip=[\d.]+)?\)\s*)?(?:INFO|WARNING|WARN|DEBUG)\b"
    r"|\s(?:INFO|DEBUG)(?:\s+[\w.:-]+[:\]]|:\s|\s+\d\d-\d\d\s)"
    r"|(?<!NCCL)\s(?:WARN|WARNING)(?:\s+[\w.:-]+[:\]]|:\s|\s+\d\d-\d\d\s)|^\[W\d"
    # NCCL's INFO; Python logging's `name - WARNING - message` (not its INFO: tools relay an engine's output at INFO)
    r"|\sNCCL INFO\s|\s-\s(?:DEBUG|WARNING)\s-\s"
    r"|^(?:[\w.-]+\s+\|\s+)?\[rank\d+\]:\[[WI]\d"  # PyTorch's c10d warnings and infos under their rank prefix
    r"|(?:^|\s)level=(?i:info|warn(?:ing)?|debug)\b"  # Go's slog (Ollama) and logrus (`level=warning`) text records
    # vLLM's level and clock glued to another process's output that was cut mid-line (`(VllmINFO 04-18 14:10:22 ...`)
    r"|^\W*\w{1,40}(?:INFO|WARNING|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d\b"
    # a logger without levels (SGLang's `[time] message`) whose message calls itself a warning
    r"|^\[[^\]]{1,60}\]\s*Warning: "
)
# A tool that relays an engine's output logs it at its own INFO (`- INFO - vLLM: ERROR 07-13 ...`, `INFO     OSError:
# [Errno 48] ...`): the relayed line keeps its own level.
# Ollama's scheduler logs a model that failed to load at INFO, with the runner's error (`msg="Load failed" ... error=`).
RELAYED_ERROR = re.compile(
    r"\b(?:ERROR|CRITICAL|FATAL)\b|^\W*(?:INFO|DEBUG)\s+[\w.]*(?:Error|Exception):\s|msg=\"Load failed\" .*\berror="
)


def _said(rx: re.Pattern[str], line: str) -> bool:
    """The pattern is in the line as it stands or, where what relayed the log put its prefix first (docker compose's
    `vllm-1  | `, kubectl's clock), in the line as the engine wrote it: the patterns anchored at its start need that."""
    if rx.search(line) is not None:
        return True
    engines_own = without_relay(line)
    return engines_own is not line and rx.search(engines_own) is not None


def is_quiet(line: str) -> bool:
    """Logged at INFO, WARNING or DEBUG (also behind a relay's prefix), and not an error relayed at a tool's own
    INFO."""
    return _said(QUIET_LEVEL, line) and RELAYED_ERROR.search(line) is None


# A line at an error level in any engine's words: `main: error: ...`, `error loading model: ...`,
# `[TensorRT-LLM][ERROR] ...`, `[TRT] [E] ...`, `FATAL: ...`, a Rust panic (TGI's router and launcher), a failed
# glog-style CHECK (`Check failed: (x) is false: ...`: TVM under MLC-LLM, LMDeploy's TurboMind, TensorRT), a glog
# line at severity E or F (`E0608 10:49:50.145396 474 ucx_utils.cpp:592] ...`: Triton server, UCX/NIXL, gRPC),
# Python logging's common `asctime - name - ERROR - message` format (LMDeploy, Xinference), ggml's aborts
# (`GGML_ASSERT(x) failed`, before 2024 `GGML_ASSERT: file.c:224: x`, GGML_ABORT's `file.cpp:748: message`, and its
# CUDA checks `CUDA error 2 at ggml-cuda.cu:9132: out of memory`), ptxas (`ptxas ..., line 372; error   : ...`), a
# program's own `aborting startup: reason`.
# Traceback frames and code lines under an engine's `ERROR` prefix have no such marker of their own.
ERROR_MESSAGE = re.compile(
    r"(?:^|[\s:\]])(?:[Ee]rror|ERROR|FATAL|[Ff]atal)(?: [\w'-]+){0,3}:\s+\S|\[(?:E|ERROR|FATAL)\]\s*(?:\[\w+\]\s*)*\S"
    r"|thread '[^']{1,60}'(?: \(\d+\))? panicked at|\bCheck failed: \S|\s-\s(?:ERROR|CRITICAL)\s-\s|\bFATAL ERROR\b"
    r"|called `(?:Result|Option)::(?:unwrap|expect)\(\)` on an? `(?:Err|None)` value"
    r"|(?:^|[\s|])[EF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w.-]+:\d+\] \S"
    # Rust's tracing (TGI, mistral.rs, Dynamo, vllm.rs): `2026-01-20T15:24:43.340496Z ERROR vllm_rs::core::engine: msg`
    r"|\d(?:Z|[+-]\d\d:?\d\d)?\s+(?:ERROR|FATAL)\s+[\w.-]+(?:::[\w.-]+)*:\s+\S"
    r"|^\[[\w-]+ (?:ERROR|FATAL) \S+:\d+\]\s*\S"  # protobuf's and abseil's `[libprotobuf ERROR file.cc:335] msg`
    r"|[Aa]borting(?: \w+)?: \S|GGML_ASSERT\(.*\) failed|GGML_ASSERT: \S+:\d+: \S"
    rf"|(?:^|\s){CANN_CODE}(?::\s*)?\[PID: \d+\] \S"  # Ascend CANN's error report: `EZ1001: [PID: 5] <time> msg`
    r"|^\s*\[Error\]: \S"  # torch_npu's table of what an NPU error code means (`[Error]: The device is unavailable.`)
    r"|^\s*what\(\):\s+\S"  # an uncaught C++ exception's message, under `terminate called after throwing ...`
    r"|: Assertion `.{1,300}' failed\.?\s*$"  # glibc's assert(): `prog: file.cpp:42: func: Assertion `expr' failed.`
    r"|\]:\d+: failed assertion `"  # Apple's (Metal): `-[Class method:]:722: failed assertion `...'`
    r"|\b(?:CUDA|cuBLAS|HIP|ROCm|SYCL) error \d+ at \S+:\d+"
    r"|^[\w./\\:-]+\.(?:c|cc|cpp|cu|cuh|m|mm|h|hpp):\d+: [a-zA-Z(]|; error\s+: \S"
    r"|^\S+\.(?:c|cc|cpp|cu|cuh|m|mm|h|hpp|metal):\d+:\d+: (?:fatal )?error: \S"  # a compiler's diagnostic
    # a logger's level among the first words of its line: `... kserve ERROR [__main__.py:<module>():341] msg`,
    # `xinference.core.worker 48213 ERROR    msg`, `03:47PM ERROR msg`
    r"|^[^\s\]]*(?:\s+[^\s\]]+){0,5}?\s+(?:ERROR|CRITICAL)\s+(?:\[[^\]]{1,80}\]\s*)?[A-Z]"
)

# Python's warnings module (`path.py:106: UserWarning: message`): its words may say "error" (`... may report error in
# max-autotune mode: ...`) without stating one. Not quiet: a warning that the GPU is not supported is a named cause.
PYTHON_WARNING_TEXT = r"\.py:\d+: [A-Z]\w*Warning: "
PYTHON_WARNING = re.compile(r"^\S+" + PYTHON_WARNING_TEXT)


def states_error(line: str) -> bool:
    """The line states an error in words (an error level, `error:`), other than a Python warning's words."""
    return _said(ERROR_MESSAGE, line) and not is_python_warning(line)


def is_python_warning(line: str) -> bool:
    """The line is a warning of Python's warnings module (`path.py:106: UserWarning: message`), under any prefix."""
    return "Warning: " in line and PYTHON_WARNING.match(strip_line_prefix(line)) is not None


# A line that says the program carries on past what it reports (`Skipping import of cpp extensions: ...`,
# `... Falling back to regular HTTP download`, torchvision's `... you can ignore this warning`, llama.cpp's
# `flash_attn is not supported with ... - forcing off`, a bare `FlashAttention is not installed.`, `... all custom ops
# will be disabled`, `Failed to import nixl: ... NixlRelay will not work.`): a cause only if
# nothing that stopped the launch is found.
CARRIES_ON = re.compile(
    r"(?i)\b(skipping|falling back|fall back to|ignoring|will be ignored|will ignore|defaulting to|continuing without|"
    r"may not be usable|may not work|you can ignore this warning|retrying|after connection broken by|"
    r"forcing (it )?off|forcing \w+ (off|to \w+)|will be disabled|using (the )?defaults?)\b"
    # an optional part said to be lost with what failed (`Failed to import nixl: ... NixlRelay will not work.`)
    r"|\bwill not work\.(?:\s|$)"
    # an optional kernel library announced missing, the statement alone on its line (InternVL's and other remote
    # code's `FlashAttention is not installed.`): the model then runs without it; a launch it stops raises instead
    r"|^\s*(?i:flash[-_ ]?attn|flash[-_ ]?attention\w*|xformers|apex) (is|are) not installed\.?\s*$"
    # ggml's backends (CUDA, Vulkan, SYCL, CANN) take ordinary host memory when pinned memory is short
    r"|(?i:failed to allocate .{0,60}pinned memory)"
)

# A dump of settings: many `key=value` or `'key': value` pairs, or a list of command-line flags.
_SETTING = re.compile(r"\b\w+=|'\w+': |[\s\[,(]['\"]?--\w")
DUMP_SETTINGS = 6
# A structured log record's own keys (Go's slog: `time=... level=... source=... msg=`) are its header, not settings
_RECORD_HEADER = re.compile(r"\btime=\S+ level=\w+ source=\S+ ")


def is_settings_dump(line: str) -> bool:
    """A configuration dump or an argument echo (`Initializing a V1 LLM engine ... with config: ...`,
    `server_args=ServerArgs(...)`, `Starting ... with args: ['--trust-remote-code', ...]`): not a cause,
    unless it is an exception's own message (pydantic puts the rejected settings after the reason), a line at an
    error level (vLLM's `Error: Cannot provide a placement group of placement_group_specs=[{...}]`), or an NSError's
    description (`Error Domain=X Code=N "..." UserInfo={K=V, ...}`: macOS and Metal errors with their details). A
    structured record's header keys do not count: Ollama's `level=ERROR ... msg=... model=... error=...` is one
    error."""
    if line.count("=") + line.count("': ") + line.count("--") < DUMP_SETTINGS:
        return False  # the cheap count spares the regex for most lines
    if "error, " in line or "Error Domain=" in line or (states_error(line) and not is_quiet(line)):
        return False
    line = _RECORD_HEADER.sub("", line, count=1)
    return len(_SETTING.findall(line)) >= DUMP_SETTINGS and not EXCEPTION_LINE.search(line)


class IgnoredMessage:
    """An error the engine ignores may run on over the lines after it, without the engine's prefix (`Ignore import
    error when loading X: <an exception whose text spans lines>`): those lines are ignored with it, up to SPAN."""

    SPAN = 8

    def __init__(self, ignored: re.Pattern[str] | None) -> None:
        self.ignored = ignored
        self.left = 0  # lines the message may still run on

    def starts(self, line: str) -> None:
        """Note an ignored error on a line with the engine's prefix (unprefixed lines after it are its message)."""
        if self.ignored is not None and self.ignored.search(line) and strip_line_prefix(line) != line:
            self.left = self.SPAN

    def continues(self, line: str, frame: bool) -> bool:
        """Whether this line goes on with it; a blank line, a line with a prefix of its own or a traceback ends it."""
        if self.left <= 0:
            return False
        if frame or not line.strip() or TRACEBACK_TEXT in line or strip_line_prefix(line) != line:
            self.left = 0
            return False
        self.left -= 1
        return True
