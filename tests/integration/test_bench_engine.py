"""bench on the real vLLM CPU engine: autoregressive, then n-gram speculative decoding, compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from firstlight.launch.supervisor import group_members
from firstlight.store import Store
from tests.conftest import firstlight, tiny_spec

pytestmark = [pytest.mark.engine, pytest.mark.usefixtures("engine_available")]

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
LOAD = ["--concurrency", "1,4", "--num-requests", "8", "--output-len", "32", "--input-len", "64", "--warmup", "1"]


def test_baseline_then_ngram_compared(served, tmp_path: Path) -> None:
    store = served["store"]
    launch = Store(store).get_launch(int(served["launch_id"]))
    base_json = tmp_path / "base.json"
    res = firstlight("bench", "--url", launch.url, *LOAD, "--label", "baseline", "--json", str(base_json), store=store)
    assert res.returncode == 0, res.stdout + res.stderr
    base = json.loads(base_json.read_text())
    assert base["tokenizer"].startswith("server /tokenize")
    for lv in base["levels"]:
        assert lv["completed"] == 8 and lv["failed"] == 0
        assert lv["output_tokens"] == 8 * 32  # the tiny model never stops early
        assert lv["input_tokens"] == 8 * 64  # exact input lengths, as the server counted them
        assert lv["spec_decode"] is None  # no drafts without speculative decoding

    spec = tiny_spec(tmp_path, args={"speculative-config": NGRAM})
    ngram_json = tmp_path / "ngram.json"
    res = firstlight(
        "bench", "--launch", str(spec), *LOAD, "--label", "ngram", "--json", str(ngram_json), store=store, timeout=600
    )
    assert res.returncode == 0, res.stdout + res.stderr
    ngram = json.loads(ngram_json.read_text())
    for lv in ngram["levels"]:
        sd = lv["spec_decode"]
        assert sd is not None and sd["scope"] == "this level (counter deltas)"
        assert sd["drafts"] > 0 and sd["draft_tokens"] > 0
        assert 0 < sd["acceptance_rate"] <= 1
        assert 1 < sd["mean_acceptance_length"] <= 4
    # up, bench, down in one command: the ngram launch is stopped and nothing of it is left
    launched = Store(store).latest_launch()
    assert launched.id != launch.id and launched.state == "stopped"
    assert group_members(launched.pgid) == []

    rep = firstlight(
        "report",
        str(base["run"]),
        str(ngram["run"]),
        "--json",
        "--md",
        str(tmp_path / "r.md"),
        "--html",
        str(tmp_path / "r.html"),
        store=store,
    )
    assert rep.returncode == 0, rep.stderr
    compared = json.loads(rep.stdout)["comparison"]
    assert [c["level"] for c in compared] == ["C=1", "C=4"]
    assert all(c["speedup"] and c["speedup"] > 0 for c in compared)
    html = (tmp_path / "r.html").read_text()
    assert html.count("data:image/png;base64,") == 3 and "speedup" in html
    assert "| C=4 |" in (tmp_path / "r.md").read_text()


def test_bench_launch_with_a_bad_spec_is_a_clear_error(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump({"engine": "vllm"}))
    res = firstlight("bench", "--launch", str(spec), store=tmp_path / "s.db", timeout=60)
    assert res.returncode == 2 and "python: required field is missing" in res.stderr
