"""The library's face of a launch: `up(spec)` starts one, `Launch` follows, waits for and stops it.

A `Launch` reads everything from the store, so a launch started by another process (or by `up
--detach` an hour ago) is followed the same way. The watcher process decides everything about the
launch it can see; the one thing it cannot decide, its own death, is noticed here by whoever follows.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from firstlight.errors import LaunchInTheWay, LaunchNotFound, PreflightFailed
from firstlight.launch.control import StopResult, start_launch, stop_launch
from firstlight.store import Event, LaunchRecord, LaunchState, Store

# Following, listing and stopping a launch needs only the store and the process table: the spec model,
# the engine adapters and the checks are imported where they are used, so `status`, `watch` and `down`
# start fast.
if TYPE_CHECKING:
    from firstlight.deployment import Deployment
    from firstlight.engines import EngineAdapter
    from firstlight.facts import Facts
    from firstlight.preflight import Findings

POLL_S = 0.05
WATCHER_GONE = "the watcher process is gone"
WATCHER_CHECK_S = 1.0


class Launch:
    """One launch in a store: its record, its events, and the verbs `wait` and `down`."""

    def __init__(self, store: Store, launch_id: int, findings: Findings | None = None) -> None:
        self.store = store
        self.id = launch_id
        self.findings = findings  # the preflight's, when this process started the launch

    @property
    def record(self) -> LaunchRecord:
        """The launch as stored now (state, phase, pids, reason, diagnosis)."""
        record = self.store.get_launch(self.id)
        if record is None:
            raise LaunchNotFound(f"no launch {self.id} in {self.store.path}")
        return record

    @cached_property
    def deployment(self) -> Deployment:
        from firstlight.deployment import Deployment

        return Deployment.model_validate(self.record.spec)

    @property
    def adapter(self) -> EngineAdapter:
        from firstlight.engines import get_engine

        return get_engine(self.deployment.engine)

    @property
    def url(self) -> str:
        return self.record.url

    @property
    def log_path(self) -> Path:
        return Path(self.record.log_path)

    @property
    def state(self) -> LaunchState:
        return self.record.state

    @property
    def running(self) -> bool:
        """Whether any process of the launch's engine group is alive."""
        from firstlight.launch.supervisor import launch_members

        record = self.record
        return bool(launch_members(record.pgid, record.leader_start))

    @property
    def watcher_lost(self) -> bool:
        """The watcher process is gone while the engine still runs: nobody is deciding about this launch. (A
        launch its watcher failed or stopped is decided, whatever of it still runs.)"""
        record = self.record
        undecided = record.state in (LaunchState.STARTING, LaunchState.READY, LaunchState.STALLED) or (
            record.state == LaunchState.FAILED and (record.reason or "").startswith(WATCHER_GONE)
        )
        return bool(record.watcher_pid) and undecided and not _alive(record.watcher_pid) and self.running

    def reattach(self, timeout: float = 10.0) -> None:
        """Start a new watcher for this launch (its engine runs on without one); it decides as the first
        would have: ready, failed or stalled. Returns once the new watcher has taken the launch."""
        from firstlight.launch.control import reattach

        old = self.record.watcher_pid
        reattach(self.store, self.record)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = self.record.watcher_pid
            if pid != old and _alive(pid):
                return
            time.sleep(POLL_S)

    def serves(self, timeout: float = 30.0) -> tuple[bool, str]:
        """Whether the server still serves as readiness defined it: its health path, then one generated token
        (a server whose process lives on can have lost its worker). Returns (serves, what it answered)."""
        import httpx

        from firstlight.benchmark import endpoint
        from firstlight.launch.probe import check_health, generate_one_token

        dep, adapter = self.deployment, self.adapter
        with httpx.Client(trust_env=False, headers=endpoint.headers(adapter.api_key(dep))) as client:
            result = check_health(client, self.url, adapter.health_path)
            if result.ok:
                result = generate_one_token(client, self.url, adapter.request_model(dep), timeout)
        return result.ok, result.detail

    def events(self, after_id: int = 0) -> list[Event]:
        return self.store.events(self.id, after_id=after_id)

    def follow(self, poll_s: float = POLL_S) -> Iterator[Event | None]:
        """Every event as it is recorded, and None after each poll (so a screen can redraw). Ends once the
        launch is decided: ready, failed, stalled (or stopped, exited)."""
        last_id = 0
        last_check = time.monotonic()
        while True:
            events = self.events(last_id)
            yield from events
            if events:
                last_id = events[-1].id
            record = self.record
            if record.state.decided:
                yield from self.events(last_id)  # written in the same instant as the decision
                return
            if time.monotonic() - last_check > WATCHER_CHECK_S:
                last_check = time.monotonic()
                self._notice_dead_watcher(record)
            yield None
            if not events:
                time.sleep(poll_s)

    def wait(self, timeout: float | None = None) -> LaunchRecord:
        """Block until the launch is decided; return its record (its state says how it went). With a
        timeout, return the record as it stands when the time is up."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for _ in self.follow():
            if deadline is not None and time.monotonic() > deadline:
                break
        return self.record

    def down(self, grace: float = 15.0) -> StopResult:
        """SIGTERM the engine's process group, SIGKILL after `grace`; verify nothing is left (on the GPU too)."""
        return stop_launch(self.store, self.record, grace)

    def _notice_dead_watcher(self, record: LaunchRecord) -> None:
        if record.state in (LaunchState.STARTING, LaunchState.READY) and not _alive(record.watcher_pid):
            self.store.update_launch(
                record.id,
                state=LaunchState.FAILED,
                reason=f"{WATCHER_GONE}; the engine may still run",
            )

    def __repr__(self) -> str:
        return f"Launch({self.id}, {self.store.path})"


