"""Where a Python traceback is as a log is read: its last frame's file and the source line shown under it.

The frame says where an exception was raised (an engine's config validation, a model registry); the source line
says what a bare `AssertionError` asserted, and what a traceback cut off before its exception line would have
raised. What the log said of the launch's settings before (settings.py) tells what a shape mismatch under a weight
loader means."""

from __future__ import annotations

import re
from typing import NamedTuple

from firstlight.diagnosis.places import (
    BLOCK_SIZE_NOT_TAKEN,
    DRAFT_MODELS,
    DRAFT_SOURCES,
    ENGINE_KEYWORD_UNKNOWN,
    FALLBACK_MODELS,
    FIRST_OF_LISTING,
    FRAME_LINE,
    KEYED_LOADER,
    NAMES_AN_ARGUMENT,
    NOTHING_LISTED,
    QUANTIZED_WEIGHTS,
    RAISED_IN_CONFIG,
    RAISED_IN_DRAFT,
    RAISED_IN_FALLBACK,
    RAISED_IN_WEIGHT_LOADER,
    SETTINGS_CHECK,
    SHAPE_MISMATCH,
    WEIGHT_LOADER,
    WEIGHT_SHAPE,
    argument_named,
    raised_in_places,
)
from firstlight.diagnosis.settings import StatedSettings
from firstlight.diagnosis.signatures import EXCEPTION_LINE, TRACEBACK_TEXT, Signature, signatures_by_id
from firstlight.engines import strip_line_prefix

# signatures of a checkpoint tensor that the model's code made no parameter for (vLLM's AutoWeightsLoader)
TENSOR_WITHOUT_PARAMETER = frozenset(("checkpoint_weight_unknown",))
# The engine's code entered straight from a user's script at its top level (`LLM(model=..., max_tokens=16)` in a
# script, `python -c`, a notebook cell), not through another package's code
_ENGINE_CODE = re.compile(r"[/\\](?:vllm|sglang)[/\\]")
_USER_TOP_LEVEL = re.compile(
    r"(?:<(?:string|stdin)>|<ipython-input-[\w-]+>|(?:(?!site-packages|dist-packages).)*\.py) in <module>"
)
MAX_FRAMES = 200  # of one traceback, kept to tell what it passed through (a recursion's are thousands)
_RAISE = re.compile(r"^\s*raise \w")  # a traceback's source line, pasted without its indentation
# `raise NotImplementedError("sharded is not supported for AutoModel")`: what the exception line would have said
_RAISE_CALL = re.compile(
    r"""^\s*raise (?P<exc>[\w.]+)\(\s*f?(?P<q>["'])(?P<msg>.+?)(?P=q)\s*\)(?:\s+from\s+\w+)?\s*$"""
)


# Where the frames of the libraries every engine runs its kernels through live: an exception raised in one says
# where it was raised only through the engine's frame that called it (a Triton kernel's launch, torch's linear).
_SHARED_LIBRARY = re.compile(r"/(?:torch|triton)/|/python3\.\d+/(?!(?:site|dist)-packages/)|^<")


def _passed(path: str, function: str) -> str:
    """A frame as the places and a signature's `in_traceback` match it: `path in function`."""
    return f"{path} in {function}"


class Place(NamedTuple):
    frame: bool  # the line is a traceback frame (`File "...", line N, in f`)
    code: bool  # the line is the source line a traceback shows under a frame


