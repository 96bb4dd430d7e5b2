"""up / watch / status / logs / down against the real vLLM CPU engine on loopback.

One engine comes up for the whole session (the `served` fixture; launching takes ~30 s on two cores)
and the tests that only need a server share it; the failure tests each launch their own, one at a time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import httpx
import pytest

import firstlight as fl
from firstlight.launch.supervisor import group_members
from firstlight.logs import PHASES
from firstlight.store import Store
from tests.conftest import fail_and_check, firstlight, json_lines, tiny_spec

pytestmark = [pytest.mark.engine, pytest.mark.usefixtures("engine_available")]


def test_up_reaches_ready_with_vllm_phases_in_order(served) -> None:
    proc = served["proc"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    entered = [e["phase"] for e in served["events"] if e["kind"] == "phase" and not e.get("aside")]
    for phase in (
        "process_start",
        "distributed_init",
        "weights_loading",
        "weights_loaded",
        "kv_cache_allocated",
        "http_listening",
        "ready",
    ):
        assert phase in entered, entered
    assert [PHASES.index(p) for p in entered] == sorted(PHASES.index(p) for p in entered)
    assert entered[-1] == "ready"
    # vLLM's engine core warms up before its API server listens: recorded where it happens, out of the usual order
    asides = [e["phase"] for e in served["events"] if e["kind"] == "phase" and e.get("aside")]
    assert asides == ["warmup_done"], asides


def test_ready_only_after_one_generated_token(served) -> None:
    ready = next(e for e in served["events"] if e["kind"] == "phase" and e["phase"] == "ready")
    assert ready["detail"].startswith("generated 1 token")
    assert ready["token"]  # the text of the generated token
    launch = Store(served["store"]).get_launch(int(served["launch_id"]))
    log = Path(launch.log_path).read_text()
    # The probe's generation is in the engine's own access log, after its health check.
    assert log.index('"GET /health HTTP/1.1" 200') < log.index('"POST /v1/completions HTTP/1.1" 200')


def test_server_answers_streamed_completion(served) -> None:
    launch = Store(served["store"]).get_launch(int(served["launch_id"]))
    body = {
        "model": "tiny-llama",
        "prompt": "the model",
        "max_tokens": 16,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    chunks = []
    with httpx.stream("POST", launch.url + "/v1/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    usage = [c["usage"] for c in chunks if c.get("usage")]
    assert usage and usage[-1]["completion_tokens"] == 16  # the tiny model never stops early


def test_status_and_watch_and_logs(served) -> None:
    store = served["store"]
    st = firstlight("status", "--json", store=store)
    rows = {str(r["id"]): r for r in json.loads(st.stdout)}
    row = rows[served["launch_id"]]
    assert row["state"] == "ready" and row["running"] is True
    watch = firstlight("watch", served["launch_id"], "--json", store=store, timeout=30)
    assert watch.returncode == 0
    assert any(e["phase"] == "ready" for e in json_lines(watch.stdout))
    logs = firstlight("logs", served["launch_id"], store=store, timeout=30)
    assert "Application startup complete." in logs.stdout


# ---------------------------------------------------------------- failures reproducible on CPU


def test_missing_model_path_fails(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path, model=str(tmp_path / "no-such-model"))
    fail_and_check(spec, tmp_path / "s.db", "missing_model_files", "no-such-model")


def test_max_model_len_above_limit_fails(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path, args={"max-model-len": 100000})
    fail_and_check(spec, tmp_path / "s.db", "invalid_config", "100000")


def test_port_taken_fails(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path)
    import yaml

    port = yaml.safe_load(spec.read_text())["port"]
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        # The preflight names the holder and refuses; with --force the engine's own failure is diagnosed.
        refused = firstlight("up", str(spec), store=tmp_path / "s.db", timeout=60)
        assert refused.returncode == 2
        assert f"port {port} on 127.0.0.1 is in use by pid {os.getpid()}" in refused.stdout
        assert Store(tmp_path / "s.db").latest_launch() is None  # nothing was launched
        fail_and_check(spec, tmp_path / "s.db", "port_in_use", "Address already in use")


# ---------------------------------------------------------------- stall


def test_sigstop_is_stalled_within_allowance_and_down_cleans_up(tmp_path: Path) -> None:
    allowance = 3.0
    stall = {
        p: allowance
        for p in (
            "distributed_init",
            "weights_loading",
            "weights_loaded",
            "kv_cache_allocated",
            "cuda_graph_capture",
            "cuda_graph_done",
            "http_listening",
        )
    }
    spec = tiny_spec(tmp_path, stall=stall)
    store_path = tmp_path / "s.db"
    handle = fl.up(spec, store=store_path)  # the library: returns at once, the watcher keeps recording
    deadline = time.monotonic() + 180
    while handle.record.phase == "process_start":
        assert time.monotonic() < deadline, "the engine never left process_start"
        time.sleep(0.05)
    launch = handle.record
    os.killpg(launch.pgid, signal.SIGSTOP)
    stopped_at = time.time()
    record = handle.wait(timeout=allowance + 10)
    assert record.state == fl.LaunchState.STALLED, "never reported stalled"
    store = handle.store
    stalled = store.events(launch.id, kinds=("stalled",))[0]
    assert stalled.ts - stopped_at <= allowance + 1.0
    assert stalled.data["allowance"] == allowance
    res = firstlight("down", store=store_path, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "none left" in res.stdout
    assert group_members(launch.pgid) == []  # down leaves no process of the group, stopped ones included
    st = json.loads(firstlight("status", "--json", store=store_path).stdout)
    assert st[0]["id"] == launch.id and st[0]["state"] == "stopped" and st[0]["running"] is False


def test_transformers_serve_engine_ready(tmp_path: Path) -> None:
    import yaml

    from tests.conftest import ENGINE_PY, TINY_MODEL, free_port

    spec = tmp_path / "tf.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "tiny-tf",
                "engine": "transformers",
                "python": str(ENGINE_PY),
                "model": str(TINY_MODEL),
                "port": free_port(),
                "args": {"device": "cpu"},
                "log_dir": str(tmp_path / "logs"),
            }
        )
    )
    launch = fl.up(spec, store=tmp_path / "s.db")  # through the library, as a Python user would
    try:
        record = launch.wait(timeout=240)
        assert record.state == fl.LaunchState.READY, (record.reason, launch.log_path.read_text()[-2000:])
        entered = [e.phase for e in launch.events() if e.kind == "phase"]
        assert entered == ["process_start", "weights_loading", "weights_loaded", "http_listening", "ready"]
    finally:
        result = launch.down()
    assert result.stopped and not result.survivors
