"""The real SGLang 0.5.23 server on the CPU (`make sglang`): up, watch, bench, check and down, and failures.

One SGLang server comes up for the tests that only need a server (`sglang_served`, this module only, so it
never runs beside another engine's launch on two cores); each failure test launches its own, one at a time.
SGLang runs on the CPU with a pure-torch stand-in for sgl-kernel's two CPU ops (tools/sglang_cpu/kernel), so
these tests exercise SGLang's own scheduler, HTTP server, streaming, log and health rule, not its kernels.
Speculative decoding does not run here (reference/sglang-cpu.md): SGLang's acceptance path is tested on
recorded GPU output in tests/unit/test_specdecode.py.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

import firstlight as fl
from firstlight.benchmark import specdecode
from firstlight.launch.supervisor import group_members
from firstlight.store import Store
from tests.conftest import (
    SGLANG_PY,
    TINY_MODEL,
    bench_two_levels,
    fail_and_check,
    firstlight,
    json_lines,
    sglang_spec,
)

pytestmark = [pytest.mark.engine]


@pytest.fixture(scope="module", autouse=True)
def sglang_available() -> None:
    if not SGLANG_PY.exists() or not (TINY_MODEL / "config.json").exists():
        pytest.fail("SGLang's CPU environment or the tiny model is missing: run `make sglang model` first")


@pytest.fixture(scope="module")
def sglang_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("sglang")
    store = tmp / "store.db"
    spec = sglang_spec(tmp)
    proc = firstlight("up", str(spec), "--json", store=store)
    launch = Store(store).latest_launch()
    yield {"proc": proc, "store": store, "events": json_lines(proc.stdout), "spec": spec, "launch": launch}
    if launch is not None:
        firstlight("down", str(launch.id), store=store)


def test_up_reaches_ready_through_sglang_phases(sglang_served: dict[str, Any]) -> None:
    proc = sglang_served["proc"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    entered = [e["phase"] for e in sglang_served["events"] if e["kind"] == "phase"]
    # parallel init, weights, KV cache and memory pool, HTTP, warm-up, ready; no CUDA graphs on the CPU
    assert entered == [
        "process_start",
        "distributed_init",
        "weights_loading",
        "weights_loaded",
        "kv_cache_allocated",
        "http_listening",
        "warmup_done",
        "ready",
    ], entered
    progress = [e for e in sglang_served["events"] if e["kind"] == "progress" and e["phase"] == "weights_loading"]
    assert progress and progress[-1]["progress"] == {"done": 1, "total": 1, "label": "shards"}


def test_ready_is_sglang_health_after_warmup_then_one_streamed_token(sglang_served: dict[str, Any]) -> None:
    """SGLang's /health is 503 until its own warm-up generation is done; firstlight's token comes after."""
    events = sglang_served["events"]
    ready = next(e for e in events if e["kind"] == "phase" and e["phase"] == "ready")
    assert ready["detail"].startswith("generated 1 token") and ready["token"]
    assert any(e["kind"] == "probe" and "answered 503" in e.get("detail", "") for e in events)
    log = Path(sglang_served["launch"].log_path).read_text()
    warmup = log.index('"POST /generate HTTP/1.1" 200')
    assert log.index('"GET /health HTTP/1.1" 503') < warmup < log.index('"GET /health HTTP/1.1" 200')
    assert log.index('"GET /health HTTP/1.1" 200') < log.index('"POST /v1/completions HTTP/1.1" 200')
    # the probe backs off while SGLang says "not yet": a handful of 503s, not one every 50 ms
    assert log.count('"GET /health HTTP/1.1" 503') <= 15


def test_bench_measures_sglang_and_reads_its_server_info(sglang_served: dict[str, Any], tmp_path: Path) -> None:
    url = sglang_served["launch"].url
    levels = bench_two_levels(url, sglang_served["store"], tmp_path / "bench.json")
    assert all(lv.get("speculative") is None for lv in levels)  # no speculative decoding: no acceptance invented
    # /metrics is 404 without --enable-metrics, so bench asked /server_info before and after each level
    log = Path(sglang_served["launch"].log_path).read_text()
    assert log.count('"GET /metrics HTTP/1.1" 404') >= 4 and log.count('"GET /server_info HTTP/1.1" 200') >= 4
    assert httpx.get(url + "/metrics", timeout=5).status_code == 404
    info = httpx.get(url + specdecode.SERVER_INFO_PATH, timeout=10).json()
    assert info["version"] == "0.5.23" and info["internal_states"]
    assert specdecode.parse_server_info(info) is None  # no avg_spec_accept_length without a draft


def test_status_logs_and_down_leave_none_of_sglangs_three_processes(sglang_served: dict[str, Any]) -> None:
    store, launch = sglang_served["store"], sglang_served["launch"]
    rows = {r["id"]: r for r in json.loads(firstlight("status", "--json", store=store).stdout)}
    assert rows[launch.id]["state"] == "ready" and rows[launch.id]["running"] is True
    names = {p.name() for p in group_members(launch.pgid)}
    assert {"sglang::scheduler", "sglang::detokenizer"} <= names, names  # and the main process
    down = firstlight("down", str(launch.id), store=store, timeout=60)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "none left" in down.stdout
    assert group_members(launch.pgid) == []


def test_check_reads_flags_from_the_installed_sglang(tmp_path: Path) -> None:
    findings = {f.id: f for f in fl.check(sglang_spec(tmp_path, args={"max-num-seqs": 8}))}
    assert findings["engine_env"].severity == "ok" and findings["engine_env"].message.startswith("sglang 0.5.23")
    flags = findings["engine_flags"]
    assert flags.severity == "fail" and "--max-num-seqs" in flags.message  # vLLM's name; SGLang has none
    ok = {f.id: f for f in fl.check(sglang_spec(tmp_path))}
    assert ok["engine_flags"].severity == "ok" and "known to sglang 0.5.23" in ok["engine_flags"].message


# ---------------------------------------------------------------- failures SGLang really produces on the CPU


def test_missing_model_path_fails(tmp_path: Path) -> None:
    spec = sglang_spec(tmp_path, model=str(tmp_path / "no-such-model"))
    fail_and_check(spec, tmp_path / "s.db", "missing_model_files", "no-such-model")


def test_port_taken_fails_although_sglang_hangs(tmp_path: Path) -> None:
    """SGLang 0.5.23 logs uvicorn's bind error after "Application startup complete." and then hangs: the
    fatal line fails the launch within the grace period, and down takes its processes."""
    spec = sglang_spec(tmp_path)
    port = yaml.safe_load(spec.read_text())["port"]
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        fail_and_check(spec, tmp_path / "s.db", "port_in_use", "address already in use")


def test_missing_cpu_engine_variable_fails(tmp_path: Path) -> None:
    spec = sglang_spec(tmp_path, env={"SGLANG_USE_CPU_ENGINE": None})
    with pytest.raises(fl.PreflightFailed) as refused:  # check knows SGLang's CPU path needs it
        fl.up(spec, store=tmp_path / "s.db")
    assert any("SGLANG_USE_CPU_ENGINE" in f.remedy for f in refused.value.findings if f.severity == "fail")


# ---------------------------------------------------------------- the kernel stand-in, in SGLang's environment

STANDIN_CHECK = """
import torch, sgl_kernel
# the request->token map: request rows 2 and 0 get 3 and 2 new locations, back to back in out_cache_loc
req_to_token = torch.zeros((4, 8), dtype=torch.int32)
sgl_kernel.assign_req_to_token_pool_cpu(
    torch.tensor([2, 0]), req_to_token, torch.tensor([1, 4]), torch.tensor([4, 6]),
    torch.tensor([11, 12, 13, 21, 22], dtype=torch.int64), 8)
