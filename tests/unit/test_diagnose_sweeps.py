"""Failures met by sweeps, recorded (tests/data/failures/sweeps/index.jsonl says where and how each was
recorded): a vLLM CPU launch refused at start-up for asking more host memory than is available (the
ladder's first rung), and a transformers server that became ready, answered requests, and then lost its worker to
CUDA OOM under load (it started: outcome ready, and the diagnosis says how it failed while serving)."""

from __future__ import annotations

import json

import pytest

from firstlight.diagnosis import diagnose_file
from tests.conftest import DATA

FAILURES = DATA / "failures" / "sweeps"
INDEX = [json.loads(line) for line in (FAILURES / "index.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("case", INDEX, ids=[c["file"] for c in INDEX])
def test_recorded_sweep_failures_are_diagnosed(case: dict[str, str]) -> None:
    report = diagnose_file(FAILURES / case["file"], "auto")
    assert report.engine == case["engine"]
    assert report.outcome == case["outcome"]
    assert report.diagnosis is not None
    assert report.diagnosis.category == case["category"]
    assert case["root_cause_contains"] in report.diagnosis.root_cause_line


def test_a_server_that_answered_requests_and_then_failed_started_and_says_how_it_failed() -> None:
    report = diagnose_file(FAILURES / "transformers-cb-oom-after-ready-h200.log", "transformers")
    assert [p.phase for p in report.phases][-1] == "ready"
    assert report.outcome == "ready" and "failed serving" in report.rule
    assert report.diagnosis is not None and "allocating 7.80 GiB" in report.diagnosis.remedy