def _alive(pid: int | None) -> bool:
    if not pid:
        return True  # the watcher has not started yet
    from firstlight.launch.supervisor import alive

    return alive(pid)


def up(
    spec: Deployment | Path | str,
    *,
    store: Store | Path | str | None = None,
    force: bool = False,
    facts: Facts | Path | str | None = None,
    supervisor: str | None = None,
) -> Launch:
    """Check the spec, then start it; returns at once with a `Launch` (call `.wait()` to follow it).

    Raises PreflightFailed (with the findings) when a check fails, unless `force`; SystemdUnavailable
    for `supervisor="systemd"` where systemd does not run; SpecError for a bad spec.
    """
    from firstlight.deployment import as_deployment
    from firstlight.launch import systemd
    from firstlight.preflight import check

    dep = as_deployment(spec)
    if supervisor is not None:
        dep = dep.with_supervisor(supervisor)
    if dep.supervisor == "systemd":
        systemd.require_systemd()
    db = Store.open(store)
    # Two `up` of one spec at once: the second waits for the first to be recorded, then finds it. (Before
    # the engine binds its port, which can take minutes, the port check alone cannot see it.)
    with address_lock(db, dep.url):
        running = live_launch_at(db, dep.url)
        if running is not None:
            raise LaunchInTheWay(
                f"launch {running.id} ({running.name}) is already {running.state.value} at {dep.url}: stop it with "
                f"`firstlight down {running.id}`, or give this spec another port"
            )
        findings = check(dep, facts)
        if findings.failures and not force:
            raise PreflightFailed(
                f"{len(findings.failures)} preflight check(s) failed; fix them, or launch anyway with --force",
                findings,
            )
        return Launch(db, start_launch(db, dep).id, findings)


@contextmanager
def address_lock(db: Store, url: str) -> Iterator[None]:
    """An exclusive lock per address, beside the store, held from the checks until the launch is recorded."""
    directory = db.path.parent / "locks"
    directory.mkdir(mode=0o700, exist_ok=True)
    name = "".join(c if c.isalnum() else "_" for c in url)
    fd = os.open(directory / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def live_launch_at(db: Store, url: str) -> LaunchRecord | None:
    """A launch of this store at `url` that has not ended: starting, ready or stalled, its engine (or, just
    started, its watcher) alive."""
    from firstlight.launch.supervisor import launch_members

    for record in db.launches(200):
        if record.url != url or record.state not in (LaunchState.STARTING, LaunchState.READY, LaunchState.STALLED):
            continue
        if launch_members(record.pgid, record.leader_start) or (record.pgid is None and _alive(record.watcher_pid)):
            return record
    return None


def get_launch(launch_id: int | None = None, store: Store | Path | str | None = None) -> Launch:
    """A launch by id, or the latest one."""
    db = Store.open(store)
    record = db.get_launch(launch_id) if launch_id is not None else db.latest_launch()
    if record is None:
        raise LaunchNotFound(
            f"no launch {launch_id} in {db.path}" if launch_id is not None else f"no launches in {db.path}"
        )
    return Launch(db, record.id)


def _handle(launch: Launch | int | None, store: Store | Path | str | None) -> Launch:
    return launch if isinstance(launch, Launch) else get_launch(launch, store)


def wait(
    launch: Launch | int | None = None, timeout: float | None = None, store: Store | Path | str | None = None
) -> LaunchRecord:
    """Wait for a launch (a Launch, an id, or the latest) to be decided; its record says how it went."""
    return _handle(launch, store).wait(timeout)


def down(
    launch: Launch | int | None = None, grace: float = 15.0, store: Store | Path | str | None = None
) -> StopResult:
    """Stop a launch (a Launch, an id, or the latest): its whole process group, verified gone."""
    return _handle(launch, store).down(grace)