class TracebackPlace:
    """Feed every line; `frame` and `code` then say where the traceback being read is."""

    def __init__(self) -> None:
        self.frame: str | None = None  # the last traceback frame's file, until an exception line follows
        self.function = ""  # the function of that frame
        self.caller: str | None = None  # the last frame outside the libraries every engine calls (torch, Triton)
        self.drafting = False  # a frame of this traceback is a draft model's code (its load_weights, its forward)
        self.passed: list[str] = []  # this traceback's frames so far, each as `path in function`
        self.code: tuple[int, str] | None = None  # the source line under the last frame (line number, text)
        self._code_col: int | None = None  # where the last frame line's `File` starts: its source line is deeper
        self.settings = StatedSettings()  # what the log said of the launch's settings so far

    def read(self, line_no: int, line: str) -> Place:
        """Note the line; whether it is a frame line, or the source line under a frame."""
        self.settings.read(line)
        frame = FRAME_LINE.search(line) if 'File "' in line else None  # the substring test spares the regex
        if frame is not None:
            if self.frame is None:  # a traceback's first frame
                self.caller, self.drafting, self.passed = None, False, []
            self.frame, self.function = frame.group("path"), frame.group("function") or ""
            if len(self.passed) < MAX_FRAMES:
                self.passed.append(_passed(self.frame, self.function))
            self.drafting = self.drafting or DRAFT_MODELS.search(self.frame) is not None
            if not _SHARED_LIBRARY.search(self.frame):
                self.caller = self.frame
            self.code = None
        elif TRACEBACK_TEXT in line:  # a new traceback, whether the last one ended or not
            self._forget()
        elif (self._code_col is not None and line[self._code_col : self._code_col + 1] == " ") or (
            "raise " in line and _RAISE.match(strip_line_prefix(line))
        ):
            # the source line a traceback shows under its frame, indented deeper: `raise RuntimeError(f"NCCL ...")`,
            # also where an engine's logger put its prefix before it (`ERROR ... [core.py:398] raise TimeoutError`)
            self._code_col = None
            self.code = (line_no, line)
            return Place(frame=False, code=True)
        self._code_col = frame.start() if frame is not None else None
        return Place(frame=frame is not None, code=False)

    def raised(self, line: str, frame: bool) -> None:
        """After a line that is not a frame: an exception line ends the traceback (the next has frames of its own)."""
        if not frame and self.frame is not None and EXCEPTION_LINE.search(line):
            self._forget()

    def _forget(self) -> None:
        self.frame, self.function, self.caller, self.drafting, self.passed = None, "", None, False, []

    def retold(self, sig: Signature, line: str) -> tuple[Signature, str] | None:
        """For a signature whose message means another cause when raised through certain code (a Ray actor's, the
        engine's wait on its own HTTP server): that cause's signature, with why. A checkpoint tensor the model's
        code has no parameter for is, in a speculative-decoding draft's code, a draft that does not fit; with a
        quantization method in effect, the method's layout, as a shape mismatch there is. A keyword the engine's
        argument class does not take (`line`) is the user's own when the user's script called the engine; block sizes no
        backend takes are the user's setting when the user set one."""
        for frames, other in sig.in_traceback:
            passed = next((f for f in self.passed if frames.search(f)), None)
            if passed is not None:
                return signatures_by_id()[other], f"raised through {passed}, which makes it {other}"
        if sig.id == "call_signature_mismatch" and ENGINE_KEYWORD_UNKNOWN.search(line) and self._user_called_engine():
            return ENGINE_KEYWORD_UNKNOWN, "an engine argument the user's own script gave the engine"
        if sig.id == "vllm_kv_block_size_backend" and self.settings.block_size and BLOCK_SIZE_NOT_TAKEN.search(line):
            return BLOCK_SIZE_NOT_TAKEN, f"the launch asked for block size {self.settings.block_size}"
        if sig.id not in TENSOR_WITHOUT_PARAMETER:
            return None
        if self.drafting:
            return (
                RAISED_IN_DRAFT,
                "a checkpoint tensor without a parameter, raised in a speculative-decoding draft's code",
            )
        if self.settings.quantization:
            return (
                QUANTIZED_WEIGHTS,
                f"a checkpoint tensor without a parameter, loading {self.settings.quantization} weights",
            )
        return None

    def _user_called_engine(self) -> bool:
        """Whether this traceback entered the engine's code straight from a user's script, at its top level."""
        first = next((i for i, f in enumerate(self.passed) if _ENGINE_CODE.search(f)), 0)
        return first > 0 and _USER_TOP_LEVEL.fullmatch(self.passed[first - 1]) is not None

    def failed_assert(self, line: str) -> tuple[int, str] | None:
        """For a bare `AssertionError`, the `assert` statement the traceback shows above it (its line number, text)."""
        if self.code is None or strip_line_prefix(line).strip() != "AssertionError":
            return None
        if not strip_line_prefix(self.code[1]).lstrip().startswith("assert "):
            return None
        return self.code

    def cut_off_raise(self) -> tuple[int, str, str] | None:
        """A traceback left open under a `raise X("message")` or an `assert` (the log ended before its exception
        line): the statement's line number, its text, and the exception line it stands for (`X: message`,
        `AssertionError: <the assert statement>`, as a bare AssertionError is read)."""
        if self.frame is None or self.code is None:
            return None
        line_no, code = self.code
        statement = strip_line_prefix(code).strip()
        if statement.startswith("assert "):
            return line_no, code, f"AssertionError: {statement}"
        raised = _RAISE_CALL.match(statement)
        if raised is None:
            return None
        return line_no, code, f"{raised['exc']}: {raised['msg']}"

    def placed(self, line: str, statement: bool = False) -> tuple[Signature, str] | None:
        """For a generic exception (or the statement a bare AssertionError failed on), what the place it was raised
        says: a shape mismatch in a speculative-decoding draft's code; its last frame's file, or the engine's frame
        that called into torch or Triton (a model registry's lookup, an engine's argument and config validation, an
        attention backend, a quantization layer: the first that matches); a shape mismatch or a KeyError under a
        model's weight loader (read with the quantization method the log said is in effect); an IndexError on a line
        that takes the first of a file listing; a function that checks settings; else the engine argument its message
        names. With why."""
        raised = None if statement else EXCEPTION_LINE.search(line)
        if raised is None and not statement:
            return None
        where, function, caller = self.frame, self.function, self.caller
        if where is None:
            return self._named(line, raised)
        # a draft model's code called on the way, or the innermost engine frame is a draft's (the speculative
        # worker's own checks); the speculative worker alone also loads and runs the target
        drafting = self.drafting or DRAFT_SOURCES.search(caller or where) is not None
        if drafting and RAISED_IN_DRAFT.search(line):
            return (
                RAISED_IN_DRAFT,
                f"a shape mismatch raised in a speculative-decoding draft's code ({caller or where})",
            )
        for place in (where, caller if caller != where else None):
            sig = next((sig for places, sig in raised_in_places() if places.search(place)), None) if place else None
            if sig is not None:
                return sig, f"raised in {sig.id.removeprefix('raised_in_').replace('_', ' ')} ({place})"
        quantization = self.settings.quantization
        quantized = f", loading {quantization} weights" if quantization else ", no quantization stated"
        loading = next((f for f in self.passed if WEIGHT_LOADER.search(f)), None)
        if loading is not None and SHAPE_MISMATCH.search(line):
            return QUANTIZED_WEIGHTS if quantization else WEIGHT_SHAPE, f"a shape mismatch under {loading}{quantized}"
        if raised is not None and raised["exc"] == "KeyError" and KEYED_LOADER.search(_passed(where, function)):
            sig = QUANTIZED_WEIGHTS if quantization else RAISED_IN_WEIGHT_LOADER
            return sig, f"a KeyError in a weight loader ({where}, {function}){quantized}"
        if raised is not None and raised["exc"] == "IndexError" and self._takes_first_listed():
            return NOTHING_LISTED, f"an IndexError taking the first of a listing that found nothing ({where})"
        fallback = next((f for f in self.passed if FALLBACK_MODELS.search(f)), None)
        if fallback is not None:
            return RAISED_IN_FALLBACK, f"raised while the Transformers fallback ran the model ({fallback})"
        if SETTINGS_CHECK.fullmatch(function):
            return RAISED_IN_CONFIG, f"raised by {function}, which checks the settings ({where})"
        return self._named(line, raised)

    def _takes_first_listed(self) -> bool:
        """Whether the source line the traceback shows under its last frame takes the first of a file listing."""
        return self.code is not None and FIRST_OF_LISTING.search(self.code[1]) is not None

    @staticmethod
    def _named(line: str, raised: re.Match[str] | None) -> tuple[Signature, str] | None:
        """The engine argument the exception's message (or the failed assert's statement) names."""
        named = argument_named(line) if raised is None else argument_named(raised["msg"] or "", raised["exc"])
        return (NAMES_AN_ARGUMENT, f"names the engine argument {named}") if named else None
