"""Record how the real SGLang fails to start on the CPU, for tests/data/failures/sglang/.

Each case is one real launch of `python -m sglang.launch_server` from `.venv-sglang` (made by `make sglang`)
serving the tiny model, with one thing wrong. The log (stdout and stderr merged, as firstlight keeps it) is
written as it came; index.jsonl gets the command, the exit code and the time to exit. The category and the
root-cause line are a person's reading of the log, added to index.jsonl by hand afterwards: this script
never asks firstlight, so the test data cannot agree with the diagnosis by construction.

Usage: .venv/bin/python tools/record_sglang_failures.py OUT_DIR [CASE ...]
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv-sglang" / "bin" / "python"
MODEL = ROOT / "models" / "tiny-llama"
PORT = 30391
MODEL_S = str(MODEL)
BASE_ENV = {"SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"}
# Without the stand-in: the same interpreter with the stand-in's folder taken off its path before SGLang loads.
NO_STANDIN = (
    "import runpy, sys; sys.path[:] = [p for p in sys.path if not p.endswith('sglang_cpu/kernel')]; "
    "sys.argv[0] = 'sglang.launch_server'; runpy.run_module('sglang.launch_server', run_name='__main__')"
)


@dataclass
class Case:
    name: str
    args: list[str]
    env: dict[str, str | None] = field(default_factory=dict)  # None removes a variable
    model: str = str(MODEL)
    setup: Callable[[], object] = nullcontext
    without_standin: bool = False


@contextmanager
def port_taken() -> Iterator[None]:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", PORT))
        s.listen()
        yield


def _empty_model_dir() -> Path:
    path = Path("/tmp/firstlight-sglang-record/no-config")
    path.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (path / name).write_bytes((MODEL / name).read_bytes())
    return path


def _truncated_weights_dir() -> Path:
    path = Path("/tmp/firstlight-sglang-record/truncated")
    path.mkdir(parents=True, exist_ok=True)
    for item in MODEL.iterdir():
        if item.is_file() and item.suffix != ".safetensors":
            (path / item.name).write_bytes(item.read_bytes())
    weights = (MODEL / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    return path


CASES = [
    Case("missing-model-path", [], model="/tmp/firstlight-sglang-record/does-not-exist"),
    Case("model-dir-without-config", [], model="<no-config>"),
    Case("truncated-weights", [], model="<truncated>"),
    Case("port-in-use", [], setup=port_taken),
    Case("unknown-argument", ["--max-num-seqs", "8"]),
    Case("context-length-beyond-model", ["--context-length", "65536"]),
    Case("max-total-tokens-beyond-memory", ["--max-total-tokens", "4000000000"]),
    Case("tp2-on-one-device", ["--tp-size", "2"]),
    Case("no-cpu-engine-env", [], env={"SGLANG_USE_CPU_ENGINE": None}),
    Case("no-kernel-standin", [], without_standin=True),
    Case("attention-backend-fa3-on-cpu", ["--attention-backend", "fa3"]),
    Case("quantization-fp8-on-cpu", ["--quantization", "fp8"]),
    # (NGRAM gets past start-up and then needs a speculative kernel the stand-in does not have: not SGLang's
    # own failure, so not recorded)
    Case(
        "speculative-eagle-on-cpu", ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", str(MODEL)]
    ),
]


def model_path(case: Case) -> str:
    if case.model == "<no-config>":
        return str(_empty_model_dir())
    if case.model == "<truncated>":
        return str(_truncated_weights_dir())
    return case.model


def record(case: Case, out: Path, timeout: float = 240) -> dict[str, object]:
    entry = ["-c", NO_STANDIN] if case.without_standin else ["-m", "sglang.launch_server"]
    argv = [str(PYTHON), *entry, "--model-path", model_path(case), "--device", "cpu"]
    argv += ["--host", "127.0.0.1", "--port", str(PORT), "--max-total-tokens", "16384", *case.args]
    if "--max-total-tokens" in case.args:  # the case's own value replaces the default one
        i = argv.index("--max-total-tokens")
        del argv[i : i + 2]
    env = {**os.environ, **BASE_ENV}
    for key, value in case.env.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    log = out / f"{case.name}.log"
    started = time.monotonic()
    with case.setup(), open(log, "wb") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        code = _wait(proc, log, timeout)
        _reap_group(proc.pid)
    return {
        "file": log.name,
        "category": "",
        "root_cause_line": "",
        "exit_code": code,
        "seconds_to_exit": round(time.monotonic() - started, 1),
        "how": " ".join(
            [*(f"{k}={v}" if v is not None else f"(no {k})" for k, v in {**BASE_ENV, **case.env}.items()), *argv[1:]]
        ).replace(str(ROOT) + "/", ""),
        "recorded": "2026-11-30, sglang 0.5.23 with torch 2.13.0+cpu (.venv-sglang), 2-core Debian 12 CPU machine",
    }


def _wait(proc: subprocess.Popen[bytes], log: Path, timeout: float) -> int | str:
    """The exit code; or what happened instead (a case SGLang accepts comes up and is stopped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            return code
        if b"The server is fired up and ready to roll" in log.read_bytes():
            return "came up: not a failure"
        time.sleep(0.5)
    return f"still running after {timeout:.0f} s: stopped"


def _reap_group(pgid: int) -> None:
    """SGLang leaves its scheduler and detokenizer behind when the main process dies first."""
    with suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def main(out_dir: str, names: list[str]) -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        if names and case.name not in names:
            continue
        row = record(case, out)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
