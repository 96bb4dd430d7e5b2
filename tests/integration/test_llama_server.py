"""llama.cpp's `llama-server`, launched for real through the library, benchmarked through the CLI.

The engine added as one module (engines/llama_cpp.py): its phases, its readiness rule (/health 200 once the
model is loaded, then one generated token), its failures diagnosed from its own log. Built by `make llama`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

import firstlight as fl
from firstlight.launch.supervisor import group_members
from firstlight.logs import PHASES
from tests.conftest import LLAMA_SERVER, TINY_GGUF, bench_two_levels, firstlight, free_port

pytestmark = [pytest.mark.engine]


@pytest.fixture(scope="module", autouse=True)
def llama_available() -> None:
    if not LLAMA_SERVER.exists() or not TINY_GGUF.exists():
        pytest.fail("llama-server or the tiny GGUF is missing: run `make llama` first")


def llama_spec(tmp_path: Path, **overrides: Any) -> Path:
    spec: dict[str, Any] = {
        "name": "tiny-llamacpp",
        "engine": "llama.cpp",
        "program": str(LLAMA_SERVER),
        "model": str(TINY_GGUF),
        "served_model_name": "tiny-llama",
        "port": free_port(),
        "args": {"ctx-size": 4096, "parallel": 4, "threads": 1, "metrics": True},
        "log_dir": str(tmp_path / "logs"),
        **overrides,
    }
    path = tmp_path / "llama.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_up_ready_bench_down(tmp_path: Path) -> None:
    spec = llama_spec(tmp_path)
    store = tmp_path / "s.db"
    findings = fl.check(spec)
    env = next(f for f in findings if f.id == "engine_env")
    assert env.severity == "ok" and env.message.startswith("llama.cpp 0.5.0"), env  # `llama-server --version`
    flags = next(f for f in findings if f.id == "engine_flags")
    assert flags.message.startswith("4 extra flag(s) known to llama.cpp"), flags  # from `llama-server --help`
    launch = fl.up(spec, store=store)
    try:
        record = launch.wait(timeout=120)
        assert record.state == fl.LaunchState.READY, (record.reason, launch.log_path.read_text()[-3000:])
        assert record.leader_start is not None  # `down` checks it before it signals the group
        events = launch.events()
        # the machine's own moves, in order; this build's listening line comes after the model is loaded, aside
        entered = [e.phase for e in events if e.kind == "phase" and not e.data.get("aside")]
        assert [e.phase for e in events if e.kind == "phase" and e.data.get("aside")] == ["http_listening"]
        assert entered[0] == "process_start" and entered[-1] == "ready"
        assert {"weights_loading", "kv_cache_allocated", "warmup_done"} <= set(entered), entered
        assert [PHASES.index(p) for p in entered] == sorted(PHASES.index(p) for p in entered)
        ready = next(e for e in events if e.kind == "phase" and e.phase == "ready")
        assert ready.data["detail"].startswith("generated 1 token")
        assert httpx.get(record.url + "/health", timeout=5).json() == {"status": "ok"}

        bench_two_levels(record.url, store, tmp_path / "bench.json")
    finally:
        result = launch.down()
    assert result.stopped and not result.survivors
    assert group_members(launch.record.pgid) == []


def test_missing_model_file_is_diagnosed_from_its_log(tmp_path: Path) -> None:
    spec = llama_spec(tmp_path, model=str(tmp_path / "no-such-model.gguf"))
    with pytest.raises(fl.PreflightFailed) as refused:  # the preflight sees it first
        fl.up(spec, store=tmp_path / "s.db")
    assert any(f.id == "model_files" for f in refused.value.findings if f.severity == "fail")
    launch = fl.up(spec, store=tmp_path / "s.db", force=True)  # and the engine's own failure is diagnosed
    record = launch.wait(timeout=60)
    assert record.state == fl.LaunchState.FAILED
    assert record.diagnosis is not None
    diagnosis = record.diagnosis["diagnosis"]
    assert diagnosis["category"] == "missing_model_files"
    assert (
        "failed to open GGUF file" in diagnosis["root_cause_line"]
        and "no-such-model.gguf" in diagnosis["root_cause_line"]
    )


def test_secrets_reach_the_engine_but_never_the_store(tmp_path: Path) -> None:
    """A token in the spec's env and an API key in its args: the engine runs with both (and is ready: the
    readiness probe sends the key the server demands); the store, `status --json` and the events hold them
    redacted; the store and the logs are readable by their owner only."""
    token, key = "hf_do_not_store_me_4711", "sk-do-not-store-me-0815"
    args = {"ctx-size": 4096, "parallel": 4, "threads": 1, "api-key": key}
    spec = llama_spec(tmp_path, env={"HF_TOKEN": token}, args=args)
    store = tmp_path / "private" / "s.db"
    launch = fl.up(spec, store=store)
    try:
        record = launch.wait(timeout=120)
        assert record.state == fl.LaunchState.READY, record.reason
        environ = Path(f"/proc/{record.pid}/environ").read_bytes().split(b"\0")
        assert f"HF_TOKEN={token}".encode() in environ  # the engine has it
        assert key.encode() in Path(f"/proc/{record.pid}/cmdline").read_bytes()
        assert httpx.get(record.url + "/v1/models", timeout=5).status_code == 401  # it demands the key
        assert record.spec["env"]["HF_TOKEN"] == "<redacted>" and record.spec["args"]["api-key"] == "<redacted>"
        assert key not in " ".join(record.argv)
        shown = firstlight("status", "--json", store=store).stdout + firstlight("watch", "--json", store=store).stdout
        assert token not in shown and key not in shown
    finally:
        launch.down()
    for path in store.parent.rglob("*"):  # the database, its -wal/-shm files, the address locks
        assert path.stat().st_mode & 0o077 == 0, (path, oct(path.stat().st_mode))
        if path.is_file():
            assert token.encode() not in path.read_bytes() and key.encode() not in path.read_bytes(), path
    assert store.parent.stat().st_mode & 0o077 == 0
    assert launch.log_path.stat().st_mode & 0o077 == 0 and launch.log_path.parent.stat().st_mode & 0o077 == 0
