"""A real campaign on the CPU engine: baseline against n-gram speculative decoding with 2 and 4 draft
tokens, at C = 1, 4, 16, two repeats each, with a ladder whose first rung really fails.

One campaign, three runs of `firstlight sweep`, as an operator would live through them:
1. the sweep is SIGKILLed in the middle of a level (a crash or a reboot);
2. `--resume` stops what the dead sweep left running, runs only the missing cells, and meets an engine
   killed under load: that cell is kept as incomplete, the heavier level of that repeat is not run (it
   would kill the engine again), and the variant is relaunched for the next repeat;
3. `--resume --retry-failed` runs only those two cells.
Then the report: speedups and a crossover from these measurements, acceptance for the n-gram variants only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from firstlight.store import Store
from tests.conftest import firstlight, tiny_spec

LEVELS = [1, 4, 16]
VARIANTS = ["baseline", "ngram2", "ngram4"]
TOTAL = len(VARIANTS) * len(LEVELS) * 2


def write_campaign(tmp: Path) -> Path:
    # no VLLM_CPU_KVCACHE_SPACE: on CPU, --gpu-memory-utilization is then the share of host memory
    base = tiny_spec(tmp, env={"VLLM_CPU_KVCACHE_SPACE": None})
    plan = {
        "base": base.name,
        "variants": {
            "baseline": {},
            "ngram2": {"speculative": {"method": "ngram", "tokens": 2, "lookup_max": 3}},
            "ngram4": {"speculative": {"method": "ngram", "tokens": 4, "lookup_max": 3}},
        },
        # 0.999 of host memory is more than is ever available: vLLM refuses it at start-up, for real
        "ladder": {"gpu-memory-utilization": [0.999, 0.1]},
        "load": {"concurrency": LEVELS, "num-requests": 24, "input-len": 64, "output-len": 32},
        "repeats": 2,
        "slo": {"ttft_ms": 5000, "tpot_ms": 200},
    }
    path = tmp / "campaign.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def start(plan: Path, store: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "firstlight", "sweep", str(plan), "--store", str(store), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(what: str, test: Any, proc: subprocess.Popen[str], timeout: float = 400) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = test()
        if found:
            return found
        if proc.poll() is not None:
            pytest.fail(f"the sweep ended before {what}:\n{proc.stdout.read() if proc.stdout else ''}")
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"timed out waiting for {what}")


def running_cell(store: Path, variant: str, repeat: int, level: int, min_requests: int) -> dict[str, Any] | None:
    """The cell while it runs, once it has stored some of its requests (a level half-way)."""
    db = Store(store)
    try:
        for cell in db.cells(1):
            if (cell["variant"], cell["repeat"], cell["level"], cell["state"]) == (variant, repeat, level, "running"):
                if cell["run_id"] is None:
                    return None
                rows = db.db.execute(
                    "SELECT COUNT(*) FROM bench_requests r JOIN bench_levels l ON r.level_id = l.id "
                    "WHERE l.run_id = ? AND l.idx >= 0",
                    (cell["run_id"],),
                ).fetchone()[0]
                return cell if rows >= min_requests else None
        return None
    finally:
        db.close()


def stored_requests(store: Path) -> set[tuple[int, int]]:
    db = Store(store)
    try:
        return {(r[0], r[1]) for r in db.db.execute("SELECT level_id, idx FROM bench_requests")}
    finally:
        db.close()


@pytest.fixture(scope="module")
def campaign(engine_available: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("sweep")
    plan, store = write_campaign(tmp), tmp / "store.db"
    out: dict[str, Any] = {"plan": plan, "store": store}

    # 1. the sweep dies (SIGKILL) half-way through ngram2's second level; its engine is left running
    first = start(plan, store)
    killed = wait_for("ngram2 half-way through C=4", lambda: running_cell(store, "ngram2", 0, 1, 4), first)
    first.send_signal(signal.SIGKILL)
    first.wait()
    out["killed_cell"] = killed
    out["requests_after_kill"] = stored_requests(store)

    # 2. resume; the ngram4 engine is killed under load half-way through its first repeat's C=4
    second = start(plan, store, "--resume", "1")
    victim = wait_for("ngram4 half-way through C=4", lambda: running_cell(store, "ngram4", 0, 1, 4), second)
    db = Store(store)
    launch = db.get_launch(db.attempts(1)[-1]["launch_id"])
    assert launch is not None and launch.pgid
    os.killpg(launch.pgid, signal.SIGKILL)
    out["second_output"] = second.communicate(timeout=600)[0]
    out["second_rc"] = second.returncode
    out["engine_killed_cell"] = victim
    out["cells_after_second"] = db.cells(1)

    # 3. resume again, the cells not run too: only the cell the engine died in and the one skipped after it
    third = firstlight("sweep", str(plan), "--resume", "1", "--retry-failed", store=store, timeout=600)
    out["third"] = third
    out["cells"] = db.cells(1)
    out["attempts"] = db.attempts(1)
    report = firstlight("report", "sweep:1", "--json", store=store)
    assert report.returncode == 0, report.stderr
    out["report"] = json.loads(report.stdout)
    out["html"] = firstlight("report", "sweep:1", "--html", str(tmp / "sweep.html"), store=store)
    out["html_path"] = tmp / "sweep.html"
    return out


def test_the_first_rung_fails_for_real_is_diagnosed_and_the_next_comes_up(campaign: dict[str, Any]) -> None:
    first, second = campaign["attempts"][:2]
    assert (first["variant"], first["rung"], first["state"]) == (
        "baseline",
        {"gpu-memory-utilization": 0.999},
        "failed",
    )
    assert first["category"] == "gpu_memory_imbalance"  # vLLM's own "less than desired CPU memory utilization"
    assert "next rung: --gpu-memory-utilization 0.999 → 0.1" in first["reason"]
    assert second["rung"] == {"gpu-memory-utilization": 0.1} and second["ready_s"] > 0
    # later variants start on the rung that came up: 0.999 is never tried again
    assert all(a["rung"] == {"gpu-memory-utilization": 0.1} for a in campaign["attempts"][1:])


def test_a_killed_sweep_resumes_with_only_the_missing_cells_and_loses_nothing(campaign: dict[str, Any]) -> None:
    cells = campaign["cells_after_second"]
    killed = campaign["killed_cell"]
    tries = [c for c in cells if (c["variant"], c["level"], c["repeat"]) == ("ngram2", 1, 0)]
    assert [c["state"] for c in tries] == ["incomplete", "complete"]
    assert tries[0]["reason"] == "the sweep stopped during this cell" and tries[0]["id"] == killed["id"]
    # what the dead sweep measured is all still there
    assert campaign["requests_after_kill"] <= stored_requests(campaign["store"])
    # nothing measured complete before the kill ran again
    done_before = [c for c in cells if c["id"] < killed["id"]]
    assert done_before and all(c["state"] == "complete" for c in done_before)
    keys = [(c["variant"], c["level"], c["repeat"]) for c in cells if c["state"] == "complete"]
    assert len(keys) == len(set(keys))
    # the dead sweep's engine was stopped before the resumed one launched
    stopped = [a for a in campaign["attempts"] if a["variant"] == "ngram2" and a["state"] == "stopped"]
    assert len(stopped) == 2


def test_an_engine_killed_under_load_is_kept_incomplete_relaunched_and_resumed(campaign: dict[str, Any]) -> None:
    assert campaign["second_rc"] == 1, campaign["second_output"]  # partial: one cell not measured
    victim = campaign["engine_killed_cell"]
    died = [a for a in campaign["attempts"] if a["state"] == "died"]
    assert (
        len(died) == 1
        and died[0]["variant"] == "ngram4"
        and "the engine died during C=4, repeat 0" in died[0]["reason"]
    )
    after = {c["id"]: c for c in campaign["cells_after_second"]}
    assert after[victim["id"]]["state"] == "incomplete"
    skipped = [c for c in after.values() if c["state"] == "failed"]
    assert [(c["variant"], c["level"], c["repeat"]) for c in skipped] == [("ngram4", 2, 0)]
    assert skipped[0]["reason"] == "not run: the engine died at C=4 in this repeat"
    # the relaunch measured the next repeat whole
    ngram4_r1 = {(c["level"], c["state"]) for c in after.values() if c["variant"] == "ngram4" and c["repeat"] == 1}
    assert ngram4_r1 == {(0, "complete"), (1, "complete"), (2, "complete")}
    ngram4_attempts = [a for a in campaign["attempts"] if a["variant"] == "ngram4"]
    assert len(ngram4_attempts) == 3  # the one that died, its relaunch for the rest, and the third run's
    third = campaign["third"]
    assert third.returncode == 0, third.stdout + third.stderr
    new = [c for c in campaign["cells"] if c["id"] > max(after)]
    assert [(c["variant"], c["level"], c["repeat"], c["state"]) for c in new] == [
        ("ngram4", 1, 0, "complete"),
        ("ngram4", 2, 0, "complete"),
    ]


def test_the_report_measures_speedups_crossover_and_acceptance(campaign: dict[str, Any]) -> None:
    data = campaign["report"]
    assert data["state"] == "complete"
    measured = [c for c in data["cells"] if c["state"] == "complete"]
    assert len(measured) == TOTAL
    for variant in VARIANTS:
        for row in data["table"][variant]:
            assert row["repeats"] == 2 and row["throughput"]["median"] > 0
            assert (row["accept_len"] is not None) == (variant != "baseline")
            if variant != "baseline":
                assert row["accept_len"]["median"] > 1.0
    for variant in ("ngram2", "ngram4"):
        speedups = data["speedup"][variant]
        assert [s["concurrency"] for s in speedups] == LEVELS
        assert all(s["speedup"] > 0 and s["low"] <= s["speedup"] <= s["high"] for s in speedups)
        assert data["crossover"][variant]["verdict"]
    assert set(data["knee"]["per_variant"]) == set(VARIANTS)
    # A level whose median request got all its tokens in one read has a TPOT of 0 and no place on the front: on
    # a loaded 2-core machine the tiny model can finish before the API server flushes (even baseline at C=1)
    placed = {(v, row["level"]) for v in VARIANTS for row in data["table"][v] if (row["tpot_p50"] or {}).get("median")}
    assert {(p["variant"], p["level"]) for p in data["pareto"]} == placed
    assert placed and any(p["front"] for p in data["pareto"])
    assert campaign["html"].returncode == 0 and "data:image/png;base64" in campaign["html_path"].read_text()
