"""`down` never signals a process group that is no longer the launch's: the group leader's start time is
recorded at launch, and a pgid now held by another process (the number reused after the engine died) is
refused, with nothing signalled. Real processes, started here in sessions of their own."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from firstlight.launch import get_launch
from firstlight.launch.supervisor import launch_members, process_start_time
from firstlight.store import LaunchState, Store
from tests.conftest import firstlight


@pytest.fixture
def other_process() -> Iterator[subprocess.Popen[bytes]]:
    """Someone else's process, leader of its own group (as a reused pgid's holder would be)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def record_launch(store: Store, pgid: int, leader_start: float | None) -> int:
    launch_id = store.add_launch("old", "vllm", {"engine": "vllm"}, "http://127.0.0.1:1", "/nonexistent.log")
    store.update_launch(launch_id, state=LaunchState.READY, pid=pgid, pgid=pgid, leader_start=leader_start)
    return launch_id


def test_a_reused_pgid_is_refused_and_nothing_is_signalled(tmp_path: Path, other_process) -> None:  # type: ignore[no-untyped-def]
    store = Store(tmp_path / "s.db")
    started = process_start_time(other_process.pid)
    assert started is not None
    # the launch's leader started an hour before the process that now holds its number
    launch_id = record_launch(store, other_process.pid, started - 3600)
    assert launch_members(other_process.pid, started - 3600) == []  # status: not running
    result = get_launch(launch_id, store).down(grace=1)
    assert result.refused and f"process group {other_process.pid} now belongs to another process" in result.refused
    assert result.stopped == [] and other_process.poll() is None  # untouched
    assert [e.kind for e in store.events(launch_id)] == ["down_refused"]
    res = firstlight("down", str(launch_id), store=tmp_path / "s.db", timeout=60)
    assert res.returncode == 1 and "nothing was signalled" in res.stderr and "Traceback" not in res.stderr
    assert other_process.poll() is None


def test_the_launchs_own_group_is_stopped(tmp_path: Path, other_process) -> None:  # type: ignore[no-untyped-def]
    store = Store(tmp_path / "s.db")
    launch_id = record_launch(store, other_process.pid, process_start_time(other_process.pid))
    assert [p.pid for p in launch_members(other_process.pid, process_start_time(other_process.pid))] == [
        other_process.pid
    ]
    result = get_launch(launch_id, store).down(grace=2)
    assert result.refused is None and result.stopped == [other_process.pid] and not result.survivors
    deadline = time.monotonic() + 5
    while other_process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert other_process.poll() is not None
    assert not psutil.pid_exists(other_process.pid) or psutil.Process(other_process.pid).status() == "zombie"
