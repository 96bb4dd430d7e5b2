"""The real failed-launch logs of the corpus (tests/data/corpus, from public issues)."""

from __future__ import annotations

import json

import pytest

from firstlight.diagnosis import diagnose_file
from firstlight.diagnosis.signatures import CATEGORIES
from tests.conftest import DATA, firstlight

CORPUS = DATA / "corpus"
INDEX = [json.loads(line) for line in (CORPUS / "index.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("case", INDEX, ids=[c["id"] for c in INDEX])
def test_category_and_root_cause_line(case: dict) -> None:
    report = diagnose_file(CORPUS / f"{case['id']}.log")
    assert report.outcome in ("failed", "not_ready")
    assert report.diagnosis is not None
    assert report.diagnosis.category == case["category"]
    assert report.diagnosis.root_cause_line.strip() == case["root_cause_line"].strip()
    lines = (CORPUS / f"{case['id']}.log").read_bytes().decode("utf-8", "replace").split("\n")
    assert lines[report.diagnosis.line - 1].rstrip("\r") == report.diagnosis.root_cause_line
    assert report.diagnosis.remedy


RELAYS = {
    "docker compose": lambda n: "vllm-server-1  | ",
    "kubectl --timestamps": lambda n: f"2026-04-03T17:38:{n % 60:02d}.123456789Z ",
    "journald (iso)": lambda n: f"2026-04-03T17:38:{n % 60:02d}+0000 gpu-node-3 vllm[4123]: ",
    "syslog": lambda n: f"Apr  3 17:38:{n % 60:02d} gpu-node-3 vllm[4123]: ",
    "pm2": lambda n: "0|vllm     | ",
}


@pytest.mark.parametrize("relay", list(RELAYS))
def test_a_relayed_log_is_read_as_the_engine_wrote_it(relay: str, tmp_path) -> None:
    """Every corpus log, each line behind the prefix of what carried it to the file (constructed from the real
    logs): the same category and the same line, its prefix kept."""
    prefix = RELAYS[relay]
    for case in INDEX:
        lines = (CORPUS / f"{case['id']}.log").read_bytes().decode("utf-8", "replace").split("\n")
        relayed = tmp_path / f"{case['id']}.log"
        relayed.write_text("\n".join(prefix(n) + line if line else line for n, line in enumerate(lines)))
        d = diagnose_file(relayed).diagnosis
        assert d is not None and d.category == case["category"], case["id"]
        assert d.root_cause_line.strip().endswith(case["root_cause_line"].strip()), case["id"]


def test_json_output_shape() -> None:
    res = firstlight("diagnose", str(CORPUS / "004.log"), "--json", timeout=60)
    assert res.returncode == 1
    out = json.loads(res.stdout)
    assert set(out) >= {"outcome", "engine", "phases", "last_phase", "diagnosis"}
    assert out["outcome"] == "failed" and out["engine"] == "vllm"
    d = out["diagnosis"]
    assert set(d) >= {"category", "root_cause_line", "line", "evidence", "remedy", "confidence"}
    assert d["category"] in CATEGORIES and 0 <= d["confidence"] <= 1
    # numbers captured from the log make the remedy concrete
    assert "7.34 of 139.72 GiB" in d["remedy"] and "nvidia-smi --query-compute-apps" in d["remedy"]


def test_cut_short_log_is_not_ready_with_last_phase() -> None:
    report = diagnose_file(CORPUS / "042.log")
    assert report.outcome == "not_ready"
    assert report.last_phase == "weights_loading"
    assert "weights_loading" in report.diagnosis.remedy


def test_human_output_and_stdin() -> None:
    text = (CORPUS / "016.log").read_text()
    res = firstlight("diagnose", "-", timeout=60, stdin=text)
    assert res.returncode == 1
    assert "nccl_error" in res.stdout and "NCCL_DEBUG=INFO" in res.stdout
    assert "outcome: failed" in res.stdout
