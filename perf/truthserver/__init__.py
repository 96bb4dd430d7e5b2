"""The C truth server (truthserver.c): refserver's API, SSE bytes and GET /truth, on time at loads one Python
process cannot carry, over one or more processes sharing the port. `start_process` builds it when needed
(`make truthserver`), starts it and returns once it answers, as `refserver.start_process` does.
"""

from __future__ import annotations

import select
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from firstlight.testing import refserver

ROOT = Path(__file__).resolve().parents[2]
BINARY = ROOT / "perf" / "truthserver" / "build" / "truthserver"
LOADGEN = ROOT / "perf" / "truthserver" / "build" / "loadgen"


def build() -> None:
    """`make truthserver`: compiles the server and its load generator when a source is newer than its binary."""
    res = subprocess.run(["make", "-s", "truthserver"], cwd=ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"make truthserver failed:\n{res.stdout}{res.stderr}")


def start_process(
    port: int,
    ttft_ms: float,
    itl_ms: float,
    procs: int = 1,
    cpus: str | None = None,
    per_chunk: int = 1,
    prefix: Sequence[str] = (),
    timeout: float = 20.0,
) -> subprocess.Popen:
    """The server on 127.0.0.1:port in `procs` processes (process i pinned to the i-th core of `cpus`, e.g.
    "0-3", when given), after `prefix` (e.g. `taskset -c 0`); returned once it answers /health. Killing the
    returned process takes its server processes with it."""
    build()
    cmd = [*prefix, str(BINARY), *refserver.timing_args(port, ttft_ms, itl_ms, per_chunk), "--procs", str(procs)]
    if cpus:
        cmd += ["--cpus", cpus]
    # stderr goes to a file, not a pipe (a server blocked on a full pipe would lose its timing); the server
    # keeps its own descriptor of it. stdout carries one line, written once every process's socket listens:
    # on a port another server holds, that server's /health must not pass for this one's.
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, text=True)
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        listening = select.select([proc.stdout], [], [], timeout)[0] and proc.stdout.readline()
        if listening and refserver.wait_healthy(port, deadline):
            return proc
        proc.kill()
        proc.wait()
        errors.seek(0)
        reason = errors.read().decode(errors="replace").strip() or f"no answer on port {port} within {timeout:g} s"
    raise RuntimeError(f"the truth server did not start: {reason}")
