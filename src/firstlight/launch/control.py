"""Starting and stopping launches: what `up` and `down` do, usable from other commands too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from firstlight.errors import StoreError
from firstlight.launch.supervisor import SECRETS_VAR, group_members, group_reused, private_log, stop_group
from firstlight.secrets import split_secrets
from firstlight.store import LaunchRecord, LaunchState, Store

if TYPE_CHECKING:
    from firstlight.deployment import Deployment


def start_launch(store: Store, dep: Deployment) -> LaunchRecord:
    """Record the launch and start its watcher, which starts the engine. Returns at once."""
    log_dir = Path(dep.log_dir).expanduser()
    log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # an engine's log can hold what it was given
    public, secrets = split_secrets(dep.model_dump(mode="json"))
    launch_id = store.add_launch(dep.name, dep.engine, public, dep.url, "")
    # The time makes the name unique across stores sharing a log directory: a launch never appends to
    # (and is never diagnosed with) an older launch's log.
    stem = f"{_safe(dep.name)}-{launch_id}-{time.strftime('%Y%m%d-%H%M%S')}"
    log_path = log_dir / f"{stem}.log"
    store.update_launch(launch_id, log_path=str(log_path))
    # The secrets reach the watcher in its environment, which only this user can read, never in a file.
    env = {**os.environ, SECRETS_VAR: json.dumps(secrets)} if secrets else None
    _start_watcher(store, launch_id, log_dir / f"{stem}.watcher.log", env=env)
    launch = store.get_launch(launch_id)
    assert launch is not None
    return launch


def reattach(store: Store, launch: LaunchRecord) -> None:
    """Start a watcher for a launch whose watcher died while its engine runs on: it replays the log,
    follows it, probes readiness and decides, as the first one would have."""
    _start_watcher(store, launch.id, Path(launch.log_path).with_suffix(".watcher.log"), "--attach")


def _start_watcher(
    store: Store, launch_id: int, watcher_log: Path, *extra: str, env: dict[str, str] | None = None
) -> None:
    """The watcher daemon, in a session of its own so that it outlives the command that started it."""
    with private_log(watcher_log) as wlog:
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "firstlight.launch.daemon",
                "--store",
                str(store.path),
                "--launch",
                str(launch_id),
                *extra,
            ],
            stdin=subprocess.DEVNULL,
            stdout=wlog,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "launch"


@dataclass
class StopResult:
    stopped: list[int]  # pids that were running
    survivors: list[int]  # pids still alive after SIGKILL
    gpu_holders: list[int]  # of the stopped pids, those NVML still shows holding GPU memory
    refused: str | None = None  # why nothing was signalled (the group id now belongs to another process)
    gpu_release_s: float | None = None  # from the processes' exit until NVML showed none of them on a GPU


def stop_launch(store: Store, launch: LaunchRecord, grace: float = 15.0) -> StopResult:
    """SIGTERM the engine's group, SIGKILL after `grace`; check that nothing is left, on the GPU too.
    A systemd launch is stopped through its unit (KillMode=control-group takes every process)."""
    if launch.spec.get("supervisor") == "systemd":
        from firstlight.deployment import Deployment
        from firstlight.launch import systemd

        systemd.stop(systemd.unit_name(Deployment.model_validate(launch.spec)))
    if launch.pgid is None:
        launch = _engine_started(store, launch)
    if launch.pgid is None:
        store.update_launch(launch.id, state=LaunchState.STOPPED, ended=time.time(), reason="stopped before it started")
        return StopResult([], [], [])
    holder = group_reused(launch.pgid, launch.leader_start)
    if holder is not None:
        refused = (
            f"process group {launch.pgid} now belongs to another process (pid {holder.pid}, "
            f"{_describe(holder)}): the launch's engine is gone, and nothing was signalled"
        )
        store.add_event(launch.id, "down_refused", launch.phase, reason=refused)
        return StopResult([], [], [], refused)
    members = [p.pid for p in group_members(launch.pgid)]
    try:
        if launch.state not in (LaunchState.FAILED, LaunchState.EXITED):
            store.update_launch(
                launch.id, state=LaunchState.STOPPED, ended=time.time(), reason="stopped by firstlight down"
            )
        store.add_event(launch.id, "down", launch.phase, pids=members)
    except StoreError:
        pass  # a full store must not keep an engine running: stop it all the same
    survivors = stop_group(launch.pgid, grace=grace)
    from firstlight.nvml import Nvml  # only `down` asks the driver; `status` and `watch` need not load it

    gpu_holders: list[int] = []
    released: float | None = None
    nvml = Nvml()
    if nvml.available:
        gone = time.monotonic()
        deadline = gone + 10  # the driver releases memory shortly after the process is gone
        while True:
            held = {pid for m in nvml.memory() for pid in m.processes}
            gpu_holders = sorted(held & set(members))
            if not gpu_holders:
                released = time.monotonic() - gone
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        nvml.close()
    return StopResult(members, survivors, gpu_holders, gpu_release_s=released)


def _engine_started(store: Store, launch: LaunchRecord, wait_s: float = 10.0) -> LaunchRecord:
    """A launch recorded but whose engine its watcher may be starting this instant: wait (while the watcher
    lives) for the engine's group to be recorded, so `down` right after `up` leaves nothing behind."""
    from firstlight.launch.supervisor import alive

    deadline = time.monotonic() + wait_s
    while launch.pgid is None and launch.state == LaunchState.STARTING and time.monotonic() < deadline:
        if launch.watcher_pid is not None and not alive(launch.watcher_pid):
            break
        time.sleep(0.05)
        launch = store.get_launch(launch.id) or launch
    return launch


def _describe(proc: psutil.Process) -> str:
    try:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(proc.create_time()))
        return f"started {started}: {' '.join(proc.cmdline())[:200] or proc.name()}"
    except psutil.Error:
        return "gone since"
