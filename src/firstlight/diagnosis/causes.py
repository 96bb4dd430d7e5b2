"""Causal pairs: a failure an engine raises only because something it reported earlier, often as a mere warning,
went wrong first. Levels rank the warning below the failure; the pair says the warning is the cause.

Each pair is read from where the engines wire the two together:
- PyTorch registers an extension's ops and classes when its shared library loads (`torch.ops.load_library`,
  `TORCH_LIBRARY`). vLLM (`vllm/_custom_ops.py`, `vllm/platforms`), vllm-ascend and SGLang's `sgl_kernel` import
  their extension under a try/except that logs a warning and carries on; the first call then finds no such op
  (`'_OpNamespace' '_C_ascend' object has no attribute 'weak_ref_tensor'`) or class (`Tried to instantiate class
  '_core_C.ScalarType', but it does not exist!`). The library that did not load is the cause.
- TGI (`server/text_generation_server/models/__init__.py`) logs `Could not import Flash Attention enabled models:
  <why>` and later raises `<Model> requires Flash Attention enabled models.` for a model that needs them.
- Python chains exceptions: one raised while handling another prints the first traceback, `During handling of the
  above exception, another exception occurred:` (or `The above exception was the direct cause of the following
  exception:`), then its own. transformers turns the registry's `KeyError: 'glm_moe_dsa'` into a `ValueError` that
  explains it: the explanation is the line to act on. A later exception that only carries the first one's message on
  (urllib3's `MaxRetryError: ... (Caused by SSLError(...))` around `ssl.SSLEOFError`) adds nothing: the first is.
- transformers (`models/auto/configuration_auto.py`) raises `... has model type X but Transformers does not recognize
  this architecture` when the installed version predates the model; engines check the version first and warn
  (LMDeploy: `The current version of transformers is A, which is lower than the required version B`, SGLang and
  vLLM: `... requires transformers>=B`). The version is the cause.
- vLLM (`vllm/transformers_utils/dynamic_module.py`, try_get_class_from_dynamic_module) warns `Unable to load
  modeling_x.XForCausalLM from <model> on HF Hub.` with the traceback of transformers' `OSError: <model> does not
  appear to have a file named modeling_x.py`, and returns nothing; the registry then says `Model architectures
  ['XForCausalLM'] are not supported`. SGLang (`srt/configs/model_config.py`, `srt/models/registry.py`) logs `Failed to
  load dynamic modules from auto_map for 'X': <the same OSError>`, then raises `Cannot find model module. 'X' is not a
  registered model ...`. The model's own code file that is not there is the cause.
- vLLM (`vllm/platforms/__init__.py`) logs at DEBUG why each platform is not available (`CUDA platform is not
  available because: NVML Shared Library Not Found`; of these, the GPU's own matters) and falls back to its base
  platform, whose methods raise a bare `NotImplementedError` (`vllm/platforms/interface.py`). Why the platform was
  not found is the cause.
- llama.cpp (`ggml/src/ggml-metal/ggml-metal-context.m`) compiles its Metal library on the fly when the build holds
  none, and logs only `failed to initialize the Metal library` when that fails; the compiler's own diagnostic
  (`program_source:12:3: error: ...`, a header's `...h:3267:5: error: static_assert failed ...`, `failed to build
  'fa' library: Error Domain=MTLLibraryErrorDomain ...`) says why, before it.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace

from firstlight.diagnosis.candidate import Candidate
from firstlight.diagnosis.levels import is_quiet
from firstlight.diagnosis.signatures import EXCEPTION_LINE, TRACEBACK_TEXT
from firstlight.engines import strip_line_prefix


@dataclass(frozen=True)
class CausalPair:
    consequence: re.Pattern[str]
    antecedent: re.Pattern[str]


PAIRS = (
    CausalPair(
        re.compile(
            r"'_OpNamespace' '\w+' object has no attribute|Tried to instantiate class '[\w.]+', but it does not exist"
            r"|No such operator \w+::\w+"
        ),
        re.compile(
            r"(?i)(failed to (import|load)|ImportError|OSError).*(cannot open shared object file|undefined symbol)"
        ),
    ),
    CausalPair(
        re.compile(r"requires Flash Attention enabled models"),
        re.compile(r"Could not import Flash Attention enabled models"),
    ),
    CausalPair(
        re.compile(r"Transformers does not recognize this architecture"),
        re.compile(
            r"(?i)transformers\W.{0,80}(lower|older) than the (minimum )?required version"
            r"|requires? transformers\s*(>=|>|==)\s*\d|transformers\s*(>=|>|==)\s*[\d.]+\w* is required"
        ),
    ),
    CausalPair(
        re.compile(r"failed to initialize the Metal library"),
        re.compile(
            r"(?:program_source|\.h(?:pp)?|\.metal):\d+:\d+: error: "
            r"|failed to build '\w+' library|MTLLibraryErrorDomain"
        ),
    ),
    CausalPair(
        re.compile(
            r"Model architectures? \[[^\]]*\] (?:are|is) not supported|Cannot find model module\. '\w+' is not a"
        ),
        re.compile(r"does not appear to have a file named \w+\.py\b"),
    ),
    CausalPair(
        re.compile(r"NotImplementedError:?\s*$"),
        re.compile(r"(?:CUDA|ROCm) platform is not available because: "),
    ),
)


CHAIN_MARKER = re.compile(
    r"During handling of the above exception, another exception occurred|"
    r"The above exception was the direct cause of the following exception"
)


class ExceptionChains:
    """Feed every line (`read`) and every candidate line (`seen`) in order; `head` then finds where a chain began."""

    def __init__(self) -> None:
        self._heads: dict[int, Candidate] = {}  # an exception's line -> the exception it was raised while handling
        self._next: dict[int, Candidate] = {}  # an exception's line -> the exception raised while handling it
        # the last candidate lines (a marker's exception is the last of them with an exception's shape: checked then,
        # not on every line, since markers are rare)
        self._recent: deque[tuple[str, Candidate]] = deque(maxlen=8)
        self._pending: Candidate | None = None  # the exception a marker just said the next one follows
        self._follower = 0  # the line of the first exception after the marker

    def read(self, line_no: int, line: str) -> None:
        if "exception" in line and CHAIN_MARKER.search(line):
            raised = (c for text, c in reversed(self._recent) if EXCEPTION_LINE.search(text))
            self._pending, self._follower = next(raised, None), 0
        elif self._pending is not None and EXCEPTION_LINE.search(line):
            if self._follower:  # the exception after the marker was no candidate: the chain is not followed
                self._pending = None
            else:
                self._follower = line_no

    def seen(self, line_no: int, line: str, cand: Candidate) -> None:
        """Candidate line `line_no` was read: `cand` is its candidate, or the earlier one it repeats (another
        rank's). Only the first exception after a marker follows the one before it."""
        if self._pending is not None and line_no == self._follower:  # read() found it an exception line
            # a head comes before its exception (a rank repeating a chain may link a later line to an earlier one)
            if self._pending.line_no < cand.line_no:
                self._heads.setdefault(cand.line_no, self._pending)
                self._next.setdefault(self._pending.line_no, cand)
            self._pending = None
        self._recent.append((line, cand))

    def head(self, chosen: Candidate) -> Candidate:
        """The first exception of the chain `chosen` ends, as far back as each later one only carries the earlier
        one's message on (urllib3's `MaxRetryError: ... (Caused by SSLError(...<the message>...))`); `chosen` when
        it says what the earlier one did not (transformers' `ValueError: ... model type `x` but Transformers does
        not recognize this architecture` for the registry's `KeyError: 'x'`, `OSError: ... the config file at X is
        not a valid JSON file` for json's `JSONDecodeError`): the explanation is the line to act on."""
        head = chosen
        if chosen.category == "unknown":  # a crash names no cause for a first exception to share
            return chosen
        while (earlier := self._heads.get(head.line_no)) is not None and _carried(earlier.line, head.line):
            head = earlier
        if head is chosen:
            return chosen
        # the later exception explains the first (its signature and remedy are the more specific)
        why = f"the first exception of the chain that line {chosen.line_no} ends (takes its score and signature)"
        return _told_by(head, chosen, why)

    def retyped(self, chosen: Candidate) -> Candidate:
        """`chosen`, told by the exception raised while handling it when that one re-raises its message under a more
        specific type (requests' JSONDecodeError for json's: the reply of an HTTP call, not a file); or that one
        itself when it says how to get the module `chosen` found missing (`ImportError: Please install
        torchao>=0.10.0 ... to use torchao quantization` over `No module named 'torchao'`): the version and the use."""
        later = self._next.get(chosen.line_no)
        if later is not None and _instructs(chosen, later):  # the module is not there at all, whatever it asks for
            why = f"says how to get the module line {chosen.line_no} lacks"
            return replace(_told_by(later, chosen, why), score=chosen.score)
        if (
            later is None
            or later.signature is None
            or chosen.signature is None
            or later.signature.weight <= chosen.signature.weight
            or not _restated(chosen.line, later.line)
        ):
            return chosen
        return _told_by(chosen, later, f"line {later.line_no} re-raises its message as {later.category}")


def _instructs(missing: Candidate, later: Candidate) -> bool:
    """`later` names the package of the module `missing` says is not there."""
    module = _MISSING_MODULE.search(missing.line)
    if module is None or later.signature is None or _MISSING_MODULE.search(later.line):
        return False
    return re.search(rf"\b{re.escape(module['mod'].split('.')[0])}\b", later.line) is not None


def _told_by(head: Candidate, later: Candidate, why: str) -> Candidate:
    """The first exception of a chain, with the cause a later one of the chain names."""
    return replace(
        head,
        score=max(head.score, later.score),
        category=later.category,
        signature=later.signature,
        groups=later.groups,
        reasons=(*head.reasons, why),
    )


def _statement(line: str) -> str | None:
    """An exception line's message, when it is long enough to be told again as the same statement."""
    raised = EXCEPTION_LINE.search(line)
    message = raised["msg"].strip() if raised is not None and raised["msg"] is not None else ""
    return message if len(message) >= STATED_CHARS else None


def _carried(earlier: str, later: str) -> bool:
    """The later exception states the earlier one's message again, as its own or inside its own words."""
    message = _statement(earlier)
    return message is not None and message in later


def _restated(earlier: str, later: str) -> bool:
    """The later exception re-raises the earlier one's message under another type (requests' JSONDecodeError for
    json's): one statement, which the later one's type tells better."""
    message, then = _statement(earlier), EXCEPTION_LINE.search(later)
    return message is not None and then is not None and then["msg"] is not None and then["msg"].strip() == message


_MISSING_MODULE = re.compile(r"No module named '(?P<mod>[\w.]+)'")
STATED_CHARS = 24  # a message this long, repeated at the end of a later line, is the same statement
_EXCEPTION_TYPE = re.compile(r"[\w.]{0,80}(?:Error|Exception)\w{0,40}: ")
# A level word before a message: the line says its own level, so it is not a copy of a warning
_LEVEL_WORD = re.compile(r"(?i)\b(?:error|err|critical|fatal)\b|\s[EF]\s")
_BOUNDARY = re.compile(r": |\] ")  # where a logger's prefix, a level or an exception type ends and a message begins
# An attempt that failed and is tried again (vLLM's repo_utils: `Error parsing config for X: <why>, retrying 1 of 2`):
# the engine carried on past it, but when the last attempt fails with the same message, it was stated here first.
RETRIED = re.compile(r"(?i),? (?:retrying|will retry)\b[^:]*$")


def first_statement(chosen: Candidate, candidates: Iterable[Candidate]) -> Candidate:
    """The earliest line whose message `chosen` ends with: an error that outer layers wrap on its way up, each
    putting its own words before it (`KVCache allocation failed: X` logged, then `Failed to allocate KVCache:
    KVCache allocation failed: X`; `HIP error: invalid device function`, then `RuntimeError: HIP error: invalid
    device function`), was stated first where it happened. That line, as strong as the one that repeats it;
    `chosen` when there is none. An error the engine ignored or carried on past states nothing, unless it was an
    attempt tried again (RETRIED)."""
    text = chosen.line.rstrip()
    earlier = (c for c in candidates if c.line_no < chosen.line_no and (not c.ignored or RETRIED.search(c.line)))
    for c in sorted(earlier, key=lambda c: c.line_no):
        if any(
            _wraps(text, message) and not (_logged_with_traceback(c) and _typed(text, message))
            for message in _messages(c.line)
        ):
            why = f"line {chosen.line_no} repeats its message (takes its score {chosen.score:.2f})"
            return replace(
                c,
                score=max(c.score, chosen.score),
                category=chosen.category,
                signature=chosen.signature,
                groups=chosen.groups,
                quiet=chosen.quiet,
                reasons=(*c.reasons, why),
            )
    return chosen


def raised_below(chosen: Candidate, candidates: Iterable[Candidate]) -> Candidate:
    """For a logger's `exception(e)` line, the exception line its traceback ends with: the same message, said with
    its type (`SafetensorError: <message>`); `chosen` otherwise."""
    if not _logged_with_traceback(chosen):
        return chosen
    message = strip_line_prefix(chosen.line).strip()
    for c in sorted((c for c in candidates if c.line_no > chosen.line_no), key=lambda c: c.line_no):
        text = c.line.rstrip()
        if text.endswith(message) and _typed(text, message):
            return c
    return chosen


def _logged_with_traceback(c: Candidate) -> bool:
    """A logger's `exception(e)`: the message (one line, or a few that carry on from it), then at once the traceback
    that ends by raising it. The message and that exception line are one statement, not an error wrapped on its way
    up."""
    return c.traceback_follows or any(TRACEBACK_TEXT in line for line in c.after[:1])


def _typed(text: str, message: str) -> bool:
    """`text` is `message` with only an exception's type before it (after the logger's prefix)."""
    before = strip_line_prefix(text[: len(text) - len(message)])
    return len(before) <= 120 and _EXCEPTION_TYPE.fullmatch(before) is not None


def echoes_warning(line: str, previous: str) -> bool:
    """The line says again what the line before it logged at INFO/WARNING, without a level of its own: a second
    handler of one logger (SGLang's root logger after CUTLASS DSL's own `- WARNING -` line) prints the message
    bare. A line that names its own error level is an error, whatever was said before it."""
    message = strip_line_prefix(line).strip()
    if len(message) < STATED_CHARS or not _wraps(previous.rstrip(), message) or not is_quiet(previous):
        return False
    return _LEVEL_WORD.search(line.rstrip()[: -len(message)]) is None


def _messages(line: str) -> Iterable[str]:
    """The line's messages: the whole line, and each tail after a `: ` or `] ` that itself still has a `: ` in it
    (`X failed: why`; a bare tail such as `No such file or directory` is a phrase many errors end with)."""
    text = RETRIED.sub("", line.strip())
    if len(text) >= STATED_CHARS:
        yield text
    for boundary in _BOUNDARY.finditer(text):
        tail = text[boundary.end() :]
        if len(tail) >= STATED_CHARS and ": " in tail:
            yield tail


def _wraps(text: str, message: str) -> bool:
    """Whether `text` ends with `message`, its own words before it ending at a boundary (`: `, `] `, a space)."""
    if not text.endswith(message):
        return False
    before = text[: len(text) - len(message)]
    return not before or before.endswith((": ", "] ", " "))


def cause_behind(chosen: Candidate, candidates: Iterable[Candidate]) -> Candidate | None:
    """The earlier line `chosen` follows from, by a causal pair (the earliest such line); None when there is none."""
    pairs = [p for p in PAIRS if p.consequence.search(chosen.line)]
    if not pairs:
        return None
    earlier = sorted((c for c in candidates if c.line_no < chosen.line_no), key=lambda c: c.line_no)
    for c in earlier:
        if any(p.antecedent.search(c.line) for p in pairs):
            # it caused that failure: as fatal as the failure, whatever level it was logged at
            why = f"the failure on line {chosen.line_no} follows from it (takes its score {chosen.score:.2f})"
            if c.signature is None:  # a cause in no engine's words (a compiler's diagnostic): the failure names it
                return _told_by(replace(c, quiet=chosen.quiet), chosen, why)
            return replace(c, score=max(c.score, chosen.score), quiet=chosen.quiet, reasons=(*c.reasons, why))
    return None
