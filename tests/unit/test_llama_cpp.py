"""llama.cpp's `llama-server` as an engine, on real logs.

The logs were recorded on 2026-11-30 from llama-server built from the llama.cpp tree vendored in the
llama-cpp-python 0.3.36 sdist (version 0.5.0-dev, commit 0c1e570), on a 2-core Debian 12 CPU machine like
this one, serving the GGUF that tools/make_tiny_gguf.py writes: startups in tests/data/startup/
(`-lv 4` shows the loader lines the default verbosity hides), failed starts in
tests/data/failures/llama-server/ with index.jsonl (the command, exit code, category and root-cause line). Two
more failed starts of the same build joined them on 2026-12-03 from a held-out set recorded with
tools/record_failures.py (a grammar file that is not there, a port past 65535, a chat template file with a Jinja
syntax error, the model given to --lora), and two of the same tree built with
CUDA on an NVIDIA H200 by tools/record_gpu_failures.py (gpu-*: a --main-gpu the machine does not have, row split on
a device without split buffers); their labels are a person's reading.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firstlight.deployment import Deployment
from firstlight.diagnosis import diagnose
from firstlight.engines import get_engine, launchable
from firstlight.errors import SpecError
from firstlight.logs import iter_lines
from tests.conftest import DATA

STARTUP = DATA / "startup"
FAILURES = DATA / "failures" / "llama-server"
INDEX = [json.loads(line) for line in (FAILURES / "index.jsonl").read_text().splitlines()]
ENGINE = get_engine("llama.cpp")

# At the default verbosity: loading model → threadpool (context and KV cache exist) → slots (warm-up done) →
# model loaded; this build listens for HTTP right after (recorded aside: the launch was ready already)
DEFAULT = ["process_start", "weights_loading", "kv_cache_allocated", "warmup_done", "ready", "http_listening"]
# `-lv 4` adds the weight buffer line; at the default verbosity a context warning (`llama_context: n_ctx_seq (16384) >
# n_ctx_train (2048)`) says the weights are in, as the context is made only once they are
LOADED = [
    "process_start",
    "weights_loading",
    "weights_loaded",
    "kv_cache_allocated",
    "warmup_done",
    "ready",
    "http_listening",
]


@pytest.mark.parametrize(
    ("log", "phases"),
    [
        ("llama-server-ready.log", DEFAULT),
        ("llama-server-ready-defaults.log", DEFAULT),
        ("llama-server-ready-ctx-over-train.log", LOADED),
        ("llama-server-ready-ngl-on-cpu.log", DEFAULT),
        ("llama-server-ready-speculative.log", DEFAULT),
        ("llama-server-ready-lv4.log", LOADED),
        ("llama-server-ready-1gb-model-lv4.log", LOADED),
    ],
)
def test_recorded_startups_reach_ready_through_the_phases(log: str, phases: list[str]) -> None:
    report = diagnose(STARTUP / log)
    assert report.engine == "llama.cpp"
    assert report.outcome == "ready"
    assert [p.phase for p in report.phases] == phases
    assert [p.phase for p in report.phases if p.aside] == ["http_listening"] and report.last_phase == "ready"


def test_live_machine_wakes_the_prober_on_the_ready_line_but_never_enters_ready_itself() -> None:
    """Live, ready needs one generated token too: the log's own ready line only wakes the prober."""
    machine = ENGINE.machine()
    with open(STARTUP / "llama-server-ready.log", "rb") as f:
        lines = list(iter_lines(f))
    for line_no, text in lines:
        machine.feed(text, line_no)
    assert machine.current == "warmup_done"
    assert any(ENGINE.ready_line.search(text) for _, text in lines)  # type: ignore[union-attr]


@pytest.mark.parametrize("case", INDEX, ids=[c["file"] for c in INDEX])
def test_recorded_failed_starts_are_diagnosed(case: dict[str, str]) -> None:
    report = diagnose(FAILURES / case["file"])
    assert report.outcome == "failed"
    assert report.diagnosis is not None
    assert report.diagnosis.root_cause_line.strip() == case["root_cause_line"].strip()
    if case["file"] == "host-not-local.log":
        # the same "couldn't bind" line as a port in use (index.jsonl's note): the remedy names both causes
        assert report.diagnosis.category == "port_in_use" and "--host" in report.diagnosis.remedy
    else:
        assert report.diagnosis.category == case["category"]


def test_remedy_carries_what_the_line_says() -> None:
    report = diagnose(FAILURES / "gguf-version-too-new.log")
    assert report.diagnosis is not None
    assert "version 4" in report.diagnosis.remedy and "up to 3" in report.diagnosis.remedy


def test_command_line_and_spec() -> None:
    assert "llama.cpp" in launchable()
    dep = Deployment.model_validate(
        {
            "engine": "llama.cpp",
            "program": "/opt/llama/bin/llama-server",
            "model": "/models/tiny.gguf",
            "served_model_name": "tiny",
            "port": 8014,
            "args": {"ctx-size": 2048, "parallel": 4, "metrics": True},
        }
    )
    assert ENGINE.argv(dep) == [
        "/opt/llama/bin/llama-server",
        "--model",
        "/models/tiny.gguf",
        "--alias",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        "8014",
        "--ctx-size",
        "2048",
        "--parallel",
        "4",
        "--metrics",
    ]
    assert dep.python is None  # a binary, not a Python environment


def test_spec_without_the_program_names_the_field(tmp_path: Path) -> None:
    from firstlight.deployment import load_deployment

    spec = tmp_path / "spec.yaml"
    spec.write_text("engine: llama.cpp\nmodel: /models/tiny.gguf\n")
    with pytest.raises(SpecError, match=r"program: required field is missing \(llama.cpp runs with its own program\)"):
        load_deployment(spec)


def test_flags_are_read_from_the_programs_help_and_judged() -> None:
    """tests/data/software/llama-server-help.txt: `llama-server --help` of the recorded build (731 lines).
    `--no-mmap` was removed from that build (use `-lm none`), so it is not a flag there."""
    from firstlight.facts import Facts, SoftwareFacts
    from firstlight.facts.software import flags_in_help
    from firstlight.preflight import run_checks

    flags = flags_in_help((DATA / "software" / "llama-server-help.txt").read_text())
    assert {"--ctx-size", "--parallel", "--metrics", "--alias", "--host", "--port", "--model"} <= set(flags)
    assert "--no-mmap" not in flags and len(flags) > 100
    software = SoftwareFacts(interpreter="llama-server", program_version="0.5.0-dev", program_flags=flags)
    dep = Deployment.model_validate(
        {
            "engine": "llama.cpp",
            "program": "/opt/llama/bin/llama-server",
            "model": "/models/tiny.gguf",
            "args": {"ctx-size": 2048, "no-mmap": True},
        }
    )
    findings = {f.evidence.get("flag"): f for f in run_checks(Facts(software=software), dep) if f.id == "engine_flags"}
    assert findings["--no-mmap"].severity == "fail" and "llama.cpp 0.5.0-dev" in findings["--no-mmap"].message
    assert "--ctx-size" not in findings
