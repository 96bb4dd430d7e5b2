"""Reading a whole log, in one pass and bounded memory: which engine wrote it, the phases it reached,
and, when it did not reach ready, the root cause (rootcause.py) or where it hung.

The same code serves `firstlight diagnose LOGFILE` and the watcher the moment a launch fails.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import cache
from itertools import chain, islice
from pathlib import Path

from firstlight.diagnosis.gpu import NEWER_GPU_REMEDY, GpuSeen
from firstlight.diagnosis.order import NEWEST_FIRST_CAP, in_time_order, newest_first, numbered_as_in_file
from firstlight.diagnosis.outcome import Diagnosis, PhaseSeen, Report, furthest
from firstlight.diagnosis.rootcause import Candidate, RootCauseFinder
from firstlight.diagnosis.signatures import SIGTERM_EXIT, TRACEBACK_HEADER, signatures_by_id
from firstlight.diagnosis.stall import left_behind, same_run, seconds, stall
from firstlight.engines import ENGINES, EngineAdapter, any_clock
from firstlight.logs import PhaseMachine, PhaseRule, fold_digits, iter_lines, log_time, without_relay

DETECT_LINES = 2000
# An error the launch went on past: a phase entered this long after it (by the log's own clock) shows the engine
# did not stop there (vLLM logs a rejected attention backend at ERROR and falls back to another).
CARRIED_ON_SECONDS = 5
# The process or rank a line names: vLLM's `(VllmWorker TP1 pid=12)`, SGLang's `[2025-03-29 18:56:25 TP1]`. Another
# rank that carries on says nothing of the one that logged the error: it may have died.
_PROCESS = re.compile(r"\((\w[\w -]{0,40}?) pid=\d+|\[[^\]]{0,60}\b((?:TP|DP|PP|EP)\d+)[^\]]{0,20}\]")
_SIGTERM = re.compile(SIGTERM_EXIT)
_TRACEBACK = re.compile(TRACEBACK_HEADER)

# What usually hangs after each phase, for a log that stops without an error.
HANG_HINTS: dict[str, str] = {
    "process_start": "The engine never reached distributed init: imports, a download from a hub (is the model "
    "path local and HF_HUB_OFFLINE=1 set?), or a compile step. Dump the stacks with "
    "`py-spy dump --pid <pid>`.",
    "distributed_init": "Ranks that start distributed init but never load weights are waiting for each other: "
    "NCCL P2P or network set-up (try NCCL_DEBUG=INFO, and NCCL_P2P_DISABLE=1 on PCIe boxes "
    "with broken P2P), a wrong --dist-init-addr, or a node that was not started.",
    "weights_loading": "Weights load slowly from a network filesystem or a hub, or a rank died while others wait. "
    "Put the weights on local disk, pre-download them, and check every rank's log for an error.",
    "weights_loaded": "After loading, the engine profiles memory: a hang here is usually a collective waiting "
    "for a rank that died. Check every rank's log.",
    "torch_compile": "torch.compile takes minutes on a first start (later starts load it from the cache, "
    "~/.cache/vllm/torch_compile_cache); one that never ends is a compiler subprocess that hangs or a rank that "
    "died. Look for running compiler processes and every rank's log; --enforce-eager (or -O0) confirms it.",
    "kv_cache_allocated": "Torch compile or kernel JIT can take many minutes on a first start; otherwise a rank "
    "is stuck. Check for compiler processes and every rank's log.",
    "cuda_graph_capture": "CUDA-graph capture hangs on broken NCCL/custom all-reduce or a huge batch list: try "
    "--disable-custom-all-reduce, fewer capture sizes, or disabling graphs to confirm.",
    "cuda_graph_done": "The server should start listening next: a rank that stopped reporting holds it back.",
    "http_listening": "The HTTP server is up but not ready: the warm-up request did not finish. Check that a "
    "generation works (`curl /v1/completions`) and the engine's log after the first request.",
    "warmup_done": "Warm-up finished but readiness never followed: check /health and the generation probe.",
}

GENERIC_REMEDY = (
    "No known signature matched. Read the root-cause line and the lines before it; "
    "`firstlight diagnose --json` gives the evidence for a bug report."
)


# An argparse usage listing (`usage: ...` and its `[--flag {a,b}]` continuation lines) names every choice of
# every flag, other engines' kernels and formats among them (trtllm_mha, gguf): it says nothing of who wrote it.
USAGE_LINE = re.compile(r"^\s*(usage: |\[-)")


def detect_engine(lines: Iterable[str]) -> str:
    """The engine whose fingerprints most lines carry (ties go to the registry's order). Counting stops early
    once one engine leads by far: fingerprints are dense, and a 2,000-line head costs ~25 ms at 7 searches a line."""
    fingerprints = _fingerprints()
    scores = dict.fromkeys(fingerprints, 0)
    for n, line in enumerate(lines, 1):
        if not USAGE_LINE.match(line):
            for name, pattern in fingerprints.items():
                if pattern.search(line):
                    scores[name] += 1
        if n % DETECT_EVERY == 0 and _clear_lead(_with_wrappers(scores)):
            break
    totals = _with_wrappers(scores)
    best = max(totals, key=lambda n: totals[n])
    return best if totals[best] > 0 else "unknown"


DETECT_EVERY = 250  # lines between looks at whether one engine already leads by far
DETECT_LEAD = 10  # ... by this factor over the runner-up, with at least DETECT_FLOOR lines
DETECT_FLOOR = 100


def _with_wrappers(scores: dict[str, int]) -> dict[str, int]:
    """An engine that wraps another (Ollama runs llama.cpp) counts the wrapped engine's lines as its own."""
    totals = dict(scores)
    for name, adapter in ENGINES.items():
        if adapter.wraps and totals.get(name):
            totals[name] += sum(totals.pop(inner, 0) for inner in adapter.wraps)
    return totals


def _clear_lead(totals: dict[str, int]) -> bool:
    first, second = ([*sorted(totals.values(), reverse=True), 0, 0])[:2]
    return first >= DETECT_FLOOR and first >= DETECT_LEAD * second


@cache
def _fingerprints() -> dict[str, re.Pattern[str]]:
    """Each engine's fingerprints as one pattern: one search per engine and line."""
    return {
        name: re.compile("|".join(f"(?:{p.pattern})" for p in adapter.fingerprints))
        for name, adapter in ENGINES.items()
        if adapter.fingerprints
    }


def _union_machine() -> PhaseMachine:
    """For a log of unknown origin: every engine's phase lines."""
    rules = tuple(r for a in ENGINES.values() for r in a.phases)
    ready = tuple(a.ready_line for a in ENGINES.values() if a.ready_line is not None)

    progress = tuple(p for a in ENGINES.values() for p in a.progress)
    return PhaseMachine((*rules, *(PhaseRule("ready", r) for r in ready)), progress, any_clock())


def diagnose_lines(segments: Iterable[tuple[int, str]], engine: str = "auto") -> Report:
    """Diagnose a log given as (line number, text) segments, in one pass and bounded memory (a newest-first log of
    up to NEWEST_FIRST_CAP lines is held to be read in time order)."""
    it = iter(segments)
    head = list(islice(it, DETECT_LINES))
    if engine in ("auto", "", None):
        engine = detect_engine(text for _, text in head)
    if newest_first(head):
        held = head + list(islice(it, NEWEST_FIRST_CAP))
        more = next(it, None)
        if more is None:
            order, numbers = in_time_order(held)
            return numbered_as_in_file(_diagnose(engine, order, iter(())), numbers)
        head, it = held, chain([more], it)  # too long to hold: read as it is
    return _diagnose(engine, head, it)


def _diagnose(engine: str, head: list[tuple[int, str]], it: Iterator[tuple[int, str]]) -> Report:
    adapter: EngineAdapter | None = ENGINES.get(engine)
    machine = adapter.machine(offline=True) if adapter else _union_machine()
    finder = RootCauseFinder()
    gpu = GpuSeen()
    phases = [PhaseSeen("process_start", 1, None)]
    progress_line = 0  # the last line that showed progress (a phase or a progress line)
    served = 0  # the first line after the ready line that shows the server answering a generation
    last_line: tuple[int, str] | None = None
    run_start: tuple[int, str] | None = None  # the first of the run of like lines the log has reached
    run_shape = ""
    count = 0
    for line_no, text in chain(head, it):
        count += 1
        shape = fold_digits(text)
        ev = machine.feed(text, line_no, shape)
        if ev is not None:
            progress_line = line_no
            if ev.entered:
                phases.append(PhaseSeen(ev.phase, line_no, ev.log_time, ev.aside, _process(text)))
        elif not served and machine.current == "ready" and _generated(text):
            served = line_no
        # a phase's own line is where it got to; a relay's prefix alone (docker compose's `vllm-1  |`) is a blank line
        kept = (ev is not None and ev.entered) or (not left_behind(text) and bool(without_relay(text).strip()))
        if kept:
            last_line = (line_no, text)
        if ev is not None or (kept and not same_run(shape, run_shape)):
            run_start, run_shape = (line_no, text), shape
        finder.feed(line_no, text, shape)
        gpu.read(line_no, text)
    stopped = stall(run_start, last_line, adapter.clocks if adapter else any_clock())
    finder.finish()
    return _conclude(engine, adapter, phases, finder, stopped, progress_line, served, count, gpu)


# A generation the server answered, as its access log shows it (a health check or a model list is not one; nor is an
# error status): uvicorn's `"POST /v1/chat/completions HTTP/1.1" 200` (vLLM, SGLang), llama-server's
# `request: POST /completion 127.0.0.1 200`, Ollama's (gin's) `[GIN] ... | 200 | ... | POST "/api/chat"`.
_GENERATION = r"/(?:v1/)?(?:chat/completions|completions?|generate|embeddings?|infill|api/(?:chat|generate|embed\w*))\b"
_GENERATED = re.compile(
    rf'"POST {_GENERATION}\S* HTTP/[\d.]+" 2\d\d\b|\brequest: POST {_GENERATION}\S* \S+ 2\d\d\b'
    rf'|\[GIN\] [^|]*\| 2\d\d \|.*\bPOST\s+"{_GENERATION}'
)


def _generated(line: str) -> bool:
    """The line is the access log of a generation the server answered (the substring test spares the regex)."""
    return "POST" in line and _GENERATED.search(line) is not None


def _stopped_by_sigterm(wrappers: list[tuple[int, str]]) -> bool:
    """Every wrapper says SIGTERM ended the process, apart from the traceback headers SIGTERM's exception has."""
    texts = [text for _, text in wrappers if not _TRACEBACK.search(text)]
    return bool(texts) and all(_SIGTERM.search(text) for text in texts)


STRONGEST_RULE = (
    "the strongest candidate (a named cause, then a generic exception, then a wrapper; INFO/WARNING lines below "
    "any error; the earliest of named causes within the causal band, and of equals)"
)
WRAPPER_RULE = "no candidate but a wrapper line: the first wrapper (a traceback header last), cause unknown"


def _conclude(
    engine: str,
    adapter: EngineAdapter | None,
    phases: list[PhaseSeen],
    finder: RootCauseFinder,
    last: tuple[int, str] | None,
    progress_line: int,
    served: int,
    count: int,
    gpu: GpuSeen,
) -> Report:
    report = Report("", engine, phases, None, count, finder.wrappers)
    report.outcome, report.diagnosis, report.rule = _decide(adapter, phases, finder, last, progress_line, served)
    report.rule += _on_newer_gpu(report.diagnosis, gpu)
    report.candidates = [c.explained() for c in finder.ranked()]
    return report


def _on_newer_gpu(diagnosis: Diagnosis | None, gpu: GpuSeen) -> str:
    """A kernel that cannot run here, on a GPU newer than the build: the build lacks its architecture (gpu.py).
    Changes the diagnosis in place and says why, for the rule; nothing when it does not apply."""
    sig = signatures_by_id().get(diagnosis.signature or "") if diagnosis else None
    if diagnosis is None or sig is None or sig.on_newer_gpu is None or gpu.newer is None:
        return ""
    line_no, named = gpu.newer
    diagnosis.category = sig.on_newer_gpu
    diagnosis.remedy = NEWER_GPU_REMEDY.format(gpu=named)
    return f"; on a GPU newer than the build (line {line_no} names {named}): {sig.on_newer_gpu}"


def _decide(
    adapter: EngineAdapter | None,
    phases: list[PhaseSeen],
    finder: RootCauseFinder,
    last: tuple[int, str] | None,
    progress_line: int,
    served: int,
) -> tuple[str, Diagnosis | None, str]:
    """The outcome, the diagnosis, and the rule that decided them. `progress_line` is the last line that showed the
    engine making progress (a phase or a progress line), `served` the first generation it answered after ready."""
    where = furthest(phases)
    if where.phase == "ready":
        return _after_ready(where.line, finder, served)
    best = finder.best()
    moved_on = _moved_on_past(best, phases, adapter.clocks if adapter else any_clock())
    if best is not None and moved_on is not None:
        went_past = f"the launch went on past line {best.line_no} (phase {moved_on.phase}, line {moved_on.line})"
        later = finder.best(after=moved_on.line)
        if later is not None and later.line_no != best.line_no and later.fatal:
            return "failed", _from_candidate(later, finder), f"{went_past}; the strongest cause after it"
        if not finder.wrappers:
            return "not_ready", _hang(where.phase, last, adapter), f"{went_past}, then stopped printing"
        rule = f"{went_past}; a process then exited with no cause after it, so that line is still the best"
        return "failed", _from_candidate(best, finder), rule
    stopped = _stopped_by_sigterm(finder.wrappers)
    if stopped and (best is None or (best.signature is None and not best.fatal)):
        rule = f"stopped by SIGTERM in phase {where.phase}, with nothing fatal before it"
        return "not_ready", _hang(where.phase, last, adapter), rule
    if finder.failed(best):
        if best:
            return "failed", _from_candidate(best, finder), STRONGEST_RULE
        return "failed", _from_wrapper(finder.wrappers), WRAPPER_RULE
    if best is not None and best.raised and best.line_no > progress_line:
        rule = f"the log stops on a fatal line (line {best.line_no}) with no progress after it: failed"
        return "failed", _from_candidate(best, finder), rule
    rule = f"nothing fatal: the log stops in phase {where.phase}"
    return "not_ready", _hang(where.phase, last, adapter), rule


def _after_ready(ready: int, finder: RootCauseFinder, served: int) -> tuple[str, Diagnosis | None, str]:
    """After the ready line, a named cause or a process that died fails the launch (uvicorn's `address already in
    use` after `Application startup complete.`), unless the server had answered a generation before the failure:
    then it started, and the diagnosis says how it failed while serving."""
    after = finder.failed_after(ready)
    if after is not None:
        # a cause first stated before the ready line, and said again after it, failed where it was said again
        at = after.line_no if after.line_no > ready else after.last_seen
        again = "" if at == after.line_no else f" (line {at}; first on line {after.line_no})"
        rule = f"the engine's ready line (line {ready}), then a named cause after it{again}"
        diagnosis = _from_candidate(after, finder)
    elif finder.died_at > ready:  # a kernel fault names no cause, yet it ended the server
        crash = finder.best(after=ready)
        at = crash.line_no if crash is not None and crash.line_no > ready else finder.died_at
        died = [(n, text) for n, text in finder.wrappers if n == finder.died_at]
        rule = f"the engine's ready line (line {ready}), then a process died (line {finder.died_at})"
        diagnosis = _from_candidate(crash, finder) if crash else _from_wrapper(died or finder.wrappers)
    else:
        return "ready", None, "the engine's own ready line"
    if served and served < at:
        return "ready", diagnosis, f"{rule}; it had answered a generation (line {served}): started, then failed serving"
    return "failed", diagnosis, f"{rule}: failed"


def _moved_on_past(
    best: Candidate | None, phases: list[PhaseSeen], clocks: tuple[re.Pattern[str], ...]
) -> PhaseSeen | None:
    """The first phase the launch entered at least CARRIED_ON_SECONDS after `best` was logged, both by the
    log's own clock (HH:MM:SS: llama.cpp's elapsed clock is not read), by the same process when both lines name
    one, and not reached aside: the engine carried on past that error. None when the error came back after it,
    or either line has no time."""
    if best is None:
        return None
    start = seconds(log_time(best.line, clocks))
    if start is None:
        return None
    process = _process(best.line)
    for seen in phases:
        if seen.line <= best.line_no or seen.aside:
            continue
        if process is not None and seen.process is not None and seen.process != process:
            continue
        at = seconds(seen.log_time)
        if at is not None and at - start >= CARRIED_ON_SECONDS:
            return seen if best.last_seen <= seen.line else None
    return None


def _process(line: str) -> str | None:
    m = _PROCESS.search(line[:200])
    return (m[1] or m[2]) if m else None


def _from_candidate(c: Candidate, finder: RootCauseFinder) -> Diagnosis:
    evidence = [*c.before, c.line, *c.after]
    remedy = c.remedy or GENERIC_REMEDY
    confidence = finder.confidence(c)
    return Diagnosis(
        c.category,
        c.line,
        c.line_no,
        [e.rstrip() for e in evidence],
        remedy,
        confidence,
        c.signature.id if c.signature else None,
        c.count,
    )


def _from_wrapper(wrappers: list[tuple[int, str]]) -> Diagnosis:
    """The first wrapper that says something failed, before a traceback's header, which says only that one follows."""
    line_no, text = next(((n, t) for n, t in wrappers if not _TRACEBACK.search(t)), wrappers[0])
    return Diagnosis("unknown", text, line_no, [text], GENERIC_REMEDY, 0.1)


def _hang(phase: str, last: tuple[int, str] | None, adapter: EngineAdapter | None) -> Diagnosis:
    line_no, text = last if last else (0, "")
    engine_hint = adapter.hang_hints.get(phase, "") if adapter else ""
    remedy = f"The log ends in phase {phase} without an error. " + " ".join(
        h for h in (HANG_HINTS.get(phase, ""), engine_hint) if h
    )
    return Diagnosis("hang_timeout", text, line_no, [text] if text else [], remedy.strip(), 0.5)


def diagnose_file(path: Path | str, engine: str = "auto") -> Report:
    with open(path, "rb") as f:
        return diagnose_lines(iter_lines(f), engine)


_BINARY = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f]")


def looks_binary(head: bytes) -> bool:
    """More than 10% control bytes (not tabs, newlines, escapes) in the first block: not a log."""
    return bool(head) and len(_BINARY.findall(head)) > len(head) // 10
