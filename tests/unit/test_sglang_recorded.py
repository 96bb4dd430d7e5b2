"""SGLang 0.5.23 as it really fails to start, on recorded logs; and what `check` knows before a CPU launch.

The logs in tests/data/failures/sglang/ were recorded on 2026-11-30 by tools/record_sglang_failures.py: each
is one real launch of `python -m sglang.launch_server` from `.venv-sglang` (SGLang 0.5.23, torch 2.13.0+cpu)
serving the tiny model on a 2-core CPU machine with one thing wrong, stdout and stderr merged as firstlight
keeps them. index.jsonl has the command, the exit code (or what happened instead) and the time it took; the
category and the root-cause line in it are a person's reading of each log, not firstlight's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firstlight.deployment import Deployment
from firstlight.diagnosis import diagnose
from firstlight.engines import get_engine
from firstlight.facts import Facts
from firstlight.preflight.engine import check_engine_variables
from tests.conftest import DATA

FAILURES = DATA / "failures" / "sglang"
INDEX = [json.loads(line) for line in (FAILURES / "index.jsonl").read_text().splitlines() if line.strip()]
FAILED = [c for c in INDEX if c["category"]]


@pytest.mark.parametrize("case", FAILED, ids=[c["file"] for c in FAILED])
def test_recorded_failed_starts_are_diagnosed(case: dict[str, str]) -> None:
    report = diagnose(FAILURES / case["file"])
    assert report.engine == "sglang"
    assert report.outcome == "failed"
    assert report.diagnosis is not None
    assert report.diagnosis.category == case["category"], report.diagnosis
    assert report.diagnosis.root_cause_line.strip() == case["root_cause_line"].strip()
    assert report.diagnosis.remedy


def test_launches_sglang_accepts_are_not_failures() -> None:
    """What SGLang takes without failing (it clamps, or falls back) must not read as a failure."""
    for case in (c for c in INDEX if not c["category"]):
        assert str(case["exit_code"]).startswith("came up"), case
        report = diagnose(FAILURES / case["file"])
        assert report.outcome != "failed", (case["file"], report.diagnosis)


def test_port_taken_is_failed_although_sglang_hangs_after_it() -> None:
    """uvicorn's bind error comes after "Application startup complete."; SGLang then never exits."""
    case = next(c for c in INDEX if c["file"] == "port-in-use.log")
    assert str(case["exit_code"]).startswith("still running")
    lines = (FAILURES / "port-in-use.log").read_text().splitlines()
    bind = next(i for i, line in enumerate(lines) if "error while attempting to bind" in line)
    assert any("Application startup complete." in line for line in lines[:bind])
    assert get_engine("sglang").is_fatal(lines[bind])  # live, the watcher fails it instead of waiting


def _spec(tmp_path: Path, env: dict[str, str], device: str | None = "cpu") -> Deployment:
    args = {"device": device} if device else {}
    return Deployment(engine="sglang", python="/usr/bin/python3", model=str(tmp_path), args=args, env=env)


def test_cpu_launch_without_the_cpu_engine_variable_fails_the_check(tmp_path: Path) -> None:
    sglang = get_engine("sglang")
    [missing] = check_engine_variables(Facts(), _spec(tmp_path, {}), sglang)
    assert missing.severity == "fail" and "SGLANG_USE_CPU_ENGINE" in missing.remedy
    [wrong] = check_engine_variables(Facts(), _spec(tmp_path, {"SGLANG_USE_CPU_ENGINE": "0"}), sglang)
    assert wrong.severity == "fail" and "'0'" in wrong.message
    [right] = check_engine_variables(Facts(), _spec(tmp_path, {"SGLANG_USE_CPU_ENGINE": "1"}), sglang)
    assert right.severity == "ok"
    assert check_engine_variables(Facts(), _spec(tmp_path, {}, device=None), sglang) == []  # on a GPU: no rule
    assert check_engine_variables(Facts(), _spec(tmp_path, {}), get_engine("vllm")) == []