assert req_to_token[2, 1:4].tolist() == [11, 12, 13] and req_to_token[0, 4:6].tolist() == [21, 22]
assert int(req_to_token.sum()) == 11 + 12 + 13 + 21 + 22
# KV rows in two layer buffers, copied by base address and row stride; 1->3 and 3->5 swap-safe (read first)
layers = [torch.arange(8 * 4, dtype=torch.float32).view(8, 4) + 100 * i for i in range(2)]
before = [t.clone() for t in layers]
ptrs = torch.tensor([t.data_ptr() for t in layers], dtype=torch.uint64)
strides = torch.tensor([t.stride(0) * t.element_size() for t in layers], dtype=torch.int64)
sgl_kernel.copy_all_layer_kv_cache_cpu(ptrs, strides, torch.tensor([3, 5]), torch.tensor([1, 3]))
for t, b in zip(layers, before):
    assert torch.equal(t[3], b[1]) and torch.equal(t[5], b[3]) and torch.equal(t[0], b[0])
assert not hasattr(torch.ops.sgl_kernel, "convert_weight_packed")  # SGLang keeps the plain weight path
try:
    sgl_kernel.verify_tree_greedy_cpu()
except NotImplementedError as e:
    assert "speculative decoding" in str(e)
else:
    raise AssertionError("a speculative kernel ran")
print("ok")
"""


def test_kernel_standin_does_what_sglangs_own_kernels_do() -> None:
    import subprocess

    res = subprocess.run([str(SGLANG_PY), "-c", STANDIN_CHECK], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]
